# SPDX-License-Identifier: GPL-3.0-or-later
"""Gateway routing-file benchmark: build, write and parse 1,000 × 1,000 node pairs with each strategy."""
from __future__ import annotations

import sys
import time

import _bench_paths  # noqa: F401,E402  (the checkout's collection)
from ansible_collections.msa.hpc.plugins.module_utils import _gw_routing as R


def timed(fn, *args, **kw):
    start = time.perf_counter()
    result = fn(*args, **kw)
    return result, time.perf_counter() - start


def naive_text(table):
    """Baseline: one Python format call per line, as a straightforward route script writes it."""
    gw, cl, bo = table.gateways, table.clusters, table.boosters
    return "".join("%s %s %s\n" % (gw[g], cl[c], bo[b])
                   for g, c, b in zip(table.g.tolist(), table.c.tolist(), table.b.tolist())).encode()


def main(n_cluster=1000, n_booster=1000, n_gateways=8):
    clusters = ["cluster%04d" % i for i in range(n_cluster)]
    boosters = ["booster%04d" % i for i in range(n_booster)]
    gateways = ["10.1.0.%d:%d" % (200 + i, 40000 + i) for i in range(n_gateways)]
    print("routing file for %d x %d node pairs over %d gateways (one run, same machine)"
          % (n_cluster, n_booster, n_gateways))
    print("%-8s %8s %8s %8s %8s %10s %8s %s" % ("strategy", "map s", "write s", "total s", "parse s", "naive s",
                                                "ratio", "pairs per gateway (min-max)"))
    for strategy in ("balance", "booster", "cluster"):
        table, t_map = timed(R.build_routing, clusters, boosters, gateways, strategy)
        data, t_write = timed(R.format_routing, table)
        _, t_parse = timed(R.parse_routing, data)
        naive, t_naive = timed(naive_text, table)
        assert naive == data
        load = table.load().values()
        print("%-8s %8.3f %8.3f %8.3f %8.3f %10.3f %7.1fx %d-%d" % (
            strategy, t_map, t_write, t_map + t_write, t_parse, t_naive, t_naive / t_write, min(load), max(load)))
    print("file size: %.1f MB, %d lines" % (len(data) / 1e6, len(table)))
    return 0


if __name__ == "__main__":
    sys.exit(main(*[int(a) for a in sys.argv[1:]]))
