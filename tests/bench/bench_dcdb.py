# SPDX-License-Identifier: GPL-3.0-or-later
"""DCDB stand-in benchmark: the pipeline's capacity (Pushers -> mosquitto -> Collect Agent -> SQLite or PostgreSQL
store), and /query latency.

Run: ``.venv/bin/python tests/bench/bench_dcdb.py [--rates 10000,20000,... --seconds 8 --pushers 4]``.
Part 1 starts mosquitto (password file, no anonymous access) on an ephemeral 127.0.0.1 port; for each store (SQLite,
then PostgreSQL in a throw-away cluster, tests/pgcluster.py) it raises the offered load step by step: a fresh store,
one Collect Agent process and N Pusher processes running the tester plugin; it watches the agent's /metrics
(lag_seconds), stops the Pushers (they flush), waits for the agent to store everything and compares with what the
Pushers produced and dropped. Past the last of --rates the load keeps rising by a quarter (up to --max-rate). The first
step that drops, loses or lags ends the search; the highest rate achieved and sustained
with nothing lost is printed for both stores side by side.
Part 2 writes one day of readings of 64 nodes straight into a store and times Grafana /query calls on it.
"""
from __future__ import annotations

import argparse
import base64
import json
import os
import random
import shutil
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

import _bench_paths  # noqa: E402  (the checkout's collection and stand-ins)

ROOT = _bench_paths.BUNDLE

from msa_sim.dcdb.api import make_server  # noqa: E402
from msa_sim.dcdb.collectagent import AgentConfig, CollectAgent  # noqa: E402

S = 10 ** 9
ENV = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.join(ROOT, "sim"), os.path.join(ROOT, "collections")]))


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_port(port, timeout=10):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise SystemExit("nothing listens on port %d" % port)


def metrics(port):
    """The Collect Agent's /metrics as {name without prefix: value} ({} while it does not answer)."""
    try:
        with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=5) as resp:
            text = resp.read().decode()
    except OSError:
        return {}
    return {line.split()[0][len("dcdb_collectagent_"):]: float(line.split()[1])
            for line in text.splitlines() if line.startswith("dcdb_collectagent_")}


class Broker:
    """mosquitto with a password file (no anonymous access) on an ephemeral 127.0.0.1 port."""

    def __init__(self, work):
        self.port = free_port()
        pw = os.path.join(work, "passwd")
        subprocess.run(["mosquitto_passwd", "-b", "-c", pw, "pusher", "p"], check=True)
        subprocess.run(["mosquitto_passwd", "-b", pw, "agent", "a"], check=True)
        with open(os.path.join(work, "mosquitto.conf"), "w") as handle:
            handle.write("listener %d 127.0.0.1\nallow_anonymous false\npassword_file %s\npersistence false\n"
                         "max_queued_messages 100000\nuser %s\n" % (self.port, pw,
                                                                    "root" if os.geteuid() == 0 else "nobody"))
        self.proc = subprocess.Popen([shutil.which("mosquitto") or "/usr/sbin/mosquitto", "-c",
                                      os.path.join(work, "mosquitto.conf")], stderr=subprocess.DEVNULL)
        wait_port(self.port)

    def stop(self):
        self.proc.terminate()
        self.proc.wait(10)


COUNT_SQL = ("SELECT COUNT(*) FROM readings JOIN sensors ON sensors.id = readings.sensor "
             "WHERE sensors.topic NOT LIKE '%/pusher/%'")  # the tester's readings, not the Pushers' own counters


def sqlite_store(work, rate):
    path = "%s/dcdb-%d.sqlite" % (work, rate)

    def count():
        with sqlite3.connect(path, timeout=30) as conn:
            return conn.execute(COUNT_SQL).fetchone()[0]
    return " backend sqlite\n path %s\n" % path, count


def postgres_store(dsn, rate):
    """A fresh database per step (the store of each step starts empty)."""
    import psycopg2

    name = "bench_%d" % rate
    conn = psycopg2.connect(dsn)
    conn.autocommit = True
    with conn.cursor() as cur:
        cur.execute("DROP DATABASE IF EXISTS %s" % name)
        cur.execute("CREATE DATABASE %s" % name)
    conn.close()
    dsn = dsn.replace("dbname=postgres", "dbname=" + name)

    def count():
        with psycopg2.connect(dsn) as conn, conn.cursor() as cur:
            cur.execute(COUNT_SQL)
            return cur.fetchone()[0]
    return ' backend postgresql\n dsn "%s"\n' % dsn, count


def step(args, work, broker, store, rate):
    """One load step: a fresh store and Collect Agent, Pushers offering ``rate`` readings/s for args.seconds.

    Returns {offered, produced, stored, dropped, lag (largest lag_seconds in the second half), drain (s from the
    Pushers' stop until everything was stored), ok}."""
    api = free_port()
    conf = os.path.join(work, "collectagent.conf")
    with open(conf, "w") as handle:
        handle.write("global {\n mqttBroker 127.0.0.1:%d\n mqttprefix /bench\n username agent\n password a\n"
                     " batchSize %d\n batchInterval %d\n sacct none\n clientId bench-%d\n"
                     " persistentSession false\n}\nstorage {\n%s}\nrestAPI {\n address 127.0.0.1:%d\n}\n"
                     % (broker.port, args.batch, args.batch_interval, rate, store[0], api))
    procs = [subprocess.Popen([sys.executable, "-m", "msa_sim.dcdb.collectagent", "--insecure-no-auth", "-c", conf], env=ENV,
                              stderr=open(os.path.join(work, "agent-%d.log" % rate), "w"))]
    try:
        wait_port(api, 30)
        while not metrics(api).get("broker_connected"):
            time.sleep(0.1)
        sensors = max(1, round(rate * args.interval / 1000.0 / args.pushers))
        offered = args.pushers * sensors * 1000.0 / args.interval
        for i in range(args.pushers):
            d = os.path.join(work, "r%d-p%d" % (rate, i))
            os.makedirs(d)
            with open(os.path.join(d, "tester.conf"), "w") as handle:
                handle.write("group t {\n interval %d\n numSensors %d\n}\n" % (args.interval, sensors))
            with open(os.path.join(d, "dcdbpusher.conf"), "w") as handle:
                handle.write("global {\n mqttBroker 127.0.0.1:%d\n mqttprefix /bench/cm/n%02d\n username pusher\n"
                             " password p\n maxMsgNum 1000\n maxQueuedReadings 10000000\n flushInterval %d\n"
                             " payloadFormat %s\n flushTimeout 30000\n statusFile %s/status\n}\nplugins {\n"
                             " plugin tester {\n  config tester.conf\n }\n}\n" % (broker.port, i, args.flush,
                                                                                   args.format, d))
            procs.append(subprocess.Popen([sys.executable, "-m", "msa_sim.dcdb.pusher", "-c",
                                           os.path.join(d, "dcdbpusher.conf")], env=ENV,
                                          stderr=open(os.path.join(d, "log"), "w")))
        start = time.monotonic()
        lag = 0.0
        while time.monotonic() - start < args.seconds:
            time.sleep(0.5)
            seen = metrics(api)
            if time.monotonic() - start > args.seconds / 2:
                lag = max(lag, seen.get("lag_seconds", 0.0))
        ran = time.monotonic() - start
        for proc in procs[1:]:
            proc.send_signal(signal.SIGTERM)
        for proc in procs[1:]:
            proc.wait(120)
        stopped = time.monotonic()
        produced = dropped = 0
        for i in range(args.pushers):
            with open(os.path.join(work, "r%d-p%d" % (rate, i), "status")) as handle:
                status = json.load(handle)
            produced += status["produced"]
            dropped += status["dropped"] + status["queued"]
        stored = store[1]()
        while stored < produced - dropped and time.monotonic() - stopped < 60:
            time.sleep(0.2)
            stored = store[1]()
        drain = time.monotonic() - stopped
        seen = metrics(api)
        dropped += int(seen.get("readings_dropped_total", 0) + seen.get("messages_rejected_total", 0))
        ok = dropped == 0 and stored >= produced and lag <= args.max_lag and drain <= args.max_lag
        if not ok:  # say why: the Pushers' and the agent's own counts, and the agent's last complaint
            with open(os.path.join(work, "agent-%d.log" % rate)) as handle:
                complaints = [line.strip() for line in handle if "WARNING" in line or "ERROR" in line]
            print("    why: pushers dropped/queued %d, agent %s; %s" % (
                dropped - int(seen.get("readings_dropped_total", 0) + seen.get("messages_rejected_total", 0)),
                {k: seen.get(k) for k in ("readings_received_total", "readings_stored_total", "readings_dropped_total",
                                          "messages_rejected_total", "pending_readings")},
                complaints[-1][:300] if complaints else "agent log clean"))
        return {"offered": offered, "achieved": produced / ran, "produced": produced, "stored": stored, "dropped": dropped, "lag": lag,
                "drain": drain, "ok": ok}
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.terminate()
                proc.wait(30)


def capacity(args, work, name, storage):
    """Raise the offered load step by step until readings lag or drop; the highest rate sustained with nothing lost.

    The rate that counts is the one achieved (readings the Pushers produced per second of the step), not the one
    offered: on a loaded machine the Pushers fall behind their schedule. Past the last of args.rates the offered
    load keeps rising by a quarter until a step is not sustained or args.max_rate is reached (then the result is a
    lower bound, and says so)."""
    broker = Broker(work)
    best = 0.0
    limited = False
    rates = list(args.rates)
    try:
        while rates:
            rate = rates.pop(0)
            result = step(args, work, broker, storage(work, rate), rate)
            print("  %-10s offered %7.0f/s  achieved %7.0f/s  produced %8d  stored %8d  dropped %6d  lag %5.2f s  "
                  "drain %5.2f s  %s" % (name, result["offered"], result["achieved"], result["produced"],
                                         result["stored"], result["dropped"], result["lag"], result["drain"],
                                         "sustained" if result["ok"] else "NOT sustained"), flush=True)
            if not result["ok"]:
                limited = True
                break
            best = max(best, result["achieved"])
            if not rates and rate * 1.25 <= args.max_rate:
                rates.append(int(rate * 1.25))
    finally:
        broker.stop()
    return best, limited


def pipeline(args):
    from tests import pgcluster

    print("== pipeline capacity: %d Pushers (tester plugin, every %d ms, %s payloads of up to 1000 readings, flushed "
          "every %d ms) -> mosquitto -> Collect Agent (batches of %d) -> store; %.0f s per step; sustained = nothing "
          "dropped, all stored, lag and drain <= %.1f s"
          % (args.pushers, args.interval, args.format, args.flush, args.batch, args.seconds, args.max_lag))
    results = {}
    with tempfile.TemporaryDirectory(prefix="bench_dcdb.") as work:
        results["sqlite"] = capacity(args, work, "sqlite", sqlite_store)
    missing = pgcluster.missing()
    if missing:
        print("postgresql: not measured: %s" % missing)
    else:
        with tempfile.TemporaryDirectory(prefix="bench_dcdb.") as work, \
                pgcluster.cluster(("fsync=off", "synchronous_commit=off")) as dsn:
            results["postgresql"] = capacity(args, work, "postgresql", lambda _, rate: postgres_store(dsn, rate))
    print("== highest rate sustained with nothing lost (achieved readings/s; goal >= 50000):")
    print("   " + "   ".join("%s %.0f readings/s%s" % (k, v, "" if limited else " (not limited up to --max-rate)")
                             for k, (v, limited) in results.items()))
    if len(results) == 2 and results["sqlite"][0]:
        print("   ratio postgresql / sqlite: %.2f" % (results["postgresql"][0] / results["sqlite"][0]))


def query_latency(args, work):
    conf = os.path.join(work, "q.conf")
    with open(conf, "w") as handle:
        handle.write("global {\n sacct none\n}\nstorage {\n path %s/q.sqlite\n}\nrestAPI {\n user g {\n"
                     "  password g\n }\n}\n" % work)
    agent = CollectAgent(AgentConfig(conf))
    agent.start_writer()
    day0 = (int(time.time()) // 86400 - 1) * 86400 * S
    sensors = [("power/node", 10), ("cpu/util", 10), ("mem/used", 60), ("load/load1", 60)]
    rng = random.Random(1)
    t = time.monotonic()
    total = 0
    for node in range(64):
        rows = []
        for name, step in sensors:
            topic = "/msa/%s/n%02d/%s" % ("cm" if node < 32 else "esb", node, name)
            base = rng.uniform(100, 300)
            rows.extend((topic, day0 + i * step * S, base + rng.random() * 50) for i in range(86400 // step))
        agent.store.add(rows)
        total += len(rows)
    for topic in agent.store.topics():
        agent.tree.add(topic)
    load_s = time.monotonic() - t
    server = make_server(agent, "127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = "http://127.0.0.1:%d/query" % server.server_address[1]
    auth = "Basic " + base64.b64encode(b"g:g").decode()

    def call(target, t0, t1, points):
        body = json.dumps({"range": {"from": t0 // 10 ** 6, "to": t1 // 10 ** 6}, "maxDataPoints": points,
                           "intervalMs": 1000, "targets": [{"target": target}]}).encode()
        req = urllib.request.Request(url, data=body, headers={"Authorization": auth}, method="POST")
        start = time.perf_counter()
        with urllib.request.urlopen(req, timeout=120) as resp:
            result = json.loads(resp.read())
        return time.perf_counter() - start, len(result), sum(len(s["datapoints"]) for s in result)

    print("== /query on one day of 64 nodes: %d rows (%d sensors) written in %.1f s (%.0f rows/s)"
          % (total, len(agent.tree), load_s, total / load_s))
    cases = [("one sensor, one day, 1000 points", "/msa/cm/n00/power/node", day0, day0 + 86400 * S, 1000),
             ("one sensor, one day, raw", "/msa/cm/n00/power/node", day0, day0 + 86400 * S, None),
             ("one sensor, one hour, raw", "/msa/cm/n00/power/node", day0, day0 + 3600 * S, None),
             ("64 nodes (wildcard), one day, 1000 points each", "/msa/+/+/power/node", day0, day0 + 86400 * S, 1000),
             ("64 nodes (wildcard), one hour, raw", "/msa/+/+/power/node", day0, day0 + 3600 * S, None)]
    timings = {}
    for label, target, t0, t1, points in cases:
        runs = [call(target, t0, t1, points) for _ in range(args.repeat)]
        med = statistics.median(r[0] for r in runs)
        timings[label] = med
        print("%-48s %8.1f ms  (%d series, %d points)" % (label, med * 1000, runs[0][1], runs[0][2]))
    print("ratio one day raw / 1000 points: %.1f" % (timings[cases[1][0]] / timings[cases[0][0]]))
    server.shutdown()
    agent.stop()


def main():
    parser = argparse.ArgumentParser(description="DCDB stand-in benchmark")
    parser.add_argument("--pushers", type=int, default=4)
    parser.add_argument("--interval", type=int, default=100, help="ms between readings of each sensor")
    parser.add_argument("--rates", default="10000,20000,30000,40000,50000,60000,80000,100000",
                        help="offered loads (readings/s) tried in turn until one is not sustained")
    parser.add_argument("--max-rate", type=int, default=400000,
                        help="past the last of --rates the load rises by a quarter per step up to this")
    parser.add_argument("--seconds", type=float, default=8, help="length of each load step")
    parser.add_argument("--flush", type=int, default=1000, help="Pusher flushInterval (ms)")
    parser.add_argument("--batch", type=int, default=20000, help="Collect Agent batchSize (readings)")
    parser.add_argument("--batch-interval", type=int, default=200, help="Collect Agent batchInterval (ms)")
    parser.add_argument("--max-lag", type=float, default=3.0, help="s of lag or drain still counted as sustained")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--format", default="binary", choices=["json", "binary"])
    parser.add_argument("--skip-throughput", action="store_true")
    parser.add_argument("--skip-query", action="store_true")
    args = parser.parse_args()
    args.rates = [int(r) for r in args.rates.split(",")]
    if not args.skip_throughput:
        pipeline(args)
    with tempfile.TemporaryDirectory(prefix="bench_dcdb.") as work:
        if not args.skip_query:
            query_latency(args, work)


if __name__ == "__main__":
    main()
