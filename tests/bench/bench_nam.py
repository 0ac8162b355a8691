# SPDX-License-Identifier: GPL-3.0-or-later
"""Allocate+free latency of the NAM manager's REST API with 10,000 live allocations, against an empty manager."""
from __future__ import annotations

import argparse
import base64
import http.client
import json
import os
import pathlib
import random
import shutil
import statistics
import tempfile
import time

import _bench_paths  # noqa: E402  (the checkout's collection and stand-ins)


from msa_sim.nammgr import testing  # noqa: E402
from msa_sim.nammgr.store import Store  # noqa: E402

HELP = """
    .venv/bin/python tests/bench/bench_nam.py [--pairs 1000] [--live 10000]

Starts the manager (``python3 -m msa_sim.nammgr serve``) on 127.0.0.1 for each case, fills it straight
through its store (12.5 % more allocations than kept, the surplus freed again at random so the free table
is fragmented), then times POST /nam/allocations + DELETE /nam/allocations/<id> pairs over one keep-alive
connection with a bearer token. Prints median and p99 per case and the ratios between cases of one run.
"""

CONF = """
[manager]
state_dir = {state}
users_file = {users}
synchronous = {sync}
admin_reserve_percent = 5
aat_size = 256
[nam:nam01]
capacity = 64G
nonvolatile_capacity = 256G
[nam:nam02]
capacity = 64G
[gce:gce01]
"""


def populate(db, live, seed=1):
    rnd = random.Random(seed)
    store = Store(db, synchronous="off", granularity=4096)
    store.sync_devices([{"name": "nam01", "capacity": 64 << 30, "nonvolatile_capacity": 256 << 30,
                         "aat_size": 256, "reserve_percent": 5},
                        {"name": "nam02", "capacity": 64 << 30, "aat_size": 256, "reserve_percent": 5}])
    ids = [store.allocate(rnd.choice((64, 256, 1024, 4096)) << 10, volatile=rnd.random() < 0.7, owner="bench",
                          job=str(rnd.randrange(500)))["id"] for _ in range(live + live // 8)]
    for alloc_id in rnd.sample(ids, live // 8):
        store.free(alloc_id)
    segments = len(store.free_segments())
    assert store.check() == []
    store.close()
    return segments


class Manager:
    def __init__(self, tmp, sync, live):
        self.tmp = tmp
        tmp.mkdir()
        conf = testing.write_config(tmp, CONF, {"bench": ("admin", "pw")}, sync=sync)
        (tmp / "state").mkdir()
        self.free_segments = populate(str(tmp / "state" / "nam-manager.db"), live) if live else 1
        try:
            self.proc, self.port = testing.spawn(conf, tmp / "ready", extra_args=["--log-level", "WARNING"], timeout=60)
        except RuntimeError as exc:
            raise SystemExit(str(exc)) from None
        self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        basic = "Basic " + base64.b64encode(b"bench:pw").decode()
        token = self.call("POST", "/auth/token", {}, {"Authorization": basic})[1]["token"]
        self.headers = {"Authorization": "Bearer " + token}

    def call(self, method, path, body=None, headers=None):
        self.conn.request(method, path, body=json.dumps(body) if body is not None else None,
                          headers=dict(headers or self.headers, **{"Content-Type": "application/json"}))
        resp = self.conn.getresponse()
        return resp.status, json.loads(resp.read())

    def stop(self):
        self.conn.close()
        self.proc.terminate()
        self.proc.wait(timeout=20)


def measure(mgr, pairs, seed=2):
    rnd = random.Random(seed)
    alloc_t, free_t = [], []
    for _ in range(pairs):
        body = {"size": rnd.choice((64, 256, 1024, 4096)) << 10, "volatile": rnd.random() < 0.7, "job": "bench"}
        t0 = time.perf_counter()
        status, rec = mgr.call("POST", "/nam/allocations", body)
        t1 = time.perf_counter()
        assert status == 201, rec
        status, _ = mgr.call("DELETE", "/nam/allocations/%d" % rec["id"])
        t2 = time.perf_counter()
        assert status == 200
        alloc_t.append(t1 - t0)
        free_t.append(t2 - t1)
    return alloc_t, free_t


def pct(values, q):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q / 100.0 * (len(ordered) - 1))))]


def main():
    ap = argparse.ArgumentParser(description=HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pairs", type=int, default=1000)
    ap.add_argument("--live", type=int, default=10000)
    args = ap.parse_args()
    work = pathlib.Path(tempfile.mkdtemp(prefix="bench_nam."))
    cases = [("empty", "full", 0), ("%d live" % args.live, "full", args.live),
             ("empty", "normal", 0), ("%d live" % args.live, "normal", args.live)]
    rows = {}
    try:
        for i, (label, sync, live) in enumerate(cases):
            t0 = time.monotonic()
            mgr = Manager(work / ("case%d" % i), sync, live)
            setup = time.monotonic() - t0
            try:
                measure(mgr, min(50, args.pairs))                  # warm-up
                a, f = measure(mgr, args.pairs)
                left = mgr.call("GET", "/nam/allocations?job=bench")[1]["allocations"]
                check = mgr.call("GET", "/nam/admin/check")[1]
                devices = mgr.call("GET", "/nam/devices")[1]["devices"]
            finally:
                mgr.stop()
            assert not left and check["ok"], (left, check)
            pair = [x + y for x, y in zip(a, f)]
            rows[(label, sync)] = pair
            segs = sum(p["free_segments"] for d in devices for p in d["pools"].values())
            print("%-12s sync=%-6s live=%5d free segments=%5d  alloc median %6.2f ms p99 %6.2f ms | "
                  "free median %6.2f ms p99 %6.2f ms | pair median %6.2f ms p99 %6.2f ms  (set-up %.1f s)"
                  % (label, sync, live, segs, 1e3 * statistics.median(a), 1e3 * pct(a, 99),
                     1e3 * statistics.median(f), 1e3 * pct(f, 99), 1e3 * statistics.median(pair),
                     1e3 * pct(pair, 99), setup), flush=True)
        live_label = "%d live" % args.live
        for sync in ("full", "normal"):
            full, empty = rows[(live_label, sync)], rows[("empty", sync)]
            print("ratio %s / empty (sync=%s): median %.2f, p99 %.2f" % (
                live_label, sync, statistics.median(full) / statistics.median(empty), pct(full, 99) / pct(empty, 99)))
        full, normal = rows[(live_label, "full")], rows[(live_label, "normal")]
        print("ratio sync=full / sync=normal (%s): median %.2f" % (
            live_label, statistics.median(full) / statistics.median(normal)))
        print("pairs per case: %d over one keep-alive connection, bearer token; %d CPUs, load %.1f"
              % (args.pairs, os.cpu_count(), os.getloadavg()[0]))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
