# SPDX-License-Identifier: GPL-3.0-or-later
"""Deadlock-freedom proofs of EXTOLL routing tables on virtual channels, as bitset array passes.

The model (docs/extoll_routing.md): every EXTOLL link offers ``MODEL_VCS`` = 4 virtual channels. A table is
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

from ansible_collections.msa.hpc.plugins.module_utils import _routing as R

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


def _identity(n):
    bits = np.zeros((n + 1, _words(n)), dtype=np.uint64)
    idx = np.arange(n)
    bits[idx, idx // 64] = np.left_shift(np.uint64(1), (idx % 64).astype(np.uint64))
    return bits


def _all_bits(n):
    bits = np.zeros((n + 1, _words(n)), dtype=np.uint64)
    bits[:n] = ALL
    tail = n % 64
    if tail:
        bits[:n, -1] = np.uint64((1 << tail) - 1)
    return bits


def _popcount(bits):
    return int(np.bitwise_count(bits).sum(dtype=np.int64))


def port_masks(port, P, rows=2048):
    """``M[p]``: (n+1, W) bitsets of the destinations t that node u sends out of port p (row n is zero)."""
    n = port.shape[0]
    W = _words(n)
    M = np.zeros((P, n + 1, W), dtype=np.uint64)
    pad = W * 64 - n
    for start in range(0, n, rows):
        stop = min(n, start + rows)
        block = port[start:stop]
        for p in range(P):
            sel = block == p
            if pad:
                sel = np.pad(sel, ((0, 0), (0, pad)))
            M[p, start:stop] = np.packbits(sel, axis=1, bitorder="little").view(np.uint64)
    return M


def _rowmask(flags):
    return np.where(flags, ALL, np.uint64(0))[:, None]


class _Rule:
    """A VC rule: injection VCs and, for packets that arrive through port r, their next VC per out link."""

    def __init__(self, fab, M, scheme, up=None):
        self.fab, self.M, self.scheme = fab, M, scheme
        n, P = fab.n, fab.P
        if scheme == "dateline":
            _, self.dim_of, wrap = R._direction_ports(fab)
            D = len(fab.sizes)
            self.wrap_out = np.zeros((n, M.shape[2]), dtype=np.uint64)
            self.same_dim = np.zeros((D, n, M.shape[2]), dtype=np.uint64)
            for q in range(P):
                self.wrap_out |= M[q, :n] & _rowmask(wrap[:, q])
                for d in range(D):
                    self.same_dim[d] |= M[q, :n] & _rowmask((self.dim_of[:, q] == d) & ~wrap[:, q])
        elif scheme == "layers":
            self.up = up
            self.up_out = np.zeros((n, M.shape[2]), dtype=np.uint64)
            for q in range(P):
                self.up_out |= M[q, :n] & _rowmask(up[:, q])

    def inject(self, bits):
        """VC per injected packet (bits: all pairs u != t)."""
        if self.scheme == "dateline":
            return [(0, bits & ~self.wrap_out), (1, bits & self.wrap_out)]
        return [(0, bits)]

    def turn(self, arrived, r, k):
        """``[(k', bits)]`` for packets on VC k that arrived at each node through its port r."""
        if self.scheme == "single":
            return [(k, arrived)]
        n = self.fab.n
        if self.scheme == "dateline":
            d = self.dim_of[:, r]
            same = self.same_dim[np.where(d < 0, 0, d), np.arange(n)] & _rowmask(d >= 0)
            wrap = arrived & self.wrap_out
            keep = arrived & same
            return [(k, keep), (1, wrap), (0, arrived & ~same & ~self.wrap_out)]
        escalate = arrived & self.up_out & _rowmask(self.up[:, r])
        return [(k, arrived & ~escalate), (k + 1, escalate)]


def _arrivals(fab, bits, M, r):
    """Bits of packets (in state ``bits``, per sender row) that arrive at every node through its port r."""
    n = fab.n
    w = np.where(fab.nbr[:, r] < 0, n, fab.nbr[:, r])
    p = np.where(fab.nbr[:, r] < 0, 0, fab.nbr_port[:, r]).astype(np.int64)
    return bits[w] & M[p, w]


def reachability(fab, M):
    """Reverse BFS from every destination over the table: ``(unreached pairs, max hops, total hops, first)``."""
    n, P = fab.n, fab.P
    nbr = np.where(fab.nbr < 0, n, fab.nbr)
    visited = _identity(n)
    frontier = visited.copy()
    level = total = 0
    while True:
        nxt = np.zeros_like(frontier)
        for p in range(P):
            nxt[:n] |= M[p, :n] & frontier[nbr[:, p]]
        nxt &= ~visited
        if not nxt.any():
            break
        level += 1
        total += level * _popcount(nxt)
        visited |= nxt
        frontier = nxt
    missing = _all_bits(n) & ~visited
    first = None
    if missing.any():
        u, word = np.argwhere(missing)[0]
        value = int(missing[u, word])
        first = (int(u), int(word) * 64 + (value & -value).bit_length() - 1)
    return n * (n - 1) - (_popcount(visited) - n), level, total, first


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


def prove(fab, port, scheme="single", vcs=MODEL_VCS, root=None, M=None, max_cycle=12):
    """Certificate of one table under one VC scheme (see the module doc).

    Returns ``{scheme, virtual_channels, virtual_channels_used, acyclic, reachable, unreachable_pairs,
    channels, dependencies, max_hops, avg_hops, cycle, problems}``; ``cycle`` names the (node, port, VC)
    channels of one dependency cycle when there is one.
    """
    if scheme not in SCHEMES:
        raise R.RoutingError("unknown virtual-channel scheme %r (expected %s)" % (scheme, ", ".join(SCHEMES)))
    n, P = fab.n, fab.P
    if M is None:
        M = port_masks(port, P)
    cert = {"scheme": scheme, "virtual_channels": int(vcs), "problems": [], "cycle": []}
    unreached, max_hops, total, first = reachability(fab, M)
    cert.update(reachable=not unreached, unreachable_pairs=int(unreached), max_hops=int(max_hops),
                avg_hops=round(total / max(1, n * (n - 1) - unreached), 3))
    if unreached:
        cert["problems"] += ["route %d -> %d does not reach its destination" % (fab.ids[first[0]], fab.ids[first[1]]),
                             "%d pairs in all do not reach their destination" % unreached]
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
    rule = _Rule(fab, M, scheme, up)
    ident = _identity(n)[:n]
    occupied = np.zeros((K + 1, n + 1, M.shape[2]), dtype=np.uint64)  # VC K collects overflow
    frontier = np.zeros_like(occupied)
    for k, bits in rule.inject(_all_bits(n)[:n]):
        frontier[k, :n] |= bits
    occupied |= frontier
    while frontier[:K].any():
        new = np.zeros_like(frontier)
        for k in range(K):
            if not frontier[k].any():
                continue
            for r in range(P):
                arrived = _arrivals(fab, frontier[k], M, r) & ~ident
                for k2, bits in rule.turn(arrived, r, k):
                    new[min(k2, K), :n] |= bits
        new &= ~occupied
        occupied |= new
        frontier = new
    overflow = bool(occupied[K].any())
    # dependencies (node w port p VC k) -> (node v port q VC k'), v = neighbour of w behind p
    states = n * P * K
    src, dst = [], []
    for k in range(K):
        if not occupied[k].any():
            continue
        for r in range(P):
            arrived = _arrivals(fab, occupied[k], M, r) & ~ident
            w = fab.nbr[:, r].astype(np.int64)
            p = fab.nbr_port[:, r].astype(np.int64)
            for k2, bits in rule.turn(arrived, r, k):
                if k2 >= K:
                    continue
                for q in range(P):
                    v = np.nonzero((bits & M[q, :n]).any(axis=1))[0]
                    src.append((w[v] * P + p[v]) * K + k)
                    dst.append((v * P + q) * K + k2)
    src = np.concatenate(src) if src else np.zeros(0, dtype=np.int64)
    dst = np.concatenate(dst) if dst else np.zeros(0, dtype=np.int64)
    ok, left = R.acyclic(states, src, dst)
    used = [k for k in range(K + 1) if occupied[k].any()]
    cert.update(acyclic=bool(ok and not overflow), virtual_channels_used=(max(used) + 1) if used else 0,
                channels=int(np.unique(np.concatenate([src, dst])).size) if src.size else 0,
                dependencies=int(src.size))
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

    ``compute(fab, engine)`` returns the table (default: _routing.compute). Returns ``(port, certificate)``;
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
        for scheme in schemes_for(fab, name, vcs):
            cert = prove(fab, port, scheme, vcs, root, M=M)
            if cert["acyclic"] and cert["reachable"]:
                cert.update(algorithm=name, requested=R.algorithm_name(engines[0]), attempts=attempts,
                            nodes=int(fab.n), links=int((fab.nbr >= 0).sum() // 2))
                return port, cert
            attempts.append({"algorithm": name, "scheme": scheme, "reason": "; ".join(cert["problems"]),
                             "cycle": cert["cycle"]})
            if not cert["reachable"]:
                break
    raise Refused("no deadlock-free routing on %d VC%s: %s" % (
        vcs, "s" if vcs > 1 else "", "; ".join("%s%s: %s" % (a["algorithm"], " (%s)" % a["scheme"] if a["scheme"]
                                                            else "", a["reason"]) for a in attempts)), attempts)
