# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

"""DCDB Pusher stand-in: samples plugin sensor groups and publishes readings over MQTT through a bounded queue.

``python3 -m msa_sim.dcdb.pusher --config /etc/dcdb/dcdbpusher.conf``. While the broker is away readings wait in a
queue of at most ``maxQueuedReadings`` readings; when it is full the oldest are dropped and counted (seed 004
§6.1.1: a compute node must not run out of memory because the Collect Agent is down). The counters are published as
``<mqttprefix>/pusher/{dropped,queued,published}`` once connected and written to ``statusFile``. SIGHUP reloads the
configuration (plugins and broker); SIGTERM flushes what it can for ``flushTimeout`` ms and exits.
"""

import argparse
import collections
import json
import logging
import os
import signal
import sys
import threading
import time

from .. import sdnotify
from . import payload as wire
from .info import (DcdbConfigError, as_int, client_class, load_info, mqtt_tls, pusher_plugins, read_secret,
                   split_hostport, use_tls, validate_topic)
from .plugins import load_plugin, plugin_config_path, short_hostname

try:
    import paho.mqtt.client as mqtt
except ImportError:  # pragma: no cover - the node image installs python3-paho-mqtt
    mqtt = None

LOG = logging.getLogger("dcdb.pusher")


class PusherConfig:
    """The ``global`` and ``plugins`` sections of dcdbpusher.conf."""

    def __init__(self, path):
        self.path = path
        root = load_info(path)
        glob = root.get("global")
        get = (lambda key, default=None: glob.value_of(key, default)) if glob is not None else (lambda k, d=None: d)
        self.ca_file, port = mqtt_tls(get)
        self.broker = split_hostport(get("mqttBroker", "127.0.0.1:%d" % port), port, "global.mqttBroker")
        self.username = get("username") or None
        password_file = get("passwordFile")
        self.password = read_secret(password_file, "global.passwordFile") if password_file else get("password")
        hostname = get("nodename") or short_hostname()
        self.prefix = validate_topic(get("mqttprefix", get("mqttPrefix", "/dcdb/%h")), "global.mqttprefix")
        self.prefix = self.prefix.replace("%h", hostname).rstrip("/") or ""
        self.qos = as_int(get("qosLevel"), 1, "global.qosLevel")
        if self.qos not in (0, 1, 2):
            raise DcdbConfigError("global.qosLevel %r must be 0, 1 or 2" % self.qos)
        self.max_queued = as_int(get("maxQueuedReadings"), 100000, "global.maxQueuedReadings")
        if self.max_queued < 1:
            raise DcdbConfigError("global.maxQueuedReadings %r must be at least 1" % self.max_queued)
        self.max_msg_num = max(1, as_int(get("maxMsgNum"), 100, "global.maxMsgNum"))
        self.max_inflight = max(1, as_int(get("maxInflight"), 100, "global.maxInflight"))
        self.flush_interval = max(1, as_int(get("flushInterval"), 1000, "global.flushInterval")) / 1000.0
        self.flush_timeout = max(0, as_int(get("flushTimeout"), 2000, "global.flushTimeout")) / 1000.0
        self.format = get("payloadFormat", "json")
        if self.format not in ("json", "binary"):
            raise DcdbConfigError("global.payloadFormat %r must be json or binary" % self.format)
        self.status_file = get("statusFile", "/run/dcdb/pusher.status")
        self.status_interval = max(10, as_int(get("statusInterval"), 1000, "global.statusInterval")) / 1000.0
        # one MQTT session per sensor tree: two Pushers with one client id would keep disconnecting each other
        self.client_id = (get("clientId") or "dcdbpusher" + self.prefix.replace("/", "-")).replace("%h", hostname)
        self.keepalive = as_int(get("keepalive"), 30, "global.keepalive")
        self.reconnect_max = as_int(get("reconnectMax"), 10, "global.reconnectMax")
        config_dir = os.path.dirname(os.path.abspath(path))
        self.plugins = [(name, plugin_config_path(config_dir, name, cfg)) for name, cfg in pusher_plugins(root)]

    def connection(self):
        return (self.broker, self.ca_file, self.username, self.password, self.client_id, self.keepalive)


class ReadingQueue:
    """A FIFO of (topic, ts, value) bounded to ``limit`` readings: a full queue drops its oldest and counts them."""

    def __init__(self, limit):
        self.limit = limit
        self.dropped = 0
        self.produced = 0
        self._items = collections.deque()
        self._lock = threading.Lock()

    def __len__(self):
        return len(self._items)

    def put_many(self, readings):
        with self._lock:
            self.produced += len(readings)
            self._items.extend(readings)
            excess = len(self._items) - self.limit
            if excess > 0:
                self.dropped += excess
                for _ in range(excess):
                    self._items.popleft()

    def pop(self, count):
        with self._lock:
            n = min(count, len(self._items))
            return [self._items.popleft() for _ in range(n)]

    def push_front(self, readings):
        """Give back readings that could not be handed to the MQTT client (they are older than the queue)."""
        with self._lock:
            room = self.limit - len(self._items)
            if room < len(readings):
                self.dropped += len(readings) - max(room, 0)
                readings = readings[len(readings) - max(room, 0):]
            self._items.extendleft(reversed(readings))


class Pusher:
    """Plugins → bounded queue → MQTT. ``client_factory`` exists for tests; by default it is paho's Client."""

    def __init__(self, config, client_factory=None, clock=time.time_ns):
        self.config = config
        self.clock = clock
        self.queue = ReadingQueue(config.max_queued)
        self.groups = []
        self.published = 0
        self.reloads = 0
        self.connected = False
        self._client_factory = client_factory
        self._client = None
        self._inflight = {}
        self._handing = 0  # readings taken from the queue that are not yet tracked or given back
        self._early_acks = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._reload = False
        self._tick = threading.Event()
        self._sender = None
        self._last_status = 0.0
        self._load_groups()

    # ---- configuration ---------------------------------------------------------------------------------------------
    def _load_groups(self):
        groups = []
        for name, path in self.config.plugins:
            groups.extend((name, g) for g in load_plugin(name, path))
        self.groups = groups
        LOG.info("%d sensor groups from plugins %s", len(groups), ", ".join(n for n, _ in self.config.plugins))

    def reload(self):
        """Re-read the configuration; reconnect only if the broker or credentials changed."""
        old, old_groups = self.config, self.groups
        try:
            self.config = PusherConfig(old.path)
            self._load_groups()
        except (DcdbConfigError, OSError, ValueError) as exc:
            LOG.error("reload failed, keeping the running configuration: %s", exc)
            self.config, self.groups = old, old_groups
            return False
        self.queue.limit = self.config.max_queued
        self.reloads += 1
        LOG.info("configuration reloaded (%d)", self.reloads)
        if self.config.connection() != old.connection() and self._client is not None:
            LOG.info("broker settings changed: reconnecting to %s:%d", *self.config.broker)
            self._disconnect()
            self._connect()
        self.write_status()
        return True

    # ---- sampling --------------------------------------------------------------------------------------------------
    def topic(self, group, group_topic):
        """``group_topic`` is ``/<group part>/<sensor suffix>`` as the group's read() returns it."""
        return (group.prefix or self.config.prefix) + group_topic

    def sample(self, group, now_ns=None):
        now_ns = self.clock() if now_ns is None else now_ns
        try:
            readings = group.read(now_ns)
        except Exception as exc:  # one broken sensor file must not stop the other groups
            LOG.warning("group %s failed: %s", group.name, exc)
            return 0
        self.queue.put_many([(self.topic(group, s), ts, v) for s, ts, v in readings])
        return len(readings)

    def sample_all(self, now_ns=None):
        return sum(self.sample(group, now_ns) for _, group in self.groups)

    # ---- MQTT ------------------------------------------------------------------------------------------------------
    def _connect(self):
        if mqtt is None and self._client_factory is None:
            raise DcdbConfigError("the Pusher needs paho-mqtt (python3-paho-mqtt)")
        factory = self._client_factory or client_class(mqtt)
        cfg = self.config
        client = factory(client_id=cfg.client_id, clean_session=True)
        use_tls(client, cfg.ca_file)
        if cfg.username:
            client.username_pw_set(cfg.username, cfg.password)
        client.max_inflight_messages_set(cfg.max_inflight)
        client.max_queued_messages_set(cfg.max_inflight * 2)
        client.reconnect_delay_set(0.2, cfg.reconnect_max)
        client.on_connect = self._on_connect
        client.on_disconnect = self._on_disconnect
        client.on_publish = self._on_publish
        client.connect_async(cfg.broker[0], cfg.broker[1], cfg.keepalive)
        client.loop_start()
        self._client = client

    def _disconnect(self):
        client, self._client = self._client, None
        if client is not None:
            client.disconnect()
            client.loop_stop()
        self.connected = False
        with self._lock:  # readings paho still held are gone with the old client
            lost = sum(self._inflight.values())
            self._inflight.clear()
            self._early_acks.clear()
        self.queue.dropped += lost

    def _on_connect(self, client, userdata, flags, rc):
        if rc == 0:
            self.connected = True
            LOG.info("connected to %s:%d", *self.config.broker)
            self._wake.set()
        else:
            LOG.error("broker refused the connection: %s", mqtt.connack_string(rc) if mqtt else rc)

    def _on_disconnect(self, client, userdata, rc):
        if self.connected and rc != 0:
            LOG.warning("lost the broker (rc=%s); queueing up to %d readings", rc, self.config.max_queued)
        self.connected = False

    def _on_publish(self, client, userdata, mid):
        with self._lock:
            count = self._inflight.pop(mid, None)
            if count is None:
                self._early_acks.add(mid)
            else:
                self.published += count

    def _track(self, mid, count):
        with self._lock:
            if mid in self._early_acks:
                self._early_acks.discard(mid)
                self.published += count
            else:
                self._inflight[mid] = count

    def drain(self):
        """Hand queued readings to the MQTT client while connected and its in-flight window has room."""
        cfg = self.config
        client = self._client
        while client is not None and self.connected and len(self.queue) and not self._stop.is_set():
            with self._lock:
                room = cfg.max_inflight - len(self._inflight)
            if room <= 0:
                time.sleep(0.002)
                continue
            batch = self.queue.pop(room * cfg.max_msg_num)
            self._handing = len(batch)
            by_topic = collections.OrderedDict()
            for topic, ts, value in batch:
                by_topic.setdefault(topic, []).append((ts, value))
            messages = []
            for topic, readings in by_topic.items():
                for i in range(0, len(readings), cfg.max_msg_num):
                    messages.append((topic, readings[i:i + cfg.max_msg_num]))
            for index, (topic, readings) in enumerate(messages):
                info = client.publish(topic, wire.encode(readings, cfg.format), qos=cfg.qos)
                kept = info.rc == mqtt.MQTT_ERR_SUCCESS or (cfg.qos > 0 and info.rc == mqtt.MQTT_ERR_NO_CONN)
                if kept:
                    self._track(info.mid, len(readings))
                    self._handing -= len(readings)
                    continue
                rest = [(t, ts, v) for t, rs in messages[index:] for ts, v in rs]
                rest.sort(key=lambda r: r[1])
                self.queue.push_front(rest)
                self._handing = 0
                return

    def publish_status(self):
        """Counters as the Pusher's own sensors; sent directly (never queued, so never dropped)."""
        client = self._client
        if client is None or not self.connected:
            return
        now = self.clock()
        for name, value in (("dropped", self.queue.dropped), ("queued", len(self.queue)),
                            ("published", self.published)):
            client.publish(self.config.prefix + "/pusher/" + name, wire.encode([(now, value)], self.config.format),
                           qos=self.config.qos)

    def status(self):
        with self._lock:
            inflight = sum(self._inflight.values())
        return {"ts": time.time(), "connected": self.connected, "broker": "%s:%d" % self.config.broker,
                "prefix": self.config.prefix, "produced": self.queue.produced, "queued": len(self.queue),
                "queue_limit": self.queue.limit, "inflight": inflight, "published": self.published,
                "dropped": self.queue.dropped, "reloads": self.reloads,
                "plugins": [name for name, _ in self.config.plugins], "groups": len(self.groups)}

    def write_status(self):
        path = self.config.status_file
        if not path:
            return
        try:
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
            tmp = "%s.%d.tmp" % (path, os.getpid())
            with open(tmp, "w", encoding="utf-8") as handle:
                json.dump(self.status(), handle)
            os.replace(tmp, path)
        except OSError as exc:
            LOG.warning("cannot write status file %s: %s", path, exc)

    def _send_loop(self):
        while not self._stop.is_set():
            self._wake.wait(self.config.flush_interval)
            self._wake.clear()
            now = time.monotonic()
            if now - self._last_status >= self.config.status_interval:
                self._last_status = now
                self.publish_status()
                self.write_status()
            try:
                self.drain()
            except Exception:  # the sender must survive anything a publish raises
                LOG.exception("sender error")

    # ---- lifecycle -------------------------------------------------------------------------------------------------
    def start(self):
        self._connect()
        self._sender = threading.Thread(target=self._send_loop, name="dcdb-sender", daemon=True)
        self._sender.start()

    def request_reload(self):
        self._reload = True
        self._tick.set()

    def request_stop(self, stop_event):
        stop_event.set()
        self._tick.set()

    def stop(self):
        """Flush for up to flushTimeout, then disconnect."""
        deadline = time.monotonic() + self.config.flush_timeout
        while time.monotonic() < deadline and self.connected and (len(self.queue) or self._inflight or self._handing):
            self._wake.set()
            time.sleep(0.02)
        self._stop.set()
        self._wake.set()
        if self._sender is not None:
            self._sender.join(timeout=5)
        self.publish_status()
        self.write_status()
        time.sleep(0.05)
        self._disconnect()

    def run(self, stop_event):
        """Sample every group at its interval until ``stop_event`` is set; reload when asked."""
        next_due = {}
        start = time.monotonic()
        while not stop_event.is_set():
            if self._reload:
                self._reload = False
                self.reload()
                next_due = {}
            now = time.monotonic()
            for key, group in self.groups:
                due = next_due.setdefault(id(group), start)
                if due <= now:
                    self.sample(group)
                    interval = group.interval_ms / 1000.0
                    due += interval
                    if due <= now:  # late (slow read or a suspended process): skip the missed slots
                        due = now + interval
                    next_due[id(group)] = due
            wait = (min(next_due.values()) if next_due else now + 1.0) - time.monotonic()
            self._tick.wait(max(0.0, min(wait, 1.0)))
            self._tick.clear()


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python3 -m msa_sim.dcdb.pusher",
                                     description="DCDB Pusher stand-in: plugins → bounded queue → MQTT")
    parser.add_argument("--config", "-c", default="/etc/dcdb/dcdbpusher.conf")
    parser.add_argument("--verbose", "-v", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    try:
        pusher = Pusher(PusherConfig(args.config))
    except (DcdbConfigError, OSError, ValueError) as exc:
        print("dcdbpusher: %s" % exc, file=sys.stderr)
        return 2
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: pusher.request_stop(stop))
    signal.signal(signal.SIGINT, lambda *_: pusher.request_stop(stop))
    signal.signal(signal.SIGHUP, lambda *_: pusher.request_reload())
    pusher.start()
    sdnotify.notify("READY=1")  # Type=notify: systemctl (re)start returns now that SIGHUP is handled
    try:
        pusher.run(stop)
    finally:
        pusher.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
