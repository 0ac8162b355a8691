# SPDX-License-Identifier: GPL-3.0-or-later
"""Slurm's topology.conf (topology/tree) from an EXTOLL fabric description, so jobs are packed close together.

Slurm's tree plugin places a job under the lowest switch that holds enough nodes. An EXTOLL torus has no
switches, so the tree is made of the fabric's own structure: the .td blocks (Figure 3: SDV and FS inside SUB
inside top) and, inside a block with coordinates, recursive bisection of the coordinate box along its longest
dimension until a group holds at most ``leaf_size`` nodes. Nodes under one switch are then neighbours on the
torus (a 2x2 face, a 2x2x2 cube, ...), and the number of switch levels a job spans bounds its hop distance.
"""
from __future__ import annotations

from ansible_collections.msa.hpc.plugins.module_utils import _hostlist as HL


class _Switch:
    def __init__(self, name, nodes=(), children=()):
        self.name, self.nodes, self.children = name, list(nodes), list(children)


def _bisect(name, members, leaf_size):
    """members: [(coordinate tuple, host)] → a switch tree (a leaf when it holds at most leaf_size hosts)."""
    if len(members) <= leaf_size:
        return _Switch(name, [host for coord, host in members])
    dims = len(members[0][0])
    spans = [len({coord[d] for coord, host in members}) for d in range(dims)]
    d = max(range(dims), key=lambda i: (spans[i], -i))
    values = sorted({coord[d] for coord, host in members})
    if len(values) < 2:  # every host at the same coordinate along every dimension: split the list
        half = len(members) // 2
        low, high = members[:half], members[half:]
    else:
        cut = values[len(values) // 2]
        low = [m for m in members if m[0][d] < cut]
        high = [m for m in members if m[0][d] >= cut]
    return _Switch(name, children=[_bisect(name + "0", low, leaf_size), _bisect(name + "1", high, leaf_size)])


def _block_switch(topo, name, hosts, leaf_size, prefix):
    block = topo.blocks[name]
    switch_name = "%s_%s" % (prefix, name)
    children, placed = [], []
    for coord, member in block.members:
        if isinstance(member, str):
            children.append(_block_switch(topo, member, hosts, leaf_size, prefix))
        elif member in hosts:
            placed.append((tuple(coord), hosts[member]))
    if not children:
        return _bisect(switch_name, placed, leaf_size)
    if placed:
        children.append(_bisect(switch_name + "_nodes", placed, leaf_size))
    return _Switch(switch_name, children=children)


def _prune(switch):
    """Drop empty switches and collapse a switch that has a single child switch and no nodes."""
    switch.children = [c for c in (_prune(c) for c in switch.children) if c is not None]
    if not switch.nodes and not switch.children:
        return None
    if not switch.nodes and len(switch.children) == 1:
        return switch.children[0]
    return switch


def tree(topo, hosts, others=(), leaf_size=4, prefix="extoll"):
    """topology.conf text.

    ``topo``: the fabric's topology.Topology; ``hosts``: node id → Slurm node name for the fabric's Slurm nodes
    (NAM and GCE devices are not Slurm nodes and are left out); ``others``: Slurm nodes off the fabric, put
    under their own switch so every node is reachable from the top switch.
    """
    if int(leaf_size) < 1:
        raise ValueError("leaf_size must be at least 1, got %r" % (leaf_size,))
    root = topo.root
    if root is not None:
        top = _block_switch(topo, root, hosts, int(leaf_size), prefix)
    else:
        top = _Switch(prefix, sorted(hosts.values(), key=HL.natural_key))
    top = _prune(top)
    if others:
        rest = _Switch(prefix + "_none", sorted(others, key=HL.natural_key))
        top = _Switch(prefix + "_all", children=[c for c in (top, rest) if c is not None])
    lines = ["# Slurm topology/tree from the EXTOLL fabric description: switches are blocks of the .td and",
             "# bisections of their coordinates, so a job under one switch sits on neighbouring nodes."]

    def emit(switch):
        for child in switch.children:
            emit(child)
        if switch.nodes:
            lines.append("SwitchName=%s Nodes=%s" % (switch.name, HL.compress(switch.nodes)))
        else:
            lines.append("SwitchName=%s Switches=%s" % (switch.name, ",".join(c.name for c in switch.children)))

    if top is not None:
        emit(top)
    return "\n".join(lines) + "\n"
