# SPDX-License-Identifier: GPL-3.0-or-later
"""slurmd Prolog/Epilog piece of a compute node (root): the host routes of a job's cross-module node pairs.

``msa-gw-routes prolog`` (SLURM_JOB_ID, SLURMD_NODENAME from slurmd) asks each gateway of the pool file for the job
(``GET /v1/jobs/<id>`` with the agents' read-only token; a heterogeneous job's component by its leader's id,
SLURM_HET_JOB_ID, under which the controller's prolog opened the paths: ``pairs`` the gateway forwards for the job;
404 when the job has none there), keeps the pairs with this node's address, and installs one host route per peer: on a cluster
node ``<booster addr>/32 via <gateway's cluster-fabric addr>``, on a booster node ``<cluster addr>/32 via <gateway's
booster-fabric addr>``. Nothing the job wrote is read: the pool file (root-owned, from the inventory) names the
gateways, their addresses and every node's addresses, and a pair an agent answers is used only when both its
addresses are those of compute nodes there. The routes are written to ``<state dir>/<job>.json``; ``epilog`` removes
them again. Jobs that share a node and a peer share its one kernel route: the oldest running job's gateway carries
it (a later job's prolog leaves it, and its traffic to that peer crosses where the older job opened the same pair),
and when that job ends its epilog hands the route over to the next job's gateway rather than removing it. Prologs and
epilogs of jobs on one node take a lock on the state directory. A route is a convenience: the gateway's nftables
rules decide what crosses (docs/architecture.md §4.6). ``--route-helper CMD`` replaces ``ip route`` by
``CMD add|del PEER VIA OWN`` (the simulator's EXTOLL side tunnels to the gateway with its own helper).
"""
from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import socket
import subprocess
import sys
import time

from ansible_collections.msa.hpc.plugins.module_utils import _gw_paths as N
from ansible_collections.msa.hpc.plugins.module_utils import _gw_pool as P
from ansible_collections.msa.hpc.plugins.module_utils.slurm import jobs as S
from ansible_collections.msa.hpc.plugins.module_utils._rest import RestClient, RestError, RestTransportError

DEFAULT_STATE_DIR = "/run/msa-gw/routes"


class RouteError(Exception):
    """The job's routes cannot be worked out or installed; the message names the gateway, node or value."""


class AgentUnreachable(RouteError):
    """A gateway's agent did not answer at all (powered off, down): it opened no path for a job starting now."""


def agent_pairs(gateway, job_id, token, ca_path=None, timeout=10.0):
    """The pairs ``gateway`` forwards for the job (``[]`` when it serves no such job)."""
    try:
        client = RestClient(gateway["agent"], token=token, token_header="Authorization", timeout=timeout, retries=1,
                            ca_path=ca_path)
        rec = client.request("GET", "/v1/jobs/%s" % job_id, expect=(200,))[1]
    except RestError as exc:
        if exc.status == 404:
            return []
        # no connection (refused, no route, timed out); an untrusted certificate is no such thing (not retryable)
        unreachable = isinstance(exc, RestTransportError) and exc.retryable
        error = AgentUnreachable if unreachable else RouteError
        raise error("gateway %s: agent %s: %s" % (gateway["name"], gateway["agent"], exc)) from None
    pairs = rec.get("pairs") if isinstance(rec, dict) else None
    if not isinstance(pairs, list):
        raise RouteError("gateway %s answered no pairs for job %s" % (gateway["name"], job_id))
    return pairs


def check_pairs(gateway, pairs, nodes):
    """The agent's ``pairs`` as ``[(cluster addr, booster addr)]``, each address that of a compute node of the pool
    file on the gateway's fabric on that side; anything else is refused naming the gateway and value."""
    c_fabric, b_fabric = N.gateway_fabrics(gateway)
    known = {f: {a[f] for a in nodes.values() if f in a} for f in (c_fabric, b_fabric)}
    out = []
    for i, pair in enumerate(pairs):
        if not isinstance(pair, list) or len(pair) != 2 or not all(isinstance(a, str) for a in pair):
            raise RouteError("gateway %s: pairs[%d] %r is not [cluster address, booster address]"
                             % (gateway["name"], i, pair))
        for addr, fabric in zip(pair, (c_fabric, b_fabric)):
            if addr not in known[fabric]:
                raise RouteError("gateway %s: pairs[%d]: %r is no compute node's %s address in the pool file"
                                 % (gateway["name"], i, addr, fabric))
        out.append(tuple(pair))
    return out


def plan(node, nodes, gateways, pairs_by_gateway):
    """``(own address, [(peer, via), ...])`` this node needs; own address None (and no routes) when the node is on
    neither side or on both (it reaches the other side without a gateway)."""
    mine = nodes.get(node, {})
    fabrics = {N.gateway_fabrics(g) for g in gateways}
    if len(fabrics) > 1:
        raise RouteError("the pool's gateways bridge different fabrics: %s" % sorted(fabrics))
    if not fabrics:
        return None, []
    c_fabric, b_fabric = fabrics.pop()
    if (c_fabric in mine) == (b_fabric in mine):
        return None, []
    own = mine.get(c_fabric) or mine.get(b_fabric)
    try:
        routes = N.node_routes(own, {g: [list(p) for p in ps] for g, ps in pairs_by_gateway.items()},
                               {g["name"]: g["addresses"] for g in gateways}, (c_fabric, b_fabric))
    except N.PathError as exc:
        raise RouteError(str(exc)) from None
    return own, routes


def ip_route(action, peer, via, own, helper, run):
    """Install (``add``) or remove (``del``) one host route, with ``ip`` or the site's ``helper``."""
    if helper:
        argv = [helper, action, peer, via, own]
    elif action == "add":
        argv = ["ip", "route", "replace", "%s/32" % peer if ":" not in peer else "%s/128" % peer, "via", via]
    else:
        argv = ["ip", "route", "del", "%s/32" % peer if ":" not in peer else "%s/128" % peer, "via", via]
    proc = run(argv, capture_output=True, text=True, timeout=30, check=False)
    if proc.returncode != 0:
        raise RouteError("%s failed: %s" % (" ".join(argv), (proc.stderr or "").strip() or proc.returncode))


def _state_file(state_dir, job_id):
    return os.path.join(state_dir, "%s.json" % job_id)


def _read_state(path):
    try:
        with open(path, "r", encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("routes"), list) else None


@contextlib.contextmanager
def _locked(state_dir):
    """The node's route records, held against the prolog or epilog of another job on this node."""
    os.makedirs(state_dir, mode=0o700, exist_ok=True)
    with open(os.path.join(state_dir, ".lock"), "a", encoding="utf-8") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _others(state_dir, job_id):
    """The route records of the node's other jobs, oldest first."""
    records = []
    for name in sorted(os.listdir(state_dir)):
        if name.endswith(".json") and name != "%s.json" % job_id:
            rec = _read_state(os.path.join(state_dir, name))
            if rec is not None:
                records.append(rec)
    return sorted(records, key=lambda r: (r.get("seq", 0), str(r.get("job"))))


def installed(records):
    """``{peer: via}`` of the kernel routes ``records`` (oldest first) make: each peer's oldest job's gateway."""
    out = {}
    for rec in records:
        for peer, via in (tuple(r) for r in rec["routes"]):
            out.setdefault(peer, via)
    return out


def prolog(job_id, node, opts, run=None, fetch=None, agent_job=None, skipped=None):
    """Install the node's routes of the job; return those installed (``[(peer, via)]``: a peer an older job on
    this node already routes keeps its route). ``agent_job``: the id the agents know the job by (a heterogeneous
    job's leader), default ``job_id``; the routes are recorded under ``job_id``. A gateway whose agent does not
    answer at all is taken to serve no pair of the job (appended to ``skipped`` with why): the controller's prolog
    opened the job's paths on live gateways just before, and a powered-off gateway must not fail every job's
    start; any answer that is an error still fails the prolog."""
    run, fetch = run or subprocess.run, fetch or agent_pairs
    gateways, settings = P.load_pool_file(opts.pool_file)
    gateways = [g.as_dict() for g in gateways]
    nodes = settings["nodes"]
    if node not in nodes:
        return []
    token = None
    if opts.token_file:
        with open(opts.token_file, "r", encoding="utf-8") as fh:
            token = fh.read().strip() or None
    pairs = {}
    for gateway in gateways:
        try:
            answer = fetch(gateway, agent_job or job_id, token, opts.ca_file or None)
        except AgentUnreachable as exc:
            if skipped is not None:
                skipped.append(str(exc))
            answer = []
        pairs[gateway["name"]] = check_pairs(gateway, answer, nodes)
    own, routes = plan(node, nodes, gateways, pairs)
    if not routes:
        return []
    with _locked(opts.state_dir):
        current = installed(_others(opts.state_dir, job_id))
        path = _state_file(opts.state_dir, job_id)
        with open(path + ".tmp", "w", encoding="utf-8") as fh:  # recorded first: the epilog removes what was tried
            json.dump({"job": job_id, "own": own, "seq": time.time_ns(), "routes": [list(r) for r in routes]}, fh)
        os.replace(path + ".tmp", path)
        done = []
        for peer, via in routes:
            if peer not in current:
                ip_route("add", peer, via, own, opts.route_helper, run)
                done.append((peer, via))
    return done


def epilog(job_id, opts, run=None, moved=None):
    """Remove the routes only this job needed; a peer another running job on this node needs keeps a route,
    through that job's gateway (appended to ``moved`` as ``(peer, old via, new via)`` when it changes)."""
    run = run or subprocess.run
    path = _state_file(opts.state_dir, job_id)
    if _read_state(path) is None:
        return []
    removed, errors = [], []
    with _locked(opts.state_dir):
        state = _read_state(path)
        if state is None:
            return []
        others = _others(opts.state_dir, job_id)
        before = installed(sorted(others + [state], key=lambda r: (r.get("seq", 0), str(r.get("job")))))
        after = installed(others)
        for peer in dict.fromkeys(r[0] for r in state["routes"]):
            try:
                if peer not in after:
                    ip_route("del", peer, before[peer], state["own"], opts.route_helper, run)
                    removed.append((peer, before[peer]))
                elif after[peer] != before[peer]:
                    if opts.route_helper:  # the helper's del also drops a tunnel device left without routes
                        ip_route("del", peer, before[peer], state["own"], opts.route_helper, run)
                    ip_route("add", peer, after[peer], state["own"], opts.route_helper, run)
                    if moved is not None:
                        moved.append((peer, before[peer], after[peer]))
            except RouteError as exc:
                errors.append(str(exc))
        os.unlink(path)
    if errors:
        raise RouteError("job %s: routes not removed: %s" % (job_id, "; ".join(errors)))
    return removed


def parser(prog="msa-gw-routes"):
    ap = argparse.ArgumentParser(prog=prog, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("action", choices=("prolog", "epilog"))
    ap.add_argument("--pool-file", default=P.DEFAULT_POOL_FILE)
    ap.add_argument("--token-file", default="/etc/msa-gw/agent-read.token",
                    help="the agents' read-only token (GET of a job only)")
    ap.add_argument("--ca-file", default="", help="CA the agents' certificates are verified against")
    ap.add_argument("--state-dir", default=DEFAULT_STATE_DIR)
    ap.add_argument("--route-helper", default="", help="CMD add|del PEER VIA OWN instead of ip route")
    return ap


def main(argv=None, env=None, out=sys.stdout, err=sys.stderr, prog="msa-gw-routes"):
    """Prolog failure: exit 1 (slurmd drains the node and requeues the job); epilog failures too (a stale route)."""
    env = os.environ if env is None else env
    opts = parser(prog).parse_args(argv)

    def action():
        job_id = S.check_job_id(env.get("SLURM_JOB_ID"), "SLURM_JOB_ID")
        if opts.action == "epilog":
            moved = []
            done = epilog(job_id, opts, moved=moved)
            verb = "removed"
            for peer, old, new in moved:
                out.write("psgw routes: job %s: %s handed over from %s to %s (another job's)\n" % (job_id, peer, old, new))
        else:
            node = env.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0]
            het = env.get("SLURM_HET_JOB_ID")
            skipped = []
            done = prolog(job_id, node, opts, agent_job=S.check_job_id(het, "SLURM_HET_JOB_ID") if het else None,
                          skipped=skipped)
            verb = "installed"
            for why in skipped:
                err.write("psgw routes prolog: job %s: no answer, taken to serve no pair: %s\n" % (job_id, why))
        if done:
            out.write("psgw routes: job %s: %s %s\n" % (job_id, verb, ", ".join("%s via %s" % r for r in done)))
        return 0
    return S.run_hook("psgw routes", opts.action, action, 1, env.get("SLURM_JOB_ID"), err,
                      (RouteError, N.PathError, P.PoolError, S.JobRecordError, OSError, ValueError))
