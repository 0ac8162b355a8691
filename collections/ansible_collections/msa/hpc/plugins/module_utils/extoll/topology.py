# SPDX-License-Identifier: GPL-3.0-or-later
"""EXTOLL topology model: the .td format of seed 004 Figure 3, its YAML form, a generator and a comparison."""
from __future__ import annotations

import itertools
import re

TYPES = ("Mesh", "Torus", "Hypercube", "AllToAll")
ROUTINGS = ("DimensionOrder", "ShortestPath", "UpDown")
# Node type from GUID bits 23:20 (seed 004 §2.1).
GUID_TYPES = {0x0: "Tourmalet", 0xF: "NAM", 0xE: "GCE"}
# Ports of one EXTOLL chip (Tourmalet has 7 link ports); ports in a .td file must be below this.
MAX_PORTS = 12

_COORD_RE = re.compile(r"^\(\s*(-?\d+(?:\s*,\s*-?\d+)*)\s*\)\s+(\S+)$")
_LINK_RE = re.compile(r"^(\S+)\s+(\S+)\s*<->\s*(\S+)\s+(\S+)$")


class TopologyError(ValueError):
    """A syntax or semantic error in a topology definition; str() is ``file:line: reason``."""

    def __init__(self, reason, file=None, line=None):
        self.file = file or "<topology>"
        self.line = line
        self.reason = reason
        super().__init__("%s:%s: %s" % (self.file, line if line is not None else "?", reason))


def guid_type(guid):
    """Device type encoded in bits 23:20 of a GUID (``Tourmalet``, ``NAM``, ``GCE`` or ``unknown(0xN)``)."""
    nibble = (int(guid) >> 20) & 0xF
    return GUID_TYPES.get(nibble, "unknown(0x%x)" % nibble)


class Node:
    __slots__ = ("id", "guid", "marker", "line")

    def __init__(self, node_id, guid, marker=None, line=None):
        self.id, self.guid, self.marker, self.line = int(node_id), int(guid), marker, line

    @property
    def type(self):
        return guid_type(self.guid)

    def as_dict(self):
        out = {"id": self.id, "guid": "0x%x" % self.guid, "type": self.type}
        if self.marker:
            out["t"] = self.marker
        return out


class Block:
    """One ``topology NAME`` block: members are ``(coordinate tuple, node id or sub-topology name)``."""

    __slots__ = ("name", "type", "dimension", "routing", "members", "member_lines", "line")

    def __init__(self, name, type_=None, dimension=None, routing=None, line=None):
        self.name, self.type, self.dimension, self.routing = name, type_, dimension, routing
        self.members = []
        self.member_lines = []
        self.line = line

    def add(self, coord, member, line=None):
        self.members.append((coord, member))
        self.member_lines.append(line)

    def sizes(self):
        """Extent per dimension (max coordinate + 1); a hypercube is 2 in every dimension."""
        if self.type == "Hypercube":
            return (2,) * (self.dimension or 0)
        if not self.members:
            return ()
        return tuple(max(c[d] for c, member in self.members) + 1 for d in range(self.dimension))


class Topology:
    """Inventory (node id → Node), topology blocks (name → Block), physical links and where it came from.

    A link is ``(node_a, port_a, node_b, port_b)``; ``link_lines`` keeps the source line of each.
    """

    def __init__(self, source="<topology>"):
        self.source = source
        self.nodes = {}
        self.blocks = {}
        self.block_order = []
        self.links = []
        self.link_lines = []

    # -- derived views -----------------------------------------------------------------
    @property
    def root(self):
        """Name of the top block: the one no other block contains (None without blocks)."""
        referenced = {m for b in self.blocks.values() for coord, m in b.members if isinstance(m, str)}
        roots = [n for n in self.block_order if n not in referenced]
        return roots[0] if roots else None

    @property
    def routing(self):
        root = self.root
        return self.blocks[root].routing if root else "UpDown"

    def by_guid(self):
        return {n.guid: n for n in self.nodes.values()}

    def leaf_coordinates(self):
        """Node id → (block name, coordinate) of the block that places the node directly."""
        out = {}
        for block in self.blocks.values():
            for coord, member in block.members:
                if isinstance(member, int):
                    out[member] = (block.name, coord)
        return out

    def regular(self):
        """``(type, sizes, {node id: coordinate})`` when the whole fabric is one Mesh/Torus/Hypercube block
        holding every node, else None. Dimension-order routing needs this."""
        if len(self.blocks) != 1:
            return None
        block = self.blocks[self.block_order[0]]
        if block.type not in ("Mesh", "Torus", "Hypercube"):
            return None
        coords = {m: c for c, m in block.members if isinstance(m, int)}
        if set(coords) != set(self.nodes):
            return None
        return block.type, block.sizes(), coords

    def adjacency(self):
        """Node id → {port: (neighbour id, neighbour port)}."""
        adj = {nid: {} for nid in self.nodes}
        for a, pa, b, pb in self.links:
            adj.setdefault(a, {})[pa] = (b, pb)
            adj.setdefault(b, {})[pb] = (a, pa)
        return adj

    def as_dict(self):
        """The YAML/dict form (inverse of :func:`from_dict`)."""
        return {
            "inventory": [self.nodes[i].as_dict() for i in sorted(self.nodes)],
            "topologies": [{"name": b.name, "type": b.type, "dimension": b.dimension, "routing": b.routing,
                            "members": [{"coord": list(c), "node": m} for c, m in b.members]}
                           for b in (self.blocks[n] for n in self.block_order)],
            "links": [format_link(link) for link in self.links],
        }


def format_link(link):
    a, pa, b, pb = link
    return "%s %s <-> %s %s" % (a, pa, pb, b)


def _parse_int(text):
    return int(text, 0)


# -- .td reader ------------------------------------------------------------------------------
def parse_td(text, source="<td>"):
    """Parse a .td file's text; raise TopologyError(file, line, reason) on the first problem."""
    topo = Topology(source)
    state, block, block_line = None, None, None
    guids = {}
    links_seen = False
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        words = line.split()
        head = words[0]

        def fail(reason, _line=lineno):
            raise TopologyError(reason, source, _line)

        if state is None:
            if line == "inventory":
                if topo.nodes:
                    fail("a second inventory section (the first one starts earlier)")
                state, block_line = "inventory", lineno
            elif head == "topology":
                if len(words) != 2:
                    fail("expected 'topology NAME', got %r" % line)
                name = words[1]
                if name in topo.blocks:
                    fail("topology %r is already defined at line %d" % (name, topo.blocks[name].line))
                if re.match(r"^-?\d+$", name) or name.startswith("0x"):
                    fail("topology name %r looks like a node id; names must start with a letter" % name)
                block = Block(name, line=lineno)
                state, block_line = "topology", lineno
            elif line == "links":
                if links_seen:
                    fail("a second links section")
                links_seen = True
                state, block_line = "links", lineno
            else:
                fail("unexpected %r outside a section (expected inventory, topology NAME or links)" % line)
        elif state == "inventory":
            if line == "inventoryend":
                state = None
                continue
            if len(words) not in (2, 3):
                fail("inventory line must be 'GUID NODEID [t=NAME]', got %r" % line)
            try:
                guid, nid = _parse_int(words[0]), _parse_int(words[1])
            except ValueError:
                fail("inventory line must be 'GUID NODEID [t=NAME]', got %r" % line)
            if guid < 0 or guid >= 1 << 64 or nid < 0:
                fail("GUID %s or node id %s out of range" % (words[0], words[1]))
            marker = None
            if len(words) == 3:
                if not words[2].startswith("t=") or len(words[2]) < 3:
                    fail("unknown inventory parameter %r (expected t=NAME)" % words[2])
                marker = words[2][2:]
            if guid in guids:
                fail("GUID 0x%x is already in the inventory at line %d" % (guid, guids[guid]))
            if nid in topo.nodes:
                fail("node id %d is already in the inventory at line %d" % (nid, topo.nodes[nid].line))
            guids[guid] = lineno
            topo.nodes[nid] = Node(nid, guid, marker, lineno)
        elif state == "topology":
            if line == "topologyend":
                if block.type is None or block.dimension is None or block.routing is None:
                    missing = [k for k in ("type", "dimension", "routing") if getattr(block, k) is None]
                    fail("topology %r ends without %s" % (block.name, ", ".join(missing)))
                topo.blocks[block.name] = block
                topo.block_order.append(block.name)
                state, block = None, None
                continue
            if head in ("type", "dimension", "routing"):
                if len(words) != 2:
                    fail("expected '%s VALUE', got %r" % (head, line))
                if getattr(block, head) is not None:
                    fail("%s given twice in topology %r" % (head, block.name))
                if block.members:
                    fail("%s must come before the coordinates of topology %r" % (head, block.name))
                value = words[1]
                if head == "type":
                    if value not in TYPES:
                        fail("unknown topology type %r (expected one of %s)" % (value, ", ".join(TYPES)))
                    block.type = value
                elif head == "routing":
                    if value not in ROUTINGS:
                        fail("unknown routing %r (expected one of %s)" % (value, ", ".join(ROUTINGS)))
                    block.routing = value
                else:
                    if not value.isdigit() or int(value) < 1:
                        fail("dimension must be a positive integer, got %r" % value)
                    block.dimension = int(value)
                continue
            match = _COORD_RE.match(line)
            if not match:
                fail("expected a coordinate line '(x,...) MEMBER' or topologyend, got %r" % line)
            if block.dimension is None:
                fail("coordinates before 'dimension' in topology %r" % block.name)
            coord = tuple(int(v) for v in match.group(1).split(","))
            member = match.group(2)
            member = int(member, 0) if re.match(r"^(0x[0-9a-fA-F]+|\d+)$", member) else member
            _check_coordinate(block, coord, fail)
            block.add(coord, member, lineno)
        elif state == "links":
            if line == "linksend":
                state = None
                continue
            match = _LINK_RE.match(line)
            if not match:
                fail("link line must be 'NODE PORT <-> PORT NODE', got %r" % line)
            try:
                a, pa, pb, b = (_parse_int(v) for v in match.groups())
            except ValueError:
                fail("link line must be 'NODE PORT <-> PORT NODE' with integers, got %r" % line)
            topo.links.append((a, pa, b, pb))
            topo.link_lines.append(lineno)
    if state is not None:
        raise TopologyError("section %s opened here is never closed (missing %send)"
                            % ("%r" % block.name if state == "topology" else state,
                               state if state != "topology" else "topology"), source, block_line)
    validate(topo)
    return topo


def _check_coordinate(block, coord, fail):
    if len(coord) != block.dimension:
        fail("coordinate %s has %d values but topology %r has dimension %d"
             % (_fmt_coord(coord), len(coord), block.name, block.dimension))
    if any(c < 0 for c in coord):
        fail("coordinate %s of topology %r is negative" % (_fmt_coord(coord), block.name))
    if block.type == "Hypercube" and any(c > 1 for c in coord):
        fail("coordinate %s is outside hypercube %r (values must be 0 or 1)" % (_fmt_coord(coord), block.name))


def _fmt_coord(coord):
    return "(%s)" % ",".join(str(c) for c in coord)


def validate(topo):
    """Semantic checks across sections; raise TopologyError naming the line of the offending entry."""
    src = topo.source
    placed = {}
    contained = {}
    for block in (topo.blocks[n] for n in topo.block_order):
        seen_coords = {}
        for index, (coord, member) in enumerate(block.members):
            where = block.member_lines[index]
            if coord in seen_coords:
                raise TopologyError("coordinate %s used twice in topology %r" % (_fmt_coord(coord), block.name),
                                    src, where)
            seen_coords[coord] = member
            if isinstance(member, int):
                if member not in topo.nodes:
                    raise TopologyError("unknown node id %d in topology %r (not in the inventory)"
                                        % (member, block.name), src, where)
                if member in placed:
                    raise TopologyError("node %d is already placed in topology %r" % (member, placed[member]),
                                        src, where)
                placed[member] = block.name
            else:
                if member not in topo.blocks:
                    raise TopologyError("unknown sub-topology %r in topology %r" % (member, block.name), src, where)
                if member in contained:
                    raise TopologyError("sub-topology %r is already part of topology %r"
                                        % (member, contained[member]), src, where)
                if member == block.name:
                    raise TopologyError("topology %r contains itself" % member, src, where)
                contained[member] = block.name
    # Containment must be a tree (no cycles) with one root.
    for name in topo.blocks:
        seen, cur = set(), name
        while cur in contained:
            if cur in seen:
                raise TopologyError("topologies %s contain each other" % " -> ".join(sorted(seen)),
                                    src, topo.blocks[name].line)
            seen.add(cur)
            cur = contained[cur]
    roots = [n for n in topo.block_order if n not in contained]
    if len(roots) > 1:
        raise TopologyError("more than one top-level topology (%s); put them into one" % ", ".join(roots),
                            src, topo.blocks[roots[1]].line)
    ports = {}
    for (a, pa, b, pb), where in zip(topo.links, topo.link_lines):
        for nid in (a, b):
            if nid not in topo.nodes:
                raise TopologyError("link to a missing node %d (not in the inventory)" % nid, src, where)
        for nid, port in ((a, pa), (b, pb)):
            if not 0 <= port < MAX_PORTS:
                raise TopologyError("port %d of node %d is out of range 0..%d" % (port, nid, MAX_PORTS - 1),
                                    src, where)
        if a == b:
            raise TopologyError("link connects node %d to itself" % a, src, where)
        for nid, port in ((a, pa), (b, pb)):
            if (nid, port) in ports:
                raise TopologyError("port %d of node %d is used twice (already linked at line %s)"
                                    % (port, nid, ports[(nid, port)]), src, where)
            ports[(nid, port)] = where
    return topo


def load_td(path):
    """Read and parse a .td file."""
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except OSError as exc:
        raise TopologyError("cannot read topology file: %s" % exc.strerror, path, 0)
    return parse_td(text, source=path)


# -- .td writer ------------------------------------------------------------------------------
def to_td(topo):
    """Render a Topology as .td text that :func:`parse_td` reads back to the same model."""
    out = ["inventory"]
    for nid in sorted(topo.nodes):
        node = topo.nodes[nid]
        out.append("0x%x %d%s" % (node.guid, nid, " t=%s" % node.marker if node.marker else ""))
    out.append("inventoryend")
    for name in topo.block_order:
        block = topo.blocks[name]
        out += ["", "topology %s" % name, "type %s" % block.type, "dimension %d" % block.dimension,
                "routing %s" % block.routing]
        out += ["%s %s" % (_fmt_coord(c), m) for c, m in block.members]
        out.append("topologyend")
    out += ["", "links"] + [format_link(link) for link in topo.links] + ["linksend", ""]
    return "\n".join(out)


# -- YAML / dict form ------------------------------------------------------------------------
def from_dict(data, source="<topology>"):
    """Build a Topology from the YAML/dict form; errors carry the key path in place of a line.

    Form::

        inventory: [{guid: 0x649, id: 1}, {guid: 0xf00001, id: 129, t: NAM1}]
        topologies: [{name: SDV, type: Hypercube, dimension: 3, routing: DimensionOrder,
                      members: [{coord: [0, 0, 0], node: 1}, ...]}]   # node: an id or a topology name
        links: ["1 0 <-> 0 2", [1, 1, 1, 3], {a: 1, port_a: 2, b: 5, port_b: 2}]

    or ``generate: {type: Torus, dims: [4, 4], routing: DimensionOrder}`` for a regular topology.
    """
    if not isinstance(data, dict):
        raise TopologyError("topology must be a mapping, got %s" % type(data).__name__, source, "topology")
    if "generate" in data:
        gen = data["generate"] or {}
        try:
            return generate(gen.get("type", "Torus"), gen.get("dims") or [], routing=gen.get("routing"),
                            guid_base=int(str(gen.get("guid_base", 0x100)), 0), id_base=int(gen.get("id_base", 1)))
        except (TypeError, ValueError) as exc:
            raise TopologyError(str(exc), source, "generate")
    topo = Topology(source)
    for index, entry in enumerate(data.get("inventory") or []):
        where = "inventory[%d]" % index
        try:
            guid = int(str(entry["guid"]), 0)
            nid = int(str(entry["id"]), 0)
        except (KeyError, TypeError, ValueError):
            raise TopologyError("needs integer guid and id, got %r" % (entry,), source, where)
        if any(n.guid == guid for n in topo.nodes.values()):
            raise TopologyError("GUID 0x%x is already in the inventory" % guid, source, where)
        if nid in topo.nodes:
            raise TopologyError("node id %d is already in the inventory" % nid, source, where)
        topo.nodes[nid] = Node(nid, guid, entry.get("t") or entry.get("marker"), where)
    for index, entry in enumerate(data.get("topologies") or []):
        where = "topologies[%d]" % index
        if not isinstance(entry, dict) or not entry.get("name"):
            raise TopologyError("needs a name", source, where)
        block = Block(str(entry["name"]), entry.get("type"), entry.get("dimension"), entry.get("routing"), line=where)
        if block.type not in TYPES:
            raise TopologyError("type: unknown topology type %r (expected one of %s)" % (block.type, ", ".join(TYPES)),
                                source, where)
        if block.routing not in ROUTINGS:
            raise TopologyError("routing: unknown routing %r (expected one of %s)"
                                % (block.routing, ", ".join(ROUTINGS)), source, where)
        if not isinstance(block.dimension, int) or block.dimension < 1:
            raise TopologyError("dimension: must be a positive integer, got %r" % (block.dimension,), source, where)
        if block.name in topo.blocks:
            raise TopologyError("topology %r is defined twice" % block.name, source, where)
        for mindex, member in enumerate(entry.get("members") or []):
            mwhere = "%s.members[%d]" % (where, mindex)
            try:
                coord = tuple(int(c) for c in member["coord"])
                ref = member["node"]
                ref = int(ref) if not isinstance(ref, str) or ref.isdigit() else ref
            except (KeyError, TypeError, ValueError):
                raise TopologyError("needs coord (list of integers) and node, got %r" % (member,), source, mwhere)

            def fail(reason, _w=mwhere):
                raise TopologyError(reason, source, _w)
            _check_coordinate(block, coord, fail)
            block.add(coord, ref, mwhere)
        topo.blocks[block.name] = block
        topo.block_order.append(block.name)
    for index, entry in enumerate(data.get("links") or []):
        where = "links[%d]" % index
        try:
            if isinstance(entry, str):
                match = _LINK_RE.match(entry.strip())
                if not match:
                    raise ValueError
                a, pa, pb, b = (int(v, 0) for v in match.groups())
            elif isinstance(entry, dict):
                a, pa, b, pb = (int(entry[k]) for k in ("a", "port_a", "b", "port_b"))
            else:
                a, pa, pb, b = (int(v) for v in entry)
        except (KeyError, TypeError, ValueError):
            raise TopologyError("link must be 'NODE PORT <-> PORT NODE', [a, port_a, port_b, b] or a mapping, got %r"
                                % (entry,), source, where)
        topo.links.append((a, pa, b, pb))
        topo.link_lines.append(where)
    return validate(topo)


# -- generator -------------------------------------------------------------------------------
def generate(kind, dims, routing=None, guid_base=0x100, id_base=1):
    """A regular Mesh, Torus or Hypercube with its inventory, one block ``top`` and all links.

    ``dims`` are the extents per dimension (for a Hypercube, the number of dimensions as one int or a
    list of 2s). Node ids are ``id_base`` + the row-major index with dimension 0 varying fastest; GUIDs are
    ``guid_base + index`` (Tourmalet type). Port numbering: in dimension d, port ``2d`` leads to the
    neighbour in the minus direction and port ``2d+1`` to the plus direction. A torus with extent 2 has two
    parallel links between the same pair; extent 1 adds no link in that dimension.
    """
    kind = {"mesh": "Mesh", "torus": "Torus", "hypercube": "Hypercube"}.get(str(kind).lower())
    if kind is None:
        raise ValueError("type must be Mesh, Torus or Hypercube")
    if kind == "Hypercube":
        dims = [2] * (dims if isinstance(dims, int) else len(dims))
    dims = [int(k) for k in dims]
    if not dims or any(k < 1 for k in dims):
        raise ValueError("dims must be a non-empty list of positive extents, got %r" % (dims,))
    topo = Topology("<generated %s %s>" % (kind, "x".join(map(str, dims))))
    coords = list(itertools.product(*(range(k) for k in reversed(dims))))
    coords = [tuple(reversed(c)) for c in coords]
    index = {c: i for i, c in enumerate(coords)}
    block = Block("top", kind, len(dims), routing or "DimensionOrder", line=None)
    for i, c in enumerate(coords):
        topo.nodes[id_base + i] = Node(id_base + i, guid_base + i)
        block.add(c, id_base + i)
    topo.blocks["top"] = block
    topo.block_order.append("top")
    for i, c in enumerate(coords):
        for d, k in enumerate(dims):
            nxt = list(c)
            if c[d] + 1 < k:
                nxt[d] = c[d] + 1
            elif kind == "Torus" and k > 1:
                nxt[d] = 0
            else:
                continue
            j = index[tuple(nxt)]
            topo.links.append((id_base + i, 2 * d + 1, id_base + j, 2 * d))
            topo.link_lines.append(None)
    return topo


# -- comparison ------------------------------------------------------------------------------
def _link_key(guid_a, pa, guid_b, pb):
    return min((guid_a, pa, guid_b, pb), (guid_b, pb, guid_a, pa))


def compare(expected, discovered):
    """Compare by GUID (what discovery sees): missing/unexpected nodes and links.

    Nodes are reported as ``{"id", "guid"}``; links as text ``"A PA <-> PB B"`` using the expected ids
    (discovered ids, else the GUID in hex, for nodes the expected model does not know).
    """
    exp_by_guid = expected.by_guid()
    disc_by_guid = discovered.by_guid()

    def name(guid):
        node = exp_by_guid.get(guid) or disc_by_guid.get(guid)
        return node.id if guid in exp_by_guid or node is not None else "0x%x" % guid

    def keys(topo):
        out = {}
        for a, pa, b, pb in topo.links:
            ga, gb = topo.nodes[a].guid, topo.nodes[b].guid
            key = _link_key(ga, pa, gb, pb)
            out[key] = key
        return out

    exp_links, disc_links = keys(expected), keys(discovered)

    def fmt(key):
        ga, pa, gb, pb = key
        (na, pa), (nb, pb) = sorted([(name(ga), pa), (name(gb), pb)], key=lambda e: (isinstance(e[0], str), e))
        return "%s %d <-> %d %s" % (na, pa, pb, nb)

    return {
        "missing_nodes": [{"id": exp_by_guid[g].id, "guid": "0x%x" % g}
                          for g in sorted(set(exp_by_guid) - set(disc_by_guid), key=lambda g: exp_by_guid[g].id)],
        "unexpected_nodes": [{"id": disc_by_guid[g].id, "guid": "0x%x" % g}
                             for g in sorted(set(disc_by_guid) - set(exp_by_guid))],
        "missing_links": sorted(fmt(k) for k in set(exp_links) - set(disc_links)),
        "unexpected_links": sorted(fmt(k) for k in set(disc_links) - set(exp_links)),
    }


def matches(report):
    return not any(report[k] for k in ("missing_nodes", "unexpected_nodes", "missing_links", "unexpected_links"))


def from_discovery(nodes, links, source="<discovered>"):
    """A Topology (inventory + links, no blocks) from discovery: nodes ``[{guid, id}]``, links by GUID
    ``[(guid_a, port_a, guid_b, port_b)]``. Links to GUIDs not in ``nodes`` are dropped."""
    topo = Topology(source)
    ids = {}
    for entry in nodes:
        guid, nid = int(str(entry["guid"]), 0), int(entry["id"])
        topo.nodes[nid] = Node(nid, guid, entry.get("t"))
        ids[guid] = nid
    seen = set()
    for ga, pa, gb, pb in links:
        ga, gb = int(str(ga), 0), int(str(gb), 0)
        if ga not in ids or gb not in ids:
            continue
        key = _link_key(ga, int(pa), gb, int(pb))
        if key in seen:
            continue
        seen.add(key)
        topo.links.append((ids[key[0]], key[1], ids[key[2]], key[3]))
        topo.link_lines.append(None)
    return topo
