# SPDX-License-Identifier: GPL-3.0-or-later
"""PrologSlurmctld/EpilogSlurmctld of the NAM/GCE manager (run as SlurmUser by msa-nam-hook).

The prolog reads the job with ``squeue --json`` (module_utils/slurm/jobs) and allocates its NAM memory for the job's
user as allocation ``slurm-<job>``, named after the job id only (a name from the user could squat another job's).
The size is the one the job's options ask (``nam_bytes`` written by msa.hpc.slurm_packjob, ``nam=100G`` written by
hand; powers of 1024), else its ``nam`` licences (one per GiB); it is bounded by the licences Slurm granted the job,
so the scheduler's accounting of the NAM holds: a size above them, NAM without a ``nam`` licence, or GCE without a
``gce`` licence is refused. A job with NAM or GCE gets a token for its own code (``.msa-nam-<id>.token`` in its
working directory, mode 0600, written as the job's user), with which the client library (msa_nam, msa_gce) reaches
the owner's allocations and communicators. A refusal or failure writes one line to ``JOB-<id>-nam.err`` in the job's
working directory (as the job's user) and exits 1: a refusal ends the job (slurm/jobs.run_hook), a failure has
slurmctld requeue a batch job. The token is valid only while the job is: the prolog records with it what Slurm
granted the job (AAT entries: the CPUs of a job with a ``nam`` licence; GCE communicators: its ``gce`` licences; a
life of its time limit plus ``--token-grace``), and the epilog revokes it first. The epilog frees the job's volatile
NAM allocations, keeps its non-volatile ones for the owner's next job, releases its GCE communicators, removes the
token file, and always exits 0.

``sweep`` (a timer on the controller runs it every few minutes) hands the manager the jobs Slurm still knows: the
manager revokes the tokens of every other job, frees their volatile allocations and communicators, keeps their
non-volatile ones for the owner, and frees the non-volatile allocations past the site's expiry. Nothing younger than
``--min-age`` is touched (a job may have started after squeue answered).

``health`` (a timer on the controller runs it every few seconds) asks the manager's ``GET /health``. While the
manager does not answer ok, the licence-only reservation ``msa_nam_down`` holds every ``nam`` and ``gce`` licence
the cluster has (module_utils/slurm/reservations), so a NAM or GCE job waits (``Reason=Licenses``) instead of
failing in this prolog, and every other job runs; the reservation is removed when the manager answers again. The
compute nodes are not drained for it: a central service being down is not a fault of theirs.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys

from ansible_collections.msa.hpc.plugins.module_utils import _jobopts as J
from ansible_collections.msa.hpc.plugins.module_utils.slurm import jobs as S
from ansible_collections.msa.hpc.plugins.module_utils.slurm import reservations as V
from ansible_collections.msa.hpc.plugins.module_utils.node import userfile as U
from ansible_collections.msa.hpc.plugins.module_utils._gce import GceService
from ansible_collections.msa.hpc.plugins.module_utils._nam import ManagerError, NamService
from ansible_collections.msa.hpc.plugins.module_utils._rest import RestClient, RestError
from ansible_collections.msa.hpc.plugins.module_utils._sizes import format_size
from ansible_collections.msa.hpc.plugins.module_utils._slurm_conf import LICENSE_GCE, LICENSE_NAM, NAM_LICENSE_UNIT

REQUEUE = 1
# What talking to the manager can fail with (a refusal of the manager, or the connection).
SERVICE_ERRORS = (ManagerError, RestError)
DEFAULT_CONF = "/etc/nam-manager/client.conf"
TOKEN_FILE = ".msa-nam-%s.token"
RESERVATION = "msa_nam_down"  # licence-only reservation holding the NAM and GCE licences while the manager is down
HEALTH_TIMEOUT = 5.0
TOKEN_GRACE = 300   # seconds a job's token outlives its time limit (KillWait, the epilog's own run)
SWEEP_MIN_AGE = 300
# Job states after which a job holds nothing (anything else, pending included, is live for the sweep).
ENDED = {"BOOT_FAIL", "CANCELLED", "COMPLETED", "DEADLINE", "FAILED", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED",
         "TIMEOUT"}


def token_path(leader):
    """Where the job's code finds its token (the client library reads the same name)."""
    return os.path.join(leader["workdir"], TOKEN_FILE % leader["job_id"])


class HookError(Exception):
    """The job cannot have its NAM/GCE; the message goes to slurmctld's log and the job's error file."""


def nam_request(records, nam_license=LICENSE_NAM, gce_license=LICENSE_GCE):
    """What the job may have: ``{"size": bytes or 0, "volatile", "name", "device", "gce"}``, bounded by its licences.

    Raises JobOptionError naming the option and value when the job asks more than Slurm granted it."""
    leader = records[0]
    options = J.decode(leader["comment"], J.NAM_KEYS)
    granted_units = S.granted(records, nam_license)
    granted = granted_units * NAM_LICENSE_UNIT
    size = options.get("nam")
    if size is None:
        size = granted
    elif size > granted:
        raise J.JobOptionError("nam: %s (%d bytes) is more than the %d %s licence%s (%s) Slurm granted the job "
                               "(ask with --licenses=%s:%d)" % (
                                   format_size(size), size, granted_units, nam_license,
                                   "" if granted_units == 1 else "s", format_size(granted) if granted else "none",
                                   nam_license, -(-size // NAM_LICENSE_UNIT)))
    for key in ("nam_nonvolatile", "nam_device"):
        if key in options and not size:
            raise J.JobOptionError("%s: %r is given but the job has no NAM (no %s licence)"
                                   % (key, options[key], nam_license))
    gce = options.get("gce", False)
    if gce and S.granted(records, gce_license) < 1:
        raise J.JobOptionError("gce: %r asks for the GCE but Slurm granted the job no %s licence (ask with "
                               "--licenses=%s:1)" % (leader_value(leader, "gce"), gce_license, gce_license))
    return {"size": size, "volatile": not options.get("nam_nonvolatile", False),
            "name": allocation_name(leader["job_id"]), "device": options.get("nam_device"),
            "gce": gce}


def allocation_name(job_id):
    """The name of a job's NAM allocation: from its id alone, never from the user (job_submit.lua refuses
    ``nam_name``; one given by hand in an old comment is ignored)."""
    return "slurm-%s" % S.check_job_id(job_id)


def job_grant(records, grace=TOKEN_GRACE, nam_license=LICENSE_NAM, gce_license=LICENSE_GCE):
    """What Slurm granted the job, for its token: ``uid``; ``aat_entries``, one per CPU of a job with a ``nam``
    licence (one AAT entry per process), else none; ``communicators``, its ``gce`` licences (one per communicator);
    ``ttl``, its longest component's time limit plus ``grace`` seconds (None: unlimited, the manager's longest)."""
    limits = [r.get("time_limit") for r in records]
    return {"uid": records[0]["uid"],
            "aat_entries": sum(r.get("cpus") or 1 for r in records) if S.granted(records, nam_license) else 0,
            "communicators": S.granted(records, gce_license),
            "ttl": None if None in limits else max(limits) * 60 + int(grace)}


def live_jobs(squeue="squeue", run=subprocess.run):
    """Ids of every job (and heterogeneous job leader) Slurm still knows in a state that may hold NAM or GCE."""
    try:
        proc = run([squeue, "--json", "--states=all"], capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        raise HookError("cannot list the jobs with %s: %s" % (squeue, exc)) from None
    if proc.returncode != 0:
        raise HookError("cannot list the jobs with %s: %s" % (squeue, (proc.stderr or proc.stdout).strip()[:300]))
    live = set()
    for job in S.load_jobs(proc.stdout):
        state = job.get("job_state")
        states = set(state if isinstance(state, list) else [state])
        if not states or not states <= ENDED:
            live.update(str(job[k]) for k in ("job_id", "het_job_id") if job.get(k))
    for job_id in live:
        S.check_job_id(job_id, "squeue --json job_id")
    return sorted(live, key=int)


def leader_value(leader, key):
    """The raw text of option ``key`` in the leader's comment (for messages)."""
    try:
        return J.parse_raw(leader["comment"]).get(key, "")
    except J.JobOptionError:
        return ""


def read_conf(path):
    """The client's ``key=value`` file (url, user, password or token, ca_path); missing file: nothing."""
    conf = {}
    try:
        with open(path, "r", encoding="utf-8") as fh:
            for line in fh:
                line = line.strip()
                if line and not line.startswith("#") and "=" in line:
                    key, value = line.split("=", 1)
                    conf[key.strip()] = value.strip()
    except FileNotFoundError:
        pass
    return conf


def make_client(conf_path, timeout=10.0, retries=3):
    """The shared RestClient with the hook's credentials; an https manager is verified against ``ca_path`` (the
    system's CAs when it is not set), and only ``validate_certs=false`` in the file turns that off."""
    conf = read_conf(conf_path)
    return RestClient(conf.get("url"), username=conf.get("user"), password=conf.get("password"),
                      token=conf.get("token"), timeout=timeout, retries=retries, ca_path=conf.get("ca_path") or None,
                      validate_certs=conf.get("validate_certs", "true").lower() not in ("false", "no", "0", "off"))


def services(client):
    return NamService(client), GceService(client)


def allocate(service, job_id, user, request):
    """Allocate the job's NAM; a prolog run again (a requeued job) finds its allocation of the same name and keeps
    it. The POST comes first, so a lost answer is looked up by the service as for any allocation."""
    try:
        return service.allocate(request["size"], request["volatile"], str(job_id), user, request["name"],
                                request["device"])
    except ManagerError as exc:
        if exc.code != "name_taken":
            raise
    existing = service.find(request["name"])
    if existing is None or existing.get("job") != str(job_id):
        raise HookError("NAM allocation %r is taken by job %s" % (request["name"], (existing or {}).get("job")))
    return existing


def prolog(env, opts, out, client_factory=make_client):
    job_id = S.check_job_id(env.get("SLURM_JOB_ID"), "SLURM_JOB_ID")
    records = S.components(S.read_job(job_id, opts.squeue), job_id)
    if records is None:
        out.write("nam prolog: job %s is a later component of a heterogeneous job\n" % job_id)
        return 0
    leader = records[0]
    try:
        try:
            request = nam_request(records, opts.license, opts.gce_license)
        except J.JobOptionError as exc:
            raise HookError("job %s refused: %s" % (job_id, exc)) from None
        if not request["size"] and not request["gce"]:
            return 0
        try:
            nam = services(client_factory(opts.conf))[0]
            rec = allocate(nam, job_id, leader["user"], request) if request["size"] else None
            grant = job_grant(records, opts.token_grace, opts.license, opts.gce_license)
            token = nam.job_token(leader["user"], job_id, grant)["token"]
        except SERVICE_ERRORS as exc:
            raise HookError("job %s: %s" % (job_id, exc)) from None
        try:
            U.user_file(U.job_record(leader), "secret", token_path(leader), (token + "\n").encode(),
                        opts.user_helper, key="nam_token_file")
        except (OSError, U.UserFileError) as exc:
            raise HookError("job %s: cannot hand the job its NAM/GCE token: %s" % (job_id, exc)) from None
    except HookError as exc:
        failed = U.append_error(U.job_record(leader), "nam", str(exc), opts.user_helper)
        if failed:
            out.write("nam prolog: job %s: %s\n" % (job_id, failed))
        raise
    if rec is not None:
        out.write("nam prolog: job %s: allocation %s of %s on %s at offset %s\n" % (
            job_id, rec.get("id"), format_size(rec.get("size") or request["size"]), rec.get("device"),
            rec.get("offset")))
    return 0


def epilog(env, opts, out, client_factory=make_client):
    # what the prolog allocated belongs to the heterogeneous job's leader (the epilog may run for any component)
    job_id = S.check_job_id(env.get("SLURM_HET_JOB_ID") or env.get("SLURM_JOB_ID"), "SLURM_JOB_ID")
    try:
        nam_service, gce_service = services(client_factory(opts.conf))
        revoke(nam_service, job_id, out)
        nam = nam_service.free_job(job_id, keep_nonvolatile=True)
        gce = gce_service.free_job(job_id)
    except SERVICE_ERRORS as exc:
        # The job is over whatever happens here; the token expires with the job's time limit, and the sweep revokes
        # it and frees the allocation sooner.
        out.write("nam epilog: job %s: %s (an orphan sweep frees it later)\n" % (job_id, exc))
        return 0
    if (nam or {}).get("freed") or (nam or {}).get("kept") or (gce or {}).get("released"):
        out.write("nam epilog: job %s: freed allocations %s (%s), kept non-volatile %s, released communicators %s\n"
                  % (job_id, nam.get("freed"), format_size(nam["bytes"]) if nam.get("bytes") else "0B",
                     nam.get("kept", []), gce.get("released")))
    remove_token(env, job_id, opts, out)
    return 0


def revoke(nam_service, job_id, out):
    """First of all: the job's code can do nothing more with its token (a failure is logged; the frees still run)."""
    try:
        revoked = nam_service.revoke_job_token(job_id)
    except SERVICE_ERRORS as exc:
        out.write("nam epilog: job %s: token not revoked: %s (it expires with the job's time limit; the sweep revokes "
                  "it sooner)\n" % (job_id, exc))
        return
    if revoked.get("revoked"):
        out.write("nam epilog: job %s: token revoked, %d AAT entries removed\n" % (job_id, revoked["detached"]))


def remove_token(env, job_id, opts, out):
    """Remove the job's token file (when the job had one); a failure is logged, the token expires anyway."""
    try:
        records = S.components(S.read_job(job_id, opts.squeue), job_id)
    except (S.JobRecordError, OSError, ValueError) as exc:
        out.write("nam epilog: job %s: token file not removed: %s\n" % (job_id, exc))
        return
    if not records:
        return
    try:
        U.user_file(U.job_record(records[0]), "remove", token_path(records[0]), b"", opts.user_helper,
                    key="nam_token_file")
    except (OSError, U.UserFileError) as exc:
        out.write("nam epilog: job %s: token file not removed: %s\n" % (job_id, exc))


def sweep(env, opts, out, client_factory=make_client):
    """Hand the manager the live jobs: it revokes, frees and expires what ended jobs left (see the module doc)."""
    live = live_jobs(opts.squeue)
    try:
        nam_service, gce_service = services(client_factory(opts.conf))
        nam = nam_service.free_orphans(live, min_age=opts.min_age)
        gce = gce_service.free_orphans(live, min_age=opts.min_age)
    except SERVICE_ERRORS as exc:
        raise HookError("the NAM/GCE manager did not sweep: %s" % exc) from None
    if nam.get("freed") or nam.get("expired") or nam.get("kept") or nam.get("revoked") or gce.get("released"):
        out.write("nam sweep: %d live jobs; tokens of ended jobs %s revoked, their allocations %s freed (%s) and "
                  "non-volatile %s kept for their owners, expired non-volatile %s freed, communicators %s released\n"
                  % (len(live), nam.get("revoked", []), nam.get("freed", []), format_size(nam.get("bytes") or 0),
                     nam.get("kept", []), nam.get("expired", []), gce.get("released", [])))
    return 0


def manager_down(client):
    """Why the manager cannot serve a job now (it does not answer, or answers not ok); None when it can."""
    try:
        answer = client.get("health")
    except RestError as exc:
        return str(exc)
    if not isinstance(answer, dict) or answer.get("ok") is not True:
        return "GET /health answered %s" % str(answer)[:200]
    return None


def health(env, opts, out, client_factory=make_client):
    """Hold every NAM and GCE licence in ``opts.reservation`` while the manager is down, none once it answers."""
    why = manager_down(client_factory(opts.conf, timeout=opts.health_timeout, retries=1))
    held = {}
    if why is not None:
        totals = V.license_totals(opts.scontrol)
        held = {lic: totals[lic] for lic in (opts.license, opts.gce_license) if totals.get(lic)}
    if V.sync_reservation(opts.scontrol, opts.reservation, held):
        if why is None:
            out.write("nam health: the NAM/GCE manager answers: reservation %s removed, NAM and GCE jobs may "
                      "start\n" % opts.reservation)
        else:
            licences = ",".join("%s:%d" % item for item in sorted(held.items())) or "no licence"
            out.write("nam health: the NAM/GCE manager is down (%s): reservation %s holds %s, NAM and GCE jobs "
                      "wait\n" % (why, opts.reservation, licences))
    return 0


def parser(prog="msa-nam-hook"):
    ap = argparse.ArgumentParser(prog=prog, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("action", choices=("prolog", "epilog", "health", "sweep"))
    ap.add_argument("--conf", default=DEFAULT_CONF, help="client key=value file (url, user, password or token)")
    ap.add_argument("--license", default=LICENSE_NAM, help="licence counting the job's NAM in GiB")
    ap.add_argument("--gce-license", default=LICENSE_GCE, help="licence a job needs for the GCE")
    ap.add_argument("--squeue", default="squeue", help="squeue (the job, read with --json)")
    ap.add_argument("--user-helper", default=U.USER_FILE_HELPER,
                    help="run through sudo to write a job's error file as its user when the hooks are not root")
    ap.add_argument("--scontrol", default="scontrol", help="scontrol (health: the licences and the reservation)")
    ap.add_argument("--reservation", default=RESERVATION,
                    help="health: the licence-only reservation that holds the NAM and GCE licences while the manager "
                         "is down")
    ap.add_argument("--health-timeout", type=float, default=HEALTH_TIMEOUT,
                    help="health: seconds the manager may take to answer")
    ap.add_argument("--token-grace", type=int, default=TOKEN_GRACE,
                    help="prolog: seconds a job's token outlives the job's time limit")
    ap.add_argument("--min-age", type=int, default=SWEEP_MIN_AGE,
                    help="sweep: seconds an allocation, communicator or token must have lived before it is swept")
    return ap


def main(argv=None, env=None, out=sys.stdout, err=sys.stderr, prog="msa-nam-hook", client_factory=make_client):
    """Run one action; every failure is one line on ``err`` and an exit status, never a traceback."""
    env = os.environ if env is None else env
    opts = parser(prog).parse_args(argv)
    action = {"prolog": prolog, "epilog": epilog, "health": health, "sweep": sweep}[opts.action]
    return S.run_hook("nam", opts.action, lambda: action(env, opts, out, client_factory),
                      0 if opts.action == "epilog" else REQUEUE, env.get("SLURM_JOB_ID"), err,
                      (HookError, S.JobRecordError, U.UserFileError, V.ReservationError, OSError, ValueError),
                      scontrol=opts.scontrol)
