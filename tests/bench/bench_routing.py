# SPDX-License-Identifier: GPL-3.0-or-later
"""Routing benchmark: full tables for 3-D tori with each numpy engine vs a networkx all-pairs BFS baseline."""
from __future__ import annotations

import sys
import time
import tracemalloc

import networkx as nx

import _bench_paths  # noqa: F401,E402  (the checkout's collection)
from ansible_collections.msa.hpc.plugins.module_utils import _routing as R
from ansible_collections.msa.hpc.plugins.module_utils import _topology as T

ENGINES = ("DimensionOrder", "ShortestPath", "UpDown")


def timed(fn, *args):
    """Wall time of one call (no tracing), then peak traced memory of a second, traced call."""
    start = time.perf_counter()
    result = fn(*args)
    elapsed = time.perf_counter() - start
    return result, elapsed


def peak_memory(fn, *args):
    tracemalloc.start()
    fn(*args)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak


def baseline(graph, sources):
    """One networkx BFS per source (nx.predecessor: hop counts and predecessors, enough for a table)."""
    for s in sources:
        nx.predecessor(graph, s)


def main(sizes=(8, 12, 16), sample=512):
    print("3-D torus routing tables: numpy engines vs networkx BFS from every source, one run, same machine")
    print("seconds: one untraced call; peak MB: tracemalloc peak of a second call (numpy buffers are traced)")
    print("%-6s %6s %-15s %9s %9s %9s %9s" % ("torus", "nodes", "engine", "seconds", "peak MB", "baseline", "ratio"))
    for k in sizes:
        topo = T.generate("torus", [k, k, k])
        fab = R.Fabric.from_topology(topo)
        graph = nx.Graph((a, b) for a, _, b, _ in topo.links)
        nodes = sorted(graph)
        sources = nodes if len(nodes) <= sample else nodes[:: len(nodes) // sample][:sample]
        _, base = timed(baseline, graph, sources)
        note = ""
        if len(sources) < len(nodes):
            base *= len(nodes) / len(sources)
            note = " (networkx timed on %d sources, extrapolated)" % len(sources)
        for engine in ENGINES:
            _, secs = timed(R.compute, fab, engine)
            peak = peak_memory(R.compute, fab, engine)
            print("%-6s %6d %-15s %9.3f %9.1f %9.2f %8.1fx%s"
                  % ("%d^3" % k, fab.n, engine, secs, peak / 2**20, base, base / secs, note))
        if k <= 8:
            for engine in ENGINES:
                (_, summary), secs = timed(R.plan, fab, engine)
                print("       check %-15s %6.3f s  max_hops=%d avg_hops=%.2f deadlock_free=%s VCs=%d"
                      % (engine, secs, summary["max_hops"], summary["avg_hops"], summary["deadlock_free"],
                         summary["virtual_channels"]))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
