# SPDX-License-Identifier: GPL-3.0-or-later
"""A job model's ids and per-component results in Slurm's records (slurm/results.py)."""
from __future__ import annotations

from ansible_collections.msa.hpc.plugins.module_utils.slurm.model import NOT_CHOSEN, validate
from ansible_collections.msa.hpc.plugins.module_utils.slurm.records import parse_sacct_json, parse_squeue_json
from ansible_collections.msa.hpc.plugins.module_utils.slurm.results import cancel_targets, find_ids, results
from ansible_collections.msa.hpc.tests.unit.plugins.module_utils.slurm.packjob_cases import SYSTEM, coupled_job, read_fixture


def _delayed_spec():
    job = coupled_job()
    job["components"].append({"partition": "booster", "nodes": 1, "delay": 55, "command": "./late"})
    return validate(job, SYSTEM)


def test_find_ids_groups_a_live_hetjob_and_its_delayed_part_for_this_user_only():
    records = parse_squeue_json(read_fixture("squeue_22.05_hetjob.json"))
    ids = find_ids(_delayed_spec(), records, "alice")
    assert ids == {"leader": 1234, "delayed": {2: 1236}, "alternatives": []}
    assert find_ids(_delayed_spec(), records, "carol") is None


def test_find_ids_ignores_finished_jobs_of_the_same_name():
    records = [r for r in parse_squeue_json(read_fixture("squeue_22.05_hetjob.json")) if r["job_id"] == 1100]
    assert find_ids(validate({"name": "old", "components": [{"partition": "cm", "command": "a"}]}), records, "alice") is None


def test_results_per_component_with_states_nodes_and_exit_codes():
    records = parse_sacct_json(read_fixture("sacct_22.05_hetjob.json"))
    res = results(_delayed_spec(), {"leader": 1234, "delayed": {2: 1236}, "alternatives": []}, records)
    comps = res["components"]
    assert [(c["index"], c["job_id"], c["role"], c["state"]) for c in comps] == [
        (0, 1234, "main", "COMPLETED"), (1, 1235, "main", "FAILED"), (2, 1236, "delayed", "CANCELLED")]
    assert comps[1]["node_list"] == ["esb01", "esb02"] and comps[1]["exit_code"] == 1
    assert res["finished"] and res["failed"] == [1, 2] and res["state"] == "FAILED"


def test_results_of_a_running_job_are_not_finished():
    records = parse_squeue_json(read_fixture("squeue_22.05_hetjob.json"))
    res = results(_delayed_spec(), {"leader": 1234, "delayed": {2: 1236}, "alternatives": []}, records)
    assert not res["finished"] and res["state"] == "RUNNING"


def _alt(job_id, state, nodes, partition, exit_code=0):
    return {"job_id": job_id, "name": "anywhere", "user": "alice", "state": state, "het_job_id": None,
            "het_job_offset": None, "nodes": nodes, "exit_code": exit_code, "signal": 0, "partition": partition,
            "comment": ""}


ALT_SPEC = {"name": "anywhere", "module_list": [{"partition": "booster", "command": "a"}, {"partition": "cm", "command": "a"},
                                                {"partition": "cm", "command": "b"}]}
ONE_JOB = {"leader": 12, "delayed": {}, "alternatives": []}


def test_module_list_pending_with_a_partition_list_has_no_winner_yet():
    res = results(validate(ALT_SPEC, SYSTEM), ONE_JOB, [_alt(12, "PENDING", "", "booster,cm")])
    assert res["winner"] is None and res["job_id"] == 12 and res["state"] == "PENDING" and not res["finished"]
    assert [c["job_id"] for c in res["components"]] == [12, 12, 12]


def test_module_list_winner_is_the_alternative_of_the_partition_it_runs_in():
    res = results(validate(ALT_SPEC, SYSTEM), ONE_JOB, [_alt(12, "COMPLETED", "cm01", "cm")])
    assert res["winner"] == 1 and res["job_id"] == 12
    assert [c["chosen"] for c in res["components"]] == [False, True, False]
    assert [c["state"] for c in res["components"]] == [NOT_CHOSEN, "COMPLETED", NOT_CHOSEN]
    assert res["finished"] and not res["failed"] and res["state"] == "COMPLETED"


def test_module_list_failure_is_the_chosen_alternatives():
    res = results(validate(ALT_SPEC, SYSTEM), ONE_JOB, [_alt(12, "FAILED", "esb01", "booster", exit_code=2)])
    assert res["failed"] == [0] and res["state"] == "FAILED" and res["finished"]


def test_module_list_cancelled_before_it_started_is_finished_and_failed():
    res = results(validate(ALT_SPEC, SYSTEM), ONE_JOB, [_alt(12, "CANCELLED", "", "booster,cm")])
    assert res["finished"] and res["state"] == "CANCELLED" and res["winner"] is None


def test_module_list_job_is_found_as_the_newest_live_job_of_the_name():
    spec = validate(ALT_SPEC, SYSTEM)
    records = [_alt(5, "COMPLETED", "cm01", "cm"), _alt(11, "PENDING", "", "booster,cm")]
    assert find_ids(spec, records, "alice") == ONE_JOB | {"leader": 11}
    assert find_ids(spec, records[:1], "alice") is None


def test_cancel_targets_use_hetjob_leaders_and_skip_finished_and_foreign_jobs():
    records = parse_squeue_json(read_fixture("squeue_22.05_hetjob.json"))
    assert cancel_targets(_delayed_spec(), records, "alice") == [1234, 1236]
