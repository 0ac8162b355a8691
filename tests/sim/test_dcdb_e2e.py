# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

"""DCDB end to end on 127.0.0.1: Pusher process → mosquitto (password file, no anonymous) → Collect Agent → SQLite → API."""

import base64
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request

import pytest

from msa_sim.dcdb.api import make_server
from msa_sim.dcdb.collectagent import AgentConfig, CollectAgent

MOSQUITTO = shutil.which("mosquitto") or "/usr/sbin/mosquitto"
MOSQUITTO_PASSWD = shutil.which("mosquitto_passwd") or "/usr/bin/mosquitto_passwd"
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

pytestmark = pytest.mark.skipif(not (os.access(MOSQUITTO, os.X_OK) and os.access(MOSQUITTO_PASSWD, os.X_OK)),
                                reason="mosquitto and mosquitto_passwd are needed (Debian package mosquitto)")


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for(predicate, timeout=15.0, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError("timed out waiting for %s" % what)


class Broker:
    """mosquitto on 127.0.0.1:<ephemeral port> with a password file and anonymous access off."""

    def __init__(self, workdir, users):
        self.port = free_port()
        self.workdir = workdir
        pwfile = workdir / "mosquitto.passwd"
        for i, (user, password) in enumerate(users.items()):
            subprocess.run([MOSQUITTO_PASSWD, "-b"] + (["-c"] if i == 0 else []) + [str(pwfile), user, password],
                           check=True, capture_output=True)
        pwfile.chmod(0o600)
        self.conf = workdir / "mosquitto.conf"
        self.conf.write_text("listener %d 127.0.0.1\nallow_anonymous false\npassword_file %s\npersistence false\n"
                             "user %s\n" % (self.port, pwfile, "root" if os.geteuid() == 0 else "nobody"))
        self.proc = None

    def start(self):
        self.proc = subprocess.Popen([MOSQUITTO, "-c", str(self.conf)], stdout=subprocess.DEVNULL,
                                     stderr=open(self.workdir / "mosquitto.log", "ab"))

        def listening():
            if self.proc.poll() is not None:
                raise AssertionError("mosquitto exited: %s" % (self.workdir / "mosquitto.log").read_text())
            with socket.socket() as sock:
                return sock.connect_ex(("127.0.0.1", self.port)) == 0
        wait_for(listening, 10, "mosquitto to listen")

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture
def system(tmp_path):
    broker = Broker(tmp_path, {"pusher": "push-pw", "collectagent": "agent-pw"})
    broker.start()
    (tmp_path / "pusher.secret").write_text("push-pw\n")
    (tmp_path / "agent.secret").write_text("agent-pw\n")
    (tmp_path / "collectagent.conf").write_text("""
global {
    mqttBroker      127.0.0.1:%d
    mqttprefix      /msa
    username        collectagent
    passwordFile    %s/agent.secret
    batchInterval   50
    reconnectMax    1
    sacct           none
}
storage {
    backend sqlite
    path    %s/dcdb.sqlite
}
restAPI {
    address 127.0.0.1:0
    user grafana {
        password view-only
    }
}
analytics {
    operator t_avg {
        type    average
        input   /msa/+/+/t/s0
        output  s0_avg
        window  1000
    }
}
""" % (broker.port, tmp_path, tmp_path))
    agent = CollectAgent(AgentConfig(str(tmp_path / "collectagent.conf")))
    agent.start()
    server = make_server(agent, "127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    agent.url = "http://127.0.0.1:%d" % server.server_address[1]
    (tmp_path / "tester.conf").write_text("group t {\n    interval 100\n    numSensors 5\n}\n")
    (tmp_path / "procfs.conf").write_text("group load {\n    interval 200\n    type loadavg\n"
                                          "    sensor load1 {\n        type load1\n    }\n}\n")
    (tmp_path / "dcdbpusher.conf").write_text("""
global {
    mqttBroker          127.0.0.1:%d
    mqttprefix          /msa/cm/n01
    username            pusher
    passwordFile        %s/pusher.secret
    maxQueuedReadings   30
    flushInterval       100
    statusInterval      200
    statusFile          %s/pusher.status
    reconnectMax        1
}
plugins {
    plugin tester {
        config tester.conf
    }
    plugin procfs {
        config procfs.conf
    }
}
""" % (broker.port, tmp_path, tmp_path))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.join(ROOT, "sim"), os.path.join(ROOT, "collections")]))
    pusher = subprocess.Popen([sys.executable, "-m", "msa_sim.dcdb.pusher", "--config",
                               str(tmp_path / "dcdbpusher.conf")], env=env, stdout=subprocess.DEVNULL,
                              stderr=open(tmp_path / "pusher.log", "ab"))
    yield {"broker": broker, "agent": agent, "pusher": pusher, "dir": tmp_path}
    pusher.terminate()
    try:
        pusher.wait(10)
    except subprocess.TimeoutExpired:
        pusher.kill()
    server.shutdown()
    server.server_close()
    agent.stop()
    broker.stop()


def api(agent, path, body=None):
    req = urllib.request.Request(agent.url + path, data=json.dumps(body).encode() if body is not None else None,
                                 method="POST" if body is not None else "GET")
    req.add_header("Authorization", "Basic " + base64.b64encode(b"grafana:view-only").decode())
    with urllib.request.urlopen(req, timeout=5) as resp:
        return json.loads(resp.read())


def last_value(agent, topic):
    row = agent.store.last(topic)
    return row[1] if row else None


def test_readings_flow_from_pusher_through_mosquitto_to_the_grafana_api(system):
    agent = system["agent"]
    wait_for(lambda: agent.store.count("/msa/cm/n01/t/s4") >= 5, what="tester readings in the store")
    wait_for(lambda: agent.store.count("/msa/cm/n01/load/load1") >= 1, what="procfs readings in the store")
    path = []
    for expected in ("msa", "cm", "n01"):
        children = api(agent, "/search" + "".join("/" + p for p in path))
        assert expected in children
        path.append(expected)
    assert set(api(agent, "/search/msa/cm/n01")) >= {"t", "load", "pusher", "analytics"}
    sensors = api(agent, "/search/msa/cm/n01/t/sensor", {})
    assert sensors == ["/msa/cm/n01/t/s%d" % i for i in range(5)]
    now_ms = int(time.time() * 1000)
    result = api(agent, "/query", {"range": {"from": now_ms - 60000, "to": now_ms + 1000}, "maxDataPoints": 1000,
                                   "intervalMs": 100, "targets": [{"target": "/msa/cm/n01/t/s0", "refId": "A"}]})
    points = result[0]["datapoints"]
    assert result[0]["target"] == "/msa/cm/n01/t/s0" and len(points) >= 5
    assert [v for v, _ in points] == sorted(v for v, _ in points)  # tester values count up
    assert all(now_ms - 60000 <= ms <= now_ms + 1000 for _, ms in points)
    wait_for(lambda: agent.store.count("/msa/cm/n01/analytics/s0_avg") >= 3, what="moving-average output")
    avg = agent.store.query("/msa/cm/n01/analytics/s0_avg", 0, 2 ** 62)[-1][1]
    last = agent.store.last("/msa/cm/n01/t/s0")[1]
    assert last - 10 < avg < last  # the mean of the last second of an increasing counter trails it
    assert agent.counters["rejected"] == 0


def test_broker_outage_drops_the_oldest_readings_and_reports_the_loss(system):
    agent, broker, workdir = system["agent"], system["broker"], system["dir"]
    wait_for(lambda: agent.store.count("/msa/cm/n01/t/s0") >= 3, what="readings before the outage")
    assert last_value(agent, "/msa/cm/n01/pusher/dropped") in (None, 0)
    broker.stop()
    stopped_at = time.time_ns()
    # 5 sensors every 100 ms against a 30-reading queue: the queue overflows within a second
    status_file = workdir / "pusher.status"
    wait_for(lambda: json.loads(status_file.read_text())["dropped"] > 0, what="the pusher to drop readings")
    status = json.loads(status_file.read_text())
    assert status["connected"] is False and status["queued"] <= 30
    broker.start()
    wait_for(lambda: (last_value(agent, "/msa/cm/n01/pusher/dropped") or 0) > 0, 20, "the drop counter sensor")
    wait_for(lambda: agent.store.last("/msa/cm/n01/t/s0")[0] > stopped_at + 10 ** 9, 20, "readings to resume")
    dropped = last_value(agent, "/msa/cm/n01/pusher/dropped")
    stored = sum(agent.store.count("/msa/cm/n01/t/s%d" % i) for i in range(5))
    stored += agent.store.count("/msa/cm/n01/load/load1")
    # the status file is a snapshot written every statusInterval: compare the store with one written after counting
    counted_at = time.time()
    wait_for(lambda: json.loads(status_file.read_text())["ts"] > counted_at, what="a status written after the count")
    final = json.loads(status_file.read_text())
    assert final["connected"] is True and final["dropped"] >= dropped > 0
    # nothing is silently lost: every stored reading was published, every published one was produced and not dropped
    assert 0 < final["published"] <= final["produced"] - final["dropped"]
    assert stored <= final["produced"] - final["dropped"]


def test_sighup_reloads_the_plugin_configuration(system):
    agent, workdir, pusher = system["agent"], system["dir"], system["pusher"]
    wait_for(lambda: agent.store.count("/msa/cm/n01/t/s0") >= 1, what="first readings")
    (workdir / "tester.conf").write_text("group t {\n    interval 100\n    numSensors 5\n}\n"
                                         "group extra {\n    interval 100\n    numSensors 2\n}\n")
    pusher.send_signal(signal.SIGHUP)
    wait_for(lambda: agent.store.count("/msa/cm/n01/extra/s1") >= 1, what="the sensors added by the reload")
    assert json.loads((workdir / "pusher.status").read_text())["reloads"] == 1
    assert pusher.poll() is None
