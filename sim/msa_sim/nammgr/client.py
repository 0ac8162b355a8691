# SPDX-License-Identifier: GPL-3.0-or-later
"""Client CLI of the NAM/GCE manager and the Slurm PrologSlurmctld/EpilogSlurmctld helper (stdlib only)."""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import urllib.parse

from ansible_collections.msa.hpc.plugins.module_utils.node import nam_hooks as H
from ansible_collections.msa.hpc.plugins.module_utils._nam import SizeError, format_size, parse_size
from ansible_collections.msa.hpc.plugins.module_utils._rest import (
    NOT_DONE, RestClient, RestError, RestTransportError, send_again)

HELP = """
    python3 -m msa_sim.nammgr.client alloc --job 42 --user alice --size 1G [--name N] [--nonvolatile]
    python3 -m msa_sim.nammgr.client free ID [ID ...]
    python3 -m msa_sim.nammgr.client list [--job J] [--owner U] [--json]
    python3 -m msa_sim.nammgr.client free-job --job 42          # NAM allocations and GCE communicators
    python3 -m msa_sim.nammgr.client attach|detach ID --node N --vpid V
    python3 -m msa_sim.nammgr.client orphans (--live-jobs 1,2 | --squeue) [--dry-run]
    python3 -m msa_sim.nammgr.client devices | limits
    python3 -m msa_sim.nammgr.client prolog | epilog            # as PrologSlurmctld / EpilogSlurmctld

The manager's URL and credentials come from the options, else NAM_MANAGER_URL / NAM_MANAGER_USER /
NAM_MANAGER_PASSWORD / NAM_MANAGER_TOKEN / NAM_MANAGER_CA_PATH, else the key=value file NAM_MANAGER_CLIENT_CONF
(default /etc/nam-manager/client.conf: ``url=``, ``user=``, ``password=`` or ``token=``, ``ca_path=``). An https
manager's certificate is always verified (against ``ca_path`` when given).

``prolog`` and ``epilog`` are aliases of the collection's NAM/GCE hooks (module_utils/node/nam_hooks.py, installed by
the role msa.hpc.nam_manager as msa-nam-hook): the job's NAM size comes from its comment or its ``nam`` licences
and is bounded by the licences Slurm granted it.
"""

DEFAULT_CONF = "/etc/nam-manager/client.conf"
REQUEUE = 1


class ClientError(RestError):
    """A failed call to the manager. ``outcome`` is None for an answer the manager gave (``status``, ``code``),
    ``not_done`` when the request certainly did not reach it, ``unknown`` when it may have been carried out."""

    def __init__(self, message, status=None, code=None, details=None, outcome=None):
        super().__init__(message, status=status, body=details)
        self.code = code
        self.details = details or {}
        self.outcome = outcome


class Client:
    """JSON over HTTP(S) with basic auth or a bearer token: module_utils' RestClient, errors as ClientError."""

    def __init__(self, url, user=None, password=None, token=None, timeout=10.0, retries=3, backoff=0.5,
                 validate_certs=True, ca_path=None, sleep=time.sleep):
        if not url or "://" not in url:
            raise ClientError("manager URL %r is not a URL (set --url or NAM_MANAGER_URL)" % (url,))
        self.url = url.rstrip("/")
        try:
            self.rest = RestClient(self.url, username=user, password=password, token=token, timeout=timeout,
                                   retries=retries, backoff=backoff, validate_certs=validate_certs,
                                   ca_path=ca_path, sleep=sleep)
        except RestError as exc:
            raise ClientError("manager URL: %s" % exc) from None

    def call(self, method, path, body=None, ok=(200, 201), lookup=None):
        """``(status, decoded JSON or {})``; ``lookup`` as RestClient.request's, for a POST that must not repeat."""
        try:
            status, payload = self.rest.request(method, path, body=body, expect=tuple(ok), lookup=lookup)[:2]
        except RestTransportError as exc:
            what = "cannot reach the NAM manager at %s" if exc.outcome == NOT_DONE else \
                "lost the NAM manager at %s in the middle of a request"
            raise ClientError("%s: %s" % (what % self.url, exc), outcome=exc.outcome) from None
        except RestError as exc:
            payload = exc.body
            err = payload.get("error") if isinstance(payload, dict) else None
            err = err if isinstance(err, dict) else {"message": str(payload)[:300]}
            raise ClientError("%s %s: HTTP %d: %s" % (method, path, exc.status, err.get("message")), exc.status,
                              err.get("code"), err) from None
        return status, payload if payload is not None else {}


def _quote(value):
    return urllib.parse.quote(str(value), safe="")


read_conf = H.read_conf  # the client's key=value file, read as the collection's NAM hook reads it


def make_client(args, env):
    conf = read_conf(args.conf or env.get("NAM_MANAGER_CLIENT_CONF") or DEFAULT_CONF)
    pick = lambda opt, var, key: opt or env.get(var) or conf.get(key)  # noqa: E731
    return Client(pick(args.url, "NAM_MANAGER_URL", "url"), pick(args.auth_user, "NAM_MANAGER_USER", "user"),
                  pick(args.auth_password, "NAM_MANAGER_PASSWORD", "password"),
                  pick(args.token, "NAM_MANAGER_TOKEN", "token"), timeout=args.timeout, retries=args.retries,
                  ca_path=pick(args.ca_path, "NAM_MANAGER_CA_PATH", "ca_path"))


# ------------------------------------------------------------------ operations

def alloc(client, job, user, size, name=None, volatile=True, device=None, reserved=False):
    """Allocate for a job; with a name, an existing allocation of that name for the same job is reused."""
    body = {"size": size, "job": str(job), "owner": user, "volatile": volatile, "reserved": reserved}
    for key, value in (("name", name), ("device", device)):
        if value is not None:
            body[key] = value
    def made_already():
        """After a lost answer: the allocation of this name the first POST made, or None."""
        found = client.call("GET", "/nam/allocations?name=%s" % _quote(name))[1].get("allocations") or []
        return next((a for a in found if a.get("job") == str(job)), None)

    try:
        return client.call("POST", "/nam/allocations", body, lookup=made_already if name is not None else None)[1]
    except ClientError as exc:
        if exc.code != "name_taken":
            raise
        existing = client.call("GET", "/nam/allocations/%s" % exc.details.get("id"))[1]
        if existing.get("job") != str(job):
            raise ClientError("allocation %r exists already for job %s, not for job %s"
                              % (name, existing.get("job"), job)) from None
        return existing


def free_job(client, job):
    """Free all NAM allocations and release all GCE communicators of a job (nothing to do is fine)."""
    # Freeing a job's resources twice frees nothing more, so a free whose answer was lost is sent again.
    nam = client.call("DELETE", "/nam/jobs/%s" % _quote(job), lookup=send_again)[1]
    gce = client.call("DELETE", "/gce/jobs/%s" % _quote(job), lookup=send_again)[1]
    return {"job": str(job), "freed": nam["freed"], "bytes": nam["bytes"], "released": gce["released"]}


def free_orphans(client, live_jobs, dry_run=False):
    body = {"live_jobs": [str(j) for j in live_jobs], "dry_run": dry_run}
    nam = client.call("POST", "/nam/admin/orphans", body)[1]
    gce = client.call("POST", "/gce/admin/orphans", body)[1] if not dry_run else {"released": []}
    return {"freed": nam["freed"], "bytes": nam["bytes"], "released": gce["released"], "dry_run": dry_run}


def squeue_jobs(squeue="squeue"):
    out = subprocess.run([squeue, "-h", "-o", "%A"], capture_output=True, text=True, check=True, timeout=60).stdout
    return sorted({line.strip() for line in out.splitlines() if line.strip()})


# ------------------------------------------------------------------ Slurm prolog / epilog

def _hook_client(args, env):
    """The collection's RestClient with this CLI's URL and credentials, for the collection's NAM hooks."""
    from ansible_collections.msa.hpc.plugins.module_utils._rest import RestClient
    conf = read_conf(args.conf or env.get("NAM_MANAGER_CLIENT_CONF") or DEFAULT_CONF)
    pick = lambda opt, var, key: opt or env.get(var) or conf.get(key)  # noqa: E731
    return RestClient(pick(args.url, "NAM_MANAGER_URL", "url"), username=pick(args.auth_user, "NAM_MANAGER_USER",
                                                                               "user"),
                      password=pick(args.auth_password, "NAM_MANAGER_PASSWORD", "password"),
                      token=pick(args.token, "NAM_MANAGER_TOKEN", "token"), timeout=args.timeout,
                      retries=args.retries, ca_path=pick(args.ca_path, "NAM_MANAGER_CA_PATH", "ca_path"))


def _hook(action, env, args, out, err):
    """``prolog``/``epilog``: an alias of the collection's hooks (module_utils/node/nam_hooks.py), which the role
    msa.hpc.nam_manager installs as ``msa-nam-hook``; nothing the roles install runs this alias."""
    argv = [action, "--license", args.license, "--gce-license", args.gce_license, "--squeue", args.squeue,
            "--user-helper", args.user_helper]
    return H.main(argv, env=env, out=out, err=err, prog="python3 -m msa_sim.nammgr.client",
                  client_factory=lambda _conf: _hook_client(args, env))


def prolog(client, env, args, out, err):
    return _hook("prolog", env, args, out, err)


def epilog(client, env, args, out, err):
    return _hook("epilog", env, args, out, err)


# ------------------------------------------------------------------ CLI

def _print_allocs(allocs, out):
    print("%-6s %-20s %-8s %-10s %-10s %-12s %-18s %s" % ("ID", "NAME", "DEVICE", "KIND", "SIZE", "JOB", "OFFSET",
                                                         "OWNER"), file=out)
    for a in allocs:
        print("%-6s %-20s %-8s %-10s %-10s %-12s %-18s %s" % (
            a["id"], a.get("name") or "-", a["device"], "volatile" if a["volatile"] else "nonvolatile",
            format_size(a["size"]), a.get("job") or "-", "0x%x" % a["offset"], a["owner"]), file=out)


def run(args, client, env, out, err):
    cmd = args.cmd
    if cmd == "prolog":
        return prolog(client, env, args, out, err)
    if cmd == "epilog":
        return epilog(client, env, args, out, err)
    if cmd == "alloc":
        try:
            size = parse_size(args.size, "--size")
        except SizeError as exc:
            raise ClientError(str(exc)) from None
        rec = alloc(client, args.job, args.user, size, args.name, not args.nonvolatile, args.device, args.reserved)
        print(rec["id"], file=out)
    elif cmd == "free":
        for alloc_id in args.ids:
            rec = client.call("DELETE", "/nam/allocations/%s" % _quote(alloc_id))[1]["freed"]
            print("freed %s (%s)" % (rec["id"], format_size(rec["size"])), file=out)
    elif cmd == "free-job":
        done = free_job(client, args.job)
        print("job %s: freed %d allocations (%s), released %d communicators" % (
            args.job, len(done["freed"]), format_size(done["bytes"]) if done["bytes"] else "0B",
            len(done["released"])), file=out)
    elif cmd == "list":
        query = "&".join("%s=%s" % (k, _quote(v)) for k, v in (("job", args.job), ("owner", args.owner)) if v)
        allocs = client.call("GET", "/nam/allocations" + ("?" + query if query else ""))[1]["allocations"]
        if args.json:
            print(json.dumps(allocs, indent=2, sort_keys=True), file=out)
        else:
            _print_allocs(allocs, out)
    elif cmd in ("attach", "detach"):
        rec = client.call("POST", "/nam/allocations/%s/%s" % (_quote(args.id), cmd),
                          {"node": args.node, "vpid": args.vpid}, lookup=send_again)[1]
        print(json.dumps(rec, sort_keys=True), file=out)
    elif cmd == "orphans":
        live = args.live_jobs.split(",") if args.live_jobs is not None else None
        if args.squeue:
            try:
                live = squeue_jobs(args.squeue_cmd)
            except (OSError, subprocess.SubprocessError) as exc:
                raise ClientError("cannot list live jobs with %s: %s" % (args.squeue_cmd, exc)) from None
        live = [j for j in (live or []) if j]
        done = free_orphans(client, live, args.dry_run)
        print("%s %d orphaned allocations (%s), released %d communicators" % (
            "would free" if args.dry_run else "freed", len(done["freed"]),
            format_size(done["bytes"]) if done["bytes"] else "0B", len(done["released"])), file=out)
    elif cmd == "devices":
        print(json.dumps(client.call("GET", "/nam/devices")[1]["devices"], indent=2, sort_keys=True), file=out)
    elif cmd == "limits":
        print(json.dumps(client.call("GET", "/gce/limits")[1], indent=2, sort_keys=True), file=out)
    return 0


def parser():
    ap = argparse.ArgumentParser(prog="python3 -m msa_sim.nammgr.client", description=HELP,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", help="manager URL (env NAM_MANAGER_URL)")
    ap.add_argument("--auth-user", help="user of users.conf (env NAM_MANAGER_USER)")
    ap.add_argument("--auth-password", help="its password (env NAM_MANAGER_PASSWORD)")
    ap.add_argument("--token", help="bearer token (env NAM_MANAGER_TOKEN)")
    ap.add_argument("--conf", help="client key=value file (env NAM_MANAGER_CLIENT_CONF, default %s)" % DEFAULT_CONF)
    ap.add_argument("--ca-path", help="CA certificate(s) of an https manager (env NAM_MANAGER_CA_PATH)")
    ap.add_argument("--timeout", type=float, default=10.0, help="seconds for one request")
    ap.add_argument("--retries", type=int, default=3, help="retries while the manager is unreachable")
    sub = ap.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("alloc", help="allocate NAM memory for a job; prints the allocation id")
    a.add_argument("--job", required=True)
    a.add_argument("--user", required=True, help="owner of the allocation (the job's user)")
    a.add_argument("--size", required=True, help="bytes or 512M, 2G, 1.5TiB")
    a.add_argument("--name", default=None)
    a.add_argument("--nonvolatile", action="store_true")
    a.add_argument("--device", default=None)
    a.add_argument("--reserved", action="store_true", help="take it from the administrator reserve")
    f = sub.add_parser("free", help="free allocations by id")
    f.add_argument("ids", nargs="+")
    j = sub.add_parser("free-job", help="free all NAM allocations and GCE communicators of a job (idempotent)")
    j.add_argument("--job", required=True)
    ls = sub.add_parser("list", help="list allocations")
    ls.add_argument("--job")
    ls.add_argument("--owner")
    ls.add_argument("--json", action="store_true")
    for name in ("attach", "detach"):
        p = sub.add_parser(name, help="%s a process (node, vpid) %s an allocation" % (name, "to" if name == "attach" else "from"))
        p.add_argument("id")
        p.add_argument("--node", required=True)
        p.add_argument("--vpid", required=True, type=int)
    o = sub.add_parser("orphans", help="free allocations of jobs that are gone (administrators)")
    g = o.add_mutually_exclusive_group(required=True)
    g.add_argument("--live-jobs", help="comma-separated ids of the jobs that still exist")
    g.add_argument("--squeue", action="store_true", help="ask squeue which jobs still exist")
    o.add_argument("--squeue-cmd", default="squeue")
    o.add_argument("--dry-run", action="store_true")
    sub.add_parser("devices", help="NAM boards, pools and AAT use")
    sub.add_parser("limits", help="GCE limits and what is left")
    for name in ("prolog", "epilog"):
        p = sub.add_parser(name, help="run as %sSlurmctld" % name.capitalize())
        p.add_argument("--license", default="nam", help="licence counting the job's NAM in GiB (its upper bound)")
        p.add_argument("--gce-license", default="gce", help="licence a job needs for the GCE")
        p.add_argument("--squeue", default="squeue", help="squeue (the job, read with --json)")
        p.add_argument("--user-helper", default=H.U.USER_FILE_HELPER)
    return ap


def main(argv=None, env=None, out=None, err=None):
    env = os.environ if env is None else env
    out, err = out or sys.stdout, err or sys.stderr
    args = parser().parse_args(argv)
    try:
        client = make_client(args, env)
        return run(args, client, env, out, err)
    except ClientError as exc:
        print("nam client: %s" % exc, file=err)
        return REQUEUE if args.cmd == "prolog" else (0 if args.cmd == "epilog" else 1)


if __name__ == "__main__":
    sys.exit(main())
