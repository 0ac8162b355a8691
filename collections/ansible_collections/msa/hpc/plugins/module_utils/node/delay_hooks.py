# SPDX-License-Identifier: GPL-3.0-or-later
"""PrologSlurmctld/EpilogSlurmctld of the delay switch (seed 004 §5.2.2, Algorithm 2), run as SlurmUser by
msa-delay-hook.

A workflow's delayed part is its own job, submitted with ``--delay=M --dependency=after:<leader>``: job_submit.lua
makes its dependency ``after:<leader>+M`` and writes ``delay=M;delay_after=<leader>`` into its comment. When the
leader starts, the prolog reserves the nodes of each delayed job of the leader for its start time (the leader's
start + M minutes) with a Slurm reservation ``msa_delay_<job>`` (the job's partition, node count, licences, user, and
its time limit bounded by the partition's MaxTime) and binds the job to it (job_submit.lua lets no other job into
it), so the scheduler keeps those nodes for it and starts it when asked, not when the queue allows. When the nodes
cannot be reserved for that time (jobs hold them past it), the next minute is tried, and so on up to an hour
(Algorithm 2's added delay, for that component). A delayed job that starts while its leader was cancelled (also
while the leader was still pending, when no reservation was made) is cancelled by its own prolog; the epilog of a
leader that did not complete (cancelled, failed, timed out; read from accounting, since squeue says COMPLETING while
the epilog runs) cancels its delayed jobs; the epilog of a delayed job removes its reservation (``PURGE_COMP``
removes it too once it is idle). A delayed job cancelled while it pends gets no EpilogSlurmctld (Slurm runs it only
for a job that had nodes), so ``sweep``, run every few seconds by a systemd timer on the controller, removes every
``msa_delay_<job>`` reservation whose job has ended or is gone, is held (a held job would keep its nodes reserved
for nothing), or still pends some minutes after the reservation began (it is unbound first, so the job runs when
Slurm can place it), and cancels a reserved part still pending whose leader was cancelled (the backstop for a
leader's epilog that did not do it). Every value read from a job is validated
(module_utils/slurm/jobs) before it goes into an scontrol command line, which is run without a shell. The hook never
fails a job start: a reservation that cannot be made is one log line, and the job starts when Slurm can place it.
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time

from ansible_collections.msa.hpc.plugins.module_utils import _jobopts as J
from ansible_collections.msa.hpc.plugins.module_utils._slurm_conf import parse_time
from ansible_collections.msa.hpc.plugins.module_utils.slurm import jobs as S
from ansible_collections.msa.hpc.plugins.module_utils.slurm import reservations as V

RESERVATION_PREFIX = "msa_delay_"
SHIFT_SECONDS = 60          # Algorithm 2: try the next minute when the nodes are taken at the asked time
SHIFT_TRIES = 60            # ... for an hour at most
OTHER_TRIES = 3             # a refusal other than busy nodes: the same minute asked again, 2 s apart
BUSY = re.compile(r"busy", re.I)   # scontrol: "Error creating the reservation: Requested nodes are busy"
MAX_MINUTES = 525600        # a year, the largest --delay
DEFAULT_MAX_RESERVATION = 1440   # minutes a reservation may last when the partition sets no MaxTime
START_GRACE = 300           # seconds a reserved job may pend after its reservation began before it is unbound
_HELD = ("JobHeldUser", "JobHeldAdmin")
# after:<leader>+<minutes>, or after:<leader> for --delay=0 (Slurm refuses a +0)
_DEPENDENCY = re.compile(r"^after:([1-9][0-9]{0,9})(?:\+([0-9]{1,6}))?(?:\([a-z]+\))?$")
_ENDED = ("CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "BOOT_FAIL", "DEADLINE", "OUT_OF_MEMORY")
_LIVE = ("PENDING", "RUNNING", "CONFIGURING", "SUSPENDED")   # a delayed part's states the leader's end cancels


class DelayError(ValueError):
    """A delayed job the hook will not act on; the message names the job, field and value."""


def _whole(job, key, lo, hi):
    value = job.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise DelayError("job %s: %s %r is not a whole number from %d to %d" % (job.get("job_id"), key, value, lo, hi))
    return value


def delayed_record(job):
    """A job's record with its delay fields, or None when it is not a delayed part (no ``delay_after``)."""
    options = J.decode_delay(job.get("comment"))
    if "delay_after" not in options:
        return None
    rec = S.record(job)
    rec.update(options)
    rec["node_count"] = _whole(job, "node_count", 1, 1 << 16)
    # an unlimited time limit (NO_VAL/INFINITE) is reserved for the longest reservation allowed
    limit = job.get("time_limit")
    rec["time_limit"] = MAX_MINUTES if isinstance(limit, int) and limit > MAX_MINUTES else \
        _whole(job, "time_limit", 1, MAX_MINUTES)
    rec["resv_name"] = str(job.get("resv_name") or "")
    rec["dependency"] = str(job.get("dependency") or "")
    return rec


def delayed_jobs(jobs, leader):
    """The pending delayed parts of ``leader`` (a record): the same user's jobs whose comment names the leader and
    whose Slurm dependency is ``after:<leader>+<delay>`` as job_submit.lua wrote it (a comment alone, which a user
    can write by hand, is not enough). Returns (records, refusals) where a refusal is a message."""
    found, refused = [], []
    for job in jobs:
        if not isinstance(job, dict) or "delay_after" not in str(job.get("comment") or ""):
            continue
        try:
            rec = delayed_record(job)
        except (DelayError, J.JobOptionError, S.JobRecordError) as exc:
            refused.append(str(exc))
            continue
        if rec is None or rec["delay_after"] != leader["job_id"] or rec["state"] != "PENDING":
            continue
        m = _DEPENDENCY.match(rec["dependency"])
        if rec["user"] != leader["user"] or not m or (m.group(1), int(m.group(2) or 0)) != (leader["job_id"],
                                                                                            rec["delay"]):
            refused.append("job %s: comment delay=%s;delay_after=%s but user %s, dependency %r (not %s's "
                           "after:%s+%s)" % (rec["job_id"], rec["delay"], rec["delay_after"], rec["user"],
                                             rec["dependency"], leader["user"], leader["job_id"], rec["delay"]))
            continue
        if not rec["partition"]:
            refused.append("job %s: no single partition to reserve in" % rec["job_id"])
            continue
        found.append(rec)
    return found, refused


def reservation_name(job_id):
    return RESERVATION_PREFIX + S.check_job_id(job_id)


def start_text(when, now):
    """scontrol's StartTime: ``now`` for a time that has come, else local ISO time (slurmctld's clock and zone)."""
    return "now" if when <= now else time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(when))


def reservation_argv(rec, when, now, scontrol="scontrol", duration=None):
    """The ``scontrol create reservation`` command line for delayed job ``rec`` starting at ``when``, lasting its
    time limit or ``duration`` minutes when that is shorter."""
    minutes = rec["time_limit"] if duration is None else min(rec["time_limit"], duration)
    argv = [scontrol, "create", "reservation", "ReservationName=%s" % reservation_name(rec["job_id"]),
            "StartTime=%s" % start_text(when, now), "Duration=%d" % minutes,
            "PartitionName=%s" % rec["partition"], "NodeCnt=%d" % rec["node_count"], "Users=%s" % rec["user"],
            "Flags=PURGE_COMP"]
    licences = ",".join("%s:%d" % (name, count) for name, count in sorted(rec["licenses"].items()))
    if licences:
        argv.append("Licenses=%s" % licences)
    return argv


def _scontrol(argv, run, stdout=False):
    """(exit status, what it said: its error, or with ``stdout`` its whole output)."""
    try:
        proc = run(argv, capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        return 1, str(exc)
    if stdout and proc.returncode == 0:
        return 0, proc.stdout or ""
    return proc.returncode, (proc.stderr or proc.stdout or "").strip()[:300]


def partition_max_minutes(partition, opts, run=subprocess.run):
    """The partition's MaxTime in minutes; ``opts.max_reservation`` when it has none (UNLIMITED) or cannot be read,
    so no reservation holds nodes longer than a job of the partition may run."""
    rc, text = _scontrol([opts.scontrol, "-o", "show", "partition", partition], run, stdout=True)
    if rc == 0:
        for fields in S.scontrol_records(text, "PartitionName"):
            if fields.get("PartitionName") == partition and "MaxTime" in fields:
                try:
                    limit = parse_time(fields["MaxTime"])
                except ValueError:
                    break
                return opts.max_reservation if limit is None else limit
    return opts.max_reservation


def reserve(rec, leader_start, now, opts, run=subprocess.run):
    """Reserve ``rec``'s nodes from the leader's start + its delay (or the first minute after it when they are
    taken then) and bind the job to the reservation. Only Slurm's "nodes are busy" moves the start on; any other
    refusal (a timeout under load, say) is asked again for the same minute a few times. Returns (start, shift in
    seconds, what Slurm said to the first refused start) or raises DelayError."""
    name = reservation_name(rec["job_id"])
    _scontrol([opts.scontrol, "delete", "reservation", name], run)  # a prolog run again (requeued leader)
    duration = partition_max_minutes(rec["partition"], opts, run)
    asked = leader_start + 60 * rec["delay"]
    why, first = "", ""
    step = retries = 0
    while step < SHIFT_TRIES:
        when = asked + step * SHIFT_SECONDS
        if step and when <= now:
            step += 1
            continue
        rc, why = _scontrol(reservation_argv(rec, when, now, opts.scontrol, duration), run)
        if rc == 0:
            break
        first = first or why
        if BUSY.search(why) is None and retries < OTHER_TRIES:
            retries += 1
            _scontrol([opts.scontrol, "delete", "reservation", name], run)  # in case it was made after all
            time.sleep(2)
            continue
        step += 1
    else:
        raise DelayError("job %s: no %d node(s) of %s can be reserved from %s to an hour later: %s" % (
            rec["job_id"], rec["node_count"], rec["partition"], start_text(asked, now), why))
    rc, why = _scontrol([opts.scontrol, "update", "JobId=%s" % rec["job_id"], "ReservationName=%s" % name], run)
    if rc:
        _scontrol([opts.scontrol, "delete", "reservation", name], run)
        raise DelayError("job %s: cannot bind it to reservation %s: %s" % (rec["job_id"], name, why))
    return max(when, now), when - asked, first


def read_all(opts, run=subprocess.run):
    """Every job slurmctld knows (squeue --json of 22.05 lists them all whatever the filter)."""
    try:
        proc = run([opts.squeue, "--json", "--states=all"], capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        raise S.JobRecordError("cannot read the jobs with %s: %s" % (opts.squeue, exc)) from None
    if proc.returncode != 0:
        raise S.JobRecordError("cannot read the jobs with %s: %s" % (opts.squeue, proc.stderr.strip()[:300]))
    return S.load_jobs(proc.stdout)


def find(jobs, job_id):
    return next((j for j in jobs if isinstance(j, dict) and str(j.get("job_id")) == str(job_id)), None)


def cancel(job_id, why, opts, out, run=subprocess.run):
    rc, text = _scontrol([opts.scancel, S.check_job_id(job_id)], run)
    out.write("delay: job %s cancelled: %s%s\n" % (job_id, why, "" if rc == 0 else " (scancel: %s)" % text))


def cancel_part(job_id, why, opts, out, run=subprocess.run):
    """Cancel a delayed part whose leader ended, and remove its reservation."""
    cancel(job_id, why, opts, out, run)
    _scontrol([opts.scontrol, "delete", "reservation", reservation_name(job_id)], run)


def end_state(jobs, job_id, opts, run=subprocess.run, sleep=time.sleep):
    """The state of job ``job_id``: squeue's, unless the job is COMPLETING (what squeue says while EpilogSlurmctld
    runs, whatever the job ended as) or no longer held by slurmctld; then accounting's (sacct), asked a few times
    since slurmdbd records the end a moment after. "" when neither tells."""
    raw = find(jobs, job_id)
    state = str(raw.get("job_state") or "") if raw is not None else ""
    if state and state != "COMPLETING":
        return state
    for attempt in range(opts.sacct_tries):
        rc, text = _scontrol([opts.sacct, "--noheader", "--parsable2", "--allocations", "--format=State",
                              "--jobs=%s" % S.check_job_id(job_id)], run)
        word = text.split()[0] if rc == 0 and text.split() else ""
        if re.match(r"^[A-Z_]+$", word) and word not in ("PENDING", "RUNNING", "REQUEUED", "RESIZING"):
            return word
        if attempt + 1 < opts.sacct_tries:
            sleep(1)
    return state


def leader_gone(jobs, rec, opts, run=subprocess.run):
    """Why the leader of delayed job ``rec`` counts as cancelled, or "" while it is alive or ended otherwise."""
    state = end_state(jobs, rec["delay_after"], opts, run)
    return "its leader %s is %s" % (rec["delay_after"], state) if state == "CANCELLED" else ""


def prolog(env, opts, out, run=subprocess.run, clock=time.time):
    job_id = S.check_job_id(env.get("SLURM_JOB_ID"), "SLURM_JOB_ID")
    jobs = read_all(opts, run)
    raw = find(jobs, job_id)
    if raw is None:
        raise S.JobRecordError("slurmctld knows no job %s (squeue --json)" % job_id)
    mine = delayed_record(raw)
    if mine is not None:
        why = leader_gone(jobs, mine, opts, run)
        if why:
            cancel(job_id, why, opts, out, run)
        return 0
    leader = S.record(raw)
    start = raw.get("start_time")
    now = int(clock())
    start = start if isinstance(start, int) and not isinstance(start, bool) and 0 < start <= now + 60 else now
    found, refused = delayed_jobs(jobs, leader)
    for text in refused:
        out.write("delay: leader %s: not reserved: %s\n" % (job_id, text))
    for rec in found:
        try:
            when, shift, said = reserve(rec, start, now, opts, run)
        except DelayError as exc:
            out.write("delay: leader %s: %s\n" % (job_id, exc))
            continue
        out.write("delay: leader %s: job %s: %d node(s) of %s reserved as %s from %s%s%s\n" % (
            job_id, rec["job_id"], rec["node_count"], rec["partition"], reservation_name(rec["job_id"]),
            start_text(when, 0), " (%d s later than asked: its nodes are taken until then)" % shift if shift else "",
            "; Slurm first said: %s" % said if said else ""))
    return 0


def epilog(env, opts, out, run=subprocess.run):
    job_id = S.check_job_id(env.get("SLURM_JOB_ID"), "SLURM_JOB_ID")
    jobs = read_all(opts, run)
    raw = find(jobs, job_id)
    if raw is None:
        return 0
    if "delay_after" in J.decode_delay(raw.get("comment")):
        rc = _scontrol([opts.scontrol, "delete", "reservation", reservation_name(job_id)], run)[0]
        if rc == 0:
            out.write("delay: job %s ended: reservation %s removed\n" % (job_id, reservation_name(job_id)))
        return 0
    leader = S.record(raw)
    waiting = []
    for job in jobs:
        if not isinstance(job, dict) or "delay_after" not in str(job.get("comment") or ""):
            continue
        try:
            rec = delayed_record(job)
        except (DelayError, J.JobOptionError, S.JobRecordError):
            continue
        if rec is not None and rec["delay_after"] == job_id and rec["user"] == leader["user"] \
                and rec["state"] in _LIVE:
            waiting.append(rec)
    if not waiting:   # most jobs: no accounting query at their end
        return 0
    state = end_state(jobs, job_id, opts, run)
    if state not in _ENDED:
        return 0
    for rec in waiting:
        cancel_part(rec["job_id"], "its leader %s ended %s" % (job_id, state), opts, out, run)
    return 0


_RESERVATION_NAME = re.compile(r"^%s([1-9][0-9]{0,9})$" % RESERVATION_PREFIX)
_WAITING = ("PENDING", "RUNNING", "CONFIGURING", "SUSPENDED", "COMPLETING", "REQUEUED", "RESIZING", "SIGNALING",
            "STAGE_OUT")


def delay_reservations(text):
    """``{job id: reservation name}`` of the delay switch's reservations in ``scontrol -o show reservation``."""
    matches = (_RESERVATION_NAME.match(name) for name in V.parse_reservations(text))
    return {m.group(1): m.group(0) for m in matches if m}


def stale(reservations, jobs):
    """The reservations (of delay_reservations) whose job slurmctld no longer holds or that has ended, by job id."""
    states = {str(j.get("job_id")): str(j.get("job_state") or "") for j in jobs if isinstance(j, dict)}
    return sorted((job_id for job_id in reservations if states.get(job_id, "") not in _WAITING), key=int)


def reservation_starts(text):
    """``{name: start (epoch seconds)}`` of the reservations in ``scontrol -o show reservation`` (local time, as
    slurmctld prints it); a start that cannot be read is left out."""
    out = {}
    for name, fields in V.parse_reservations(text).items():
        try:
            out[name] = time.mktime(time.strptime(fields.get("StartTime", ""), "%Y-%m-%dT%H:%M:%S"))
        except (ValueError, OverflowError):
            continue
    return out


def idle(reservations, starts, jobs, now, grace=START_GRACE):
    """The reservations whose job pends held (JobHeldUser/JobHeldAdmin, or priority 0), or pends ``grace`` seconds
    after its reservation began: ``{job id: why}``."""
    out = {}
    for job in jobs:
        job_id = str(job.get("job_id")) if isinstance(job, dict) else ""
        if job_id not in reservations or str(job.get("job_state") or "") != "PENDING":
            continue
        reason, priority = str(job.get("state_reason") or ""), S.number(job.get("priority"), None)
        start = starts.get(reservations[job_id])
        if reason in _HELD or priority == 0:
            out[job_id] = "is held (%s)" % (reason if reason in _HELD else "priority 0")
        elif start is not None and now > start + grace:
            out[job_id] = "still pends %d s after its reservation began (%s)" % (now - start, reason or "no reason")
    return out


def release(job_id, name, why, opts, out, run=subprocess.run):
    """Unbind a pending job from its delay reservation and remove the reservation (the job keeps its dependency
    and runs when Slurm can place it)."""
    rc, said = _scontrol([opts.scontrol, "update", "JobId=%s" % S.check_job_id(job_id), "ReservationName="], run)
    text = "" if rc == 0 else "; not unbound: %s" % said
    rc, said = _scontrol([opts.scontrol, "delete", "reservation", name], run)
    result = "removed" if rc == 0 else "not removed: %s" % said
    out.write("delay: job %s %s: reservation %s %s%s\n" % (job_id, why, name, result, text))


def sweep(env, opts, out, run=subprocess.run, clock=time.time):
    try:
        proc = run([opts.scontrol, "-o", "show", "reservation"], capture_output=True, text=True, timeout=60,
                   check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        raise S.JobRecordError("cannot list the reservations: %s" % exc) from None
    said = (proc.stderr or proc.stdout or "").strip()[:300]
    if proc.returncode != 0 and "No reservations" not in said:
        raise S.JobRecordError("cannot list the reservations: %s" % said)
    found = delay_reservations(proc.stdout if proc.returncode == 0 else "")
    if not found:   # the common case: no squeue call
        return 0
    jobs = read_all(opts, run)
    for job_id in stale(found, jobs):
        rc, why = _scontrol([opts.scontrol, "delete", "reservation", found[job_id]], run)
        out.write("delay: job %s has ended or is gone: reservation %s %s\n" % (
            job_id, found[job_id], "removed" if rc == 0 else "not removed: %s" % why))
    # a held job, or one left pending past its start, would keep its nodes reserved for nothing (and for a year,
    # before MaxTime bounded the reservation): only this timer sees a job held or late while it pends
    late = idle(found, reservation_starts(proc.stdout if proc.returncode == 0 else ""), jobs, int(clock()),
                opts.start_grace)
    for job_id in sorted(late, key=int):
        release(job_id, found[job_id], late[job_id], opts, out, run)
    # A reserved part, pending or already running, whose leader was cancelled: the leader's EpilogSlurmctld cancels
    # it, this is the backstop for an epilog that did not run to the end (a controller takeover kills the scripts it
    # ran) or did not learn how the leader ended (a loaded slurmdbd records the end after the epilog's last look)
    for job in jobs:
        try:
            rec = delayed_record(job) if isinstance(job, dict) else None
        except (DelayError, J.JobOptionError, S.JobRecordError):
            continue
        if rec is None or rec["job_id"] not in found or rec["state"] not in _LIVE:
            continue
        why = leader_gone(jobs, rec, opts, run)
        if why:
            cancel_part(rec["job_id"], why, opts, out, run)
    return 0


def parser(prog="msa-delay-hook"):
    ap = argparse.ArgumentParser(prog=prog, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("action", choices=("prolog", "epilog", "sweep"))
    ap.add_argument("--squeue", default="squeue", help="squeue (the jobs, read with --json)")
    ap.add_argument("--scontrol", default="scontrol", help="scontrol (creates, binds and deletes reservations)")
    ap.add_argument("--scancel", default="scancel", help="scancel (cancels a delayed job with its leader)")
    ap.add_argument("--sacct", default="sacct", help="sacct (how a job ended: squeue says COMPLETING meanwhile)")
    ap.add_argument("--sacct-tries", type=int, default=5, help="times sacct is asked, a second apart")
    ap.add_argument("--max-reservation", type=int, default=DEFAULT_MAX_RESERVATION,
                    help="minutes a reservation lasts at most when its partition has no MaxTime")
    ap.add_argument("--start-grace", type=int, default=START_GRACE,
                    help="seconds a reserved job may pend after its reservation began before the sweep unbinds it")
    return ap


def main(argv=None, env=None, out=sys.stdout, err=sys.stderr, prog="msa-delay-hook", run=subprocess.run):
    """Run one action; it never fails a job (exit 0), every problem is one line on ``err``."""
    env = os.environ if env is None else env
    opts = parser(prog).parse_args(argv)
    func = {"prolog": prolog, "epilog": epilog, "sweep": sweep}[opts.action]

    def action():
        return func(env, opts, out, run)

    return S.run_hook("delay", opts.action, action, 0, env.get("SLURM_JOB_ID"), err,
                      (DelayError, S.JobRecordError, J.JobOptionError, OSError, ValueError))
