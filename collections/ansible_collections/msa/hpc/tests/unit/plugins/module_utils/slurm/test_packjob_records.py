# SPDX-License-Identifier: GPL-3.0-or-later
"""Job records from real 22.05 squeue/sacct --json and scontrol output (slurm/records.py)."""
from __future__ import annotations

import pytest

from ansible_collections.msa.hpc.plugins.module_utils.slurm.records import (
    TransportError, parse_sacct_json, parse_sbatch_id, parse_scontrol_show_job, parse_squeue_json)
from ansible_collections.msa.hpc.tests.unit.plugins.module_utils.slurm.packjob_cases import read_fixture


def test_parse_squeue_json_of_a_hetjob():
    records = {r["job_id"]: r for r in parse_squeue_json(read_fixture("squeue_22.05_hetjob.json"))}
    assert records[1235] == {"job_id": 1235, "name": "coupled", "user": "alice", "state": "RUNNING",
                             "het_job_id": 1234, "het_job_offset": 1, "nodes": "esb[01-02]", "exit_code": 0,
                             "signal": 0, "partition": "esb", "comment": "msa:gw_num=2;gw_cleanup=1"}
    assert records[1236]["het_job_id"] is None and records[1236]["het_job_offset"] is None
    assert records[1236]["nodes"] == ""
    assert (records[1100]["state"], records[1100]["exit_code"]) == ("COMPLETED", 1)   # raw wait status 256


def test_parse_sacct_json_of_a_hetjob():
    records = {r["job_id"]: r for r in parse_sacct_json(read_fixture("sacct_22.05_hetjob.json"))}
    assert (records[1235]["state"], records[1235]["exit_code"], records[1235]["het_job_offset"]) == ("FAILED", 1, 1)
    assert records[1236]["nodes"] == "" and records[1236]["signal"] == 9
    assert records[1234]["comment"] == "msa:gw_num=2;gw_cleanup=1"


def test_parse_scontrol_show_job_detail_output():
    records = parse_scontrol_show_job(read_fixture("scontrol_show_job_22.05_hetjob.txt"))
    assert [(r["job_id"], r["het_job_id"], r["het_job_offset"]) for r in records] == [(1234, 1234, 0), (1235, 1234, 1)]
    assert records[0]["user"] == "alice" and records[0]["nodes"] == "cm01"
    assert records[1]["nodes"] == "esb[01-02]" and (records[1]["state"], records[1]["exit_code"]) == ("FAILED", 1)
    assert records[0]["comment"] == "msa:gw_num=2;gw_cleanup=1"


def test_newer_wrapped_numbers_and_state_lists_are_read():
    text = ('{"jobs": [{"job_id": 7, "name": "n", "user_name": "u", "job_state": ["RUNNING"], "nodes": "cm01",'
            ' "het_job_id": {"set": true, "infinite": false, "number": 0},'
            ' "het_job_offset": {"set": false, "infinite": false, "number": 0},'
            ' "exit_code": {"status": ["SUCCESS"], "return_code": {"set": true, "infinite": false, "number": 0}}}]}')
    (record,) = parse_squeue_json(text)
    assert (record["state"], record["het_job_id"], record["exit_code"]) == ("RUNNING", None, 0)


def test_json_errors_from_slurm_are_reported():
    with pytest.raises(TransportError, match="Invalid user"):
        parse_squeue_json('{"errors": [{"error": "Invalid user", "error_number": 1}], "jobs": []}')
    with pytest.raises(TransportError, match="no JSON"):
        parse_squeue_json("squeue: error: unrecognized option '--json'")


def test_parse_sbatch_id_forms():
    assert parse_sbatch_id("1234\n") == 1234
    assert parse_sbatch_id("1234;msa\n") == 1234
    assert parse_sbatch_id("Submitted batch job 99\n") == 99
    with pytest.raises(TransportError):
        parse_sbatch_id("sbatch: error: Batch job submission failed")
