# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

"""Tests of the slurm_packjob module: check mode, validation failures, idempotency by name, wait, cancel."""

import json
from unittest import mock

import pytest
from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args

from ansible_collections.msa.hpc.plugins.modules import slurm_packjob

SYSTEM = {"partitions": {"cm": {"nodes": 4}, "esb": {"nodes": 8}}, "gateways": 2}
ARGS = {"name": "coupled", "system": SYSTEM, "gateways": 2, "components": [
    {"partition": "cm", "nodes": 1, "ntasks": 2, "time": "10:00", "command": "./hello_cluster"},
    {"partition": "esb", "nodes": 2, "ntasks": 2, "command": "./hello_booster"}]}


class Done(Exception):
    def __init__(self, result, failed):
        super().__init__(result.get("msg"))
        self.result, self.failed = result, failed


def _job(job_id, state, het_id=0, offset=4294967294, nodes="", name="coupled", user="alice", exit_code=0, comment=""):
    return {"job_id": job_id, "name": name, "user_name": user, "job_state": state, "het_job_id": het_id,
            "het_job_offset": offset, "nodes": nodes, "exit_code": exit_code, "partition": "cm", "comment": comment}


class FakeSlurm:
    """Answers run_command like Slurm's commands; the queue evolves by one step per squeue call."""

    def __init__(self, queues, next_id=500, starts=None):
        self.queues, self.next_id, self.calls = list(queues), next_id, []
        self.starts = starts or {}   # partition -> what sbatch --test-only prints (a start time or an error)

    def __call__(self, argv, data=None, **kwargs):
        self.calls.append((list(argv), data))
        tool = argv[0]
        if tool == "sbatch" and "--test-only" in argv:
            part = next(line.split("=", 1)[1] for line in data.splitlines() if line.startswith("#SBATCH --partition="))
            answer = self.starts[part]
            if answer.startswith("error"):
                return 1, "", "sbatch: %s\n" % answer
            return 0, "", "sbatch: Job 99 to start at %s using 1 processors on nodes %s01 in partition %s\n" % (
                answer, part, part)
        if tool == "sbatch":
            self.next_id += 10
            return 0, "%d\n" % self.next_id, ""
        if tool == "squeue":
            jobs = self.queues[0] if len(self.queues) == 1 else self.queues.pop(0)
            return 0, json.dumps({"meta": {}, "errors": [], "jobs": jobs}), ""
        if tool == "sacct":
            return 1, "", "sacct: error: Slurm accounting storage is disabled"
        return 0, "", ""

    def commands(self, tool):
        return [argv for argv, _data in self.calls if argv[0] == tool]


def _run(args, slurm, check_mode=False):
    args = dict(args)
    if check_mode:
        args["_ansible_check_mode"] = True

    def exit_json(self, **result):
        raise Done(result, False)

    def fail_json(self, **result):
        raise Done(result, True)

    with patch_module_args(args), \
            mock.patch.object(basic.AnsibleModule, "run_command", lambda self, argv, **kw: slurm(argv, **kw)), \
            mock.patch.object(basic.AnsibleModule, "exit_json", exit_json), \
            mock.patch.object(basic.AnsibleModule, "fail_json", fail_json), \
            mock.patch.object(slurm_packjob.pwd, "getpwuid", lambda uid: mock.Mock(pw_name="alice")), \
            mock.patch.object(slurm_packjob.time, "sleep", lambda s: None):
        with pytest.raises(Done) as info:
            slurm_packjob.main()
    return info.value


def test_check_mode_builds_the_script_but_does_not_call_sbatch():
    slurm = FakeSlurm([[]])
    done = _run(ARGS, slurm, check_mode=True)
    assert not done.failed and done.result["changed"]
    assert slurm.commands("sbatch") == []
    (sub,) = done.result["submissions"]
    assert sub["argv"] == ["sbatch", "--parsable"]
    assert "#SBATCH hetjob" in sub["script"] and "#SBATCH --licenses=gateway:2" in sub["script"]


def test_a_bad_component_fails_naming_the_field_before_anything_runs():
    args = dict(ARGS, components=[dict(ARGS["components"][0]), dict(ARGS["components"][1], nodes=20)])
    slurm = FakeSlurm([[]])
    done = _run(args, slurm)
    assert done.failed
    assert "components[1].nodes: 20 asked but partition 'esb' has only 8 nodes" in done.result["msg"]
    assert slurm.calls == []


def test_a_malformed_time_fails_naming_component_and_value():
    args = dict(ARGS, components=[dict(ARGS["components"][0], time="10:99"), ARGS["components"][1]])
    done = _run(args, FakeSlurm([[]]))
    assert done.failed and "components[0].time: '10:99'" in done.result["msg"]


def test_present_submits_once_and_reports_components():
    queue = [_job(510, "PENDING", 510, 0), _job(511, "PENDING", 510, 1)]
    slurm = FakeSlurm([[], queue])
    done = _run(ARGS, slurm)
    assert not done.failed and done.result["changed"]
    assert len(slurm.commands("sbatch")) == 1
    assert done.result["job_id"] == 510 and done.result["state"] == "PENDING"
    assert [c["job_id"] for c in done.result["components"]] == [510, 511]


def test_a_running_job_with_the_same_name_is_not_submitted_again():
    queue = [_job(510, "RUNNING", 510, 0, "cm01"), _job(511, "RUNNING", 510, 1, "esb[01-02]")]
    slurm = FakeSlurm([queue])
    done = _run(ARGS, slurm)
    assert not done.failed and not done.result["changed"]
    assert slurm.commands("sbatch") == []
    assert done.result["components"][1]["node_list"] == ["esb01", "esb02"]


def test_a_job_of_the_same_name_by_another_user_does_not_count():
    slurm = FakeSlurm([[_job(400, "RUNNING", nodes="cm01", user="bob")], []])
    done = _run(ARGS, slurm)
    assert done.result["changed"] and len(slurm.commands("sbatch")) == 1


def test_wait_polls_until_done_and_returns_exit_codes_and_nodes():
    pending = [_job(510, "PENDING", 510, 0), _job(511, "PENDING", 510, 1)]
    running = [_job(510, "RUNNING", 510, 0, "cm01"), _job(511, "RUNNING", 510, 1, "esb[01-02]")]
    finished = [_job(510, "COMPLETED", 510, 0, "cm01"), _job(511, "COMPLETED", 510, 1, "esb[01-02]")]
    slurm = FakeSlurm([[], pending, running, finished])
    done = _run(dict(ARGS, wait=True, poll_interval=1), slurm)
    assert not done.failed and done.result["state"] == "COMPLETED"
    assert [(c["state"], c["exit_code"]) for c in done.result["components"]] == [("COMPLETED", 0), ("COMPLETED", 0)]
    assert len(slurm.commands("squeue")) == 4


def test_wait_fails_on_a_non_zero_exit_unless_told_not_to():
    finished = [_job(510, "COMPLETED", 510, 0, "cm01"), _job(511, "FAILED", 510, 1, "esb01", exit_code=256)]
    done = _run(dict(ARGS, wait=True), FakeSlurm([[], finished]))
    assert done.failed and "component 1 (job 511) FAILED exit 1" in done.result["msg"]
    done = _run(dict(ARGS, wait=True, fail_on_error=False), FakeSlurm([[], finished]))
    assert not done.failed and done.result["state"] == "FAILED"


def test_wait_gives_up_after_the_timeout():
    running = [_job(510, "RUNNING", 510, 0, "cm01"), _job(511, "RUNNING", 510, 1, "esb01")]
    clock = iter(range(0, 10000, 100))
    with mock.patch.object(slurm_packjob.time, "monotonic", lambda: next(clock)):
        done = _run(dict(ARGS, wait=True, wait_timeout=250), FakeSlurm([[], running]))
    assert done.failed and "did not finish within 250 s" in done.result["msg"]


def test_absent_cancels_live_jobs_of_the_name_and_is_idempotent():
    queue = [_job(510, "RUNNING", 510, 0, "cm01"), _job(511, "RUNNING", 510, 1, "esb01"),
             _job(520, "PENDING", comment="msa:delay=5;delay_after=510;component=2")]
    slurm = FakeSlurm([queue])
    done = _run({"name": "coupled", "state": "absent"}, slurm)
    assert done.result["changed"] and done.result["cancelled"] == [510, 520]
    assert slurm.commands("scancel") == [["scancel", "510", "520"]]
    slurm = FakeSlurm([[_job(510, "CANCELLED", 510, 0, "cm01")]])
    done = _run({"name": "coupled", "state": "absent"}, slurm)
    assert not done.result["changed"] and slurm.commands("scancel") == []


def test_absent_in_check_mode_cancels_nothing():
    slurm = FakeSlurm([[_job(510, "RUNNING", nodes="cm01")]])
    done = _run({"name": "coupled", "state": "absent"}, slurm, check_mode=True)
    assert done.result["changed"] and slurm.commands("scancel") == []


def test_delayed_component_is_submitted_after_the_leader_with_its_id():
    args = dict(ARGS, components=ARGS["components"] + [{"partition": "esb", "delay": 30, "command": "./late"}])
    slurm = FakeSlurm([[]])
    done = _run(args, slurm)
    sbatches = slurm.commands("sbatch")
    assert sbatches[1] == ["sbatch", "--parsable", "--dependency=after:510+30"]
    delayed_script = slurm.calls[[c[0] for c in slurm.calls].index(sbatches[1])][1]
    assert "delay_after=510" in delayed_script
    assert done.result["job_ids"] == [510, 520]


def test_module_list_of_one_shape_is_submitted_once_with_a_partition_list():
    args = {"name": "anywhere", "system": SYSTEM, "module_list": [
        {"partition": "esb", "nodes": 2, "time": "5", "command": "./app"},
        {"partition": "cm", "nodes": 2, "time": "5", "command": "./app"}]}
    slurm = FakeSlurm([[]])
    done = _run(args, slurm)
    assert slurm.commands("sbatch") == [["sbatch", "--parsable"]] and not slurm.commands("scontrol")
    (script,) = [data for argv, data in slurm.calls if argv == ["sbatch", "--parsable"]]
    assert "#SBATCH --partition=esb,cm\n" in script
    assert done.result["job_ids"] == [510] and done.result["winner"] is None and "estimates" not in done.result


def _local(seconds_from_now):
    return slurm_packjob.time.strftime("%Y-%m-%dT%H:%M:%S", slurm_packjob.time.localtime(NOW + seconds_from_now))


NOW = 1_800_000_000


@pytest.mark.parametrize("starts, chosen, partition", [
    # esb: 4 nodes × 5 min starting in 10 min (slowdown 3); cm: 2 nodes × 7 min at once (slowdown 1)
    ({"esb": 600, "cm": 0}, 1, "cm"),
    # both start at once (slowdown 1): the shorter request (cm, 14 node-minutes against 20) wins
    ({"esb": 0, "cm": 0}, 1, "cm"),
    # cm waits 21 min (slowdown 4), esb 10 min (slowdown 3)
    ({"esb": 600, "cm": 1260}, 0, "esb"),
    # Slurm says esb cannot run it at all
    ({"esb": "error: Batch job submission failed: Requested node configuration is not available", "cm": 3000},
     1, "cm"),
])
def test_module_list_of_different_shapes_submits_the_lowest_expected_slowdown(starts, chosen, partition):
    args = {"name": "anywhere", "system": SYSTEM, "module_list": [
        {"partition": "esb", "nodes": 4, "time": "5", "command": "./app"},
        {"partition": "cm", "nodes": 2, "time": "7", "command": "./app"}]}
    slurm = FakeSlurm([[]], starts={p: a if isinstance(a, str) else _local(a) for p, a in starts.items()})
    with mock.patch.object(slurm_packjob.time, "time", lambda: NOW):
        done = _run(args, slurm)
    assert not done.failed, done.result
    tests, submits = [c for c in slurm.calls if "--test-only" in c[0]], slurm.commands("sbatch")[2:]
    assert len(tests) == 2 and submits == [["sbatch", "--parsable"]]
    (script,) = [data for argv, data in slurm.calls if argv == ["sbatch", "--parsable"]]
    assert "#SBATCH --partition=%s\n" % partition in script
    assert done.result["estimates"][0]["index"] == chosen and done.result["job_ids"] == [510]
    assert [s["components"] for s in done.result["submissions"]] == [[chosen]]


def test_module_list_fails_naming_every_alternative_when_none_can_run():
    args = {"name": "anywhere", "system": SYSTEM, "module_list": [
        {"partition": "esb", "nodes": 4, "time": "5", "command": "./app"},
        {"partition": "cm", "nodes": 2, "time": "7", "command": "./app"}]}
    slurm = FakeSlurm([[]], starts={"esb": "error: Invalid partition", "cm": "error: Requested time limit is invalid"})
    done = _run(args, slurm)
    assert done.failed and "module_list[0] (esb)" in done.result["msg"] and "time limit" in done.result["msg"]
    assert slurm.commands("sbatch") == [c[0] for c in slurm.calls if "--test-only" in c[0]]


def test_module_list_of_different_shapes_over_rest_without_sbatch_is_refused_by_name():
    args = {"name": "anywhere", "system": SYSTEM, "transport": "rest", "rest_url": "http://127.0.0.1:1",
            "rest_user": "alice", "rest_token": "t", "module_list": [
                {"partition": "esb", "nodes": 4, "time": "5", "command": "./app"},
                {"partition": "cm", "nodes": 2, "time": "7", "command": "./app"}]}
    with mock.patch.object(slurm_packjob.RestTransport, "jobs", lambda self, user=None: []), \
            mock.patch.object(slurm_packjob.shutil, "which", lambda name: None):
        done = _run(args, FakeSlurm([[]]))
    assert done.failed and done.result["msg"].startswith("module_list: the alternatives of 'anywhere' differ in shape")
    assert "slurmrestd v0.0.38" in done.result["msg"]


def test_a_failed_sbatch_cancels_what_was_already_submitted():
    args = {"name": "anywhere", "components": [{"partition": "esb", "command": "./app"},
                                               {"partition": "cm", "command": "./app", "delay": 5}]}
    slurm = FakeSlurm([[]])
    real = slurm.__call__

    def flaky(argv, data=None, **kw):
        if argv[0] == "sbatch" and slurm.commands("sbatch"):
            slurm.calls.append((list(argv), data))
            return 1, "", "sbatch: error: Batch job submission failed: Invalid partition name specified"
        return real(argv, data, **kw)

    done = _run(args, flaky)
    assert done.failed and "Invalid partition name specified" in done.result["msg"]
    assert slurm.commands("scancel") == [["scancel", "510"]]
