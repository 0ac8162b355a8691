# SPDX-License-Identifier: GPL-3.0-or-later
"""slurm_packjob's job records: what sbatch, squeue/sacct --json (also slurmrestd's answers) and scontrol say.

The JSON and ``scontrol`` text are read by module_utils/slurm/jobs (the one reader of job records, shared with the
controller's hooks); this file projects them onto the record slurm_packjob compares: job id, name, user, state,
heterogeneous id and offset, nodes, exit code and signal, partition, comment."""
from __future__ import annotations

import re

from ansible_collections.msa.hpc.plugins.module_utils.slurm import jobs as S

ACTIVE_STATES = frozenset(("PENDING", "RUNNING", "SUSPENDED", "COMPLETING", "CONFIGURING", "RESIZING", "REQUEUED",
                           "REQUEUE_FED", "REQUEUE_HOLD", "SIGNALING", "STAGE_OUT", "STOPPED", "SPECIAL_EXIT"))
FINAL_STATES = frozenset(("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "BOOT_FAIL",
                          "DEADLINE", "OUT_OF_MEMORY", "REVOKED"))


class TransportError(RuntimeError):
    """A Slurm command or REST call that failed; the message says which and why."""


def parse_sbatch_id(output):
    """The job id from ``sbatch --parsable`` (``1234`` or ``1234;cluster``) or from its plain message."""
    text = (output or "").strip()
    match = re.search(r"^(\d+)(?:;\S+)?$", text, re.M) or re.search(r"Submitted batch job (\d+)", text)
    if not match:
        raise TransportError("sbatch printed no job id: %r" % text[:200])
    return int(match.group(1))


def _state(value):
    if isinstance(value, dict):
        value = value.get("current")
    if isinstance(value, list):
        value = S.state_name(value, "state")
    return str(value).upper().split()[0] if value else "UNKNOWN"


def _exit(value):
    """``(return code, signal)`` from a raw wait status, ``"1:0"``, or ``{"return_code", "signal"}``."""
    if value is None:
        return None, None
    if isinstance(value, dict):
        if "return_code" in value or "signal" in value:
            signal = value.get("signal")
            if isinstance(signal, dict):
                signal = S.number(signal.get("id", signal.get("signal_id")))
            return S.number(value.get("return_code")), S.number(signal) or 0
        value = S.number(value)
        if value is None:
            return None, None
    if isinstance(value, str) and ":" in value:
        code, signal = value.split(":", 1)
        return int(code), int(signal)
    status = int(value)
    return (status >> 8) & 0xFF, status & 0x7F


def _record(job_id, name, user, state, het_id, het_offset, nodes, exit_pair, partition, comment):
    nodes = "" if nodes in (None, "None assigned", "(null)") else str(nodes)
    if het_id in (0, None) or het_offset is None:
        het_id, het_offset = (het_id or None), (het_offset if het_id else None)
    code, signal = exit_pair
    return {"job_id": int(job_id), "name": name, "user": user, "state": state, "het_job_id": het_id,
            "het_job_offset": het_offset, "nodes": nodes, "exit_code": code, "signal": signal,
            "partition": partition, "comment": comment or ""}


def _load(text, what):
    try:
        return S.load_jobs(text, what + " --json")
    except S.JobRecordError as exc:
        raise TransportError(str(exc)) from None


def parse_squeue_json(text):
    """Job records from ``squeue --json`` (Slurm 22.05 layout; later layouts' wrapped numbers also read)."""
    out = []
    for job in _load(text, "squeue"):
        out.append(_record(job.get("job_id"), job.get("name"), job.get("user_name"), _state(job.get("job_state")),
                           S.number(job.get("het_job_id")), S.number(job.get("het_job_offset")), job.get("nodes"),
                           _exit(job.get("exit_code")), job.get("partition"), job.get("comment")))
    return out


def parse_sacct_json(text):
    """Job records from ``sacct --json`` (Slurm 22.05's layout, and data_parser v0.0.40+'s state list, het offset
    and exit code objects)."""
    out = []
    for job in _load(text, "sacct"):
        het = job.get("het") or {}
        comment = job.get("comment")
        if isinstance(comment, dict):
            comment = comment.get("job")
        out.append(_record(job.get("job_id"), job.get("name"), job.get("user"), _state(job.get("state")),
                           S.number(het.get("job_id")), S.number(het.get("job_offset")), job.get("nodes"),
                           _exit(job.get("exit_code")), job.get("partition"), comment))
    return out


def parse_scontrol_show_job(text):
    """Job records from ``scontrol show job [-d]`` (read with jobs.scontrol_records)."""
    out = []
    for fields in S.scontrol_records(text, "JobId"):
        user = re.sub(r"\(\d+\)$", "", fields.get("UserId", ""))
        het_id = int(fields["HetJobId"]) if fields.get("HetJobId", "").isdigit() else None
        het_offset = int(fields["HetJobOffset"]) if fields.get("HetJobOffset", "").isdigit() else None
        exit_pair = _exit(fields.get("ExitCode")) if fields.get("ExitCode") else (None, None)
        comment = fields.get("Comment")
        out.append(_record(fields["JobId"], fields.get("JobName"), user, _state(fields.get("JobState")), het_id,
                           het_offset, fields.get("NodeList"), exit_pair, fields.get("Partition"),
                           None if comment in (None, "(null)") else comment))
    return out
