# SPDX-License-Identifier: GPL-3.0-or-later
"""The job as the hooks read it from Slurm 22.05's ``squeue --json`` (captured on the simulated system), validated."""
from __future__ import annotations

import json
import pathlib
import subprocess

import pytest

from ansible_collections.msa.hpc.plugins.module_utils.slurm import jobs as S

FIXTURE = pathlib.Path(__file__).parents[1] / "fixtures/slurm/squeue_json_22.05_all_states.json"
TEXT = FIXTURE.read_text()


def test_a_running_hetjob_is_picked_out_of_every_job_squeue_lists():
    records = S.parse_jobs(TEXT, "5")  # a later component: the whole hetjob, leader first
    assert [(r["job_id"], r["het_job_id"], r["het_job_offset"]) for r in records] == [("4", "4", 0), ("5", "4", 1)]
    leader = records[0]
    assert leader["user"] == "root" and leader["uid"] == 0 and leader["gid"] == 0
    assert leader["workdir"] == "/tmp" and leader["comment"] == "msa:gw_file=route.txt;gw_cleanup=1"
    assert leader["licenses"] == {"gce": 1} and records[1]["licenses"] == {}
    assert leader["partition"] == "cm" and leader["nodes"] == ["cm01"]
    assert records[1]["nodes"] == ["esb01", "esb02"] and leader["state"] == "RUNNING"
    assert S.components(records, "4") == records and S.components(records, "5") is None
    assert S.granted(records, "gce") == 1 and S.granted(records, "nam") == 0


def test_a_plain_job_and_a_pending_hetjob_read_too():
    (plain,) = S.parse_jobs(TEXT, "3")
    assert plain["het_job_id"] is None and plain["nodes"] == [] and plain["workdir"] == "/"
    records = S.parse_jobs(TEXT, 1)
    assert S.granted(records, "nam") == 2 and S.granted(records, "gateway") == 1


def test_a_job_slurm_does_not_know_is_an_error_naming_it():
    with pytest.raises(S.JobRecordError, match="slurmctld knows no job 99"):
        S.parse_jobs(TEXT, "99")


@pytest.mark.parametrize("field, value, message", [
    ("user_name", "a b", "user_name 'a b' is not a user name"),
    ("user_name", "", "user_name '' is not a user name"),
    ("user_id", "0", "user_id: '0' is not a numeric id"),
    ("user_id", 4294967295, "user_id: 4294967295 is not a numeric id"),
    ("group_id", True, "group_id: True is not a numeric id"),
    ("current_working_directory", "tmp", "current_working_directory 'tmp' is not an absolute path"),
    ("current_working_directory", "/home/../etc", "current_working_directory '/home/../etc'"),
    ("licenses", "nam:-1", "licenses: 'nam:-1' is not name[:count]"),
    ("partition", "cm;x", "partition 'cm;x' is not a partition name"),
    ("het_job_offset", -1, "het_job_offset -1 is not a component index"),
])
def test_every_field_the_hooks_use_is_validated_naming_field_and_value(field, value, message):
    data = json.loads(TEXT)
    leader = next(j for j in data["jobs"] if j["job_id"] == 4)
    leader[field] = value
    with pytest.raises(S.JobRecordError) as exc:
        S.parse_jobs(json.dumps(data), "4")
    assert str(exc.value).startswith("job 4: ") and message in str(exc.value)


@pytest.mark.parametrize("job_id", ["", "0", "-1", "4;id", "../4", "4 5", "12345678901", None])
def test_job_ids_are_checked_before_anything_is_run(job_id):
    calls = []
    with pytest.raises(S.JobRecordError, match="SLURM_JOB_ID: .* is not a Slurm job id"):
        S.read_job(job_id, run=lambda *a, **k: calls.append(a))
    assert calls == []


def test_read_job_asks_squeue_for_json_and_reports_its_failure():
    seen = []

    def run(argv, **kw):
        seen.append(argv)
        return subprocess.CompletedProcess(argv, 0, TEXT, "")
    assert [r["job_id"] for r in S.read_job("4", "/usr/bin/squeue", run=run)] == ["4", "5"]
    assert seen == [["/usr/bin/squeue", "--json", "--states=all", "--jobs=4"]]

    def failed(argv, **_kw):
        return subprocess.CompletedProcess(argv, 1, "", "slurm_load_jobs error: timeout")
    with pytest.raises(S.JobRecordError, match="cannot read job 4 with squeue: slurm_load_jobs error: timeout"):
        S.read_job("4", run=failed)


def test_licences_read_in_both_of_slurms_spellings():
    assert S.parse_licenses("gateway:2,nam*100,gce") == {"gateway": 2, "nam": 100, "gce": 1}
    assert S.parse_licenses("(null)") == S.parse_licenses("") == S.parse_licenses(None) == {}


def test_a_hook_ends_in_one_line_and_its_failure_status_whatever_goes_wrong():
    import io

    def broken():
        return {}["missing"]
    err = io.StringIO()
    assert S.run_hook("psgw", "prolog", broken, 1, "7", err, (S.JobRecordError,)) == 1
    assert err.getvalue() == "psgw prolog: job 7: internal error KeyError: 'missing'\n"
    err = io.StringIO()
    assert S.run_hook("nam", "epilog", lambda: S.check_job_id("x"), 0, "x", err, (S.JobRecordError,)) == 0
    assert err.getvalue() == "nam epilog: job x: job id: 'x' is not a Slurm job id\n"
    assert S.run_hook("nam", "prolog", lambda: 0, 1, "7", err) == 0


# --- the one reader of job records: squeue/sacct --json and scontrol text --------------------------------------------

def test_load_jobs_reads_every_job_of_real_squeue_and_sacct_output():
    jobs = S.load_jobs(TEXT)
    assert len(jobs) == len(json.loads(TEXT)["jobs"]) and all(isinstance(j, dict) for j in jobs)
    sacct = (FIXTURE.parent / "sacct_22.05_hetjob.json").read_text()
    assert S.load_jobs(sacct, "sacct --json") == json.loads(sacct)["jobs"]
    assert S.load_jobs(json.loads(TEXT)) == jobs   # slurmrestd's answer, already decoded


@pytest.mark.parametrize("text,required,match", [
    ("squeue: error: unrecognized option '--json'", True, "printed no JSON"),
    ('{"errors": [{"error": "Invalid user", "error_number": 1}], "jobs": []}', True, "reported: Invalid user"),
    ('{"errors": []}', True, "no 'jobs' list"),
    ('[1, 2]', False, "no 'jobs' list")])
def test_load_jobs_refuses_what_holds_no_jobs(text, required, match):
    with pytest.raises(S.JobRecordError, match=match):
        S.load_jobs(text, required=required)


def test_load_jobs_without_a_required_list_reads_none_as_no_job():
    assert S.load_jobs('{"errors": []}', required=False) == []
    assert S.load_jobs('{"jobs": [7, {"job_id": 1}]}') == [{"job_id": 1}]


def test_scontrol_records_splits_at_the_key_and_keeps_values_with_spaces_whole():
    text = (FIXTURE.parent / "scontrol_show_job_22.05_hetjob.txt").read_text()
    records = S.scontrol_records(text, "JobId")
    assert [r["JobId"] for r in records] == ["1234", "1235"]
    assert records[0]["UserId"] == "alice(1000)" and records[0]["JobState"] == "RUNNING"
    one_line = S.scontrol_records("JobId=1 Comment=two words here JobState=PENDING\nJobId=2 JobState=RUNNING", "JobId")
    assert one_line == [{"JobId": "1", "Comment": "two words here", "JobState": "PENDING"},
                        {"JobId": "2", "JobState": "RUNNING"}]
    assert S.scontrol_records("Before=1 JobId=3 Nodes=a\n Nodes=b", "JobId") == [{"JobId": "3", "Nodes": "a"}]


@pytest.mark.parametrize("value, kwargs, expected", [
    (5, {}, 5), ("7", {}, 7), ({"set": True, "number": 3}, {}, 3), ({"set": False, "number": 3}, {}, None),
    ({"infinite": True, "number": 0}, {}, None), (0xFFFFFFFE, {}, None), (True, {}, None), ("x", {}, None),
    (-2, {}, -2), (-2, {"minimum": 0, "default": 0}, 0), (None, {"default": 0}, 0),
])
def test_number_reads_slurm_json_numbers_and_its_markers(value, kwargs, expected):
    assert S.number(value, **kwargs) == expected


class FakeRun:
    """subprocess.run for scontrol: records each command line, answers ``rc``/``stderr``."""

    def __init__(self, rc=0, stderr=""):
        self.calls, self.rc, self.stderr = [], rc, stderr

    def __call__(self, argv, **_kw):
        self.calls.append(argv)
        return subprocess.CompletedProcess(argv, self.rc, "", self.stderr)


def test_a_refusing_prolog_stops_the_requeue_and_gives_the_reason_to_the_job():
    import io

    def refuse():
        raise S.JobRecordError("job 7 refused: gw_file: '/etc/x' is outside the job user's\nhome")
    err, run = io.StringIO(), FakeRun()
    assert S.run_hook("psgw", "prolog", refuse, 1, "7", err, (S.JobRecordError,), scontrol="/usr/bin/scontrol",
                      run=run) == 1
    assert run.calls == [["/usr/bin/scontrol", "update", "JobId=7", "Requeue=0",
                          "AdminComment=refused: psgw: job 7 refused: gw_file: '/etc/x' is outside the job "
                          "user's home"]]
    assert err.getvalue().splitlines()[-1] == "psgw prolog: job 7: not requeued, the refusal is its AdminComment"


def test_a_prolog_that_fails_for_a_service_or_busy_pool_is_still_requeued():
    import io

    def busy():
        raise S.JobRecordError("no 2 gateways free (busy)")
    err, run = io.StringIO(), FakeRun()
    assert S.run_hook("psgw", "prolog", busy, 1, "7", err, (S.JobRecordError,), scontrol="scontrol", run=run) == 1
    assert run.calls == [] and err.getvalue() == "psgw prolog: job 7: no 2 gateways free (busy)\n"


def test_an_epilog_or_a_prolog_that_never_fails_a_job_marks_nothing():
    import io

    def refuse():
        raise S.JobRecordError("job 7 refused: x")
    run = FakeRun()
    assert S.run_hook("nam", "epilog", refuse, 0, "7", io.StringIO(), (S.JobRecordError,), "scontrol", run) == 0
    assert S.run_hook("delay", "prolog", refuse, 0, "7", io.StringIO(), (S.JobRecordError,), "scontrol", run) == 0
    assert run.calls == []


def test_a_refusal_that_cannot_be_marked_is_said_and_the_job_still_fails_its_start():
    import io

    def refuse():
        raise S.JobRecordError("job 7 refused: x")
    err = io.StringIO()
    run = FakeRun(rc=1, stderr="slurm_update error: Access/permission denied\n")
    assert S.run_hook("nam", "prolog", refuse, 1, "7", err, (S.JobRecordError,), "scontrol", run) == 1
    assert err.getvalue().splitlines()[-1] == ("nam prolog: job 7: could not stop its requeue: scontrol update: "
                                               "slurm_update error: Access/permission denied")
