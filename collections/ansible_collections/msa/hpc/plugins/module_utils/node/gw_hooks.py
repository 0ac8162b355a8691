# SPDX-License-Identifier: GPL-3.0-or-later
"""PrologSlurmctld/EpilogSlurmctld of the MPI gateways and their health check (run as SlurmUser by msa-gw-hook).

The prolog reads the job with ``squeue --json`` (module_utils/slurm/jobs), takes its gateway count from the gateway licences Slurm
granted it (``gw_num`` in the comment may ask fewer, never more), decodes the job's options (module_utils/_jobopts)
and checks every one before anything is done: the routing strategy is a bare name of a built-in or a root-owned
plugin, the routing file lies in the user's home or the job's working directory. It then probes the idle gateways'
agents, allocates gateways from the pool, starts one psgwd per gateway with a secret made for the job (its agent
hands it to the daemon, which asks every connection to prove it), writes that secret beside the routing file
(``<routing file>.secret``, mode 0600) and then the routing file, both as the job's user
(module_utils/node/userfile). Any refusal or failure undoes what was done, writes one line to ``JOB-<id>-psgw.err`` in
the job's working directory and exits 1: a refusal ends the job (slurm/jobs.run_hook: not requeued, the refusal in
its AdminComment), a failure has slurmctld requeue a batch job (an interactive one is cancelled). The epilog stops
the daemons, frees the gateways, removes the secret file and, when ``gw_cleanup`` was asked, the routing file; it
always exits 0. A workflow's delayed part (``--delay`` with ``--dependency=after:<leader>``, comment ``delay_after``)
joins the routing file of its leader when it starts: the routes of every pair with one of its nodes, through the leader's
gateways and strategy, are appended to that file as the user (the leader's own lines stay as they are, since its
job is running on them); its epilog writes the file again without them. ``health`` probes the idle gateways' agents
and holds the licences of those no job may be given in the licence-only reservation ``msa_gw_down``, so Slurm
starts no job the live gateways cannot serve.
"""
from __future__ import annotations

import argparse
import json
import os
import secrets
import sys
import time

from ansible_collections.msa.hpc.plugins.module_utils import _gw_paths as N
from ansible_collections.msa.hpc.plugins.module_utils import _gw_pool as P
from ansible_collections.msa.hpc.plugins.module_utils import _gw_routing as R
from ansible_collections.msa.hpc.plugins.module_utils import _jobopts as J
from ansible_collections.msa.hpc.plugins.module_utils.slurm import jobs as S
from ansible_collections.msa.hpc.plugins.module_utils.slurm import reservations as V
from ansible_collections.msa.hpc.plugins.module_utils.node import userfile as U
from ansible_collections.msa.hpc.plugins.module_utils._rest import RestClient, RestError

REQUEUE = 1  # exit status that makes slurmctld requeue (batch) or cancel (interactive) the job
RESERVATION = "msa_gw_down"  # license-only reservation holding the licences of gateways no job may be given
HEALTH_TIMEOUT = 3.0


class PrologError(Exception):
    """The job cannot get its gateways; the message goes to slurmctld's log and the job's error file."""


# --------------------------------------------------------------------------- the job

class Job:
    """What the prolog needs to know about a (heterogeneous) job, every value checked."""

    def __init__(self, record, records, settings):
        self.record = record  # the leader, with the user's home (U.job_record)
        self.job_id, self.user, self.uid, self.gid = record["job_id"], record["user"], record["uid"], record["gid"]
        self.workdir, self.home = record["workdir"], record["home"]
        self.options = J.decode(record["comment"], J.GATEWAY_KEYS)
        granted = S.granted(records, settings["license"])
        asked = self.options.get("gw_num")
        if asked is not None and asked > granted:
            raise J.JobOptionError("gw_num: %d asks more gateways than the %d %s licence%s Slurm granted the job "
                                   "(ask with --licenses=%s:%d)" % (asked, granted, settings["license"],
                                                                    "" if granted == 1 else "s",
                                                                    settings["license"], asked))
        self.count = granted if asked is None else asked
        self.cluster, self.booster = _sides(records, settings)
        self.strategy_name = self.options.get("gw_plugin") or settings["strategy"]
        self.cleanup = bool(self.options.get("gw_cleanup", False))
        name = self.options.get("gw_file") or "%s-%s" % (settings["route_prefix"], self.job_id)
        try:
            self.routing_file = U.check_lexically(U.resolve(name, self.workdir), self.roots)
        except U.UserFileError as exc:
            raise J.JobOptionError(str(exc)) from None

    @property
    def roots(self):
        return [self.home, self.workdir]


def leader_records(job_id, squeue):
    """Records of all components when ``job_id`` leads (or is) the job; None for a later component."""
    try:
        return S.components(S.read_job(job_id, squeue), job_id)
    except S.JobRecordError as exc:
        raise PrologError(str(exc)) from None


# --------------------------------------------------------------------------- agents (through the shared RestClient)

def agent_call(base_url, method, path, token, body=None, timeout=15.0, ca_path=None):
    """One call to a gateway's agent; an https agent is verified against ``ca_path`` (empty: the system's CAs)."""
    try:
        client = RestClient(base_url, token=token, token_header="Authorization", timeout=timeout, retries=0,
                            ca_path=ca_path)
        return client.request(method, path, body=body, expect=(200, 201, 202, 204))[1]
    except RestError as exc:
        detail = exc.body.get("error", exc.body) if isinstance(exc.body, dict) else None
        message = detail.get("message") if isinstance(detail, dict) else None
        if exc.status is None:
            raise PrologError("agent %s unreachable: %s" % (base_url, exc)) from None
        raise PrologError("agent %s answered HTTP %s to %s %s%s" % (base_url, exc.status, method, path,
                                                                    ": " + message if message else "")) from None


def agent_probe(token=None, timeout=HEALTH_TIMEOUT, ca_path=None):
    """A probe for ``GatewayPool.refresh_health``: None when the gateway's agent answers healthy, else why not."""
    def probe(gw):
        try:
            rec = agent_call(gw["agent"], "GET", "/v1/health", token_for(token, gw), timeout=timeout, ca_path=ca_path)
        except PrologError as exc:
            return str(exc)
        if not isinstance(rec, dict) or not rec.get("ok"):
            return "agent %s is not healthy: %s" % (gw["agent"], json.dumps(rec, sort_keys=True)[:200])
        return None
    return probe


def read_token(path):
    """The agents' tokens: each gateway's own (a JSON object ``{gateway: token}``, as msa.hpc.gateway writes it, so
    no gateway holds a token another agent accepts) or one token for all (a single line)."""
    if not path:
        return None
    try:
        with open(path, "r", encoding="utf-8") as fh:
            text = fh.read().strip()
    except OSError as exc:
        raise PrologError("cannot read agent token %s: %s" % (path, exc)) from None
    if not text.startswith("{"):
        return text or None
    try:
        tokens = json.loads(text)
    except ValueError:
        tokens = None
    if not isinstance(tokens, dict) or not all(isinstance(v, str) and v for v in tokens.values()):
        raise PrologError("agent token file %s is not a JSON object of gateway name: token" % path)
    return tokens


def token_for(tokens, gw):
    """The token of gateway ``gw``'s agent from what read_token returned."""
    if not isinstance(tokens, dict):
        return tokens
    if gw["name"] not in tokens:
        raise PrologError("the agent token file names no token for gateway %s" % gw["name"])
    return tokens[gw["name"]]


# --------------------------------------------------------------------------- Slurm's view of the live gateways

def refresh(pool, settings, opts, out, token=None):
    """Probe the idle gateways, then hold the licences of those no job may be given; return what changed."""
    changed = pool.refresh_health(agent_probe(token, opts.health_timeout, opts.ca_file))
    for state in ("down", "up"):
        for name in changed[state]:
            gw = next(g for g in pool.gateways() if g["name"] == name)
            out.write("psgw: gateway %s is %s%s\n" % (name, state, " (%s)" % gw["reason"] if gw["reason"] else ""))
    unavailable = pool.unavailable()
    if opts.reservation:
        try:
            if V.sync_reservation(opts.scontrol, opts.reservation, {settings["license"]: len(unavailable)}):
                out.write("psgw: reservation %s holds %d %s licences (%s)\n" % (
                    opts.reservation, len(unavailable), settings["license"], " ".join(unavailable) or "none"))
        except V.ReservationError as exc:
            out.write("psgw: %s\n" % exc)
    return dict(changed, unavailable=unavailable)


def health(env, opts, out=sys.stdout):
    gateways, settings = P.load_pool_file(opts.pool_file)
    token = read_token(opts.token_file)
    with P.GatewayPool(opts.db) as pool:
        pool.sync(gateways)
        refresh(pool, settings, opts, out, token)
    return 0


# --------------------------------------------------------------------------- prolog / epilog

def prolog(env, opts, out=sys.stdout):
    job_id = env.get("SLURM_JOB_ID")
    if not job_id:
        raise PrologError("SLURM_JOB_ID is not set: run me as PrologSlurmctld")
    gateways, settings = P.load_pool_file(opts.pool_file)
    records = leader_records(job_id, opts.squeue)
    if records is None:
        out.write("psgw: job %s is a later component of a heterogeneous job; its leader sets up gateways\n" % job_id)
        return 0
    record = U.job_record(records[0])
    try:
        try:
            job = Job(record, records, settings)
        except J.JobOptionError as exc:
            raise PrologError("job %s refused: %s" % (job_id, exc)) from None
        if job.count <= 0:
            join_workflow(record, settings, opts, out)
            return 0
        try:  # refuse a strategy or a routing file before any gateway is taken
            strategy = R.resolve_strategy(job.strategy_name, settings["plugin_dirs"])
            U.user_file(record, "check", job.routing_file, b"", opts.user_helper)
        except (R.RoutingError, U.UserFileError) as exc:
            raise PrologError("job %s refused: %s" % (job_id, exc)) from None
        if not job.cluster or not job.booster:
            raise PrologError("job %s asks for %d gateways but has no nodes on %s side (partitions %s are the "
                              "cluster side)" % (job_id, job.count, "the cluster" if not job.cluster else "the booster",
                                                 ", ".join(settings["cluster_partitions"])))
        with P.GatewayPool(opts.db) as pool:
            pool.sync(gateways)
            health_state = refresh(pool, settings, opts, out, read_token(opts.token_file))
            info = {"routing_file": job.routing_file, "cleanup": job.cleanup, "user": job.user, "uid": job.uid,
                    "gid": job.gid, "strategy": job.strategy_name, "workdir": job.workdir, "home": job.home}
            try:
                alloc = pool.allocate(job.job_id, job.count, settings["selection"], info=info)[0]
            except P.PoolError as exc:
                why = "%s (%s)" % (exc, exc.code)
                if exc.code == "busy" and health_state["unavailable"]:
                    why += "; not available: %s" % ", ".join(
                        "%s (%s %s)" % (g["name"], g["state"], g["reason"]) for g in pool.gateways()
                        if g["name"] in health_state["unavailable"])
                raise PrologError(why) from None
            try:
                setup(job, strategy, pool, alloc, settings, opts, out)
            except BaseException:
                teardown(job.job_id, pool, opts, out, quiet=True)
                raise
        join_workflow(record, settings, opts, out)
    except PrologError as exc:
        failed = U.append_error(record, "psgw", str(exc), opts.user_helper)
        if failed:
            out.write("psgw: job %s: %s\n" % (job_id, failed))
        raise
    return 0


def setup(job, strategy, pool, alloc, settings, opts, out):
    token = read_token(opts.token_file)
    secret = secrets.token_urlsafe(32)  # the job's psgwds serve only who holds it: the job's own files
    for gw in alloc["gateways"]:
        rec = agent_call(gw["agent"], "POST", "/v1/jobs", token_for(token, gw),
                         {"job": job.job_id, "port": settings["port"], "secret": secret}, ca_path=opts.ca_file)
        try:
            port = int(rec["port"])
        except (TypeError, KeyError, ValueError):
            raise PrologError("agent %s answered no port for job %s: %r" % (gw["agent"], job.job_id, rec)) from None
        pool.set_port(job.job_id, gw["name"], port)
    alloc = pool.allocation(job.job_id)
    endpoints = P.endpoints(alloc)
    try:
        table = R.build_routing(job.cluster, job.booster, endpoints, strategy)
    except R.RoutingError as exc:
        raise PrologError("job %s: %s" % (job.job_id, exc)) from None
    open_paths(job.job_id, table.routes(), alloc, endpoints, settings, token, opts, out)
    try:
        U.user_file(job.record, "secret", R.secret_file(job.routing_file), (secret + "\n").encode(), opts.user_helper)
    except (OSError, U.UserFileError) as exc:
        raise PrologError("job %s: cannot hand the job its gateway secret: %s" % (job.job_id, exc)) from None
    try:
        U.user_file(job.record, "write", job.routing_file, R.format_routing(table), opts.user_helper)
    except (OSError, U.UserFileError) as exc:
        raise PrologError("job %s: cannot write routing file %s: %s" % (job.job_id, job.routing_file, exc)) from None
    out.write("psgw: job %s: %d gateways %s, %d routes (%s) in %s\n" % (
        job.job_id, len(endpoints), " ".join(endpoints), len(table), job.strategy_name, job.routing_file))


def open_paths(job_id, routes, alloc, endpoints, settings, token, opts, out):
    """Have each gateway forward exactly the job's node pairs it routes (POST again, with ``pairs``); nothing when
    the pool file names no node addresses (forwarding off). Returns ``{gateway: pairs}``."""
    if not settings.get("nodes"):
        return {}
    try:
        pairs = N.gateway_pairs(routes, alloc["gateways"], endpoints, settings["nodes"])
    except N.PathError as exc:
        raise PrologError("job %s: %s" % (job_id, exc)) from None
    for gw in alloc["gateways"]:
        agent_call(gw["agent"], "POST", "/v1/jobs", token_for(token, gw),
                   {"job": str(job_id), "port": gw["port"] or settings["port"], "pairs": pairs[gw["name"]]},
                   ca_path=opts.ca_file)
    out.write("psgw: job %s: forwarding %s\n" % (job_id, ", ".join(
        "%d pairs on %s" % (len(p), name) for name, p in sorted(pairs.items()))))
    return pairs


# --------------------------------------------------------------------------- a workflow's delayed parts

def _sides(records, settings):
    """``(cluster nodes, booster nodes)`` of job records, by the pool's cluster partitions, each node once."""
    cluster, booster, parts = [], [], set(settings["cluster_partitions"])
    for r in records:
        side = cluster if r["partition"] in parts else booster
        side.extend(n for n in r["nodes"] if n not in side)
    return cluster, booster


def joined_routes(leader, part, endpoints, strategy):
    """The routing-file lines (bytes) of every pair with a node of the delayed ``part``, routed as the leader's file
    routes: ``leader`` and ``part`` are ``(cluster nodes, booster nodes)``. Empty when the part adds no pair."""
    new = set(part[0] + part[1]) - set(leader[0] + leader[1])
    clusters = leader[0] + [n for n in part[0] if n not in leader[0]]
    boosters = leader[1] + [n for n in part[1] if n not in leader[1]]
    if not new or not clusters or not boosters:
        return b""
    table = R.build_routing(clusters, boosters, endpoints, strategy)
    rows = sorted((r for r in table.routes() if r[1] in new or r[2] in new),
                  key=lambda r: (R.natural_key(r[2]), R.natural_key(r[1])))
    return "".join("%s %s %s\n" % row for row in rows).encode("utf-8")


def _workflow(leader_id, settings, opts):
    """The leader's gateway allocation, checked records and routing inputs; None when it holds no gateways."""
    with P.GatewayPool(opts.db) as pool:
        alloc = pool.allocation(leader_id)
    if alloc is None or not alloc["info"].get("routing_file"):
        return None
    records = leader_records(leader_id, opts.squeue)
    if records is None:
        raise PrologError("job %s is a later component, not the leader of a workflow" % leader_id)
    try:
        strategy = R.resolve_strategy(alloc["info"].get("strategy") or settings["strategy"], settings["plugin_dirs"])
    except R.RoutingError as exc:
        raise PrologError("job %s: %s" % (leader_id, exc)) from None
    return alloc, U.job_record(records[0]), _sides(records, settings), P.endpoints(alloc), strategy


def join_workflow(record, settings, opts, out):
    """Append the routes of delayed part ``record`` to its leader's routing file (nothing for any other job).

    Only a part of the leader's own user joins (a hand-written ``delay_after`` can name nobody else's file); a part
    that cannot join is one line in the hook's log and in its error file, and starts all the same."""
    try:
        leader_id = J.decode_delay(record["comment"]).get("delay_after")
    except J.JobOptionError:
        return
    if not leader_id:
        return
    try:
        flow = _workflow(leader_id, settings, opts)
        if flow is None:
            return
        alloc, leader, leader_sides, endpoints, strategy = flow
        if (leader["user"], leader["uid"]) != (record["user"], record["uid"]):
            raise PrologError("its leader %s belongs to %s, not %s" % (leader_id, leader["user"], record["user"]))
        lines = joined_routes(leader_sides, _sides([record], settings), endpoints, strategy)
        if not lines:
            return
        path = alloc["info"]["routing_file"]
        U.user_file(leader, "append", path, lines, opts.user_helper)
        with P.GatewayPool(opts.db) as pool:
            joined = dict(pool.allocation(leader_id)["info"].get("joined") or {})
            joined[record["job_id"]] = lines.decode("utf-8")
            pool.update_info(leader_id, joined=joined)
        workflow_paths(leader_id, leader_sides, joined, alloc, endpoints, strategy, settings, opts, out)
        out.write("psgw: job %s: %d routes of its nodes %s added to %s, the routing file of its leader %s\n" % (
            record["job_id"], lines.count(b"\n"), " ".join(record["nodes"]), path, leader_id))
    except (PrologError, R.RoutingError, U.UserFileError, S.JobRecordError, P.PoolError, OSError) as exc:
        why = "job %s not added to the routing file of its leader %s: %s" % (record["job_id"], leader_id, exc)
        out.write("psgw: %s\n" % why)
        U.append_error(record, "psgw", why, opts.user_helper)


def workflow_paths(leader_id, sides, joined, alloc, endpoints, strategy, settings, opts, out):
    """Have the leader's gateways forward the pairs of its own nodes and of the parts that joined it now."""
    if not settings.get("nodes"):
        return
    routes = R.build_routing(sides[0], sides[1], endpoints, strategy).routes()
    routes |= {tuple(line.split()) for text in joined.values() for line in text.splitlines() if line.strip()}
    open_paths(leader_id, routes, alloc, endpoints, settings, read_token(opts.token_file), opts, out)


def leave_workflow(job_id, opts, out):
    """Write the routing file of the workflow delayed part ``job_id`` joined again without its routes."""
    with P.GatewayPool(opts.db) as pool:
        leader_id = next((a["job_id"] for a in pool.jobs() if job_id in (a["info"].get("joined") or {})), None)
    if leader_id is None:
        return
    try:
        settings = P.load_pool_file(opts.pool_file)[1]
        flow = _workflow(leader_id, settings, opts)
        if flow is None:
            return
        alloc, leader, (cluster, booster), endpoints, strategy = flow
        joined = dict(alloc["info"].get("joined") or {})
        joined.pop(job_id, None)
        data = R.format_routing(R.build_routing(cluster, booster, endpoints, strategy))
        data += "".join(text for _part, text in sorted(joined.items())).encode("utf-8")
        U.user_file(leader, "write", alloc["info"]["routing_file"], data, opts.user_helper)
        with P.GatewayPool(opts.db) as pool:
            pool.update_info(leader_id, joined=joined)
        workflow_paths(leader_id, (cluster, booster), joined, alloc, endpoints, strategy, settings, opts, out)
        out.write("psgw: job %s ended: its routes removed from %s, the routing file of its leader %s\n" % (
            job_id, alloc["info"]["routing_file"], leader_id))
    except (PrologError, R.RoutingError, U.UserFileError, S.JobRecordError, P.PoolError, OSError) as exc:
        out.write("psgw: job %s: its routes stay in the routing file of its leader %s: %s\n" % (job_id, leader_id, exc))


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
                agent_call(gw["agent"], "DELETE", "/v1/jobs/%s" % job_id, token_for(token, gw), ca_path=opts.ca_file)
            except PrologError:
                pass
            continue
        try:
            res = agent_call(gw["agent"], "DELETE", "/v1/jobs/%s" % job_id, token_for(token, gw), ca_path=opts.ca_file)
            report["gateways"][gw["name"]] = (res or {}).get("stats")
        except PrologError as exc:
            out.write("psgw: job %s: %s; marking gateway %s down\n" % (job_id, exc, gw["name"]))
            pool.set_state([gw["name"]], "down", "psgwd of job %s not stopped: %s" % (job_id, exc))
    info = alloc["info"]
    if info.get("routing_file") and info.get("uid") is not None:
        record = {"job_id": str(job_id), "user": info.get("user"), "uid": info.get("uid"), "gid": info.get("gid"),
                  "workdir": info.get("workdir") or os.path.dirname(info["routing_file"]), "home": info.get("home")}
        # the secret is worthless once the daemons are stopped, but it is the job's: it goes with the job
        for path in [R.secret_file(info["routing_file"])] + ([info["routing_file"]] if info.get("cleanup") else []):
            try:
                U.user_file(record, "remove", path, helper=opts.user_helper)
            except (OSError, U.UserFileError) as exc:
                out.write("psgw: job %s: cannot remove %s: %s\n" % (job_id, path, exc))
    pool.release(job_id)
    return report


def epilog(env, opts, out=sys.stdout):
    job_id = env.get("SLURM_JOB_ID")
    try:
        job_id = S.check_job_id(job_id, "SLURM_JOB_ID")
    except S.JobRecordError as exc:
        raise PrologError("%s: run me as EpilogSlurmctld" % exc) from None
    leave_workflow(job_id, opts, out)
    with P.GatewayPool(opts.db) as pool:
        report = teardown(job_id, pool, opts, out)
    if report is None:
        return 0
    for name, stats in sorted(report["gateways"].items()):
        dirs = (stats or {}).get("directions", {})
        line = ", ".join("%s %d bytes" % (k, v["bytes"]) for k, v in sorted(dirs.items())) or "no traffic"
        forwarded = (stats or {}).get("forwarded")  # the kernel forwarding of the job's pairs (MPI over TCP)
        if forwarded:
            line += "; forwarded " + ", ".join("%s %d bytes" % (k, v["bytes"]) for k, v in sorted(forwarded.items()))
        out.write("psgw: job %s gateway %s: %s\n" % (job_id, name, line))
    if opts.report_dir:
        try:
            os.makedirs(opts.report_dir, exist_ok=True)
            with open(os.path.join(opts.report_dir, "%s.json" % job_id), "w", encoding="utf-8") as fh:
                json.dump(report, fh, sort_keys=True, indent=1)
        except OSError as exc:
            out.write("psgw: cannot write report: %s\n" % exc)
    return 0


def parser(prog="msa-gw-hook"):
    ap = argparse.ArgumentParser(prog=prog, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("action", choices=("prolog", "epilog", "health"))
    ap.add_argument("--pool-file", default=P.DEFAULT_POOL_FILE)
    ap.add_argument("--db", default=P.DEFAULT_DB)
    ap.add_argument("--token-file", default="/etc/msa-gw/agent.token")
    ap.add_argument("--ca-file", default="", help="CA the agents' https certificates are verified against "
                    "(default: the system's CAs)")
    ap.add_argument("--scontrol", default="scontrol", help="scontrol (the reservation of unavailable gateways)")
    ap.add_argument("--squeue", default="squeue", help="squeue (the job, read with --json)")
    ap.add_argument("--report-dir", default="/var/lib/msa-gw/reports")
    ap.add_argument("--reservation", default=RESERVATION,
                    help="license-only reservation holding the licences of unavailable gateways ('' for none)")
    ap.add_argument("--user-helper", default=U.USER_FILE_HELPER,
                    help="run through sudo to write a job's files as its user when the hooks are not root")
    ap.add_argument("--health-timeout", type=float, default=HEALTH_TIMEOUT, help="seconds an agent has to answer")
    return ap


def main(argv=None, env=None, out=sys.stdout, err=sys.stderr, prog="msa-gw-hook"):
    """Run one action; every expected failure is one line on ``err`` and an exit status, never a traceback."""
    env = os.environ if env is None else env
    opts = parser(prog).parse_args(argv)
    action = {"prolog": prolog, "epilog": epilog, "health": health}[opts.action]
    return S.run_hook("psgw", opts.action, lambda: action(env, opts, out), {"prolog": REQUEUE, "epilog": 0}.get(
        opts.action, 1), env.get("SLURM_JOB_ID"), err,
        (PrologError, P.PoolError, R.RoutingError, S.JobRecordError, U.UserFileError, OSError, ValueError),
        scontrol=opts.scontrol)
