# SPDX-License-Identifier: GPL-3.0-or-later
"""EXTOLL routing engines (dimension-order, shortest path, up*/down*) and their checker, vectorised with numpy."""
from __future__ import annotations

import itertools

try:
    import numpy as np
except ImportError:  # pragma: no cover - the sanity import test runs without numpy
    np = None

ALGORITHMS = {
    "dimensionorder": "DimensionOrder", "dimension_order": "DimensionOrder", "dor": "DimensionOrder",
    "shortestpath": "ShortestPath", "shortest_path": "ShortestPath",
    "updown": "UpDown", "up_down": "UpDown", "up*/down*": "UpDown",
    "perblock": "PerBlock", "per_block": "PerBlock",
}


class RoutingError(ValueError):
    """The requested routing cannot be computed for this fabric (the reason says why)."""


def need_numpy():
    if np is None:
        raise RoutingError("routing needs numpy (python3-numpy) on the host that computes the tables")


def algorithm_name(name):
    key = str(name).replace("-", "_").lower()
    if key not in ALGORITHMS:
        raise RoutingError("unknown routing algorithm %r (expected DimensionOrder, ShortestPath, UpDown or "
                           "PerBlock)" % (name,))
    return ALGORITHMS[key]


class Fabric:
    """Array form of a fabric: ``n`` nodes (index i ↔ ``ids[i]``), ``P`` ports per node.

    ``nbr[i, p]`` is the neighbour index behind port p (-1: port unused), ``nbr_port[i, p]`` its port.
    For a regular Mesh/Torus/Hypercube, ``coords`` (n, D), ``sizes`` and ``kind`` allow dimension-order routing.
    """

    def __init__(self, ids, nbr, nbr_port, coords=None, sizes=None, kind=None, guids=None):
        need_numpy()
        self.ids = np.asarray(ids, dtype=np.int64)
        self.nbr = np.asarray(nbr, dtype=np.int32)
        self.nbr_port = np.asarray(nbr_port, dtype=np.int16)
        self.n, self.P = self.nbr.shape
        self.index = {int(v): i for i, v in enumerate(self.ids)}
        self.coords = None if coords is None else np.asarray(coords, dtype=np.int32)
        self.sizes = None if sizes is None else tuple(int(k) for k in sizes)
        self.kind = kind
        self.guids = guids

    @classmethod
    def from_topology(cls, topo, use_coordinates=True):
        """Build from a topology.Topology; coordinates are kept when the whole fabric is one regular block."""
        need_numpy()
        ids = sorted(topo.nodes)
        index = {nid: i for i, nid in enumerate(ids)}
        ports = 1 + max([max(pa, pb) for node_a, pa, node_b, pb in topo.links] or [0])
        nbr = np.full((len(ids), ports), -1, dtype=np.int32)
        nbr_port = np.full((len(ids), ports), -1, dtype=np.int16)
        for a, pa, b, pb in topo.links:
            ia, ib = index[a], index[b]
            nbr[ia, pa], nbr_port[ia, pa] = ib, pb
            nbr[ib, pb], nbr_port[ib, pb] = ia, pa
        coords = sizes = kind = None
        regular = topo.regular() if use_coordinates else None
        if regular:
            kind, sizes, by_id = regular
            coords = [by_id[nid] for nid in ids]
        return cls(ids, nbr, nbr_port, coords, sizes, kind, guids=[topo.nodes[i].guid for i in ids])

    @classmethod
    def from_edges(cls, n, edges, ids=None):
        """Build from undirected edges between indices 0..n-1; ports are numbered per node in edge order."""
        need_numpy()
        degree = [0] * n
        wired = []
        for u, v in edges:
            wired.append((u, degree[u], v, degree[v]))
            degree[u] += 1
            degree[v] += 1
        P = max(degree + [1])
        nbr = np.full((n, P), -1, dtype=np.int32)
        nbr_port = np.full((n, P), -1, dtype=np.int16)
        for u, pu, v, pv in wired:
            nbr[u, pu], nbr_port[u, pu] = v, pv
            nbr[v, pv], nbr_port[v, pv] = u, pu
        return cls(list(range(n)) if ids is None else ids, nbr, nbr_port)

    def node_index(self, node_id):
        try:
            return self.index[int(node_id)]
        except (KeyError, TypeError, ValueError):
            raise RoutingError("node %r is not part of the fabric" % (node_id,))

    def is_connected(self):
        return bool(_bfs_levels(self, 0).min() >= 0) if self.n else True


# -- bitset helpers: row u of an (n+1, words) uint64 matrix holds one bit per destination t -------------
# The destinations are handled in chunks of words sized so that one (n, words) bitset is about CHUNK_BYTES: the
# arrays a chunk works on then stay in the CPU cache. With whole-width (or ~32 MiB) bitsets every pass ran from main
# memory, and a 32^3 torus took several times longer for the same number of word operations.
CHUNK_BYTES = 1 << 20


def _words(n):
    return (n + 63) // 64


def word_chunks(n, W=None):
    """``[(c0, c1)]``: destination word ranges of about CHUNK_BYTES per (n, words) bitset."""
    W = _words(n) if W is None else W
    step = max(1, min(W, CHUNK_BYTES // (8 * max(1, n))))
    return [(c0, min(W, c0 + step)) for c0 in range(0, W, step)]


def identity_chunk(n, c0, c1, rows=None):
    """(rows, c1 - c0) bitsets with bit t set in row t for the destinations t of words c0..c1 (rows: n)."""
    bits = np.zeros((n if rows is None else rows, c1 - c0), dtype=np.uint64)
    t = np.arange(c0 * 64, min(n, c1 * 64))
    bits[t, t // 64 - c0] = np.left_shift(np.uint64(1), (t % 64).astype(np.uint64))
    return bits


def _ports_from_choice(chosen, port, c0):
    """Write one chunk of destinations into the table: ``chosen[p]`` (n, words) bitsets of words c0.. of the
    destinations that leave through port p (disjoint over p) become ``port[:, t]`` (-1: none).

    Unpacking bits to bytes is the costly part, so it is done per bit of p + 1 (3 planes for 7 ports), not per port."""
    n = port.shape[0]
    t0 = c0 * 64
    t1 = min(n, t0 + chosen.shape[2] * 64)
    code = np.zeros((n, t1 - t0), dtype=np.int8)
    for b in range(int(chosen.shape[0]).bit_length()):
        plane = np.zeros(chosen.shape[1:], dtype=np.uint64)
        for p in range(chosen.shape[0]):
            if (p + 1) >> b & 1:
                plane |= chosen[p]
        bits = np.unpackbits(plane.view(np.uint8), axis=1, bitorder="little")[:, :t1 - t0]
        code |= bits.view(np.int8) << b
    code -= 1
    port[:, t0:t1] = code


def _padded_nbr(fab):
    # -1 (no link) points at the all-zero padding row n of every bitset matrix.
    return np.where(fab.nbr < 0, fab.n, fab.nbr)


def _by_port(nbr):
    """(n, P) → (P, n) contiguous: one index array per port for np.take (a column of nbr is strided)."""
    return np.ascontiguousarray(nbr.T)


def _bfs_step(frontier, nbrs, ports, remaining, chosen):
    """One BFS level backwards: the nodes u still in ``remaining`` whose port p (of ``ports``, in order: the first
    port wins a tie) leads to ``nbrs[p][u]`` (one contiguous index array per port) in the frontier (n+1 rows, row n
    zero) leave ``remaining`` and are recorded in ``chosen[p]``. Returns their bits: the next frontier's n rows.

    Dense on purpose: a row-sparse variant (as in deadlock.py's propagation) measured no faster here, since 1 MiB
    chunks make the dense AND/XOR passes cheap and the frontiers of a BFS level are rarely under a few % of rows."""
    before = remaining.copy()
    cand = np.empty_like(remaining)
    for p in ports:
        np.take(frontier, nbrs[p], axis=0, out=cand, mode="clip")
        np.bitwise_and(cand, remaining, out=cand)
        np.bitwise_xor(remaining, cand, out=remaining)
        chosen[p] |= cand
    return np.bitwise_xor(before, remaining, out=before)


# -- engines ------------------------------------------------------------------------------------------
def route_shortest_path(fab):
    """Minimal routes: BFS from every destination at once, one frontier level per step, as bitsets.

    Ties go to the lowest port number. Shortest-path routing is not deadlock-free in general; plan.check_routes
    reports whether the channel-dependency graph of this table happens to be acyclic.
    """
    need_numpy()
    n = fab.n
    nbr = _by_port(_padded_nbr(fab))
    port = np.full((n, n), -1, dtype=np.int8)
    for c0, c1 in word_chunks(n):
        _ports_from_choice(_shortest_path_chunk(fab, nbr, c0, c1), port, c0)
    return port


def _shortest_path_chunk(fab, nbr, c0, c1):
    """``chosen[p]``: (n, words) bitsets of the destinations (words c0..c1) that each node reaches first through p."""
    n, P = fab.n, fab.P
    frontier = identity_chunk(n, c0, c1, rows=n + 1)
    unvisited = ~frontier[:n]
    chosen = np.zeros((P, n, c1 - c0), dtype=np.uint64)
    while frontier[:n].any():
        frontier[:n] = _bfs_step(frontier, nbr, range(P), unvisited, chosen)
    return chosen


def _bfs_levels(fab, root):
    level = np.full(fab.n, -1, dtype=np.int64)
    level[root] = 0
    frontier = np.array([root])
    depth = 0
    while frontier.size:
        depth += 1
        cand = fab.nbr[frontier].ravel()
        cand = np.unique(cand[cand >= 0])
        cand = cand[level[cand] < 0]
        level[cand] = depth
        frontier = cand
    return level


def updown_orientation(fab, root=None):
    """``(up, level)``: ``up[i, p]`` is True when the link out of port p of node i goes *up*, i.e. towards a
    smaller (BFS level from the root, node id) pair. Every link is up in one direction and down in the other."""
    need_numpy()
    root_index = 0 if root is None else fab.node_index(root)
    level = _bfs_levels(fab, root_index)
    if (level < 0).any():
        missing = fab.ids[level < 0][:5].tolist()
        raise RoutingError("the fabric is not connected: nodes %s cannot be reached from node %d"
                           % (missing, fab.ids[root_index]))
    rank = level * (int(fab.ids.max()) + 1) + fab.ids
    valid = fab.nbr >= 0
    up = valid & (rank[np.where(valid, fab.nbr, 0)] < rank[:, None])
    return up, level


def route_updown(fab, root=None):
    """up*/down* routing: legal routes take zero or more up links, then zero or more down links.

    Destination-based tables must stay legal for a packet that has already turned down, so a node that has
    a down-only path to the destination uses its shortest down-only path; any other node takes an up link
    towards the neighbour with the shortest (legal) remaining route. Computed for all destinations at once
    with bitset frontiers: pass 1 finds who has a down-only path (and its first port), pass 2 re-runs the
    down frontiers level by level and lets the remaining nodes join one level after an up-neighbour.
    The CDG of such routes is acyclic on any connected fabric (the (level, id) order never cycles).
    """
    need_numpy()
    n, P = fab.n, fab.P
    up = updown_orientation(fab, root)[0]
    down = (fab.nbr >= 0) & ~up
    nbr = _padded_nbr(fab)
    # ports that are not down (resp. up) point at the zero padding row, so no masking is needed per step
    nbr_down = _by_port(np.where(down, nbr, n))
    nbr_up = _by_port(np.where(up, nbr, n))
    down_ports = [p for p in range(P) if down[:, p].any()]
    up_ports = [p for p in range(P) if up[:, p].any()]
    port = np.full((n, n), -1, dtype=np.int8)
    for c0, c1 in word_chunks(n):
        chosen = _updown_chunk(fab, nbr_down, nbr_up, down_ports, up_ports, c0, c1)
        _ports_from_choice(chosen, port, c0)
    return port


def _updown_chunk(fab, nbr_down, nbr_up, down_ports, up_ports, c0, c1):
    """route_updown's two passes for the destinations of words c0..c1: ``chosen[p]`` (n, words) bitsets.
    Frontiers have n+1 rows (row n stays zero); the sets grown level by level are kept as their complement
    (``no_down``, ``unassigned``) for _bfs_step."""
    n, P = fab.n, fab.P
    chosen = np.zeros((P, n, c1 - c0), dtype=np.uint64)
    # pass 1: down-only reachability (and ports); its frontiers are the down levels pass 2 steps through again
    frontier = identity_chunk(n, c0, c1, rows=n + 1)
    no_down = ~frontier[:n]
    down_levels = []
    while frontier[:n].any():
        frontier[:n] = _bfs_step(frontier, nbr_down, down_ports, no_down, chosen)
        down_levels.append(frontier[:n].copy())
    # pass 2: level-synchronous; nodes without a down path join one level after an up-neighbour
    fl = identity_chunk(n, c0, c1, rows=n + 1)
    unassigned = no_down
    for level in itertools.count():
        if not fl[:n].any():
            break
        fl[:n] = _bfs_step(fl, nbr_up, up_ports, unassigned, chosen)
        if level < len(down_levels):
            fl[:n] |= down_levels[level]
    return chosen


def _direction_ports(fab):
    """``dir_port[i, d, s]``: port of node i towards its neighbour in dimension d, s=0 minus / s=1 plus
    (-1 if absent); ``dim_of[i, p]`` and ``wrap[i, p]`` (the link is a torus wrap-around: the dateline)."""
    n, P = fab.n, fab.P
    C = fab.coords
    D = C.shape[1]
    k = np.asarray(fab.sizes)
    torus = fab.kind == "Torus"
    dir_port = np.full((n, D, 2), -1, dtype=np.int16)
    dim_of = np.full((n, P), -1, dtype=np.int16)
    wrap = np.zeros((n, P), dtype=bool)
    rows = np.arange(n)
    for p in range(P):
        v = fab.nbr[:, p]
        ok = v >= 0
        diff = C[np.where(ok, v, 0)] - C
        nonzero = diff != 0
        ok &= nonzero.sum(axis=1) == 1
        d = np.argmax(nonzero, axis=1)
        delta = diff[rows, d]
        kd = k[d]
        if torus:
            mod = delta % kd
            plus = ok & (mod == 1)
            minus = ok & (mod == kd - 1)
        else:
            plus, minus = ok & (delta == 1), ok & (delta == -1)
        both = plus & minus  # extent 2: two parallel links, the first free direction wins
        plus_free = dir_port[rows, d, 1] < 0
        plus = np.where(both, plus_free, plus)
        minus = np.where(both, ~plus_free, minus)
        for sel, s in ((plus, 1), (minus, 0)):
            sel = sel & (dir_port[rows, d, s] < 0)
            dir_port[rows[sel], d[sel], s] = p
            dim_of[sel, p] = d[sel]
            if torus:
                wrap[sel, p] = (C[rows[sel], d[sel]] == (kd[sel] - 1)) if s else (C[rows[sel], d[sel]] == 0)
    return dir_port, dim_of, wrap


def route_dimension_order(fab, chunk=256):
    """Dimension-order routing on a Mesh, Torus or Hypercube: correct dimension 0 first, then 1, …

    On a torus each dimension goes the shorter way round (ties: plus). Deadlock freedom on a torus needs two
    virtual channels per link with a dateline on the wrap-around link of every ring (see plan.check_routes).
    """
    need_numpy()
    if fab.coords is None:
        raise RoutingError("DimensionOrder needs a fabric that is one Mesh, Torus or Hypercube with coordinates")
    n = fab.n
    dir_port = _direction_ports(fab)[0]
    C = fab.coords.astype(np.int64)
    port = np.full((n, n), -1, dtype=np.int8)
    torus = fab.kind == "Torus"
    # Per block of source rows and dimension d: a lookup table (rows, extent) of the port towards each coordinate
    # value of d (-1: same coordinate, -2: no link that way); the table row is gathered by the destinations'
    # coordinates, and dimensions are laid over each other from the last to the first, so the first dimension that
    # differs decides. int8 arrays only: a 32^3 torus is 1 GiB of table and a few row blocks of work space.
    for start in range(0, n, chunk):
        rows = slice(start, min(n, start + chunk))
        block = port[rows]
        for d in reversed(range(len(fab.sizes))):
            k = fab.sizes[d]
            values = np.arange(k)[None, :]
            cu = C[rows, d][:, None]
            if torus:
                delta = (values - cu) % k
                plus = delta <= k // 2
            else:
                delta = values - cu
                plus = delta > 0
            lut = np.where(plus, dir_port[rows, d, 1][:, None], dir_port[rows, d, 0][:, None])
            lut = np.where(lut < 0, -2, lut)
            lut = np.where(delta == 0, -1, lut).astype(np.int8)
            cand = np.take(lut, C[:, d], axis=1)
            if d == len(fab.sizes) - 1:
                block[...] = cand
            else:
                np.copyto(block, cand, where=cand != -1)
    missing = (port < 0)
    missing[np.arange(n), np.arange(n)] = False
    if missing.any():
        i, t = np.argwhere(missing)[0]
        raise RoutingError("DimensionOrder has no link to use from node %d towards node %d (is a link missing?)"
                           % (fab.ids[i], fab.ids[t]))
    return port


def compute(fab, algorithm, root=None):
    """Full table ``port[src, dst]`` (output port at src towards dst, -1 on the diagonal)."""
    name = algorithm_name(algorithm)
    if name == "DimensionOrder":
        return route_dimension_order(fab)
    if name == "ShortestPath":
        return route_shortest_path(fab)
    if name == "PerBlock":
        raise RoutingError("PerBlock routing needs the topology definition's blocks (hierarchy.engine)")
    return route_updown(fab, root)


# -- following routes ---------------------------------------------------------------------------------
def next_hops(fab, port):
    """``nxt[u, t]``: neighbour index the packet for t goes to from u (t on the diagonal, -1 if no port)."""
    n = fab.n
    p = port.astype(np.int64)
    safe = np.where(p < 0, 0, p)
    nxt = np.take_along_axis(fab.nbr, safe, axis=1) if n else np.zeros((0, 0), dtype=np.int32)
    nxt = np.where(p < 0, -1, nxt)
    nxt[np.arange(n), np.arange(n)] = np.arange(n)
    return nxt


def next_hop(fab, port, src_id, dst_id):
    i, t = fab.node_index(src_id), fab.node_index(dst_id)
    p = int(port[i, t])
    return None if p < 0 else int(fab.ids[fab.nbr[i, p]])


def route(fab, port, src_id, dst_id):
    """Node ids along the route from src to dst (raises RoutingError on a dead end or a loop)."""
    i, t = fab.node_index(src_id), fab.node_index(dst_id)
    path = [i]
    while i != t:
        p = int(port[i, t])
        if p < 0 or fab.nbr[i, p] < 0:
            raise RoutingError("route %d → %d ends at node %d" % (src_id, dst_id, fab.ids[i]))
        i = int(fab.nbr[i, p])
        if len(path) > fab.n:
            raise RoutingError("route %d → %d loops" % (src_id, dst_id))
        path.append(i)
    return [int(fab.ids[j]) for j in path]


def hop_counts(fab, port):
    """Pointer jumping over the next-hop table: ``(hops[u, t], reached[u, t])`` in O(log n) array steps.

    A route that loops or ends early never reaches t; its ``reached`` entry is False."""
    n = fab.n
    nxt = next_hops(fab, port)
    cols = np.arange(n)[None, :]
    jump = np.where(nxt < 0, np.arange(n)[:, None], nxt).astype(np.int64)  # dead end: stay (never reaches)
    hops = (np.arange(n)[:, None] != cols).astype(np.int32)
    hops[nxt < 0] = 0
    flat_cols = np.broadcast_to(cols, (n, n))
    steps = 1
    while steps <= n:
        idx = jump * n + flat_cols
        hops = hops + hops.ravel()[idx]
        jump = jump.ravel()[idx]
        steps *= 2
    reached = jump == flat_cols
    return hops, reached


# -- channel dependency graph -------------------------------------------------------------------------
def acyclic(num, src, dst):
    """Kahn's algorithm over edge arrays, one frontier of zero in-degree vertices per numpy step.
    Returns ``(True, empty)`` or ``(False, vertices left on or behind a cycle)``."""
    src = np.asarray(src, dtype=np.int64)
    dst = np.asarray(dst, dtype=np.int64)
    order = np.argsort(src, kind="stable")
    dst_sorted = dst[order]
    indptr = np.concatenate(([0], np.cumsum(np.bincount(src, minlength=num))))
    indeg = np.bincount(dst, minlength=num)
    frontier = np.nonzero(indeg == 0)[0]
    removed = 0
    while frontier.size:
        removed += frontier.size
        starts, counts = indptr[frontier], indptr[frontier + 1] - indptr[frontier]
        total = int(counts.sum())
        if not total:
            break
        offsets = np.repeat(starts - np.concatenate(([0], np.cumsum(counts)[:-1])), counts)
        targets = dst_sorted[offsets + np.arange(total)]
        dec = np.bincount(targets, minlength=num)
        indeg -= dec
        frontier = np.nonzero((indeg == 0) & (dec > 0))[0]
    left = np.nonzero(indeg > 0)[0]
    return left.size == 0, left


def tables(fab, port):
    """``{src id: {dst id: port}}`` for JSON / installation (the diagonal is left out)."""
    out = {}
    ids = fab.ids.tolist()
    for i, row in enumerate(port.tolist()):
        out[ids[i]] = {ids[t]: p for t, p in enumerate(row) if t != i}
    return out


def table_changes(before, after):
    """Lines ``node S: dst D port A -> B`` for entries that differ between two ``tables()`` dicts."""
    lines = []
    for src in sorted(set(before) | set(after), key=int):
        b, a = before.get(src, {}), after.get(src, {})
        for dst in sorted(set(b) | set(a), key=int):
            if b.get(dst) != a.get(dst):
                lines.append("node %s: dst %s port %s -> %s" % (src, dst, b.get(dst, "-"), a.get(dst, "-")))
    return lines


def to_dot(fab, port=None, algorithm=None, root=None, types=None):
    """Graphviz text of the fabric: one edge per link labelled with its ports; with up*/down* the link
    direction is drawn towards the up end and nodes are ranked by BFS level."""
    lines = ["graph extoll {", '  graph [label="EXTOLL fabric%s"];'
             % (" (%s)" % algorithm if algorithm else ""), "  node [shape=box];"]
    level = None
    if algorithm and algorithm_name(algorithm) == "UpDown":
        level = updown_orientation(fab, root)[1]
    for i, nid in enumerate(fab.ids.tolist()):
        label = str(nid)
        if fab.guids is not None:
            label += "\\n0x%x" % fab.guids[i]
        if types:
            label += "\\n%s" % types.get(nid, "")
        if fab.coords is not None:
            label += "\\n(%s)" % ",".join(str(c) for c in fab.coords[i].tolist())
        if level is not None:
            label += "\\nlevel %d" % level[i]
        lines.append('  n%d [label="%s"];' % (nid, label))
    for i in range(fab.n):
        for p in range(fab.P):
            j = int(fab.nbr[i, p])
            q = int(fab.nbr_port[i, p])
            if j < 0 or (j, q) < (i, p):
                continue
            lines.append('  n%d -- n%d [taillabel="%d", headlabel="%d"];' % (fab.ids[i], fab.ids[j], p, q))
    lines.append("}")
    return "\n".join(lines) + "\n"
