# SPDX-License-Identifier: GPL-3.0-or-later
"""A job's token handed to the job's own processes on any node, proved with munge (the stand-in's way where the
job's working directory is not shared between the controller and the job's nodes).

The client library runs ``munge -n -s job=<id>`` as the job's user; the manager decodes the credential with
``unmunge`` (munged refuses a replayed or expired one), then asks Slurm whether job <id> is running for that very uid
and holds a ``nam`` or ``gce`` licence. Only then does it issue the job's token (the same the prolog would have
written, under the job's live grant), for the owner Slurm names. ``owner_of`` proves a Slurm user for an owner's
token (list and free its own non-volatile allocations) the same way, with payload ``owner=<name>``.
"""
from __future__ import annotations

import re
import subprocess

JOB_RE = re.compile(r"^[0-9]{1,12}$")
OWNER_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,31}$")
ACTIVE = ("RUNNING", "CONFIGURING", "COMPLETING")
MAX_CREDENTIAL = 4096


class MungeError(Exception):
    """A credential or a job that does not earn a token; ``status`` is the HTTP status to answer."""

    def __init__(self, status, message):
        super().__init__(message)
        self.status = status


def decode(credential, run=subprocess.run, unmunge="unmunge"):
    """``(uid, payload)`` of a valid munge credential."""
    if not isinstance(credential, str) or not credential.startswith("MUNGE:") or len(credential) > MAX_CREDENTIAL:
        raise MungeError(400, "credential is not a munge credential (MUNGE:...)")
    proc = run([unmunge], input=credential.encode(), capture_output=True, timeout=10, check=False)
    head, _, payload = proc.stdout.decode(errors="replace").partition("\n\n")
    fields = dict(line.split(":", 1) for line in head.splitlines() if ":" in line)
    status = fields.get("STATUS", "").strip()
    if proc.returncode != 0 or not status.startswith("Success"):
        raise MungeError(401, "munge credential refused: %s" % (status or proc.stderr.decode(errors="replace").strip()))
    m = re.search(r"\((\d+)\)\s*$", fields.get("UID", ""))
    if m is None:
        raise MungeError(401, "munge credential has no uid")
    return int(m.group(1)), payload.strip()


def job_of(payload):
    """The job id the credential's payload names (``job=<id>``)."""
    key, _, job = payload.partition("=")
    if key != "job" or not JOB_RE.match(job):
        raise MungeError(400, "credential payload %r is not job=<numeric id>" % payload[:64])
    return job


def job_owner(job, uid, run=subprocess.run, squeue="squeue"):
    """The name of the user job ``job`` runs for, when it runs for ``uid`` and holds NAM or GCE."""
    proc = run([squeue, "--noheader", "--jobs=" + job, "--format=%U|%u|%T|%W"], capture_output=True, timeout=20,
               check=False)
    lines = [line.split("|") for line in proc.stdout.decode(errors="replace").splitlines() if line.strip()]
    if proc.returncode != 0 or not lines:
        raise MungeError(403, "job %s is not a job Slurm knows (squeue: %s)"
                         % (job, proc.stderr.decode(errors="replace").strip() or "no such job"))
    if any(len(f) != 4 for f in lines):
        raise MungeError(403, "job %s: squeue's answer is not uid|user|state|licenses" % job)
    if any(f[0].strip() != str(uid) for f in lines):
        raise MungeError(403, "job %s does not belong to uid %d" % (job, uid))
    if not any(f[2].strip() in ACTIVE for f in lines):
        raise MungeError(403, "job %s is not running (%s)" % (job, ",".join(sorted({f[2].strip() for f in lines}))))
    licences = ",".join(f[3] for f in lines)
    if not re.search(r"(^|,)(nam|gce)(:|,|$)", licences):
        raise MungeError(403, "job %s has neither NAM nor GCE (licences %s)" % (job, licences.strip() or "none"))
    return lines[0][1].strip()


def owner_and_job(credential, run=subprocess.run):
    uid, payload = decode(credential, run)
    job = job_of(payload)
    return job_owner(job, uid, run), job


def owner_of(credential, owner_uid, run=subprocess.run, getpwnam=None):
    """The Slurm user a munge credential with payload ``owner=<name>`` proves: ``name`` when the credential's uid is
    the uid Slurm's job records gave that owner (``owner_uid(name)``, learnt by the manager from the prolog), else
    the manager host's user database (``getpwnam``) says so. uid 0 owns nothing here."""
    uid, payload = decode(credential, run)
    key, _, name = payload.partition("=")
    if key != "owner" or not OWNER_RE.match(name):
        raise MungeError(400, "credential payload %r is not owner=<user name>" % payload[:64])
    if uid == 0:
        raise MungeError(403, "uid 0 owns no NAM allocation; run as the owner")
    known = owner_uid(name)
    if known is None and getpwnam is not None:
        try:
            known = getpwnam(name).pw_uid
        except KeyError:
            known = None
    if known is None:
        raise MungeError(403, "the manager knows no uid for owner %s (it learns it from that user's first NAM or GCE "
                         "job)" % name)
    if known != uid:
        raise MungeError(403, "the credential is of uid %d, owner %s is uid %d" % (uid, name, known))
    return name
