# SPDX-License-Identifier: GPL-3.0-or-later
"""Per-block routing of a hierarchical topology definition (seed 004 §2.1, Figure 3).

Every ``topology`` block is routed by its own algorithm on the links among its own nodes; the table entry of
node u towards node t comes from the lowest block that holds both (a pair inside the SDV hypercube follows the
hypercube's dimension order, a pair between the SDV and the FS mesh follows SUB's shortest paths, a pair with
the NAM follows the top level). The combined table is then proved like any other (deadlock.safe_plan).
"""
from __future__ import annotations

from ansible_collections.msa.hpc.plugins.module_utils.extoll import routing as R
from ansible_collections.msa.hpc.plugins.module_utils.extoll import topology as T

try:
    import numpy as np
except ImportError:  # pragma: no cover - the sanity import test runs without numpy
    np = None

PER_BLOCK = "PerBlock"


def block_nodes(topo):
    """Block name → set of node ids beneath it (recursively)."""
    out = {}

    def walk(name, trail):
        if name in out:
            return out[name]
        if name in trail:
            raise R.RoutingError("topology block %s contains itself" % name)
        members = set()
        for coord, member in topo.blocks[name].members:
            members |= {member} if isinstance(member, int) else walk(member, trail | {name})
        out[name] = members
        return members

    for name in topo.block_order:
        walk(name, frozenset())
    return out


def _depths(topo):
    depth = {}

    def down(name, d):
        depth[name] = d
        for coord, member in topo.blocks[name].members:
            if isinstance(member, str):
                down(member, d + 1)

    if topo.root:
        down(topo.root, 0)
    return depth


def sub_topology(topo, name, nodes):
    """The block as a topology of its own: its nodes, the links among them and (for a leaf block) its block."""
    sub = T.Topology("%s block %s" % (topo.source, name))
    for nid in sorted(nodes):
        sub.nodes[nid] = topo.nodes[nid]
    block = topo.blocks[name]
    if all(isinstance(m, int) for c, m in block.members):
        sub.blocks[name] = block
        sub.block_order.append(name)
    sub.links = [link for link in topo.links if link[0] in nodes and link[2] in nodes]
    return sub


def is_hierarchical(topo):
    return len(topo.blocks) > 1


def compute(topo, fab, overrides=None):
    """``(port, algorithms)``: the combined table over ``fab`` (built from ``topo``) and block → algorithm.

    ``overrides`` maps block names to algorithms that replace the definition's choice.
    """
    members = block_nodes(topo)
    depth = _depths(topo)
    port = np.full((fab.n, fab.n), -1, dtype=np.int8)
    algorithms = {}
    for name in sorted(depth, key=lambda b: depth[b]):
        nodes = members[name]
        algorithm = R.algorithm_name((overrides or {}).get(name) or topo.blocks[name].routing or "UpDown")
        algorithms[name] = algorithm
        if len(nodes) < 2:
            continue
        sub = sub_topology(topo, name, nodes)
        sub_fab = R.Fabric.from_topology(sub)
        if not sub_fab.is_connected():
            raise R.RoutingError("topology block %s is not connected by its own links, so it cannot be routed "
                                 "on its own (%s)" % (name, algorithm))
        if algorithm == "DimensionOrder" and sub_fab.coords is None:
            raise R.RoutingError("topology block %s routes DimensionOrder but holds sub-blocks, not nodes with "
                                 "coordinates (use ShortestPath or UpDown between blocks)" % name)
        try:
            sub_port = R.compute(sub_fab, algorithm)
        except R.RoutingError as exc:
            raise R.RoutingError("topology block %s (%s): %s" % (name, algorithm, exc))
        rows = np.array([fab.node_index(i) for i in sub_fab.ids.tolist()], dtype=np.int64)
        port[np.ix_(rows, rows)] = np.where(np.eye(rows.size, dtype=bool), -1, sub_port)
    return port, algorithms


def engine(topo, overrides=None):
    """A ``compute(fab, name)`` callable for deadlock.safe_plan that routes ``PerBlock`` by the blocks and
    every other name over the whole fabric; it records the block algorithms in ``.algorithms``."""

    def run(fab, name):
        if name == PER_BLOCK:
            port, run.algorithms = compute(topo, fab, overrides)
            return port
        return R.compute(fab, name)

    run.algorithms = {}
    return run
