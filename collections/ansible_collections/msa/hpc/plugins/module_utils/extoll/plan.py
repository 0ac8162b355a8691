# SPDX-License-Identifier: GPL-3.0-or-later
"""Routing plans: compute a fabric's tables with an engine and prove them deadlock-free, for the EMP and the module."""
from __future__ import annotations

from ansible_collections.msa.hpc.plugins.module_utils.extoll import deadlock as D
from ansible_collections.msa.hpc.plugins.module_utils.extoll import hierarchy as H
from ansible_collections.msa.hpc.plugins.module_utils.extoll import routing as R
from ansible_collections.msa.hpc.plugins.module_utils.extoll import topology as T


class PlanRefused(R.RoutingError):
    """No plan for this fabric: nothing discovered, or no engine whose tables can be proved deadlock-free."""


def check_routes(fab, port, vcs=None, algorithm=None):
    """Prove a table (see deadlock.prove): every route reaches its destination, and the channel-dependency
    graph on virtual channels is acyclic. ``vcs``: None (one VC), ``"dateline"`` or ``"layers"``.

    Returns the certificate with the summary keys ``algorithm, nodes, links, deadlock_free, virtual_channels``.
    """
    R.need_numpy()
    cert = D.prove(fab, port, vcs or "single")
    cert.update(algorithm=algorithm, nodes=int(fab.n), links=int((fab.nbr >= 0).sum() // 2))
    return summary(cert)


def summary(cert):
    """The certificate plus the summary keys the EMP and the module report."""
    cert["deadlock_free"] = bool(cert["acyclic"] and cert["reachable"])
    cert["virtual_channels_available"] = cert["virtual_channels"]
    cert["virtual_channels"] = cert["virtual_channels_used"]
    return cert


def plan(fab, algorithm, root=None, fallback=(), vcs=None, compute_fn=None):
    """Compute a table and prove it deadlock-free: ``(port, certificate)``.

    The routes of ``algorithm`` are spread over virtual channels when they need it (dateline or up*/down*
    layers); when they cannot be, the engines of ``fallback`` are tried in order (OpenSM's ``-R a,b``).
    Raises RoutingError (a deadlock.Refused) naming every algorithm tried and the channels on its cycle.
    """
    R.need_numpy()
    engines = [R.algorithm_name(algorithm)] + [R.algorithm_name(e) for e in fallback or ()]
    if compute_fn is None:
        def compute_fn(f, name):
            return R.compute(f, name, root)
    port, cert = D.safe_plan(fab, list(dict.fromkeys(engines)), D.MODEL_VCS if vcs is None else vcs, root,
                             compute=compute_fn)
    return port, summary(cert)


def choose_algorithm(routing, configured, mode, expected):
    """The engine a run uses: the request's, else the EMP's configured one, else up*/down* in auto mode (or
    without a definition), else the definition's (per block when it nests blocks)."""
    if routing:
        return R.algorithm_name(routing)
    if configured:
        return R.algorithm_name(configured)
    if mode == "auto" or expected is None:
        return "UpDown"
    return H.PER_BLOCK if H.is_hierarchical(expected) else expected.routing


def route_topology(topo, algorithm, fallback=(), vcs=None, root=None):
    """``(fab, port, certificate)`` of a topology; PerBlock routes each block by its own algorithm."""
    fab = R.Fabric.from_topology(topo)
    run = H.engine(topo) if algorithm == H.PER_BLOCK else None
    compute_fn = run if run is not None else (lambda f, name: R.compute(f, name, root))
    port, cert = plan(fab, algorithm, root=root, fallback=fallback, vcs=vcs, compute_fn=compute_fn)
    if run is not None and cert["algorithm"] == H.PER_BLOCK:
        cert["blocks"] = run.algorithms
    return fab, port, cert


def fabric_plan(expected, discovered, routing=None, mode="auto", fallback=(), vcs=None, root=None,
                configured=None, route=route_topology):
    """The plan of a discovered fabric (Topology) against its definition (Topology or None): a dict with
    ``algorithm, mode, summary, certificate, tables, dot, comparison, fabric, port, topology`` (``waiting`` and no
    tables while a topology-mode definition still lacks nodes or links). ``route`` is route_topology or a caching
    stand-in with its signature. Raises PlanRefused when nothing was discovered or no engine is deadlock-free."""
    comparison = T.compare(expected, discovered) if expected is not None else None
    algorithm = choose_algorithm(routing, configured, mode, expected)
    missing = comparison is not None and (comparison["missing_nodes"] or comparison["missing_links"])
    if mode == "topology" and missing:
        return {"algorithm": algorithm, "mode": mode, "summary": None, "tables": {}, "dot": None,
                "comparison": comparison, "waiting": True, "fabric": None, "port": None, "topology": None}
    # Coordinates (for DimensionOrder) come from the definition when the fabric matches it.
    topo = expected if comparison is not None and T.matches(comparison) else discovered
    if not topo.nodes:
        raise PlanRefused("no nodes discovered")
    if algorithm == H.PER_BLOCK and topo is not expected:
        algorithm = expected.routing if expected is not None else "UpDown"
    try:
        fab, port, cert = route(topo, algorithm, fallback, vcs, root)
    except R.RoutingError as exc:
        raise PlanRefused("routing %s refused, nothing installed: %s" % (algorithm, exc))
    types = {nid: node.type for nid, node in topo.nodes.items()}
    return {"algorithm": cert["algorithm"], "mode": mode, "summary": cert, "certificate": cert,
            "fabric": fab, "port": port,
            "tables": {str(k): {str(d): p for d, p in v.items()} for k, v in R.tables(fab, port).items()},
            "dot": R.to_dot(fab, port, algorithm=cert["algorithm"], types=types), "comparison": comparison,
            "topology": topo}
