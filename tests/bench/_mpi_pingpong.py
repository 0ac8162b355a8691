# SPDX-License-Identifier: GPL-3.0-or-later
"""The MPI program of tests/bench/bench_mpi.py, run on the nodes by `srun --mpi=pmix` (mpi4py, Python 3, nothing
else): pingpong latency (small messages) and bandwidth (large messages) between pairs of ranks, all pairs at once.

  --pairs 0:1,2:3          the pairs (world ranks; the first of each pair starts the pingpong)
  --pick A,B:C,D           instead of --pairs: ranks A,B (cluster side) against C,D (booster side), one pair each;
                           the pairing chosen so that the pairs go through different gateways when the nodes' routes
                           allow (every rank of the cluster side asks its kernel `ip route get` for each booster
                           rank's address on --fabric-net), else the first pairing
  --fabric-net CIDR        the booster side's fabric network (for --pick)

World rank 0 prints one line `RESULT {json}`: every rank's place, and per pair the hosts, the gateway its route goes
through (with --pick), the median one-way latency in microseconds (half a round trip, over --iters round trips,
after a warm-up) and the pingpong bandwidth in MiB/s (bytes moved both ways over the time of --big-iters round
trips), and whether the big message arrived intact.
"""
import argparse
import hashlib
import ipaddress
import itertools
import json
import socket
import statistics
import subprocess
import sys

from mpi4py import MPI


def addresses_in(net):
    """This node's IPv4 addresses in ``net``."""
    out = subprocess.run(["ip", "-o", "-4", "addr", "show"], capture_output=True, text=True, check=False).stdout
    network = ipaddress.ip_network(net)
    found = []
    for line in out.splitlines():
        fields = line.split()
        if "inet" in fields:
            addr = fields[fields.index("inet") + 1].split("/")[0]
            if ipaddress.ip_address(addr) in network:
                found.append(addr)
    return found


def route_via(addr):
    """The next hop of this node's route to ``addr`` (None when it is reached directly)."""
    fields = subprocess.run(["ip", "-o", "route", "get", addr], capture_output=True, text=True,
                            check=False).stdout.split()
    return fields[fields.index("via") + 1] if "via" in fields else None


def pick_pairs(comm, left, right, net):
    """Pairs (left[i], right[j]) over distinct gateways when possible; ``(pairs, via)`` on every rank."""
    rank = comm.Get_rank()
    mine = addresses_in(net) if rank in right else []
    addrs = comm.allgather(mine)
    vias = {}
    if rank in left:
        vias = {r: route_via(addrs[r][0]) if addrs[r] else None for r in right}
    table = comm.gather(vias, root=0)
    choice = None
    if rank == 0:
        via = {(a, b): table[a].get(b) for a in left for b in right}
        options = [list(zip(left, perm)) for perm in itertools.permutations(right, len(left))]
        spread = [p for p in options if len({via[pair] for pair in p}) == len(p)]
        chosen = (spread or options)[0]
        choice = ([list(p) for p in chosen], {"%d:%d" % p: via[p] for p in chosen}, bool(spread))
    return comm.bcast(choice, root=0)


def pattern(nbytes):
    return hashlib.shake_256(b"bench-mpi %d" % nbytes).digest(nbytes)


def pingpong(comm, peer, first, nbytes, iters, warmup):
    """Round trips of ``nbytes`` with ``peer``; the seconds of each (on the first rank) and whether data arrived."""
    send = bytearray(pattern(nbytes)) if first else bytearray(nbytes)
    recv = bytearray(nbytes)
    times = []
    intact = True
    for i in range(warmup + iters):
        if first:
            t0 = MPI.Wtime()
            comm.Send([send, MPI.BYTE], dest=peer, tag=7)
            comm.Recv([recv, MPI.BYTE], source=peer, tag=8)
            if i >= warmup:
                times.append(MPI.Wtime() - t0)
        else:
            comm.Recv([recv, MPI.BYTE], source=peer, tag=7)
            if i == 0:
                intact = bytes(recv) == pattern(nbytes)
                send[:] = recv
            comm.Send([send, MPI.BYTE], dest=peer, tag=8)
    if first:
        intact = intact and bytes(recv) == pattern(nbytes)
    return times, intact


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs")
    ap.add_argument("--pick")
    ap.add_argument("--fabric-net")
    ap.add_argument("--small", type=int, default=8)
    ap.add_argument("--iters", type=int, default=300)
    ap.add_argument("--big", type=int, default=4 << 20)
    ap.add_argument("--big-iters", type=int, default=5)
    args = ap.parse_args()
    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    host = socket.gethostname()
    places = comm.allgather(host)
    via, spread = {}, None
    if args.pick:
        left, right = ([int(r) for r in side.split(",")] for side in args.pick.split(":"))
        pairs, via, spread = pick_pairs(comm, left, right, args.fabric_net)
    else:
        pairs = [[int(r) for r in p.split(":")] for p in args.pairs.split(",")]
    results = []
    for a, b in pairs:
        if rank in (a, b):
            first, peer = rank == a, b if rank == a else a
            small_times, small_ok = pingpong(comm, peer, first, args.small, args.iters, 20)
            big_times, big_ok = pingpong(comm, peer, first, args.big, args.big_iters, 1)
            oks = comm.sendrecv((small_ok, big_ok), dest=peer, source=peer, sendtag=9, recvtag=9)
            if first:
                results.append({
                    "pair": [a, b], "hosts": [places[a], places[b]], "via": via.get("%d:%d" % (a, b)),
                    "latency_us": statistics.median(small_times) / 2 * 1e6,
                    "bandwidth_mib_s": 2 * args.big * len(big_times) / sum(big_times) / (1 << 20),
                    "big_seconds": sum(big_times), "intact": small_ok and big_ok and all(oks)})
    gathered = comm.gather(results, root=0)
    if rank == 0:
        print("RESULT " + json.dumps({"places": places, "spread": spread,
                                      "pairs": [r for part in gathered for r in part]}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
