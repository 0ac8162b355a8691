# SPDX-License-Identifier: GPL-3.0-or-later
"""Deadlock-freedom proofs of EXTOLL routing tables on virtual channels, as bitset array passes.

The model (docs/extollrouting.md): every EXTOLL link offers ``MODEL_VCS`` = 4 virtual channels. A table is
destination based (``port[u, t]``); the VC a packet uses on its next hop is chosen at each node from the VC it
arrived on, the link it arrived on and the link it leaves on, by one of three local rules (schemes):

* ``single``: one VC, nothing changes.
* ``dateline``: torus dimension order; a packet enters every dimension on VC 0 and moves to VC 1 when it crosses
  the ring's wrap-around link (the dateline).
* ``layers``: up*/down* layering (LASH/DFSSSP style, over the up*/down* order of a BFS from a root): a packet
  starts on VC 0 and moves up one VC at each turn up*/down* forbids (arrived on a down link, leaves on an up
  link). Within one VC only legal turns remain, so any table fits in ``1 + max forbidden turns`` VCs.

The proof does not trust the rule: it computes, for every (channel, VC) a packet can actually hold, the
dependencies of the table (all destinations at once, destinations as bits of uint64 words), builds the
channel-dependency graph over (node, port, VC) and checks it for cycles with Kahn's algorithm. It also checks
that every route ends at its destination (a reverse BFS over the table) and counts hops.
"""
from __future__ import annotations

from ansible_collections.msa.hpc.plugins.module_utils.extoll import routing as R

try:
    import numpy as np
except ImportError:  # pragma: no cover - the sanity import test runs without numpy
    np = None

MODEL_VCS = 4
SCHEMES = ("single", "dateline", "layers")
ALL = np.uint64(0xFFFFFFFFFFFFFFFF) if np is not None else None


class Refused(R.RoutingError):
    """No table of the requested engines is deadlock-free on the VCs available; ``attempts`` says why."""

    def __init__(self, message, attempts):
        super().__init__(message)
        self.attempts = attempts


def _words(n):
    return (n + 63) // 64


# Set bits per byte value, for a numpy without bitwise_count (it came with 2.0; Debian 12's numpy is 1.24, and the
# EMP master runs this code with the node's numpy).
_BYTE_BITS = []


def _popcount(bits):
    if hasattr(np, "bitwise_count"):
        return int(np.bitwise_count(bits).sum(dtype=np.int64))
    if not _BYTE_BITS:
        _BYTE_BITS.append(np.array([bin(i).count("1") for i in range(256)], dtype=np.uint8))
    return int(_BYTE_BITS[0][np.ascontiguousarray(bits).view(np.uint8)].sum(dtype=np.int64))


def port_masks(port, P, rows=256):
    """``M[p]``: (n+1, W) bitsets of the destinations t that node u sends out of port p (row n is zero).
    Packed per block of rows straight into M's bytes (blocks of a few MiB stay in the CPU cache)."""
    n = port.shape[0]
    W = _words(n)
    M = np.zeros((P, n + 1, W), dtype=np.uint64)
    packed = M.view(np.uint8)
    width = (n + 7) // 8
    for start in range(0, n, rows):
        stop = min(n, start + rows)
        block = port[start:stop]
        for p in range(P):
            packed[p, start:stop, :width] = np.packbits(block == p, axis=1, bitorder="little")
    return M


def _rowmask(flags):
    return np.where(flags, ALL, np.uint64(0))[:, None]


def _rows_any(bits):
    """(rows, words) → (rows,) bool, any bit set per row. numpy's ``any(axis=1)`` over a few words per row is a slow
    reduction; OR-ing the few columns is not."""
    acc = bits[:, 0].copy()
    for j in range(1, bits.shape[1]):
        acc |= bits[:, j]
    return acc != 0


class _Rule:
    """A VC rule on one chunk of destinations: injection VCs and, for packets that arrive through port r, their
    next VC per out link. Everything that depends only on (node, arrival port) is precomputed per port r, and
    ``moves(r, k)`` lists (k', bits) with the incoming destinations of port r that continue on VC k' (a partition
    of ``incoming[r]``, empty parts left out), so a propagation step is one gather and one AND per part."""

    def __init__(self, fab, M, scheme, incoming, every, K, up=None, directions=None):
        self.scheme = scheme
        n, P = fab.n, fab.P
        self.every = every
        if scheme == "dateline":
            # (dim_of, wrap) of R._direction_ports: the same for every chunk, so the caller may pass it
            dim_of, wrap = directions or R._direction_ports(fab)[1:]
            self.wrap_out = np.zeros((n, M.shape[2]), dtype=np.uint64)
            same_dim = np.zeros((len(fab.sizes), n, M.shape[2]), dtype=np.uint64)
            for q in range(P):
                self.wrap_out |= M[q, :n] & _rowmask(wrap[:, q])
                for d in range(len(fab.sizes)):
                    same_dim[d] |= M[q, :n] & _rowmask((dim_of[:, q] == d) & ~wrap[:, q])
            # same[r]: destinations a packet that came in through r keeps its VC for (same ring, no dateline)
            self.same = [same_dim[np.where(dim_of[:, r] < 0, 0, dim_of[:, r]), np.arange(n)]
                         & _rowmask(dim_of[:, r] >= 0) for r in range(P)]
            self.other = [~(self.same[r] | self.wrap_out) for r in range(P)]
        elif scheme == "layers":
            up_out = np.zeros((n, M.shape[2]), dtype=np.uint64)
            for q in range(P):
                up_out |= M[q, :n] & _rowmask(up[:, q])
            # escalate[r]: destinations a packet that came down through r must leave on an up link for
            self.escalate = [up_out & _rowmask(up[:, r]) for r in range(P)]
        self._moves = {}
        for r in range(P):
            if scheme == "layers":
                # the parts do not depend on k (stay, or one VC up): computed once per r and shared
                parts = self._partition(incoming[r], r, 0)
                for k in range(K):
                    self._moves[r, k] = [(k + k2, bits) for k2, bits in parts]
            else:
                for k in range(K):
                    self._moves[r, k] = self._partition(incoming[r], r, k)

    def inject(self):
        """VC per injected packet (all pairs u != t of the chunk)."""
        if self.scheme == "dateline":
            return [(0, self.every & ~self.wrap_out), (1, self.every & self.wrap_out)]
        return [(0, self.every)]

    def turn(self, arrived, r, k):
        """``[(k', bits)]`` for packets on VC k that arrived at each node through its port r."""
        if self.scheme == "single":
            return [(k, arrived)]
        if self.scheme == "dateline":
            return [(k, arrived & self.same[r]), (1, arrived & self.wrap_out), (0, arrived & self.other[r])]
        escalate = arrived & self.escalate[r]
        return [(k, arrived ^ escalate), (k + 1, escalate)]

    def _partition(self, incoming, r, k):
        # turn() of everything that can arrive through r, parts with the same next VC merged
        merged = {}
        for k2, bits in self.turn(incoming, r, k):
            merged[k2] = merged[k2] | bits if k2 in merged else bits
        return [(k2, bits) for k2, bits in sorted(merged.items()) if bits.any()]

    def moves(self, r, k):
        return self._moves[r, k]


def _senders(fab):
    """Per port r of every node v: the neighbour w behind it (row n when unused) and w's port p."""
    n = fab.n
    w = np.where(fab.nbr < 0, n, fab.nbr).astype(np.int64)
    p = np.where(fab.nbr < 0, 0, fab.nbr_port).astype(np.int64)
    return w, p


def _incoming(M, ident, senders, P):
    """``incoming[r]``: (n, words) destinations the neighbour behind port r sends to this node (not for it)."""
    w_of, p_of = senders
    return [M[p_of[:, r], w_of[:, r]] & ~ident for r in range(P)]


def _chunk_bits(n, c0, c1):
    """``(identity, all pairs u != t)`` for the destinations of words c0..c1 (rows 0..n-1)."""
    ident = R.identity_chunk(n, c0, c1)
    every = np.full((n, c1 - c0), ALL, dtype=np.uint64)
    if c1 * 64 > n:
        every[:, -1] = np.uint64((1 << (n % 64)) - 1)
    return ident, every & ~ident


def reachability(fab, M, ident, c0=0):
    """Reverse BFS over the table from the destinations of one word chunk of M:
    ``(unreached pairs, max hops, total hops, first unreached (u, t) or None)``."""
    n, P = fab.n, fab.P
    nbr = np.where(fab.nbr < 0, n, fab.nbr)
    words = M.shape[2]
    frontier = np.zeros((n + 1, words), dtype=np.uint64)
    frontier[:n] = ident
    todo = _chunk_bits(n, c0, c0 + words)[1]  # pairs u != t not reached yet
    nxt = np.empty((n, words), dtype=np.uint64)
    hop = np.empty_like(nxt)
    level = total = 0
    while True:
        # (u, t) is reached at this level when u's port towards t leads to a node reached at the previous one
        nxt.fill(0)
        for p in range(P):
            np.take(frontier, nbr[:, p], axis=0, out=hop, mode="clip")
            hop &= M[p, :n]
            nxt |= hop
        nxt &= todo
        if not nxt.any():
            break
        level += 1
        total += level * _popcount(nxt)
        todo ^= nxt
        frontier[:n] = nxt
    first = None
    if todo.any():
        u, word = np.argwhere(todo)[0]
        value = int(todo[u, word])
        first = (int(u), (int(word) + c0) * 64 + (value & -value).bit_length() - 1)
    return _popcount(todo), level, total, first


# After the first steps only a few nodes hold states new to a VC (packets that changed VC on the way, ~10% of the
# rows at 32^3): below this share of the nodes a step works on those rows and their neighbours only.
SPARSE_SHARE = 0.25


class _NewStates:
    """Per VC, the bits a propagation step produces: a zeroed (n, words) scratch array plus the rows written,
    so that collecting them costs the rows touched, not n."""

    def __init__(self, K, n, words):
        self.bits = np.zeros((K + 1, n, words), dtype=np.uint64)
        self.touched = np.zeros((K + 1, n), dtype=bool)

    def add_all(self, k, bits):
        self.bits[k] |= bits
        self.touched[k] = True

    def add_rows(self, k, rows, bits):
        self.bits[k][rows] |= bits
        self.touched[k][rows] = True

    def take(self, k):
        """(rows, bits) written to VC k since the last take; the scratch is zero again afterwards."""
        rows = np.flatnonzero(self.touched[k])
        if rows.size < SPARSE_SHARE * self.touched.shape[1]:
            bits = self.bits[k][rows]
            self.bits[k][rows] = 0
        else:  # most rows: plain copies instead of fancy indexing
            bits = self.bits[k][rows] if rows.size < self.touched.shape[1] else self.bits[k].copy()
            self.bits[k].fill(0)
        self.touched[k] = False
        return rows, bits


def _step(fab, rule, k, rows, bits, M, w_of, new):
    """One hop of the packets on VC k held at ``rows`` (``bits``: their destinations): into ``new`` by next VC."""
    n, K = fab.n, new.bits.shape[0] - 1
    if rows.size >= SPARSE_SHARE * n:
        held = np.zeros((n + 1, bits.shape[1]), dtype=np.uint64)  # row n: the padding row of unused ports
        if rows.size == n:
            held[:n] = bits
        else:
            held[rows] = bits
        arrived = np.empty((n, bits.shape[1]), dtype=np.uint64)
        for r in range(fab.P):
            moves = rule.moves(r, k)
            if moves:
                np.take(held, w_of[:, r], axis=0, out=arrived, mode="clip")
                for k2, mask in moves:
                    new.add_all(min(k2, K), arrived & mask)
        return
    # few rows: push each row's packets out of the port they leave by, to the neighbour behind it
    for p in range(fab.P):
        sent = bits & M[p][rows]
        keep = _rows_any(sent)
        if not keep.any():
            continue
        v = fab.nbr[rows[keep], p]
        r_of = fab.nbr_port[rows[keep], p]
        sent = sent[keep]
        # a node v is reached through one port r from one sender per (p, r): the rows of one group are distinct
        for r in np.unique(r_of):
            group = r_of == r
            for k2, mask in rule.moves(int(r), k):
                new.add_rows(min(k2, K), v[group], sent[group] & mask[v[group]])


def _propagate(fab, rule, K, M, w_of):
    """VCs packets can hold: ``occupied[k]`` (n+1, words) bits of (node, destination) on VC k; VC K = overflow.
    A frontier of the states first reached in the last step (per VC: rows and their bits), until no step reaches
    a new one."""
    n = fab.n
    words = rule.every.shape[1]
    occupied = np.zeros((K + 1, n + 1, words), dtype=np.uint64)
    new = _NewStates(K, n, words)
    for k, bits in rule.inject():
        new.add_all(k, bits)
    while True:
        frontier = []
        for k in range(K + 1):
            rows, bits = new.take(k)
            every_row = rows.size == n  # then slices, not fancy indexing
            seen = occupied[k, :n] if every_row else occupied[k][rows]
            bits |= seen
            bits ^= seen  # bits & ~seen: the states not reached before
            keep = _rows_any(bits) if rows.size else np.zeros(0, dtype=bool)
            if every_row and keep.all():
                occupied[k, :n] |= bits
            else:
                rows, bits = rows[keep], bits[keep]
                occupied[k][rows] |= bits
            frontier.append((rows, bits))
        if not any(rows.size for rows, bits in frontier[:K]):
            return occupied
        for k in range(K):
            if frontier[k][0].size:
                _step(fab, rule, k, frontier[k][0], frontier[k][1], M, w_of, new)


def _dependencies(fab, M, rule, K, occupied, w_of, edges):
    """Mark ``edges[k, r, k2, q, v]``: a packet on VC k arriving at v through r leaves through q on VC k2."""
    n, P = fab.n, fab.P
    for k in range(K):
        held = np.flatnonzero(_rows_any(occupied[k, :n]))
        if not held.size:
            continue
        if held.size >= SPARSE_SHARE * n:
            nodes = slice(None)
            arrived = [np.take(occupied[k], w_of[:, r], axis=0, mode="clip") for r in range(P)]
        else:
            # only the neighbours of the few nodes holding VC k (layers: the higher VCs)
            at = np.full(n + 1, -1, dtype=np.int64)
            at[held] = np.arange(held.size)
            bits = occupied[k][held]
            src = [at[w_of[:, r]] for r in range(P)]
            nodes = [np.flatnonzero(s >= 0) for s in src]
            arrived = [bits[src[r][nodes[r]]] for r in range(P)]
        for r in range(P):
            v = nodes if isinstance(nodes, slice) else nodes[r]
            for k2, mask in rule.moves(r, k):
                if k2 >= K:
                    continue
                part = arrived[r] & mask[v]
                if not part.any():
                    continue
                for q in range(P):
                    edges[k, r, k2, q, v] |= _rows_any(part & M[q, :n][v])


def _find_cycle(num, src, dst, left):
    """One cycle among the vertices Kahn's algorithm could not remove (walks predecessors until one repeats)."""
    inside = np.zeros(num, dtype=bool)
    inside[left] = True
    keep = inside[src] & inside[dst]
    pred = {}
    for a, b in zip(src[keep].tolist(), dst[keep].tolist()):
        pred.setdefault(b, a)
    seen, order = {}, []
    x = int(left[0])
    while x not in seen:
        seen[x] = len(order)
        order.append(x)
        x = pred[x]
    cycle = order[seen[x]:]
    cycle.reverse()
    return cycle


def routes_reach(fab, M):
    """Whether every route of the table (port masks M) ends at its destination, and its hop counts:
    ``{reachable, unreachable_pairs, max_hops, avg_hops, first}`` (first: one unreached (u, t) or None).
    It depends on the table only, so safe_plan computes it once for all VC schemes."""
    n = fab.n
    unreached = max_hops = total = 0
    first = None
    for c0, c1 in R.word_chunks(n, M.shape[2]):
        Mc = np.ascontiguousarray(M[:, :, c0:c1])
        miss, level, hops, where = reachability(fab, Mc, _chunk_bits(n, c0, c1)[0], c0)
        unreached, max_hops, total = unreached + miss, max(max_hops, level), total + hops
        first = first or where
    return {"reachable": not unreached, "unreachable_pairs": int(unreached), "max_hops": int(max_hops),
            "avg_hops": round(total / max(1, n * (n - 1) - unreached), 3), "first": first}


def prove(fab, port, scheme="single", vcs=MODEL_VCS, root=None, M=None, max_cycle=12, reach=None):
    """Certificate of one table under one VC scheme (see the module doc).

    Returns ``{scheme, virtual_channels, virtual_channels_used, acyclic, reachable, unreachable_pairs,
    channels, dependencies, max_hops, avg_hops, cycle, problems}``; ``cycle`` names the (node, port, VC)
    channels of one dependency cycle when there is one. ``reach``: routes_reach() of this table, if known.
    """
    if scheme not in SCHEMES:
        raise R.RoutingError("unknown virtual-channel scheme %r (expected %s)" % (scheme, ", ".join(SCHEMES)))
    n, P = fab.n, fab.P
    if M is None:
        M = port_masks(port, P)
    cert = {"scheme": scheme, "virtual_channels": int(vcs), "problems": [], "cycle": []}
    if reach is None:
        reach = routes_reach(fab, M)
    cert.update((key, value) for key, value in reach.items() if key != "first")
    if not reach["reachable"]:
        first = reach["first"]
        cert["problems"] += ["route %d -> %d does not reach its destination" % (fab.ids[first[0]], fab.ids[first[1]]),
                             "%d pairs in all do not reach their destination" % reach["unreachable_pairs"]]
        cert.update(acyclic=False, virtual_channels_used=0, channels=0, dependencies=0)
        return cert
    if scheme == "dateline" and (fab.coords is None or fab.kind != "Torus"):
        raise R.RoutingError("the dateline scheme needs a torus with coordinates")
    K = 1 if scheme == "single" else (2 if scheme == "dateline" else int(vcs))
    if K > vcs:
        cert.update(acyclic=False, virtual_channels_used=K, channels=0, dependencies=0)
        cert["problems"].append("the %s scheme needs %d VCs, the links offer %d" % (scheme, K, vcs))
        return cert
    up = R.updown_orientation(fab, root)[0] if scheme == "layers" else None
    directions = R._direction_ports(fab)[1:] if scheme == "dateline" else None
    senders = _senders(fab)
    edges = np.zeros((K, P, K, P, n), dtype=bool)
    used = np.zeros(K + 1, dtype=bool)
    for c0, c1 in R.word_chunks(n, M.shape[2]):
        Mc = np.ascontiguousarray(M[:, :, c0:c1])
        ident, every = _chunk_bits(n, c0, c1)
        rule = _Rule(fab, Mc, scheme, _incoming(Mc, ident, senders, P), every, K, up, directions)
        occupied = _propagate(fab, rule, K, Mc, senders[0])
        used |= occupied.reshape(K + 1, -1).any(axis=1)
        _dependencies(fab, Mc, rule, K, occupied, senders[0], edges)
    overflow = bool(used[K])
    k, r, k2, q, v = np.nonzero(edges)
    w, p = senders[0][v, r], senders[1][v, r]
    src = (w * P + p) * K + k
    dst = (v * P + q) * K + k2
    states = n * P * K
    ok, left = R.acyclic(states, src, dst)
    used = np.nonzero(used)[0]
    channel = np.zeros(states, dtype=bool)
    channel[src] = channel[dst] = True
    cert.update(acyclic=bool(ok and not overflow), virtual_channels_used=int(used.max()) + 1 if used.size else 0,
                channels=int(channel.sum()), dependencies=int(src.size))
    if overflow:
        cert["problems"].append("routes need more than %d VCs under the %s scheme" % (K, scheme))
    if not ok:
        cycle = _find_cycle(states, src, dst, left)
        names = ["node %d port %d vc %d" % (fab.ids[c // K // P], (c // K) % P, c % K) for c in cycle]
        cert["cycle"] = names[:max_cycle] + (["… %d more" % (len(names) - max_cycle)]
                                             if len(names) > max_cycle else [])
        cert["problems"].append("the channel-dependency graph on %d VC%s has a cycle through %d channels: %s"
                                % (K, "s" if K > 1 else "", len(cycle), " -> ".join(cert["cycle"])))
    return cert


def schemes_for(fab, algorithm, vcs=MODEL_VCS):
    """VC schemes worth trying for a table, fewest VCs first; torus dimension order starts with the dateline."""
    out = []
    if algorithm == "DimensionOrder" and fab.kind == "Torus" and fab.coords is not None and vcs >= 2:
        out.append("dateline")
    out.append("single")
    if vcs >= 2:
        out.append("layers")
    return out


def safe_plan(fab, engines, vcs=MODEL_VCS, root=None, compute=None):
    """Route with the first engine of ``engines`` whose table can be proved deadlock-free on ``vcs`` VCs.

    ``compute(fab, engine)`` returns the table (default: routing.compute). Returns ``(port, certificate)``;
    the certificate adds ``algorithm``, ``requested`` and ``attempts`` (every engine/scheme tried and why it
    failed). Raises :class:`Refused` naming each algorithm and the channels on its cycle when none works.
    """
    if compute is None:
        compute = R.compute
    if not 1 <= int(vcs) <= MODEL_VCS:
        raise R.RoutingError("virtual_channels must be between 1 and %d (an EXTOLL link offers %d in the model), "
                             "got %r" % (MODEL_VCS, MODEL_VCS, vcs))
    attempts = []
    for engine in engines:
        name = R.algorithm_name(engine)
        try:
            port = compute(fab, name)
        except R.RoutingError as exc:
            attempts.append({"algorithm": name, "scheme": None, "reason": str(exc)})
            continue
        M = port_masks(port, fab.P)
        reach = routes_reach(fab, M)
        for scheme in schemes_for(fab, name, vcs):
            cert = prove(fab, port, scheme, vcs, root, M=M, reach=reach)
            if cert["acyclic"] and cert["reachable"]:
                cert.update(algorithm=name, requested=R.algorithm_name(engines[0]), attempts=attempts,
                            nodes=int(fab.n), links=int((fab.nbr >= 0).sum() // 2))
                return port, cert
            attempts.append({"algorithm": name, "scheme": scheme, "reason": "; ".join(cert["problems"]),
                             "cycle": cert["cycle"]})
            if not cert["reachable"]:
                break
    tried = "; ".join("%s%s: %s" % (a["algorithm"], " (%s)" % a["scheme"] if a["scheme"] else "", a["reason"])
                      for a in attempts)
    raise Refused("no deadlock-free routing on %d VC%s: %s" % (vcs, "s" if vcs > 1 else "", tried), attempts)
