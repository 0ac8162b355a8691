# SPDX-License-Identifier: GPL-3.0-or-later
"""scripts/stage_times.py: the time each stage and play of a CI log took, from the log's own stamps."""
from __future__ import annotations

import importlib.util

from tests.helpers import BUNDLE

spec = importlib.util.spec_from_file_location("stage_times", BUNDLE / "scripts" / "stage_times.py")
stage_times = importlib.util.module_from_spec(spec)
spec.loader.exec_module(stage_times)

LOG = """\
[10:00:00] == pytest
1648 passed in 344.2s
[10:06:00] == ansible-lint (production profile, .ansible-lint)
[10:07:30] == molecule test (default scenario: mini)
PLAY [Bring up the simulated system] ****
\x1b[0;36m[10:07:31] -- play Bring up the simulated system\x1b[0m
TASK [x] ***
  │   "msg": "runner said: [10:08:00] == ansible-runner: rc=0"
  │ [10:09:01] -- play Base configuration of every node
[10:20:01] == check_clean
"""


def test_stages_last_until_the_next_stage_and_plays_until_the_next_stamp():
    stages, plays = stage_times.durations(LOG.splitlines())
    assert stages == [("pytest", 360), ("ansible-lint (production profile, .ansible-lint)", 90),
                      ("molecule test (default scenario: mini)", 751), ("check_clean", 0)]
    assert plays == [("Bring up the simulated system", "molecule test (default scenario: mini)", 90),
                     ("Base configuration of every node", "molecule test (default scenario: mini)", 660)]


def test_the_report_lists_stages_in_order_then_the_slowest_plays_first():
    out = stage_times.report(LOG.splitlines(), slowest=1)
    assert out[1] == "     6:00  pytest"
    assert out[5] == "    20:01  total"
    assert out[-2:] == ["slowest plays (m:ss):",
                        "    11:00  Base configuration of every node  (in: molecule test (default scenario: mini))"]


def test_a_run_past_midnight_counts_forward():
    stages, _ = stage_times.durations(["[23:59:00] == unit", "[00:01:30] == lint"])
    assert stages == [("unit", 150), ("lint", 0)]


def test_a_log_without_stamps_says_so():
    assert stage_times.report(["no stamps here"]) == ["stage times: no time stamps in the log"]


def test_stamps_of_the_suites_run_beside_molecule_are_not_this_run_s_stages():
    log = ["[10:00:00] == molecule test (default scenario: mini)",
           "beside | [10:00:05] == ansible-lint (production profile, .ansible-lint)",
           "[10:30:00] == waiting for the suites beside molecule"]
    stages, _ = stage_times.durations(log)
    assert stages == [("molecule test (default scenario: mini)", 1800), ("waiting for the suites beside molecule", 0)]
