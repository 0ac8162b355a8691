# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

"""PrologSlurmctld / EpilogSlurmctld for gateways: ``python3 -m msa_sim.psgwd.slurm prolog|epilog``.

The prolog reads the job (``scontrol show job -o``), takes the gateway count from the job's licenses
(``--licenses=gateway:N``; the license name is ``license`` in pool.yml) or, without one, from
``gw_num=N`` in the job's comment; the comment also carries ``gw_file=PATH``, ``gw_plugin=NAME`` and
``gw_cleanup`` (comma separated, e.g. ``--comment=gw_file=route.txt,gw_plugin=booster,gw_cleanup``).
It first probes the idle gateways' agents (``health`` below), then allocates gateways from the pool, starts one
psgwd per gateway through its psgw-agent, and writes
the routing file as the job's user. Any failure undoes what was done and exits 1: slurmctld then
requeues a batch job (an interactive job is cancelled) — see ``REQUEUE`` below. The epilog stops the
daemons, frees the gateways and removes the routing file when ``gw_cleanup`` was asked, whatever the
job's exit status; it always exits 0 (a gateway whose daemon cannot be stopped is marked down instead).

``health`` (run every few seconds by the msa-gw-health timer, and by every prolog) probes the agent of each idle
gateway: one that does not answer is marked down (reason ``unreachable: ...``) and comes back up when it
answers again. The licences of the gateways no job may be given (down or drained, not held by a job) are held
in the license-only reservation ``msa_gw_down``, so Slurm never starts a job that the live gateways cannot
serve: such a job waits for licences instead of failing its prolog.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request

from ansible_collections.msa.hpc.plugins.module_utils import _gw_pool as P
from ansible_collections.msa.hpc.plugins.module_utils import _hostlist as H
from ansible_collections.msa.hpc.plugins.module_utils import _gw_routing as R

REQUEUE = 1  # exit status that makes slurmctld requeue (batch) or cancel (interactive) the job
RESERVATION = "msa_gw_down"  # license-only reservation holding the licences of gateways no job may be given
HEALTH_TIMEOUT = 3.0
TRUE = ("", "1", "yes", "true", "on")


class PrologError(Exception):
    """The job cannot get its gateways; the message goes to slurmctld's log and the job's error file."""


# --------------------------------------------------------------------------- job description

def parse_scontrol(text):
    """``scontrol show job -o`` output → one dict per line (one line per heterogeneous job component)."""
    records = []
    for line in text.splitlines():
        if not line.strip():
            continue
        rec = {}
        for m in re.finditer(r"(\w[\w:/]*)=(.*?)(?=\s+\w[\w:/]*=|\s*$)", line.strip()):
            rec.setdefault(m.group(1), m.group(2))
        records.append(rec)
    return records


def expand_hostlist(text):
    """Slurm host list (``cl[01-03,07],bo5``) → names, as ``scontrol show hostnames`` would print them."""
    text = str(text or "").strip()
    return [] if text in ("", "(null)") else H.expand(text)


def parse_licenses(text, name):
    """Count of license ``name`` in ``gateway:2,foo*1`` (both separators Slurm has used); 0 when absent."""
    for item in str(text or "").split(","):
        m = re.fullmatch(r"\s*([^:*\s]+)(?:[:*](\d+))?\s*", item)
        if m and m.group(1) == name:
            return int(m.group(2) or 1)
    return 0


def parse_comment(text):
    """``gw_num=2,gw_file=PATH,gw_plugin=NAME,gw_cleanup`` (any order, commas/semicolons/spaces) → dict."""
    out = {}
    for m in re.finditer(r"\bgw_(num|file|plugin|cleanup)(?:=([^,;\s]*))?", str(text or "")):
        key, value = m.group(1), m.group(2)
        if key == "cleanup":
            out[key] = (value or "").lower() in TRUE
        elif value:
            out[key] = value
    return out


def _id_of(field):
    m = re.search(r"\((\d+)\)", field or "")
    return int(m.group(1)) if m else None


class Job:
    """What the prolog needs to know about a (heterogeneous) job."""

    def __init__(self, job_id, records, env, settings):
        leader = records[0]
        self.job_id = str(job_id)
        self.user = env.get("SLURM_JOB_USER") or (leader.get("UserId") or "").split("(")[0]
        uid = env.get("SLURM_JOB_UID") or _id_of(leader.get("UserId"))
        gid = env.get("SLURM_JOB_GID") or _id_of(leader.get("GroupId"))
        self.uid = int(uid) if uid is not None else None
        self.gid = int(gid) if gid is not None else None
        self.workdir = env.get("SLURM_JOB_WORK_DIR") or leader.get("WorkDir") or ""
        licenses = env.get("SLURM_JOB_LICENSES") or ",".join(r.get("Licenses", "") for r in records)
        comment = env.get("SLURM_JOB_COMMENT") or leader.get("Comment", "")
        self.options = parse_comment(comment)
        count = max([parse_licenses(r.get("Licenses"), settings["license"]) for r in records]
                    + [parse_licenses(licenses, settings["license"])])
        if not count and "num" in self.options:
            try:
                count = int(self.options["num"])
            except ValueError:
                raise PrologError("job %s: gw_num=%r in the comment is not a number" % (job_id, self.options["num"]))
        self.count = count
        self.cluster, self.booster = [], []
        cluster_parts = set(settings["cluster_partitions"])
        for r in records:
            side = self.cluster if r.get("Partition") in cluster_parts else self.booster
            side.extend(n for n in expand_hostlist(r.get("NodeList")) if n not in side)
        self.strategy = self.options.get("plugin") or settings["strategy"]
        self.cleanup = bool(self.options.get("cleanup", False))
        home = _home_of(self.user)
        base = self.workdir or home or "/tmp"
        gw_file = self.options.get("file")
        if gw_file:
            self.routing_file = gw_file if os.path.isabs(gw_file) else os.path.join(base, gw_file)
        else:
            self.routing_file = os.path.join(base, "%s-%s" % (settings["route_prefix"], self.job_id))
        self.error_file = os.path.join(base, "JOB-%s-psgw.err" % self.job_id)


def _home_of(user):
    try:
        import pwd
        return pwd.getpwnam(user).pw_dir
    except (KeyError, ImportError):
        return None


def scontrol_records(job_id, scontrol="scontrol"):
    try:
        out = subprocess.run([scontrol, "show", "job", "-o", str(job_id)], capture_output=True, text=True,
                             timeout=30, check=True).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        raise PrologError("cannot read job %s with %s: %s" % (job_id, scontrol, exc))
    records = parse_scontrol(out)
    if not records:
        raise PrologError("scontrol knows no job %s" % job_id)
    return records


def leader_records(job_id, scontrol):
    """Records of all components when ``job_id`` leads (or is) the job; None for a non-leading component."""
    records = scontrol_records(job_id, scontrol)
    mine = next((r for r in records if r.get("JobId") == str(job_id)), records[0])
    het = mine.get("HetJobId")
    if het and het != str(job_id):
        return None
    if het:
        records = [r for r in records if r.get("HetJobId") == het]
        records.sort(key=lambda r: int(r.get("HetJobOffset") or 0))
    return records


# --------------------------------------------------------------------------- agents

def agent_call(base_url, method, path, token, body=None, timeout=15.0):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(base_url.rstrip("/") + path, data=data, method=method,
                                 headers={"Content-Type": "application/json", "Accept": "application/json",
                                          **({"Authorization": "Bearer " + token} if token else {})})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return json.loads(resp.read() or b"null")
    except urllib.error.HTTPError as exc:
        try:
            detail = json.loads(exc.read()).get("error", {}).get("message", "")
        except (ValueError, AttributeError):
            detail = ""
        raise PrologError("agent %s answered HTTP %d to %s %s%s" % (base_url, exc.code, method, path,
                                                                     ": " + detail if detail else ""))
    except (urllib.error.URLError, OSError) as exc:
        raise PrologError("agent %s unreachable: %s" % (base_url, getattr(exc, "reason", exc)))


def agent_probe(token=None, timeout=HEALTH_TIMEOUT):
    """A probe for ``GatewayPool.refresh_health``: None when the gateway's agent answers healthy, else why not."""
    def probe(gw):
        try:
            rec = agent_call(gw["agent"], "GET", "/v1/health", token, timeout=timeout)
        except PrologError as exc:
            return str(exc)
        if not isinstance(rec, dict) or not rec.get("ok"):
            return "agent %s is not healthy: %s" % (gw["agent"], json.dumps(rec, sort_keys=True)[:200])
        return None
    return probe


# --------------------------------------------------------------------------- Slurm's view of the live gateways

def _scontrol(scontrol, *args):
    try:
        proc = subprocess.run([scontrol] + list(args), capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as exc:
        raise PrologError("%s %s failed: %s" % (scontrol, " ".join(args), exc))
    return proc.returncode, (proc.stdout + proc.stderr).strip()


def reserved_licenses(scontrol, name, license_name):
    """Licences ``license_name`` held by reservation ``name``; None when there is no such reservation."""
    code, out = _scontrol(scontrol, "-o", "show", "reservation", name)
    if code != 0 or "ReservationName=%s " % name not in out + " ":
        return None
    rec = (parse_scontrol(out) or [{}])[0]
    return parse_licenses(rec.get("Licenses"), license_name)


def sync_reservation(scontrol, name, license_name, count):
    """Make reservation ``name`` hold exactly ``count`` licences (none: no reservation); return whether it changed."""
    current = reserved_licenses(scontrol, name, license_name)
    if (current or 0) == count:
        return False
    lic = "licenses=%s:%d" % (license_name, count)
    if count == 0:
        args = ["delete", "reservation=%s" % name]
    elif current is None:
        args = ["create", "reservation=%s" % name, "starttime=now", "duration=infinite", "users=root",
                "flags=any_nodes", lic]
    else:
        args = ["update", "reservation=%s" % name, lic]
    code, out = _scontrol(scontrol, *args)
    if code != 0:
        raise PrologError("cannot hold %d %s licences in reservation %s: %s" % (count, license_name, name, out))
    return True


def refresh(pool, settings, opts, out, token=None):
    """Probe the idle gateways, then hold the licences of those no job may be given; return what changed."""
    changed = pool.refresh_health(agent_probe(token, opts.health_timeout))
    for state in ("down", "up"):
        for name in changed[state]:
            gw = next(g for g in pool.gateways() if g["name"] == name)
            out.write("psgw: gateway %s is %s%s\n" % (name, state, " (%s)" % gw["reason"] if gw["reason"] else ""))
    unavailable = pool.unavailable()
    if opts.reservation:
        try:
            if sync_reservation(opts.scontrol, opts.reservation, settings["license"], len(unavailable)):
                out.write("psgw: reservation %s holds %d %s licences (%s)\n" % (
                    opts.reservation, len(unavailable), settings["license"], " ".join(unavailable) or "none"))
        except PrologError as exc:
            out.write("psgw: %s\n" % exc)
    return dict(changed, unavailable=unavailable)


def health(env, opts, out=sys.stdout):
    gateways, settings = P.load_pool_file(opts.pool_file)
    token = read_token(opts.token_file)
    with P.GatewayPool(opts.db) as pool:
        pool.sync(gateways)
        refresh(pool, settings, opts, out, token)
    return 0


# --------------------------------------------------------------------------- files as the job's user

# Run through sudo as the job's user when the hooks are not root (PrologSlurmctld runs as SlurmUser): writes a
# file from stdin atomically, appends stdin to one, or removes one. The role installs it with a sudoers rule
# that lets SlurmUser run it as any user but root.
USER_FILE_HELPER = "/usr/local/libexec/msa-gw-userfile"


def as_user(uid, gid, func):
    """Run ``func()`` with the job user's identity (a forked child when we are root), so root-squashed
    home directories work and the file belongs to the user."""
    if os.geteuid() != 0 or uid in (None, 0):
        return func()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - needs root
        code = 1
        try:
            os.setgroups([])
            os.setgid(gid)
            os.setuid(uid)
            func()
            code = 0
        except BaseException as exc:
            sys.stderr.write("psgw: %s\n" % exc)
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise PrologError("writing as uid %s failed" % uid)
    return None


def _file_action(action, path, data):
    if action == "write":
        R.write_atomic(path, data)
    elif action == "append":
        with open(path, "ab") as fh:
            fh.write(data)
    elif os.path.lexists(path):
        os.unlink(path)


def user_file(uid, gid, action, path, data=b"", helper=USER_FILE_HELPER):
    """``write`` (atomically), ``append`` or ``remove`` ``path`` as the job's user.

    As root: a child with the user's identity. As another user (SlurmUser) for a job of a third user: the helper
    through ``sudo -n -u #uid``; a job of root's, or of our own, is served with our own identity."""
    me = os.geteuid()
    if me == 0 or uid in (None, 0, me):
        return as_user(uid, gid, lambda: _file_action(action, path, data))
    argv = ["sudo", "-n", "-u", "#%d" % uid, helper, action, path]
    try:
        proc = subprocess.run(argv, input=data, capture_output=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise PrologError("cannot run %s as uid %s: %s" % (helper, uid, exc))
    if proc.returncode != 0:
        why = proc.stderr.decode("utf-8", "replace").strip() or "exit %d" % proc.returncode
        raise PrologError("%s of %s as uid %s failed: %s" % (action, path, uid, why))
    return None


def write_error_file(job, message, helper=USER_FILE_HELPER):
    try:
        user_file(job.uid, job.gid, "append", job.error_file,
                  ("gateway startup failed:\n%s\n" % message).encode("utf-8"), helper)
    except (OSError, PrologError):
        pass


# --------------------------------------------------------------------------- prolog / epilog

def prolog(env, opts, out=sys.stdout):
    job_id = env.get("SLURM_JOB_ID")
    if not job_id:
        raise PrologError("SLURM_JOB_ID is not set: run me as PrologSlurmctld")
    gateways, settings = P.load_pool_file(opts.pool_file)
    records = leader_records(job_id, opts.scontrol)
    if records is None:
        out.write("psgw: job %s is a later component of a heterogeneous job; its leader sets up gateways\n" % job_id)
        return 0
    job = Job(job_id, records, env, settings)
    if job.count <= 0:
        return 0
    try:
        if not job.cluster or not job.booster:
            raise PrologError("job %s asks for %d gateways but has no nodes on %s side (partitions %s are the "
                              "cluster side)" % (job_id, job.count, "the cluster" if not job.cluster else "the booster",
                                                 ", ".join(settings["cluster_partitions"])))
        with P.GatewayPool(opts.db) as pool:
            pool.sync(gateways)
            health_state = refresh(pool, settings, opts, out, read_token(opts.token_file))
            info = {"routing_file": job.routing_file, "cleanup": job.cleanup, "user": job.user, "uid": job.uid,
                    "gid": job.gid, "strategy": job.strategy}
            try:
                alloc, _ = pool.allocate(job.job_id, job.count, settings["selection"], info=info)
            except P.PoolError as exc:
                why = "%s (%s)" % (exc, exc.code)
                if exc.code == "busy" and health_state["unavailable"]:
                    why += "; not available: %s" % ", ".join(
                        "%s (%s %s)" % (g["name"], g["state"], g["reason"]) for g in pool.gateways()
                        if g["name"] in health_state["unavailable"])
                raise PrologError(why)
            try:
                setup(job, pool, alloc, settings, opts, out)
            except BaseException:
                teardown(job.job_id, pool, opts, out, quiet=True)
                raise
    except PrologError as exc:
        write_error_file(job, str(exc), opts.user_helper)
        raise
    return 0


def setup(job, pool, alloc, settings, opts, out):
    token = read_token(opts.token_file)
    for gw in alloc["gateways"]:
        rec = agent_call(gw["agent"], "POST", "/v1/jobs", token, {"job": job.job_id, "port": settings["port"]})
        pool.set_port(job.job_id, gw["name"], int(rec["port"]))
    alloc = pool.allocation(job.job_id)
    endpoints = P.endpoints(alloc)
    try:
        table = R.build_routing(job.cluster, job.booster, endpoints, job.strategy, search_path=settings["plugin_dirs"])
    except R.RoutingError as exc:
        raise PrologError("job %s: %s" % (job.job_id, exc))
    try:
        user_file(job.uid, job.gid, "write", job.routing_file, R.format_routing(table), opts.user_helper)
    except (OSError, PrologError) as exc:
        raise PrologError("job %s: cannot write routing file %s: %s" % (job.job_id, job.routing_file, exc))
    out.write("psgw: job %s: %d gateways %s, %d routes (%s) in %s\n" % (
        job.job_id, len(endpoints), " ".join(endpoints), len(table), job.strategy, job.routing_file))


def read_token(path):
    if not path:
        return None
    try:
        with open(path, "r", encoding="utf-8") as fh:
            return fh.read().strip() or None
    except OSError as exc:
        raise PrologError("cannot read agent token %s: %s" % (path, exc))


def teardown(job_id, pool, opts, out, quiet=False):
    """Stop the job's daemons, remove its routing file if asked, free its gateways; return the byte report."""
    alloc = pool.allocation(job_id)
    if alloc is None:
        return None
    try:
        token = read_token(opts.token_file)
    except PrologError as exc:
        out.write("psgw: %s\n" % exc)
        token = None
    report = {"job": str(job_id), "gateways": {}, "stopped": time.time()}
    for gw in alloc["gateways"]:
        if gw["port"] is None and quiet:
            try:  # the prolog may have died between the agent's start and recording the port
                agent_call(gw["agent"], "DELETE", "/v1/jobs/%s" % job_id, token)
            except PrologError:
                pass
            continue
        try:
            res = agent_call(gw["agent"], "DELETE", "/v1/jobs/%s" % job_id, token)
            report["gateways"][gw["name"]] = (res or {}).get("stats")
        except PrologError as exc:
            out.write("psgw: job %s: %s; marking gateway %s down\n" % (job_id, exc, gw["name"]))
            pool.set_state([gw["name"]], "down", "psgwd of job %s not stopped: %s" % (job_id, exc))
    info = alloc["info"]
    if info.get("cleanup") and info.get("routing_file"):
        try:
            user_file(info.get("uid"), info.get("gid"), "remove", info["routing_file"], helper=opts.user_helper)
        except (OSError, PrologError) as exc:
            out.write("psgw: job %s: cannot remove %s: %s\n" % (job_id, info["routing_file"], exc))
    pool.release(job_id)
    return report


def epilog(env, opts, out=sys.stdout):
    job_id = env.get("SLURM_JOB_ID")
    if not job_id:
        raise PrologError("SLURM_JOB_ID is not set: run me as EpilogSlurmctld")
    with P.GatewayPool(opts.db) as pool:
        report = teardown(job_id, pool, opts, out)
    if report is None:
        return 0
    for name, stats in sorted(report["gateways"].items()):
        dirs = (stats or {}).get("directions", {})
        out.write("psgw: job %s gateway %s: %s\n" % (job_id, name, ", ".join(
            "%s %d bytes" % (k, v["bytes"]) for k, v in sorted(dirs.items())) or "no traffic"))
    if opts.report_dir:
        try:
            os.makedirs(opts.report_dir, exist_ok=True)
            with open(os.path.join(opts.report_dir, "%s.json" % job_id), "w", encoding="utf-8") as fh:
                json.dump(report, fh, sort_keys=True, indent=1)
        except OSError as exc:
            out.write("psgw: cannot write report: %s\n" % exc)
    return 0


def main(argv=None, env=None, out=sys.stdout):
    env = os.environ if env is None else env
    ap = argparse.ArgumentParser(prog="python3 -m msa_sim.psgwd.slurm", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("action", choices=("prolog", "epilog", "health"))
    ap.add_argument("--pool-file", default=env.get("MSA_GW_POOL_FILE", P.DEFAULT_POOL_FILE))
    ap.add_argument("--db", default=env.get("MSA_GW_DB", P.DEFAULT_DB))
    ap.add_argument("--token-file", default=env.get("MSA_GW_AGENT_TOKEN_FILE", "/etc/msa-gw/agent.token"))
    ap.add_argument("--scontrol", default=env.get("MSA_GW_SCONTROL", "scontrol"))
    ap.add_argument("--report-dir", default=env.get("MSA_GW_REPORT_DIR", "/var/lib/msa-gw/reports"))
    ap.add_argument("--reservation", default=env.get("MSA_GW_RESERVATION", RESERVATION),
                    help="license-only reservation holding the licences of unavailable gateways ('' for none)")
    ap.add_argument("--user-helper", default=env.get("MSA_GW_USER_HELPER", USER_FILE_HELPER),
                    help="run through sudo as the job's user to write its files when the hooks are not root")
    ap.add_argument("--health-timeout", type=float, default=HEALTH_TIMEOUT, help="seconds an agent has to answer")
    opts = ap.parse_args(argv)
    try:
        return {"prolog": prolog, "epilog": epilog, "health": health}[opts.action](env, opts, out)
    except (PrologError, P.PoolError) as exc:
        sys.stderr.write("psgw %s: job %s: %s\n" % (opts.action, env.get("SLURM_JOB_ID"), exc))
        return {"prolog": REQUEUE, "epilog": 0}.get(opts.action, 1)


if __name__ == "__main__":
    sys.exit(main())
