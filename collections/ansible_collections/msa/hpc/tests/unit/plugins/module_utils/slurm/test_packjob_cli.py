# SPDX-License-Identifier: GPL-3.0-or-later
"""The CLI transport: sbatch, squeue, sacct, scancel through run_command (slurm/cli.py)."""
from __future__ import annotations

import pytest

from ansible_collections.msa.hpc.plugins.module_utils.slurm.cli import CliTransport
from ansible_collections.msa.hpc.plugins.module_utils.slurm.records import TransportError
from ansible_collections.msa.hpc.tests.unit.plugins.module_utils.slurm.packjob_cases import TEST_ONLY, read_fixture


class FakeRun:
    def __init__(self, answers):
        self.answers, self.calls = list(answers), []

    def __call__(self, argv, data=None):
        self.calls.append((argv, data))
        return self.answers.pop(0)


def test_cli_transport_sends_the_script_on_stdin_and_reads_the_id():
    run = FakeRun([(0, "4321\n", "")])
    assert CliTransport(run).submit({"argv": ["sbatch", "--parsable"], "script": "#!/bin/bash\n"}) == 4321
    assert run.calls == [(["sbatch", "--parsable"], "#!/bin/bash\n")]


def test_cli_transport_reports_a_failing_command_with_its_message():
    run = FakeRun([(1, "", "sbatch: error: invalid partition specified: dam")])
    with pytest.raises(TransportError, match="invalid partition specified: dam"):
        CliTransport(run).submit({"argv": ["sbatch", "--parsable"], "script": "x"})


def test_cli_transport_queries_and_cancels():
    run = FakeRun([(0, read_fixture("squeue_22.05_hetjob.json"), ""), (0, "", ""),
                   (0, read_fixture("sacct_22.05_hetjob.json"), "")])
    transport = CliTransport(run)
    assert len(transport.jobs("alice")) == 5
    transport.cancel([1234, 1236])
    assert len(transport.history([1234])) == 3
    assert [c[0] for c in run.calls] == [["squeue", "--json", "--all", "--states=all", "--user=alice"],
                                         ["scancel", "1234", "1236"], ["sacct", "--json", "--jobs=1234"]]


def test_cli_transport_estimates_with_test_only_and_reports_refusals():
    run = FakeRun([(0, "", TEST_ONLY), (1, "", "sbatch: error: Batch job submission failed: Invalid partition")])
    transport = CliTransport(run)
    assert transport.estimate({"argv": ["sbatch", "--test-only"], "script": "#!/bin/bash\n"})["partition"] == "cm"
    with pytest.raises(TransportError, match="Invalid partition"):
        transport.estimate({"argv": ["sbatch", "--test-only"], "script": "#!/bin/bash\n"})
    assert run.calls[0] == (["sbatch", "--test-only"], "#!/bin/bash\n")
