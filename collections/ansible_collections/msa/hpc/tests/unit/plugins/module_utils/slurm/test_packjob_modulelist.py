# SPDX-License-Identifier: GPL-3.0-or-later
"""Module lists: Slurm's start-time estimates and the choice between alternatives (slurm/modulelist.py)."""
from __future__ import annotations

import re

import pytest

from ansible_collections.msa.hpc.plugins.module_utils.slurm.modulelist import choose, expected_slowdown, parse_test_only
from ansible_collections.msa.hpc.plugins.module_utils.slurm.records import TransportError
from ansible_collections.msa.hpc.tests.unit.plugins.module_utils.slurm.packjob_cases import TEST_ONLY


@pytest.mark.parametrize("text, fields", [
    (TEST_ONLY, {"job_id": 4711, "start": "2026-11-26T11:30:00", "cpus": 8, "nodes": "cm[01-02]", "partition": "cm"}),
    ("sbatch: Job 12 to start at 2026-01-02T03:04:05 using 1 processors on nodes esb01 in partition esb",
     {"job_id": 12, "start": "2026-01-02T03:04:05", "cpus": 1, "nodes": "esb01", "partition": "esb"}),
])
def test_parse_test_only_reads_slurms_estimate(text, fields):
    got = parse_test_only(text, to_epoch=lambda t: 1000)
    assert got == dict(fields, start_epoch=1000)


@pytest.mark.parametrize("text, says", [
    # what sbatch 22.05 printed on dev2 for -p cm -N 9 (the partition has 2 nodes), exit 1
    ("allocation failure: Requested node configuration is not available\n",
     "allocation failure: Requested node configuration is not available"),
    ("sbatch: error: Batch job submission failed: Requested node configuration is not available\n",
     "Requested node configuration is not available"),
    ("srun: error: Unable to allocate resources: Requested time limit is invalid (missing or exceeds some limit)",
     "Unable to allocate resources: Requested time limit is invalid"),
    ("sbatch: error: --module-list=cm,gpu: no module gpu\nsbatch: error: Batch job submission failed: Unspecified",
     "--module-list=cm,gpu: no module gpu"),
    ("", "printed nothing"),
    ("something else entirely", "something else entirely"),
])
def test_parse_test_only_reports_why_slurm_cannot_run_it(text, says):
    with pytest.raises(TransportError, match=re.escape(says)):
        parse_test_only(text)


def _alts(*shapes):
    return [{"index": i, "partition": p, "nodes": n, "time_minutes": t} for i, (p, n, t) in enumerate(shapes)]


def _est(start_epoch, partition="x"):
    return {"start_epoch": start_epoch, "start": "T%d" % start_epoch, "partition": partition}


def test_choose_takes_the_lowest_expected_slowdown_not_the_earliest_start():
    # booster starts at once for 60 min (slowdown 1); cm in 10 min for 10 min (slowdown 2)
    alts = _alts(("cm", 1, 10), ("booster", 1, 60))
    chosen, ranking = choose(alts, {0: _est(1600, "cm"), 1: _est(1000, "booster")}, now=1000)
    assert chosen == 1 and [r["index"] for r in ranking] == [1, 0]
    assert ranking[0]["slowdown"] == 1.0 and ranking[1]["slowdown"] == 2.0 and ranking[1]["wait"] == 600


def test_choose_ties_to_the_shorter_request_then_to_the_list_order():
    alts = _alts(("esb", 4, 10), ("cm", 2, 10), ("dam", 2, 10))
    chosen, ranking = choose(alts, {i: _est(1000) for i in range(3)}, now=1000)
    assert chosen == 1 and [r["index"] for r in ranking] == [1, 2, 0]


def test_choose_skips_alternatives_slurm_cannot_run_and_fails_when_none_can():
    alts = _alts(("esb", 9, 10), ("cm", 1, 10))
    chosen, ranking = choose(alts, {0: "sbatch --test-only: Requested node configuration is not available",
                                    1: _est(1300)}, now=1000)
    assert chosen == 1 and ranking[-1]["index"] == 0 and "node configuration" in ranking[-1]["error"]
    with pytest.raises(TransportError, match=r"module_list\[0\] \(esb\): .*node configuration.*module_list\[1\]"):
        choose(alts, {0: "sbatch --test-only: Requested node configuration is not available", 1: "down"}, now=0)


def test_choose_needs_a_finite_requested_time():
    alts = _alts(("esb", 1, None), ("cm", 1, 10))
    chosen, ranking = choose(alts, {0: _est(0), 1: _est(5000)}, now=0)
    assert chosen == 1 and "give module_list[0].time" in ranking[-1]["error"]


def test_expected_slowdown_counts_a_start_in_the_past_as_now():
    assert expected_slowdown(-30, 2) == 1.0 and expected_slowdown(120, 2) == 2.0
