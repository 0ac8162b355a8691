# SPDX-License-Identifier: GPL-3.0-or-later
"""The one reader of Slurm's job records, and one job as the Slurm controller's hooks see it, every field validated.

``squeue --json``/``sacct --json`` (and slurmrestd's job answers) are decoded by load_jobs, ``scontrol show`` text by
scontrol_records, for the hooks here and for slurm_packjob (module_utils/slurm/records.py). Slurm 22.05's scontrol has
no ``--json`` (it came with 23.02); its squeue does, but dumps every job whatever the filter options say, so the
records of the job asked for are picked out here before any of them is validated."""
from __future__ import annotations

import json
import re
import subprocess

from ansible_collections.msa.hpc.plugins.module_utils._hostlist import HostlistError, expand

_USER = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,31}\$?$")
_PARTITION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")
_LICENSE = re.compile(r"^\s*([A-Za-z][A-Za-z0-9_]*)(?:[:*](\d{1,9}))?\s*$")
_JOB_ID = re.compile(r"^[1-9][0-9]{0,9}$")
MAX_ID = (1 << 32) - 2          # uid/gid 4294967295 is (uid_t)-1, never a real account


NO_VAL_LIMIT = 0xFFFFFFF0   # Slurm's NO_VAL/INFINITE markers in 32-bit fields


def number(value, default=None, minimum=None):
    """A number of Slurm's JSON: plain, ``{"set": true, "number": n}`` (newer data_parser) or a NO_VAL/INFINITE
    marker, unset value or one below ``minimum`` → ``default``."""
    if isinstance(value, dict):
        if not value.get("set", True) or value.get("infinite"):
            return default
        value = value.get("number")
    if value is None or isinstance(value, bool):
        return default
    try:
        result = int(value)
    except (TypeError, ValueError):
        return default
    if result >= NO_VAL_LIMIT or (minimum is not None and result < minimum):
        return default
    return result


class JobRecordError(ValueError):
    """A job that cannot be read, or a field of it the hooks will not act on; the message names field and value."""


def check_job_id(value, field="job id"):
    text = str(value).strip()
    if not _JOB_ID.match(text):
        raise JobRecordError("%s: %r is not a Slurm job id" % (field, value))
    return text


def parse_licenses(text, field="licenses"):
    """``gateway:2,nam*100`` (both separators Slurm has used) → ``{"gateway": 2, "nam": 100}``."""
    out = {}
    text = "" if text in (None, "(null)") else str(text)
    for item in text.split(","):
        if not item.strip():
            continue
        m = _LICENSE.match(item)
        if not m:
            raise JobRecordError("%s: %r is not name[:count]" % (field, item))
        out[m.group(1)] = out.get(m.group(1), 0) + int(m.group(2) or 1)
    return out


def _id(value, field):
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_ID:
        raise JobRecordError("%s: %r is not a numeric id" % (field, value))
    return value


def _string(job, key):
    value = job.get(key)
    return "" if value is None else str(value)


# Slurm 22.05's job_state_string(): a job with one of these flags is named by the flag, the first in this order,
# instead of its base state (data_parser v0.0.40+ gives the base state and the flags as one list).
_STATE_FLAGS = ("COMPLETING", "STAGE_OUT", "CONFIGURING", "RESIZING", "REQUEUED", "REQUEUE_FED", "REQUEUE_HOLD",
                "SPECIAL_EXIT", "STOPPED", "REVOKED", "RESV_DEL_HOLD", "SIGNALING", "LAUNCH_FAILED", "UPDATE_DB",
                "POWER_UP_NODE")
_INFINITE = 0xFFFFFFFF
# Fields of a job record the readers use, by kind: a number (plain, or data_parser v0.0.40+'s number object) or
# text. A record whose field is of another kind is refused, naming the field, rather than misread.
_NUMBERS = ("job_id", "het_job_id", "het_job_offset", "user_id", "group_id", "cpus", "time_limit", "node_count",
            "start_time")
_TEXTS = ("user_name", "user", "name", "comment", "licenses", "partition", "nodes", "current_working_directory",
          "resv_name", "dependency")


def _plain_number(value, where):
    """A number of either layout as 22.05 printed it: ``{"set": false}`` → None, ``{"infinite": true}`` → INFINITE."""
    if isinstance(value, dict):
        if "number" not in value or not set(value) <= {"set", "infinite", "number"}:
            raise JobRecordError("%s: %r is neither a number nor a number object {set, infinite, number}"
                                 % (where, value))
        if value.get("infinite"):
            return _INFINITE
        if not value.get("set", True):
            return None
        value = value["number"]
        if not isinstance(value, int) or isinstance(value, bool):
            raise JobRecordError("%s: %r is not a number" % (where, value))
    return value   # a plain value is checked where it is used, naming field and value


def state_name(value, where="job_state"):
    """A job's state as 22.05 named it (one word) from a word or data_parser v0.0.40+'s list ``["PENDING",
    "REQUEUED"]``: a state flag of _STATE_FLAGS wins over the base state, as in 22.05's job_state_string()."""
    if value is None or isinstance(value, str):
        return value
    if not isinstance(value, list) or not all(isinstance(w, str) for w in value):
        raise JobRecordError("%s: %r is not a job state (a word, or a list of words)" % (where, value))
    flags = [f for f in _STATE_FLAGS if f in value[1:]]
    return flags[0] if flags else (value[0] if value else "")


def canonical(job, what="squeue --json"):
    """One job record of any supported release in 22.05's layout: the numbers the readers use as plain numbers
    (or None when unset), ``job_state`` as one word. Other fields are left as Slurm gave them."""
    where = "job %s (%s)" % (job.get("job_id") if not isinstance(job.get("job_id"), dict) else
                             job["job_id"].get("number"), what)
    out = dict(job)
    for key in _NUMBERS:
        if key in out:
            out[key] = _plain_number(out[key], "%s: field %s" % (where, key))
    for key in _TEXTS:
        if out.get(key) is not None and not isinstance(out[key], (str, dict)):
            raise JobRecordError("%s: field %s: %r is not text" % (where, key, out[key]))
    if "job_state" in out:
        out["job_state"] = state_name(out["job_state"], "%s: field job_state" % where)
    return out


def load_jobs(text, what="squeue --json", required=True):
    """The job objects of ``squeue --json`` or ``sacct --json`` output (text, or the decoded answer of slurmrestd),
    each in 22.05's layout (canonical), whatever the release's data_parser.

    JobRecordError when it is no JSON, when Slurm reported errors and no job, or (``required``) when it holds no
    ``jobs`` list; without ``required`` a missing list is no job."""
    try:
        data = json.loads(text) if isinstance(text, (str, bytes)) else text
    except ValueError as exc:
        raise JobRecordError("%s printed no JSON: %s" % (what, exc)) from None
    if not isinstance(data, dict):
        raise JobRecordError("%s: no 'jobs' list in %r" % (what, str(text)[:200]))
    jobs = data.get("jobs")
    errors = [e for e in (data.get("errors") or []) if e]
    if errors and not jobs:
        raise JobRecordError("%s reported: %s" % (what, "; ".join(
            str(e.get("description") or e.get("error") or e) if isinstance(e, dict) else str(e) for e in errors)))
    if jobs is None and not required:
        return []
    if not isinstance(jobs, list):
        raise JobRecordError("%s: no 'jobs' list in %r" % (what, str(text)[:200]))
    return [canonical(j, what) for j in jobs if isinstance(j, dict)]


_PAIR = re.compile(r"(?:^|\s)([A-Za-z][A-Za-z0-9_:/]*)=")


def scontrol_records(text, key):
    """``scontrol show`` output (one record per line with ``-o``, else blocks) → one ``{field: value}`` per record.

    A record starts where ``key`` (``JobId``, ``LicenseName``, ``ReservationName``, …) is given; a value runs to the
    next ``Name=`` of its line, so values with spaces are kept whole. A field given twice in a record keeps its
    first value (``show job -d`` adds per-node ``Nodes=`` lines)."""
    out = []
    for line in (text or "").splitlines():
        positions = [(m.start(1), m.group(1)) for m in _PAIR.finditer(line)]
        for n, (start, name) in enumerate(positions):
            end = positions[n + 1][0] if n + 1 < len(positions) else len(line)
            value = line[start + len(name) + 1:end].strip()
            if name == key:
                out.append({})
            if out:
                out[-1].setdefault(name, value)
    return out


def record(job):
    """One job of ``scontrol show job --json`` → the fields the hooks use, each validated."""
    if not isinstance(job, dict):
        raise JobRecordError("job record: %r is not an object" % (job,))
    rec = {"job_id": check_job_id(job.get("job_id"), "job_id")}
    where = "job %s" % rec["job_id"]
    user = _string(job, "user_name")
    if not _USER.match(user):
        raise JobRecordError("%s: user_name %r is not a user name" % (where, user))
    rec["user"] = user
    rec["uid"] = _id(job.get("user_id"), "%s: user_id" % where)
    rec["gid"] = _id(job.get("group_id"), "%s: group_id" % where)
    workdir = _string(job, "current_working_directory")
    if not workdir.startswith("/") or "\x00" in workdir or "/../" in workdir + "/":
        raise JobRecordError("%s: current_working_directory %r is not an absolute path" % (where, workdir))
    rec["workdir"] = workdir
    rec["comment"] = _string(job, "comment")
    rec["licenses"] = parse_licenses(job.get("licenses"), "%s: licenses" % where)
    partition = _string(job, "partition")
    if partition and not _PARTITION.match(partition):
        raise JobRecordError("%s: partition %r is not a partition name" % (where, partition))
    rec["partition"] = partition
    nodes = _string(job, "nodes")
    try:
        rec["nodes"] = [] if nodes in ("", "(null)") else expand(nodes)
    except (HostlistError, ValueError) as exc:
        raise JobRecordError("%s: nodes %r: %s" % (where, nodes, exc)) from None
    het = job.get("het_job_id") or 0
    rec["het_job_id"] = check_job_id(het, "%s: het_job_id" % where) if het else None
    offset = job.get("het_job_offset") or 0
    if isinstance(offset, bool) or not isinstance(offset, int) or not 0 <= offset < 4096:
        raise JobRecordError("%s: het_job_offset %r is not a component index" % (where, offset))
    rec["het_job_offset"] = offset
    rec["state"] = _string(job, "job_state")
    # what Slurm granted beyond licences (None: not known, e.g. a pending job; time limit None: unlimited)
    rec["cpus"] = number(job.get("cpus"), minimum=1)
    rec["time_limit"] = number(job.get("time_limit"), minimum=1)
    return rec


def parse_jobs(text, job_id):
    """``squeue --json`` output → validated records of job ``job_id``: the job, or every component of the
    heterogeneous job it belongs to (leader first). Records of other jobs are not looked at."""
    job_id = int(check_job_id(job_id))
    jobs = load_jobs(text)
    mine = [j for j in jobs if j.get("job_id") == job_id]
    if not mine:
        raise JobRecordError("slurmctld knows no job %s (squeue --json)" % job_id)
    het = mine[0].get("het_job_id") or 0
    if het:
        mine = [j for j in jobs if j.get("het_job_id") == het]
    return sorted((record(j) for j in mine), key=lambda r: r["het_job_offset"])


def read_job(job_id, squeue="squeue", run=subprocess.run):
    """The records of job ``job_id`` (all components of a heterogeneous job, leader first)."""
    job_id = check_job_id(job_id, "SLURM_JOB_ID")
    argv = [squeue, "--json", "--states=all", "--jobs=%s" % job_id]
    try:
        proc = run(argv, capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        raise JobRecordError("cannot read job %s with %s: %s" % (job_id, squeue, exc)) from None
    if proc.returncode != 0:
        why = (proc.stderr or proc.stdout).strip()[:300]
        raise JobRecordError("cannot read job %s with %s: %s" % (job_id, squeue, why))
    return parse_jobs(proc.stdout, job_id)


def components(records, job_id):
    """Records of every component when ``job_id`` leads (or is) the job, leader first; None for a later component."""
    mine = next((r for r in records if r["job_id"] == str(job_id)), None)
    if mine is None:
        raise JobRecordError("slurmctld's answer for job %s holds jobs %s only" % (
            job_id, ", ".join(r["job_id"] for r in records[:10])))
    het = mine["het_job_id"]
    if het and het != mine["job_id"]:
        return None
    if not het:
        return [mine]
    comps = sorted((r for r in records if r["het_job_id"] == het), key=lambda r: r["het_job_offset"])
    for r in comps[1:]:
        if (r["user"], r["uid"]) != (mine["user"], mine["uid"]):
            raise JobRecordError("job %s: component %s belongs to %s, not %s" % (job_id, r["job_id"], r["user"],
                                                                                 mine["user"]))
    return comps


def granted(records, name):
    """Licences ``name`` the (heterogeneous) job was granted: the largest count of one component (Slurm copies a
    job-wide --licenses to each component of a hetjob, so adding them up would count them twice)."""
    return max([r["licenses"].get(name, 0) for r in records] + [0])


# A job a PrologSlurmctld refuses must not start again and again: Slurm 22.05 requeues a batch job whose
# PrologSlurmctld fails (prep_prolog_slurmctld_callback → job_requeue), and a requeued job pends for BeginTime and
# starts again, failing again. A job whose Requeue flag is off cannot be requeued, so Slurm kills it instead
# ("PrologSlurmctld failed, job killed"). The refusal itself goes into the job's AdminComment (only an operator,
# SlurmUser included, may set it; the user reads it in `scontrol show job`), beside the line in its error file.
# Only a refusal (the job asks what it may not have: "job <id> refused: ...") ends the job; a failure of a service
# or a busy pool still requeues it, so it starts when it can be served.
REFUSAL_MAX = 400
REFUSED = "job %s refused: "


def refuse_start(job_id, why, scontrol="scontrol", run=subprocess.run):
    """Mark job ``job_id`` as refused before its prolog exits non-zero: no requeue, the reason in its AdminComment.

    Returns why that could not be done (for the hook's log), or None."""
    text = " ".join("".join(c if c.isprintable() else " " for c in str(why)).split())[:REFUSAL_MAX]
    argv = [scontrol, "update", "JobId=%s" % check_job_id(job_id), "Requeue=0", "AdminComment=refused: %s" % text]
    try:
        proc = run(argv, capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        return "cannot run %s: %s" % (scontrol, exc)
    if proc.returncode != 0:
        said = (proc.stderr or proc.stdout or "").strip().splitlines()
        return "%s update: %s" % (scontrol, said[-1][:300] if said else "exit %d" % proc.returncode)
    return None


def run_hook(name, action, func, fail, job_id, err, expected=(), scontrol=None, run=subprocess.run):
    """Run a hook's action: an expected failure is one line on ``err`` and ``fail``, anything else one line too
    (a hook must end in a status slurmctld understands, never a traceback). A prolog that fails a job (``fail`` not
    0) with ``scontrol`` given, on a refusal (a message ``job <id> refused: ...``), first marks the job refused
    (refuse_start), so Slurm does not start it again."""
    try:
        return func()
    except expected as exc:
        text = str(exc)
        where = "" if job_id is None or text.startswith("job %s" % job_id) else "job %s: " % job_id
        line = "%s%s" % (where, text)
    except Exception as exc:  # noqa: BLE001 - see above
        line = "job %s: internal error %s: %s" % (job_id, type(exc).__name__, exc)
    err.write("%s %s: %s\n" % (name, action, line))
    refused = job_id is not None and line.startswith(REFUSED % job_id)
    if action == "prolog" and fail and scontrol and refused and _JOB_ID.match(str(job_id)):
        failed = refuse_start(job_id, "%s: %s" % (name, line), scontrol, run)
        err.write("%s %s: job %s: %s\n" % (name, action, job_id, "not requeued, the refusal is its AdminComment"
                                           if failed is None else "could not stop its requeue: " + failed))
    return fail
