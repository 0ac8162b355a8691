# SPDX-License-Identifier: GPL-3.0-or-later
"""scripts/failure_summary.py: what .ci/run prints last when `make test` fails."""
import importlib.util
import pathlib

SCRIPT = pathlib.Path(__file__).resolve().parents[1] / "scripts" / "failure_summary.py"
spec = importlib.util.spec_from_file_location("failure_summary", SCRIPT)
failure_summary = importlib.util.module_from_spec(spec)
spec.loader.exec_module(failure_summary)

LOG = """\
  \x1b[2m│\x1b[0m PLAY [Verify the gateways]
  \x1b[2m│\x1b[0m TASK [Submit with each bad credential]
  \x1b[2m│\x1b[0m failed: [mgmt01 -> localhost] (item=0) => {"msg": "refused"}
  \x1b[2m│\x1b[0m ...ignoring
  \x1b[2m│\x1b[0m TASK [Count the alternatives that ran]
  \x1b[31m│\x1b[0m fatal: [mgmt01]: FAILED! =>
  \x1b[31m│\x1b[0m     changed: false
  \x1b[31m│\x1b[0m     msg: 'BMC at https://10.42.0.172: cannot reach
  \x1b[31m│\x1b[0m   https://10.42.0.172 after 2 attempts'
  \x1b[2m│\x1b[0m
FAILED tests/sim/test_psgwd.py::test_one - AssertionError: 1 != 2
ERROR: Found 8 pep8 issue(s) which need to be resolved:
"""


def test_failures_are_named_with_play_task_and_message_and_ignored_ones_dropped():
    shown, total = failure_summary.summarize(LOG.splitlines(), limit=6)
    assert total == 3
    assert shown[0] == ("mgmt01: Verify the gateways / Count the alternatives that ran",
                        "'BMC at https://10.42.0.172: cannot reach https://10.42.0.172 after 2 attempts'")
    assert shown[1] == ("tests/sim/test_psgwd.py::test_one", "AssertionError: 1 != 2")
    assert shown[2] == ("ansible-test", "Found 8 pep8 issue(s) which need to be resolved:")


def test_the_limit_keeps_the_first_failures_and_counts_all():
    shown, total = failure_summary.summarize(["FAILED a::t%d - boom" % i for i in range(9)], limit=2)
    assert total == 9 and [w for w, _ in shown] == ["a::t0", "a::t1"]


def test_headers_molecule_wrapped_onto_two_lines_are_joined():
    log = [
        "  \x1b[2m│\x1b[0m PLAY [A node unreachable during a deploy leaves the others deployed, and a",
        "  \x1b[2m│\x1b[0m   re-run converges it] ***",
        "  \x1b[2m│\x1b[0m TASK [Deploy Slurm with site.yml while the node is unreachable]",
        "  \x1b[2m│\x1b[0m TASK [Require the deploy to have finished for every other host, the node",
        "  \x1b[2m│\x1b[0m   reported unreachable] ***",
        "  \x1b[31m│\x1b[0m fatal: [mgmt01]: FAILED! => {\"msg\": \"no attribute 'dam02'\"}",
    ]
    shown, total = failure_summary.summarize(log)
    assert total == 1
    assert shown[0] == ("mgmt01: A node unreachable during a deploy leaves the others deployed, and a re-run "
                        "converges it / Require the deploy to have finished for every other host, the node "
                        "reported unreachable", "no attribute 'dam02'")


def test_the_suites_run_beside_molecule_are_read_through_their_prefix():
    log = [
        "beside | [03:10:02] == pytest tests/test_standalone.py",
        "beside | FAILED tests/test_standalone.py::test_one - AssertionError: rendered sim/msa_sim",
        "beside | ERROR: Found 1 pylint issue(s) which need to be resolved:",
    ]
    shown, total = failure_summary.summarize(log)
    assert total == 2
    assert shown == [("tests/test_standalone.py::test_one", "AssertionError: rendered sim/msa_sim"),
                     ("ansible-test", "Found 1 pylint issue(s) which need to be resolved:")]
