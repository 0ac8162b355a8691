# SPDX-License-Identifier: GPL-3.0-or-later
"""Slurm's topology.yaml (25.05 and later: one network topology per partition) from the MSA's fabrics: the
EXTOLL torus modules as `block` topologies cut from their torus coordinates, InfiniBand modules as `tree`s.

Slurm's rules followed here (topology.yaml(5) and src/plugins/topology/block/block_record.c, tag slurm-26-05-3-1):
- ``topology`` must be the first key of each entry, so the YAML keeps insertion order (never sort_keys);
- ``block_sizes[0]`` is the base block size in nodes, every further size is it times a power of two, at most 2**15;
- Slurm aggregates the blocks *in file order*: level k joins each aligned run of 2**k consecutive blocks. The cut
  below therefore orders the blocks so that every such run is one compact box of the torus;
- a switch name is at most 64 characters; block, switch and topology names are unique.
"""
from __future__ import annotations

import re

try:  # PyYAML comes with ansible-core on the controller, where this runs (filter msa.hpc.slurm_topology)
    import yaml
except ImportError:  # pragma: no cover - a node without PyYAML never imports this module
    yaml = None

from ansible_collections.msa.hpc.plugins.module_utils import _hostlist as HL

MAX_BLOCK_LEVEL = 15          # block_record.c: block_level > 15 is an invalid BlockSizes value
MAX_SWITCH_NAME = 64          # topology.yaml(5): a switch name "cannot be longer than 64 characters"
DEFAULT_TOPOLOGY = "flat"     # the cluster default: partitions without a topology keep Slurm's flat best fit
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*$")


class TopologyError(ValueError):
    """The topology description has problems; ``problems`` holds one sentence each, naming the field and value."""

    def __init__(self, problems):
        self.problems = list(problems)
        super().__init__("; ".join(self.problems))


def _split(members):
    """Cut members ``[(coordinate, node)]`` in two along the dimension with the most distinct coordinates."""
    dims = max(len(coord) for coord, node in members)
    spans = [len({coord[d] if d < len(coord) else 0 for coord, node in members}) for d in range(dims)]
    axis = max(range(dims), key=lambda d: (spans[d], -d))
    return sorted(members, key=lambda m: ((m[0][axis] if axis < len(m[0]) else 0), m[0], HL.natural_key(m[1])))


def _cut(members, capacity, base):
    """Blocks (lists of node names) for ``members`` in a box of ``capacity`` nodes (base * 2**k): the first half
    of the box is filled before the second, so only the last blocks of the whole cut can be short."""
    if capacity <= base:
        return [[node for coord, node in members]]
    ordered = _split(members)
    half = capacity // 2
    blocks = _cut(ordered[:half], half, base)
    if len(ordered) > half:
        blocks += _cut(ordered[half:], half, base)
    return blocks


def block_cut(nodes, base):
    """``(blocks, block_sizes)`` for ``nodes`` (name → coordinate tuple) and a base block of ``base`` nodes.

    Recursive bisection of the coordinate box, always across its widest dimension, into a binary tree of
    capacity ``base * 2**levels``: every aligned run of 2**k consecutive blocks is one subtree, i.e. one box of
    neighbouring nodes, and that is the run Slurm aggregates into a level-k block. All blocks are full but the
    last. ``block_sizes`` are base, 2*base, ... up to the whole group, so a job of any size finds its level.
    Torus wrap-around links are not used: a block never spans more than its coordinate box (safe, not optimal).
    """
    count = len(nodes)
    levels = 0
    while base << levels < count:
        levels += 1
    members = [(tuple(coord), name) for name, coord in nodes.items()]
    blocks = _cut(members, base << levels, base)
    return [sorted(block, key=HL.natural_key) for block in blocks], [base << k for k in range(levels + 1)]


def _check_name(value, field, problems, limit=None):
    if not isinstance(value, str) or not _NAME.match(value):
        problems.append("%s: %r is not a name (letters, digits, '_' and '-', starting with a letter or digit)"
                        % (field, value))
        return False
    if limit and len(value) > limit:
        problems.append("%s: %r is longer than Slurm's %d characters" % (field, value, limit))
        return False
    return True


def _block_topology(group, where, problems):
    base = group.get("block_size")
    if isinstance(base, bool) or not isinstance(base, int) or base < 1:
        problems.append("%s.block_size: %r is not a positive number of nodes" % (where, base))
        return None
    nodes = group.get("nodes")
    if not isinstance(nodes, dict) or not nodes:
        problems.append("%s.nodes: %r is not a non-empty mapping node → torus coordinate" % (where, nodes))
        return None
    for name, coord in sorted(nodes.items()):
        if (not isinstance(coord, (list, tuple)) or not coord
                or any(isinstance(c, bool) or not isinstance(c, int) or c < 0 for c in coord)):
            problems.append("%s.nodes.%s: %r is not a coordinate (a list of non-negative integers)"
                            % (where, name, coord))
            return None
    blocks, sizes = block_cut(nodes, base)
    if len(sizes) - 1 > MAX_BLOCK_LEVEL:
        problems.append("%s.block_size: %r gives %d block levels for %d nodes; Slurm allows %d (a larger base block)"
                        % (where, base, len(sizes) - 1, len(nodes), MAX_BLOCK_LEVEL))
        return None
    return {"block_sizes": sizes,
            "blocks": [{"block": "%s_b%d" % (group["name"], i), "nodes": HL.compress(block)}
                       for i, block in enumerate(blocks)]}


def _tree_switches(group, where, problems):
    """The switch records of a tree: the inventory's switches cut down to the group's nodes, or one switch."""
    nodes = list(group.get("nodes") or [])
    if not nodes:
        problems.append("%s.nodes: %r holds no node" % (where, group.get("nodes")))
        return None
    switches = group.get("switches")
    if not switches:
        return [{"switch": "%s_sw" % group["name"], "nodes": HL.compress(nodes)}]
    if not isinstance(switches, dict):
        problems.append("%s.switches: %r is not a mapping switch name → {nodes, switches}" % (where, switches))
        return None
    wanted, fabric_hosts = set(nodes), set(group.get("fabric_hosts") or nodes)
    leaf_of, children, leaves, before = {}, {}, {}, len(problems)
    for name, spec in sorted(switches.items()):
        field = "%s.switches.%s" % (where, name)
        if not _check_name(name, field, problems, MAX_SWITCH_NAME):
            continue
        if not isinstance(spec, dict) or not (spec.get("nodes") or spec.get("switches")):
            problems.append("%s: %r names neither nodes nor switches" % (field, spec))
            continue
        if spec.get("nodes") and spec.get("switches"):
            problems.append("%s: %r names both nodes and switches (a switch is a leaf or not)" % (field, spec))
            continue
        try:
            members = HL.expand(spec.get("nodes") or spec.get("switches"))
        except HL.HostlistError as exc:
            problems.append("%s: %s" % (field, exc))
            continue
        if spec.get("switches"):
            unknown = [m for m in members if m not in switches]
            if unknown:
                problems.append("%s.switches: %s is not a switch of the fabric" % (field, ", ".join(unknown)))
            children[name] = [m for m in members if m in switches]
            continue
        for host in members:
            if host not in fabric_hosts:
                problems.append("%s.nodes: %r is not a host on the fabric" % (field, host))
            elif host in leaf_of:
                problems.append("%s.nodes: %r is already under switch %s" % (field, host, leaf_of[host]))
            else:
                leaf_of[host] = name
        leaves[name] = [h for h in members if h in wanted]
    for host in sorted(wanted - set(leaf_of), key=HL.natural_key):
        problems.append("%s.switches: node %s of partition %s is under no switch" % (where, host, group["partition"]))
    if len(problems) > before:
        return None
    return _pruned_tree(leaves, children, where, problems)


def _pruned_tree(leaves, children, where, problems):
    """Switch records of the tree under the single top switch, leaves without the group's nodes dropped."""
    parents = {}
    for parent, kids in sorted(children.items()):
        for kid in kids:
            if kid in parents:
                problems.append("%s.switches.%s: switch %s is already under %s" % (where, parent, kid, parents[kid]))
                return None
            parents[kid] = parent
    every = set(leaves) | set(children)
    roots = sorted(every - set(parents))
    if len(roots) != 1:
        problems.append("%s.switches: the switches form %d trees (tops: %s); Slurm places a job under one top switch"
                        % (where, len(roots), ", ".join(roots) or "none, they loop"))
        return None
    records, seen = [], set()

    def keep(name):
        # every switch has at most one parent and the top none, so a walk from the top cannot loop
        seen.add(name)
        if name in leaves:
            if leaves[name]:
                records.append({"switch": name, "nodes": HL.compress(leaves[name])})
            return bool(leaves[name])
        kept = [kid for kid in children[name] if keep(kid)]
        if kept:
            records.append({"switch": name, "children": ",".join(kept)})
        return bool(kept)

    keep(roots[0])
    if every - seen:
        problems.append("%s.switches: %s not under the top switch %s (they loop)"
                        % (where, ", ".join(sorted(every - seen)), roots[0]))
        return None
    return records[::-1]


def _plain(value):
    """Plain str, int, bool, list and dict copies: yaml.safe_dump refuses subclasses (Ansible's tagged strings)."""
    if isinstance(value, dict):
        return {_plain(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, int):
        return int(value)
    return str(value)


def build(groups, default=DEFAULT_TOPOLOGY):
    """``{"text": topology.yaml, "partitions": {partition: topology name}}`` for ``groups``.

    Each group is one module's topology, named by the partitions that use it: ``{"name", "partitions": [...],
    "kind": "block", "nodes": {node: coordinate}, "block_size": base}`` or ``{"name", "partitions", "kind":
    "tree", "nodes": [node, ...], "switches": {switch: {"nodes": hostlist} | {"switches": hostlist}} (optional),
    "fabric_hosts": [...] (optional: the hosts the switches may name)}``. The cluster default is a ``flat``
    topology (named ``flat`` unless told): partitions outside every group, and Slurm's cluster-wide operations,
    keep the best fit they had without topology. Raises TopologyError listing every problem, each naming the
    field and the value.
    """
    problems, entries, partitions = [], [], {}
    names = {default}
    _check_name(default, "default", problems)
    for index, group in enumerate(groups or []):
        where = "topologies[%d]" % index
        if not isinstance(group, dict):
            problems.append("%s: %r is not a mapping" % (where, group))
            continue
        name, kind = group.get("name"), group.get("kind")
        where = "topologies.%s" % name if isinstance(name, str) else where
        if not _check_name(name, where + ".name", problems):
            continue
        if name in names:
            problems.append("%s.name: %r is defined twice" % (where, name))
            continue
        parts = group.get("partitions")
        if not isinstance(parts, (list, tuple)) or not parts:
            problems.append("%s.partitions: %r names no partition" % (where, parts))
            continue
        taken = [p for p in parts if p in partitions]
        if taken or not all(_check_name(p, where + ".partitions", problems) for p in parts):
            for p in taken:
                problems.append("%s.partitions: %r already has topology %s" % (where, p, partitions[p]))
            continue
        group = dict(group, partition=",".join(parts))
        if kind == "block":
            body = _block_topology(group, where, problems)
        elif kind == "tree":
            body = _tree_switches(group, where, problems)
            body = {"switches": body} if body else None
        else:
            problems.append("%s.kind: %r is not block or tree" % (where, kind))
            continue
        if body is None:
            continue
        names.add(name)
        partitions.update((p, name) for p in parts)
        entries.append({"topology": name, "cluster_default": False, kind: body})
    if problems:
        raise TopologyError(problems)
    entries.insert(0, {"topology": default, "cluster_default": True, "flat": True})
    if yaml is None:
        raise TopologyError(["PyYAML is not installed: it writes topology.yaml (pip install pyyaml)"])
    text = yaml.safe_dump(_plain(entries), sort_keys=False, default_flow_style=False, explicit_start=True)
    return {"text": text, "partitions": _plain(dict(sorted(partitions.items())))}
