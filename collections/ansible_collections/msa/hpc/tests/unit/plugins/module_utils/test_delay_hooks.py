# SPDX-License-Identifier: GPL-3.0-or-later
"""The delay switch's controller hook: which jobs it reserves for, the scontrol commands it runs (no shell, every
value validated), Algorithm 2's shift when the nodes are taken, and cancelling with the leader."""
from __future__ import annotations

import io
import json
import pathlib
import subprocess
import time

import pytest

from ansible_collections.msa.hpc.plugins.module_utils.node import delay_hooks as D
from ansible_collections.msa.hpc.plugins.module_utils import _jobopts as J

FIXTURE = pathlib.Path(__file__).parent / "fixtures/slurm/squeue_json_22.05_all_states.json"
TEMPLATE = json.loads(FIXTURE.read_text())["jobs"][0]   # a real 22.05 record; fields are overridden below
NOW = 1_800_000_000


def job(job_id, **fields):
    rec = dict(TEMPLATE)
    rec.update({"job_id": job_id, "het_job_id": 0, "het_job_offset": 0, "user_name": "alice", "user_id": 5000,
                "group_id": 5000, "comment": "", "licenses": "", "nodes": "", "partition": "cm", "dependency": "",
                "job_state": "PENDING", "node_count": 1, "time_limit": 5, "resv_name": "", "start_time": 0,
                "state_reason": "Dependency", "priority": 4294901759})   # the template is a held job
    rec.update(fields)
    return rec


def delayed(job_id, leader, minutes=1, **fields):
    base = {"partition": "dam", "comment": "msa:delay=%d;delay_after=%s" % (minutes, leader),
            "dependency": "after:%s%s(unfulfilled)" % (leader, "+%d" % minutes if minutes else "")}
    base.update(fields)
    return job(job_id, **base)


class FakeSlurm:
    """squeue --json answers ``jobs``; scontrol/scancel calls are recorded; ``busy_until`` refuses reservations
    that start earlier (the nodes are taken until then)."""

    def __init__(self, jobs, busy_until=0, bind_fails=False, accounting=None, reservations="", partitions=""):
        self.jobs, self.busy_until, self.bind_fails, self.calls = jobs, busy_until, bind_fails, []
        self.partitions = partitions   # what scontrol -o show partition prints
        self.reservations = reservations   # what scontrol -o show reservation prints
        self.accounting = accounting or {}   # job id -> sacct's State column

    def __call__(self, argv, **kwargs):
        assert isinstance(argv, list) and not kwargs.get("shell")
        self.calls.append(argv)
        if argv[0] == "squeue":
            return subprocess.CompletedProcess(argv, 0, json.dumps({"jobs": self.jobs}), "")
        if argv[1:] == ["-o", "show", "reservation"]:
            if not self.reservations:
                return subprocess.CompletedProcess(argv, 1, "No reservations in the system\n", "")
            return subprocess.CompletedProcess(argv, 0, self.reservations, "")
        if argv[1:4] == ["-o", "show", "partition"]:
            return subprocess.CompletedProcess(argv, 0, self.partitions, "")
        if argv[0] == "sacct":
            job_id = argv[-1].split("=", 1)[1]
            return subprocess.CompletedProcess(argv, 0, self.accounting.get(job_id, "") + "\n", "")
        if argv[1:3] == ["create", "reservation"]:
            start = dict(a.split("=", 1) for a in argv[3:])["StartTime"]
            when = NOW if start == "now" else time.mktime(time.strptime(start, "%Y-%m-%dT%H:%M:%S"))
            if when < self.busy_until:
                return subprocess.CompletedProcess(argv, 1, "", "Error creating the reservation: Requested nodes "
                                                                "are busy")
        if argv[1] == "update" and self.bind_fails:
            return subprocess.CompletedProcess(argv, 1, "", "Invalid reservation")
        return subprocess.CompletedProcess(argv, 0, "", "")

    def made(self, verb):
        return [c for c in self.calls if c[1:2] == [verb]]


def run(action, job_id, slurm):
    out, err = io.StringIO(), io.StringIO()
    opts = D.parser().parse_args([action, "--sacct-tries", "1"])
    func = {"prolog": D.prolog, "epilog": D.epilog, "sweep": D.sweep}[action]
    kwargs = {"clock": lambda: NOW} if action in ("prolog", "sweep") else {}
    rc = D.S.run_hook("delay", action, lambda: func({"SLURM_JOB_ID": job_id}, opts, out, slurm, **kwargs), 0,
                      job_id, err, (D.DelayError, D.S.JobRecordError, J.JobOptionError, OSError, ValueError))
    return rc, out.getvalue(), err.getvalue()


def test_the_leaders_start_reserves_the_delayed_jobs_nodes_for_start_plus_delay_and_binds_it():
    slurm = FakeSlurm([job(41, job_state="RUNNING", start_time=NOW - 5, nodes="cm01"),
                       delayed(42, 41, 1, node_count=2, time_limit=3, licenses="gateway:1")])
    rc, out, err = run("prolog", "41", slurm)
    assert (rc, err) == (0, "")
    (create,) = slurm.made("create")
    start = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(NOW - 5 + 60))
    assert create == ["scontrol", "create", "reservation", "ReservationName=msa_delay_42", "StartTime=" + start,
                      "Duration=3", "PartitionName=dam", "NodeCnt=2", "Users=alice", "Flags=PURGE_COMP",
                      "Licenses=gateway:1"]
    assert slurm.made("update") == [["scontrol", "update", "JobId=42", "ReservationName=msa_delay_42"]]
    assert "job 42: 2 node(s) of dam reserved as msa_delay_42 from " + start in out


def test_a_part_without_delay_has_slurms_plain_after_and_is_reserved_from_the_leaders_start():
    slurm = FakeSlurm([job(41, job_state="RUNNING", start_time=NOW - 5, nodes="cm01"), delayed(42, 41, 0)])
    rc, out, err = run("prolog", "41", slurm)
    assert (rc, err) == (0, "")
    (create,) = slurm.made("create")
    # its start time (the leader's) has come: the nodes are reserved from now, for the part to start at once
    assert create[3:5] == ["ReservationName=msa_delay_42", "StartTime=now"], create


def test_nodes_taken_at_the_asked_time_shift_the_reservation_a_minute_at_a_time():
    slurm = FakeSlurm([job(41, job_state="RUNNING", start_time=NOW), delayed(42, 41, 2)], busy_until=NOW + 300)
    rc, out, dummy = run("prolog", "41", slurm)
    starts = [c[4] for c in slurm.made("create")]
    assert rc == 0 and len(starts) == 4   # +120 s busy, +180, +240, then +300 free
    assert starts[-1] == "StartTime=" + time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(NOW + 300))
    assert "(180 s later than asked" in out and "Slurm first said: Error creating the reservation: Requested nodes" in out


class FlakySlurm(FakeSlurm):
    """The first ``fails`` reservation requests time out (slurmctld under load), whatever their start."""

    def __init__(self, jobs, fails):
        super().__init__(jobs)
        self.fails = fails

    def __call__(self, argv, **kwargs):
        if argv[1:3] == ["create", "reservation"] and self.fails:
            self.fails -= 1
            self.calls.append(argv)
            return subprocess.CompletedProcess(argv, 1, "", "slurm_create_reservation error: Socket timed out on "
                                                            "send/recv operation")
        return super().__call__(argv, **kwargs)


def test_a_refusal_other_than_busy_nodes_asks_again_for_the_same_minute_instead_of_shifting(monkeypatch):
    monkeypatch.setattr(D.time, "sleep", lambda seconds: None)
    slurm = FlakySlurm([job(41, job_state="RUNNING", start_time=NOW), delayed(42, 41, 2)], fails=2)
    rc, out, dummy = run("prolog", "41", slurm)
    starts = [c[4] for c in slurm.made("create")]
    asked = "StartTime=" + time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(NOW + 120))
    assert rc == 0 and starts == [asked] * 3
    assert "later than asked" not in out and "Slurm first said: slurm_create_reservation error: Socket timed" in out
    assert slurm.made("update") == [["scontrol", "update", "JobId=42", "ReservationName=msa_delay_42"]]


def test_a_refusal_other_than_busy_nodes_that_persists_shifts_after_a_few_tries(monkeypatch):
    monkeypatch.setattr(D.time, "sleep", lambda seconds: None)
    slurm = FlakySlurm([job(41, job_state="RUNNING", start_time=NOW), delayed(42, 41, 2)], fails=5)
    rc, out, dummy = run("prolog", "41", slurm)
    starts = [c[4] for c in slurm.made("create")]
    assert rc == 0 and len(starts) == 6 and len(set(starts[:4])) == 1 and starts[4] != starts[3]


def test_nodes_taken_for_over_an_hour_leave_the_job_unreserved_and_the_leader_starting():
    slurm = FakeSlurm([job(41, job_state="RUNNING", start_time=NOW), delayed(42, 41, 1)], busy_until=NOW + 7200)
    rc, out, dummy = run("prolog", "41", slurm)
    assert rc == 0 and slurm.made("update") == []
    assert "job 42: no 1 node(s) of dam can be reserved" in out and "Requested nodes are busy" in out


def test_a_bind_that_fails_removes_the_reservation_again():
    slurm = FakeSlurm([job(41, job_state="RUNNING", start_time=NOW), delayed(42, 41, 0)], bind_fails=True)
    rc, out, dummy = run("prolog", "41", slurm)
    assert rc == 0 and slurm.made("create")[0][4] == "StartTime=now"
    assert slurm.made("delete")[-1] == ["scontrol", "delete", "reservation", "msa_delay_42"]
    assert "cannot bind it to reservation msa_delay_42: Invalid reservation" in out


@pytest.mark.parametrize("other", [
    delayed(42, 41, 1, user_name="mallory", user_id=6000),          # another user's job naming our leader
    delayed(42, 41, 1, dependency="after:41+5"),                    # comment and dependency disagree
    delayed(42, 41, 1, dependency="afterok:41"),                    # a comment written by hand
    delayed(42, 41, 1, partition="dam;rm -rf /"),                   # a field scontrol must never see
    delayed(42, 41, 1, node_count=0),
    delayed(42, 41, 1, comment="msa:delay=1;delay_after=x41"),
])
def test_jobs_that_only_claim_to_be_delayed_parts_get_no_reservation(other):
    slurm = FakeSlurm([job(41, job_state="RUNNING", start_time=NOW), other])
    rc, out, err = run("prolog", "41", slurm)
    assert rc == 0 and slurm.made("create") == [] and slurm.made("update") == []
    assert "delay: leader 41: not reserved: " in out and err == "", (out, err)


def test_other_leaders_jobs_and_started_jobs_are_left_alone():
    slurm = FakeSlurm([job(41, job_state="RUNNING", start_time=NOW), delayed(42, 40, 1),
                       delayed(43, 41, 1, job_state="RUNNING")])
    assert run("prolog", "41", slurm)[0] == 0
    assert slurm.made("create") == [] and slurm.made("scancel") == []


def test_a_delayed_job_starting_after_its_leader_was_cancelled_is_cancelled():
    slurm = FakeSlurm([job(41, job_state="CANCELLED"), delayed(42, 41, 1, job_state="CONFIGURING")])
    rc, out, dummy = run("prolog", "42", slurm)
    assert rc == 0 and ["scancel", "42"] in slurm.calls
    assert "job 42 cancelled: its leader 41 is CANCELLED" in out


def test_a_delayed_job_whose_leader_runs_starts():
    slurm = FakeSlurm([job(41, job_state="RUNNING"), delayed(42, 41, 1, job_state="CONFIGURING")])
    assert run("prolog", "42", slurm)[0] == 0 and not [c for c in slurm.calls if c[0] == "scancel"]


def test_a_cancelled_leader_takes_its_delayed_jobs_and_their_reservations_with_it():
    # while EpilogSlurmctld runs squeue says COMPLETING: how the leader ended comes from accounting
    slurm = FakeSlurm([job(41, job_state="COMPLETING"), delayed(42, 41, 1), delayed(43, 41, 1, job_state="RUNNING"),
                       delayed(44, 41, 1, job_state="COMPLETED"), delayed(45, 41, 1, user_name="bob")],
                      accounting={"41": "CANCELLED by 5000"})
    rc, out, dummy = run("epilog", "41", slurm)
    assert rc == 0 and ["sacct", "--noheader", "--parsable2", "--allocations", "--format=State",
                        "--jobs=41"] in slurm.calls
    assert [c for c in slurm.calls if c[0] == "scancel"] == [["scancel", "42"], ["scancel", "43"]]
    assert ["scontrol", "delete", "reservation", "msa_delay_42"] in slurm.calls


def test_a_leader_that_completed_leaves_its_delayed_jobs_to_start_when_asked():
    slurm = FakeSlurm([job(41, job_state="COMPLETING"), delayed(42, 41, 1)], accounting={"41": "COMPLETED"})
    assert run("epilog", "41", slurm)[0] == 0 and [c[0] for c in slurm.calls] == ["squeue", "sacct"]


def test_a_leader_whose_end_accounting_does_not_tell_leaves_its_delayed_jobs_alone():
    slurm = FakeSlurm([job(41, job_state="COMPLETING"), delayed(42, 41, 1)], accounting={"41": "sacct: error"})
    assert run("epilog", "41", slurm)[0] == 0 and [c[0] for c in slurm.calls] == ["squeue", "sacct"]


def test_a_delayed_job_whose_leader_slurmctld_forgot_asks_accounting():
    slurm = FakeSlurm([delayed(42, 41, 9, job_state="CONFIGURING")], accounting={"41": "COMPLETED"})
    assert run("prolog", "42", slurm)[0] == 0 and not [c for c in slurm.calls if c[0] == "scancel"]
    slurm = FakeSlurm([delayed(42, 41, 9, job_state="CONFIGURING")], accounting={"41": "CANCELLED by 0"})
    assert run("prolog", "42", slurm)[0] == 0 and ["scancel", "42"] in slurm.calls


def test_a_job_without_delayed_parts_ends_without_asking_accounting():
    slurm = FakeSlurm([job(41, job_state="COMPLETING"), delayed(42, 40, 1)], accounting={"41": "CANCELLED"})
    assert run("epilog", "41", slurm)[0] == 0 and [c[0] for c in slurm.calls] == ["squeue"]


def test_a_delayed_jobs_end_removes_its_reservation():
    slurm = FakeSlurm([delayed(42, 41, 1, job_state="COMPLETED")])
    rc, out, dummy = run("epilog", "42", slurm)
    assert rc == 0 and slurm.calls[-1] == ["scontrol", "delete", "reservation", "msa_delay_42"]


def test_a_bad_job_id_from_the_environment_is_one_line_and_no_command():
    slurm = FakeSlurm([])
    rc, dummy, err = run("prolog", "41; rm -rf /", slurm)
    assert rc == 0 and slurm.calls == [] and "is not a Slurm job id" in err


@pytest.mark.parametrize("comment,message", [
    ("msa:delay_after=41", "delay_after: '41' is given without delay"),
    ("msa:delay=-1;delay_after=41", "delay: '-1' is not a whole number"),
    ("msa:delay=1;delay_after=0", "delay_after: '0' is not a job id"),
])
def test_decode_delay_refuses_naming_key_and_value(comment, message):
    with pytest.raises(J.JobOptionError, match=message):
        J.decode_delay(comment)


def test_decode_delay_reads_the_lua_comment():
    assert J.decode_delay("msa:gw_num=1;delay=5;delay_after=41") == {"delay": 5, "delay_after": "41"}
    assert J.decode_delay("delay=5 by hand") == {} and J.decode_delay(None) == {}


def stamp(when):
    """A time as scontrol prints it (slurmctld's local time)."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(when))


START = stamp(NOW - 60)   # the delay reservations began a minute ago (within the sweep's grace)
RESERVATIONS = (
    "ReservationName=msa_delay_42 StartTime=%(s)s EndTime=2026-11-26T12:03:00 Duration=00:03:00"
    " Nodes=dam01 NodeCnt=1 CoreCnt=8 Features=(null) PartitionName=dam Flags=PURGE_COMP\n"
    "ReservationName=msa_delay_43 StartTime=%(s)s EndTime=2026-11-26T12:03:00 Duration=00:03:00"
    " Nodes=dam02 NodeCnt=1 CoreCnt=8 Features=(null) PartitionName=dam Flags=PURGE_COMP\n"
    "ReservationName=msa_delay_44 StartTime=%(s)s Nodes=dam03 PartitionName=dam\n"
    "ReservationName=msa_gw_down StartTime=2026-11-26T11:00:00 Licenses=gateway:1\n"
    "ReservationName=msa_delay_x Nodes=dam04\n") % {"s": START}


def test_delay_reservations_are_read_by_name_and_others_ignored():
    assert D.delay_reservations(RESERVATIONS) == {"42": "msa_delay_42", "43": "msa_delay_43", "44": "msa_delay_44"}
    assert D.delay_reservations("No reservations in the system") == {}


def test_the_sweep_removes_the_reservation_of_a_part_cancelled_while_pending_and_keeps_the_others():
    # 42 was cancelled while it pended (no EpilogSlurmctld for it), 43 pends, 44 slurmctld forgot
    slurm = FakeSlurm([delayed(42, 41, job_state="CANCELLED"), delayed(43, 41), job(41, job_state="RUNNING")],
                      reservations=RESERVATIONS)
    rc, out, err = run("sweep", None, slurm)
    assert rc == 0 and err == ""
    assert slurm.made("delete") == [["scontrol", "delete", "reservation", "msa_delay_42"],
                                    ["scontrol", "delete", "reservation", "msa_delay_44"]]
    assert "job 42 has ended or is gone: reservation msa_delay_42 removed" in out


@pytest.mark.parametrize("part_state", ["PENDING", "RUNNING"])
def test_the_sweep_cancels_a_reserved_part_whose_leader_was_cancelled_and_leaves_a_live_leaders_part(part_state):
    # 41's epilog did not cancel 42 (it was killed, or accounting was late); 51 runs, so 52 keeps waiting
    slurm = FakeSlurm([job(41, job_state="CANCELLED"), delayed(42, 41, 5, job_state=part_state),
                       job(51, job_state="RUNNING"),
                       delayed(52, 51, 5)],
                      reservations="ReservationName=msa_delay_42 Nodes=dam01\nReservationName=msa_delay_52 Nodes=dam02\n")
    rc, out, err = run("sweep", None, slurm)
    assert (rc, err) == (0, "")
    assert [c for c in slurm.calls if c[0] == "scancel"] == [["scancel", "42"]]
    assert slurm.made("delete") == [["scontrol", "delete", "reservation", "msa_delay_42"]]
    assert "job 42 cancelled: its leader 41 is CANCELLED" in out


def test_the_sweep_without_delay_reservations_reads_no_jobs():
    slurm = FakeSlurm([], reservations="ReservationName=msa_gw_down Licenses=gateway:1\n")
    assert run("sweep", None, slurm)[0] == 0
    assert not slurm.made("delete") and not [c for c in slurm.calls if c[0] == "squeue"]
    slurm = FakeSlurm([])
    assert run("sweep", None, slurm) == (0, "", "")


@pytest.mark.parametrize("state", ["PENDING", "RUNNING", "CONFIGURING", "COMPLETING"])
def test_the_sweep_keeps_the_reservation_of_a_part_that_waits_or_runs(state):
    slurm = FakeSlurm([delayed(42, 41, job_state=state), delayed(43, 41), delayed(44, 41)], reservations=RESERVATIONS)
    run("sweep", None, slurm)
    assert slurm.made("delete") == []


# --- bounded reservations: MaxTime, held and late jobs ---------------------------------------------------------------

@pytest.mark.parametrize("max_time, limit, duration", [
    ("00:30:00", 525600, 30),          # a job without a time limit reserves no more than a job may run
    ("1-00:00:00", 5, 5),              # a shorter time limit is the job's own
    ("UNLIMITED", 525600, D.DEFAULT_MAX_RESERVATION),   # no MaxTime: the site's bound, a day
])
def test_a_reservation_lasts_no_longer_than_the_partitions_maxtime(max_time, limit, duration):
    slurm = FakeSlurm([job(41, job_state="RUNNING", start_time=NOW), delayed(42, 41, 1, time_limit=limit)],
                      partitions="PartitionName=dam AllowGroups=ALL MaxTime=%s DefaultTime=NONE State=UP\n" % max_time)
    assert run("prolog", "41", slurm)[0] == 0
    (create,) = slurm.made("create")
    assert "Duration=%d" % duration in create, create
    assert ["scontrol", "-o", "show", "partition", "dam"] in slurm.calls


def test_a_partition_that_cannot_be_read_bounds_the_reservation_by_a_day():
    slurm = FakeSlurm([job(41, job_state="RUNNING", start_time=NOW), delayed(42, 41, 1, time_limit=525600)])
    assert run("prolog", "41", slurm)[0] == 0
    assert "Duration=%d" % D.DEFAULT_MAX_RESERVATION in slurm.made("create")[0]


@pytest.mark.parametrize("fields, why", [
    ({"state_reason": "JobHeldUser", "priority": 0}, "job 42 is held (JobHeldUser)"),
    ({"state_reason": "JobHeldAdmin", "priority": 0}, "job 42 is held (JobHeldAdmin)"),
    ({"state_reason": "Resources", "priority": 0}, "job 42 is held (priority 0)"),
])
def test_the_sweep_unbinds_a_held_job_and_removes_its_reservation(fields, why):
    slurm = FakeSlurm([job(41, job_state="RUNNING"), delayed(42, 41, **fields), delayed(43, 41)],
                      reservations=RESERVATIONS)
    rc, out, err = run("sweep", None, slurm)
    assert (rc, err) == (0, "")
    assert slurm.made("update") == [["scontrol", "update", "JobId=42", "ReservationName="]]
    assert ["scontrol", "delete", "reservation", "msa_delay_42"] in slurm.made("delete")
    assert ["scontrol", "delete", "reservation", "msa_delay_43"] not in slurm.made("delete")
    assert why + ": reservation msa_delay_42 removed" in out


def test_the_sweep_unbinds_a_job_left_pending_past_its_start():
    late = RESERVATIONS.replace("ReservationName=msa_delay_43 StartTime=%s" % START,
                                "ReservationName=msa_delay_43 StartTime=%s" % stamp(NOW - D.START_GRACE - 1))
    slurm = FakeSlurm([job(41, job_state="RUNNING"), delayed(42, 41), delayed(43, 41, state_reason="Resources"),
                       delayed(44, 41)], reservations=late)
    rc, out, err = run("sweep", None, slurm)
    assert (rc, err) == (0, "")
    assert slurm.made("update") == [["scontrol", "update", "JobId=43", "ReservationName="]]
    assert slurm.made("delete") == [["scontrol", "delete", "reservation", "msa_delay_43"]]
    assert "job 43 still pends %d s after its reservation began (Resources): reservation msa_delay_43 removed" % (
        D.START_GRACE + 1) in out
