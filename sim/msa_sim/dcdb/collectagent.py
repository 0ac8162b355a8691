# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

"""DCDB Collect Agent stand-in: MQTT subscriber → validation → operators → store, plus the Grafana HTTP API.

``python3 -m msa_sim.dcdb.collectagent --config /etc/dcdb/collectagent.conf``. Subscribes with credentials to
``<mqttprefix>/#`` on the broker, rejects (and counts) malformed topics and payloads, writes readings in batched
transactions, runs the ``analytics`` operators on each batch, and keeps a job table from the readings of the slurm
plugin's ``jobid`` sensors. SIGTERM drains the pending readings and exits.
"""

import argparse
import collections
import json
import logging
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time

from ansible_collections.msa.hpc.plugins.module_utils._hostlist import expand as expand_hosts

from . import payload as wire
from .analytics import load_operators, run_operators
from .info import (DcdbConfigError, as_bool, as_int, client_class, load_info, mqtt_tls, read_secret, split_hostport,
                   use_tls)
from .store import StoreError, open_store
from .tree import SensorTree

try:
    import paho.mqtt.client as mqtt
except ImportError:  # pragma: no cover - the node image installs python3-paho-mqtt
    mqtt = None

LOG = logging.getLogger("dcdb.collectagent")


class AgentConfig:
    """collectagent.conf: ``global`` (MQTT, batching, jobs), ``storage``, ``restAPI`` and ``analytics``."""

    def __init__(self, path):
        self.path = path
        root = load_info(path)
        self.root = root
        glob = root.get("global")
        get = (lambda k, d=None: glob.value_of(k, d)) if glob is not None else (lambda k, d=None: d)
        self.ca_file, port = mqtt_tls(get)
        self.broker = split_hostport(get("mqttBroker", "127.0.0.1:%d" % port), port, "global.mqttBroker")
        self.username = get("username") or None
        pw_file = get("passwordFile")
        self.password = read_secret(pw_file, "global.passwordFile") if pw_file else get("password")
        prefix = (get("mqttprefix") or get("mqttPrefix") or "/").rstrip("/")
        self.subscription = prefix + "/#" if prefix else "#"
        self.qos = as_int(get("qosLevel"), 1, "global.qosLevel")
        self.client_id = get("clientId", "dcdb-collectagent")
        self.persistent = as_bool(get("persistentSession"), True)
        self.reconnect_max = max(1, as_int(get("reconnectMax"), 10, "global.reconnectMax"))
        self.batch_size = max(1, as_int(get("batchSize"), 5000, "global.batchSize"))
        self.batch_interval = max(1, as_int(get("batchInterval"), 200, "global.batchInterval")) / 1000.0
        self.max_pending = max(1, as_int(get("maxPendingMessages"), 100000, "global.maxPendingMessages"))
        # the agent's memory: readings waiting for the store (in all, and per message, that is per topic and
        # publish), and the jobs remembered per node; past each bound the oldest go first, and are counted
        self.max_pending_readings = max(1, as_int(get("maxPendingReadings"), 200000, "global.maxPendingReadings"))
        self.max_message_readings = max(1, as_int(get("maxReadingsPerMessage"), 10000,
                                                  "global.maxReadingsPerMessage"))
        self.max_jobs_per_node = max(1, as_int(get("maxJobsPerNode"), 256, "global.maxJobsPerNode"))
        self.job_sensor = get("jobSensor", "jobid")
        self.job_grace_ns = as_int(get("jobGrace"), 5000, "global.jobGrace") * 1000000
        sacct = get("sacct", "auto")
        self.sacct = shutil.which("sacct") if sacct == "auto" else (None if sacct in ("", "none") else sacct)
        self.status_file = get("statusFile")
        rest = root.get("restAPI")
        rget = (lambda k, d=None: rest.value_of(k, d)) if rest is not None else (lambda k, d=None: d)
        self.http = split_hostport(rget("address", "127.0.0.1:8080"), 8080, "restAPI.address")
        # DCDB's REST API speaks HTTPS with these (PEM) files; without them this stand-in serves plain HTTP
        self.tls_cert, self.tls_key = rget("certificate") or None, rget("privateKey") or None
        if bool(self.tls_cert) != bool(self.tls_key):
            raise DcdbConfigError("restAPI: certificate and privateKey must be set together")
        self.users = {}
        if rest is not None:
            for user in rest.get_all("user"):
                pw = user.value_of("password")
                if user.value_of("passwordFile"):
                    pw = read_secret(user.value_of("passwordFile"), "restAPI.user %s passwordFile" % user.value)
                if not pw:
                    raise DcdbConfigError("restAPI user %r has no password or passwordFile" % user.value)
                self.users[user.value] = pw
        self.storage = root.get("storage")
        self.analytics = root.get("analytics")


def expand_hostlist(text):
    """Slurm hostlist → names: ``cm[01-03,7],esb1`` → cm01 cm02 cm03 cm7 esb1."""
    text = str(text or "").strip()
    return [] if text in ("", "(null)") else expand_hosts(text)


FINISHED_CACHE = 1024  # finished jobs whose sacct record is kept in memory


class JobTracker:
    """In-memory view of which jobs run on which node, fed by ``…/<group>/jobid`` readings: at most ``max_jobs``
    per node (the job seen longest ago is forgotten first, and counted in ``forgotten``; the store keeps them all)."""

    def __init__(self, grace_ns, max_jobs=256):
        self.grace_ns = grace_ns
        self.max_jobs = max_jobs
        self.forgotten = 0
        self._nodes = collections.defaultdict(dict)

    def seen(self, jobid, node, ts):
        jobs = self._nodes[node]
        span = jobs.get(jobid)
        jobs[jobid] = (min(span[0], ts), max(span[1], ts)) if span else (ts, ts)
        if len(jobs) > self.max_jobs:
            del jobs[min(jobs, key=lambda j: jobs[j][1])]
            self.forgotten += 1

    def on(self, node, ts):
        """Jobs running on ``node`` at ``ts``, the latest-started last."""
        spans = self._nodes.get(node, {})
        running = [(lo, j) for j, (lo, hi) in spans.items() if lo - self.grace_ns <= ts <= hi + self.grace_ns]
        return [j for _, j in sorted(running)]


class CollectAgent:
    def __init__(self, config, store=None, client_factory=None):
        self.config = config
        self.store = store or open_store(config.storage)
        self.tree = SensorTree(self.store.topics())
        self.operators = load_operators(config.analytics)
        self.jobs = JobTracker(config.job_grace_ns, config.max_jobs_per_node)
        self.counters = collections.Counter()
        self.last_rejects = collections.deque(maxlen=20)
        self.connected = False
        self._pending = queue.Queue(maxsize=config.max_pending)
        self._client_factory = client_factory
        self._finished_jobs = collections.OrderedDict()  # sacct's records of finished jobs, the last FINISHED_CACHE
        self._pending_readings = 0
        self._pending_lock = threading.Lock()
        self._client = None
        self._stop = threading.Event()
        self._idle = threading.Event()
        self._idle.set()
        self._writer = None
        self.lag_s = 0.0

    # ---- ingestion -------------------------------------------------------------------------------------------------
    def ingest(self, topic, payload):
        """Validate one MQTT message and queue its readings; return the number queued (0 if rejected)."""
        try:
            wire.check_topic(topic)
            readings = wire.decode(payload)
        except wire.PayloadError as exc:
            self.counters["rejected"] += 1
            self.last_rejects.append({"topic": topic[:200], "reason": str(exc)[:200], "ts": time.time()})
            if self.counters["rejected"] <= 10 or self.counters["rejected"] % 1000 == 0:
                LOG.warning("rejected message on %r: %s (%d rejected so far)", topic[:200], exc,
                            self.counters["rejected"])
            return 0
        self.counters["messages"] += 1
        self.counters["received"] += len(readings)
        if len(readings) > self.config.max_message_readings:  # readings come oldest first: keep the newest
            self._shed(len(readings) - self.config.max_message_readings, topic, "maxReadingsPerMessage")
            readings = readings[-self.config.max_message_readings:]
        with self._pending_lock:
            self._pending_readings += len(readings)
            while self._pending_readings > self.config.max_pending_readings:
                try:
                    oldest, dropped = self._pending.get_nowait()
                except queue.Empty:
                    break
                self._pending_readings -= len(dropped)
                self._shed(len(dropped), oldest, "maxPendingReadings")
        self._idle.clear()
        self._pending.put((topic, readings))
        return len(readings)

    def _shed(self, count, topic, bound):
        """Count ``count`` readings of ``topic`` dropped to stay within ``bound`` (logged now and then)."""
        self.counters["shed"] += count
        if self.counters["shed_events"] % 1000 == 0:
            LOG.warning("dropped %d readings of %s to stay within %s (%d dropped so far)", count, topic[:200],
                        bound, self.counters["shed"])
        self.counters["shed_events"] += 1

    def _on_message(self, client, userdata, msg):
        self.ingest(msg.topic, msg.payload)

    def _on_connect(self, client, userdata, flags, rc):
        if rc != 0:
            LOG.error("broker refused the connection: %s", mqtt.connack_string(rc) if mqtt else rc)
            return
        self.connected = True
        client.subscribe(self.config.subscription, qos=self.config.qos)
        LOG.info("connected to %s:%d, subscribed to %s", self.config.broker[0], self.config.broker[1],
                 self.config.subscription)

    def _on_disconnect(self, client, userdata, rc):
        self.connected = False
        if rc != 0:
            LOG.warning("lost the broker (rc=%s); reconnecting", rc)

    def process(self, batch):
        """Job sightings, operators and the store write for a batch of messages [(topic, [(ts, value), ...])]."""
        sightings = []
        inputs = []
        for topic, readings in batch:
            if topic.rsplit("/", 1)[-1] == self.config.job_sensor:
                node = wire.node_prefix(topic)
                for ts, value in readings:
                    if value:
                        jobid = str(int(value))
                        self.jobs.seen(jobid, node, ts)
                        sightings.append((jobid, node, ts))
            if self.operators and any(op.matches(topic) for op in self.operators):
                inputs.extend((topic, ts, value) for ts, value in readings)
        outputs, energy = run_operators(self.operators, inputs, self.jobs.on)
        series = list(batch)
        if outputs:
            by_topic = {}
            for topic, ts, value in outputs:
                by_topic.setdefault(topic, []).append((ts, value))
            series.extend(by_topic.items())
        new_topics = self.store.add_series(series, sightings, energy)
        for topic in new_topics:
            self.tree.add(topic)
        self.counters["stored"] += sum(len(r) for _, r in batch)
        self.counters["analytics"] += len(outputs)
        newest = max((r[-1][0] for _, r in batch if r), default=None)
        if newest is not None:  # readings are oldest first; the age of the batch's newest one when it was stored
            self.lag_s = max(0.0, time.time() - newest / 1e9)

    def _write_loop(self):
        cfg = self.config
        while True:
            try:
                first = self._pending.get(timeout=0.2)
            except queue.Empty:
                if self._stop.is_set():
                    return
                self._idle.set()
                continue
            batch = [first]
            size = len(first[1])
            deadline = time.monotonic() + cfg.batch_interval
            while size < cfg.batch_size:
                try:
                    item = self._pending.get(timeout=max(0.0, deadline - time.monotonic()))
                except queue.Empty:
                    break
                batch.append(item)
                size += len(item[1])
            with self._pending_lock:
                self._pending_readings -= size
            try:
                self.process(batch)
            except Exception as exc:  # keep the agent alive; the batch is counted as lost
                self.counters["store_errors"] += 1
                self.counters["lost"] += size
                LOG.error("cannot store %d readings: %s", size, exc)
            if self._pending.empty():
                self._idle.set()

    def wait_idle(self, timeout=10.0):
        """Block until every queued reading is stored (tests and shutdown)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self._pending.empty():
                time.sleep(0.01)  # not a busy loop: the writer needs the interpreter to empty the queue
            elif self._idle.wait(0.05) and self._pending.empty():
                return True
        return False

    # ---- jobs ------------------------------------------------------------------------------------------------------
    def resolve_job(self, jobid):
        """The job's nodes (prefixes) and window, or None if unknown.

        From the job table (the Pushers' sightings, widened by jobGrace), merged over a heterogeneous job's
        components, which run under their own ids (``sacct`` names them); a part the table never saw comes from
        ``sacct -j <id> --json`` alone.
        """
        entries = self._sacct_entries(jobid)
        ids = [str(jobid)] + sorted({str(e.get("job_id")) for e in entries} - {str(jobid)})
        parts = []
        for part_id in ids:
            part = self.store.job(part_id)
            if part is not None:
                part["end"] += self.config.job_grace_ns
                part["start"] = max(0, part["start"] - self.config.job_grace_ns)
            else:
                part = next((self._sacct_part(e) for e in entries if str(e.get("job_id")) == part_id), None)
            if part is not None:
                parts.append(part)
        if not parts:
            return None
        job = {"jobid": str(jobid), "nodes": {}, "start": min(p["start"] for p in parts),
               "end": max(p["end"] for p in parts), "energy_j": {},
               "source": "pusher" if any(p["source"] == "pusher" for p in parts) else "sacct"}
        for part in parts:
            job["nodes"].update(part["nodes"])
            job["energy_j"].update(part["energy_j"])
        return job

    def _sacct_entries(self, jobid):
        """sacct's records of the job and, for a heterogeneous job, of its components ([] without sacct)."""
        if not self.config.sacct:
            return []
        if str(jobid) in self._finished_jobs:
            return self._finished_jobs[str(jobid)]
        try:
            proc = subprocess.run([self.config.sacct, "-j", str(jobid), "--json"], capture_output=True, text=True,
                                  timeout=10, check=False)
            data = json.loads(proc.stdout) if proc.returncode == 0 else {}
        except (OSError, subprocess.TimeoutExpired, ValueError) as exc:
            LOG.warning("sacct for job %s failed: %s", jobid, exc)
            return []
        entries = [e for e in data.get("jobs", [])
                   if str(jobid) in (str(e.get("job_id")), str((e.get("het") or {}).get("job_id")))]
        if entries and all(int((e.get("time") or {}).get("end") or 0) for e in entries):
            self._finished_jobs[str(jobid)] = entries  # a finished job's record no longer changes
            while len(self._finished_jobs) > FINISHED_CACHE:
                self._finished_jobs.popitem(last=False)
        return entries

    def _sacct_part(self, entry):
        times = entry.get("time") or {}
        start = int(times.get("start") or 0) * 10 ** 9
        end = int(times.get("end") or 0) * 10 ** 9 or time.time_ns()
        nodes = {prefix: (start, end) for host in expand_hostlist(entry.get("nodes", ""))
                 for prefix in self.tree.nodes_named(host)}
        return {"nodes": nodes, "start": start, "end": end, "energy_j": {}, "source": "sacct"}

    # ---- lifecycle -------------------------------------------------------------------------------------------------
    def status(self):
        return {"connected": self.connected, "broker": "%s:%d" % self.config.broker,
                "subscription": self.config.subscription, "sensors": len(self.tree),
                "pending_messages": self._pending.qsize(), "counters": dict(self.counters),
                "operators": {op.name: op.produced for op in self.operators},
                "last_rejects": list(self.last_rejects)}

    def metrics(self):
        """The agent's counters in Prometheus' text exposition format (GET /metrics)."""
        c = self.counters
        rows = [
            ("readings_received_total", "counter", "Readings received in valid MQTT messages.", c["received"]),
            ("readings_stored_total", "counter", "Readings written to the store.", c["stored"]),
            ("readings_dropped_total", "counter", "Readings lost because a store write failed.", c["lost"]),
            ("readings_shed_total", "counter", "Readings dropped, oldest first, to stay within maxPendingReadings "
             "and maxReadingsPerMessage.", c["shed"]),
            ("jobs_forgotten_total", "counter", "Jobs dropped from a node's in-memory job table (maxJobsPerNode; the "
             "store keeps them).", self.jobs.forgotten),
            ("messages_received_total", "counter", "Valid MQTT messages received.", c["messages"]),
            ("messages_rejected_total", "counter", "MQTT messages rejected (bad topic or payload).", c["rejected"]),
            ("store_errors_total", "counter", "Failed store transactions.", c["store_errors"]),
            ("analytics_readings_total", "counter", "Readings produced by the analytics operators.", c["analytics"]),
            ("pending_readings", "gauge", "Readings received and not yet stored.", self._pending_readings),
            ("lag_seconds", "gauge", "Age of the newest reading of the last stored batch when it was stored.",
             round(self.lag_s, 3)),
            ("broker_connected", "gauge", "1 while connected to the MQTT broker.", int(self.connected)),
            ("sensors", "gauge", "Sensors known to the store.", len(self.tree)),
        ]
        lines = []
        for name, kind, text, value in rows:
            lines += ["# HELP dcdb_collectagent_%s %s" % (name, text), "# TYPE dcdb_collectagent_%s %s" % (name, kind),
                      "dcdb_collectagent_%s %s" % (name, value)]
        return "\n".join(lines) + "\n"

    def start_writer(self):
        self._writer = threading.Thread(target=self._write_loop, name="dcdb-writer", daemon=True)
        self._writer.start()

    def start(self):
        self.start_writer()
        if mqtt is None and self._client_factory is None:
            raise DcdbConfigError("the Collect Agent needs paho-mqtt (python3-paho-mqtt)")
        cfg = self.config
        factory = self._client_factory or client_class(mqtt)
        client = factory(client_id=cfg.client_id, clean_session=not cfg.persistent)
        use_tls(client, cfg.ca_file)
        if cfg.username:
            client.username_pw_set(cfg.username, cfg.password)
        client.max_inflight_messages_set(1000)
        client.reconnect_delay_set(0.2, cfg.reconnect_max)
        client.on_connect = self._on_connect
        client.on_disconnect = self._on_disconnect
        client.on_message = self._on_message
        client.connect_async(cfg.broker[0], cfg.broker[1], 30)
        client.loop_start()
        self._client = client

    def stop(self):
        client, self._client = self._client, None
        if client is not None:
            client.disconnect()
            client.loop_stop()
        self.wait_idle(10)
        self._stop.set()
        if self._writer is not None:
            self._writer.join(timeout=5)


def main(argv=None):
    from .api import make_server

    parser = argparse.ArgumentParser(prog="python3 -m msa_sim.dcdb.collectagent",
                                     description="DCDB Collect Agent stand-in: MQTT → store → Grafana API")
    parser.add_argument("--config", "-c", default="/etc/dcdb/collectagent.conf")
    parser.add_argument("--verbose", "-v", action="store_true")
    parser.add_argument("--insecure-no-auth", action="store_true",
                        help="serve the REST API without restAPI users and without TLS when none are set (tests only)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    try:
        config = AgentConfig(args.config)
        missing = [what for what, given in (("a restAPI user", config.users),
                                            ("TLS (restAPI certificate, privateKey)", config.tls_cert)) if not given]
        if missing and not args.insecure_no_auth:
            raise DcdbConfigError("%s: the REST API would be served without %s: configure it, or start with "
                                  "--insecure-no-auth (tests only)" % (args.config, " and ".join(missing)))
        agent = CollectAgent(config)
        server = make_server(agent, *config.http, tls=(config.tls_cert, config.tls_key) if config.tls_cert else None)
    except (DcdbConfigError, StoreError, OSError, ValueError) as exc:
        print("collectagent: %s" % exc, file=sys.stderr)
        return 2
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    agent.start()
    http = threading.Thread(target=server.serve_forever, name="dcdb-http", daemon=True)
    http.start()
    LOG.info("API on %s://%s:%d (%s)", server.scheme, config.http[0], server.server_address[1],
             "basic auth" if config.users else "NO authentication (--insecure-no-auth)")
    while not stop.wait(5):
        if config.status_file:
            try:
                with open(config.status_file, "w", encoding="utf-8") as handle:
                    json.dump(agent.status(), handle)
            except OSError:
                pass
    server.shutdown()
    agent.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
