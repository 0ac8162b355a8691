# SPDX-License-Identifier: GPL-3.0-or-later
"""DCDB stand-in benchmark: sustained readings/s from Pushers through mosquitto into the store, and /query latency.

Run: ``.venv/bin/python tests/bench/bench_dcdb.py [--pushers 4 --sensors 250 --interval 100 --seconds 10]``.
Part 1 starts mosquitto (password file, no anonymous access) on an ephemeral 127.0.0.1 port, one Collect Agent
process and N Pusher processes running the tester plugin; after the run it stops the Pushers (they flush), waits for
the agent to store everything and compares the rows in SQLite with what the Pushers produced and dropped.
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


def stored_rows(db):
    try:
        with sqlite3.connect(db, timeout=30) as conn:
            return conn.execute("SELECT COUNT(*) FROM readings JOIN sensors ON sensors.id = readings.sensor "
                                "WHERE sensors.topic NOT LIKE '%/pusher/%'").fetchone()[0]
    except sqlite3.Error:
        return 0


def throughput(args, work, flush, fmt):
    port = free_port()
    pw = os.path.join(work, "passwd")
    subprocess.run(["mosquitto_passwd", "-b", "-c", pw, "pusher", "p"], check=True)
    subprocess.run(["mosquitto_passwd", "-b", pw, "agent", "a"], check=True)
    with open(os.path.join(work, "mosquitto.conf"), "w") as handle:
        handle.write("listener %d 127.0.0.1\nallow_anonymous false\npassword_file %s\npersistence false\n"
                     "max_queued_messages 100000\nuser %s\n" % (port, pw, "root" if os.geteuid() == 0 else "nobody"))
    broker = subprocess.Popen([shutil.which("mosquitto") or "/usr/sbin/mosquitto", "-c",
                               os.path.join(work, "mosquitto.conf")], stderr=subprocess.DEVNULL)
    procs = []
    try:
        wait_port(port)
        db = os.path.join(work, "dcdb.sqlite")
        with open(os.path.join(work, "collectagent.conf"), "w") as handle:
            handle.write("global {\n mqttBroker 127.0.0.1:%d\n mqttprefix /bench\n username agent\n password a\n"
                         " batchSize 20000\n batchInterval 200\n sacct none\n}\nstorage {\n path %s\n}\n"
                         "restAPI {\n address 127.0.0.1:%d\n}\n" % (port, db, free_port()))
        agent = subprocess.Popen([sys.executable, "-m", "msa_sim.dcdb.collectagent", "-c",
                                  os.path.join(work, "collectagent.conf")], env=ENV, stderr=subprocess.DEVNULL)
        procs.append(agent)
        time.sleep(1.0)
        for i in range(args.pushers):
            d = os.path.join(work, "p%d" % i)
            os.makedirs(d)
            with open(os.path.join(d, "tester.conf"), "w") as handle:
                handle.write("group t {\n interval %d\n numSensors %d\n}\n" % (args.interval, args.sensors))
            with open(os.path.join(d, "dcdbpusher.conf"), "w") as handle:
                handle.write("global {\n mqttBroker 127.0.0.1:%d\n mqttprefix /bench/cm/n%02d\n username pusher\n"
                             " password p\n maxMsgNum 1000\n maxQueuedReadings 1000000\n flushInterval %d\n"
                             " payloadFormat %s\n flushTimeout 30000\n statusFile %s/status\n}\nplugins {\n"
                             " plugin tester {\n  config tester.conf\n }\n}\n" % (port, i, flush, fmt, d))
        offered = args.pushers * args.sensors * 1000.0 / args.interval
        start = time.monotonic()
        for i in range(args.pushers):
            procs.append(subprocess.Popen([sys.executable, "-m", "msa_sim.dcdb.pusher", "-c",
                                           os.path.join(work, "p%d" % i, "dcdbpusher.conf")], env=ENV,
                                          stderr=open(os.path.join(work, "p%d" % i, "log"), "w")))
        time.sleep(args.seconds)
        mid_rows = stored_rows(db)
        mid_time = time.monotonic() - start
        for proc in procs[1:]:
            proc.send_signal(signal.SIGTERM)
        for proc in procs[1:]:
            proc.wait(60)
        stopped = time.monotonic() - start
        produced = dropped = published = 0
        for i in range(args.pushers):
            with open(os.path.join(work, "p%d" % i, "status")) as handle:
                status = json.load(handle)
            produced += status["produced"]
            dropped += status["dropped"]
            published += status["published"]
            if status["queued"] or status["inflight"]:
                print("pusher %d ended with %d queued, %d in flight" % (i, status["queued"], status["inflight"]))
        last, stable_since = -1, time.monotonic()
        while time.monotonic() - stable_since < 2.0:  # until the agent has written everything it received
            rows = stored_rows(db)
            if rows != last:
                last, stable_since = rows, time.monotonic()
            if rows >= produced:
                break
            time.sleep(0.2)
        done = time.monotonic() - start
        rows = stored_rows(db)
        print("== throughput: %d pushers x %d sensors every %d ms (offered %.0f readings/s), %.0f s, %s payloads "
              "flushed every %d ms (%.0f readings per message)" % (args.pushers, args.sensors, args.interval, offered,
                                                                   args.seconds, fmt, flush, flush / args.interval))
        print("produced %d  dropped by pushers %d  published %d  stored %d  lost %d"
              % (produced, dropped, published, rows, produced - rows))
        print("stored while running: %d rows in %.1f s = %.0f readings/s" % (mid_rows, mid_time, mid_rows / mid_time))
        print("sustained end to end (all stored / time until the last was stored): %.0f readings/s (%.2f of offered);"
              " drain after stop %.1f s" % (rows / done, rows / done / offered, done - stopped))
        return rows / done
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.terminate()
                proc.wait(10)
        broker.terminate()
        broker.wait(10)


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
    parser.add_argument("--sensors", type=int, default=250)
    parser.add_argument("--interval", type=int, default=100, help="ms between readings of each sensor")
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--flush", default="500,2000", help="Pusher flushInterval values (ms) to compare")
    parser.add_argument("--format", default="json", choices=["json", "binary"])
    parser.add_argument("--skip-throughput", action="store_true")
    parser.add_argument("--skip-query", action="store_true")
    args = parser.parse_args()
    if not args.skip_throughput:
        rates = []
        for flush in [int(f) for f in args.flush.split(",")]:
            with tempfile.TemporaryDirectory(prefix="bench_dcdb.") as work:
                rates.append((flush, throughput(args, work, flush, args.format)))
        if len(rates) > 1:
            print("ratio of sustained rates, flush %d ms / %d ms: %.2f" % (rates[-1][0], rates[0][0],
                                                                         rates[-1][1] / rates[0][1]))
    with tempfile.TemporaryDirectory(prefix="bench_dcdb.") as work:
        if not args.skip_query:
            query_latency(args, work)


if __name__ == "__main__":
    main()
