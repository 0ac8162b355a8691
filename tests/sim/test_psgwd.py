# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

"""The stand-in psgwd on loopback: 127.0.0.2 plays the InfiniBand fabric, 127.0.0.3 the EXTOLL fabric."""

import json
import os
import pathlib
import socket
import subprocess
import sys
import threading

import pytest

from msa_sim.psgwd import pingpong
from msa_sim.psgwd import protocol as proto

ROOT = pathlib.Path(__file__).resolve().parents[2]
ENV = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "sim"), str(ROOT / "collections")]))
IB, EXTOLL = "127.0.0.2", "127.0.0.3"


@pytest.fixture
def psgwd(tmp_path):
    stats = tmp_path / "stats.json"
    proc = subprocess.Popen([sys.executable, "-m", "msa_sim.psgwd", "--job", "42", "--listen", "ib=" + IB,
                             "--listen", "extoll=" + EXTOLL, "--name", "gw01", "--stats-file", str(stats)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV, text=True)
    try:
        first, second = proc.stdout.readline().strip(), proc.stdout.readline().strip()
        assert second == "pid\t%d" % proc.pid, proc.stderr.read()
        port = int(first.rsplit(":", 1)[1])
        yield {"port": port, "ib": "%s:%d" % (IB, port), "extoll": "%s:%d" % (EXTOLL, port), "stats": stats}
    finally:
        proc.terminate()
        proc.wait(timeout=10)


class Receiver:
    """A pingpong receiver on one fabric address, serving connections in a thread."""

    def __init__(self, host, count=1, job=None):
        self.sock = socket.socket()
        self.sock.bind((host, 0))
        self.sock.listen(4)
        self.sock.settimeout(20)
        self.addr = "%s:%d" % self.sock.getsockname()
        self.results = []
        self.thread = threading.Thread(target=self._run, args=(count, job), daemon=True)
        self.thread.start()

    def _run(self, count, job):
        with self.sock:
            while len(self.results) < count:
                conn, _ = self.sock.accept()
                with conn:
                    self.results.append(pingpong.receive_one(conn, job))

    def join(self):
        self.thread.join(20)
        return self.results


@pytest.mark.parametrize("nbytes, mtu", [(1, 1), (100_000, 4096), (1_000_003, 65536), (3 << 20, 1_000_000)])
def test_data_crosses_the_gateway_intact_with_several_fragment_sizes(psgwd, nbytes, mtu):
    receiver = Receiver(EXTOLL)
    data = pingpong.payload(nbytes, "seed%d" % mtu)
    env = proto.envelope("42", "cluster01", "booster01", receiver.addr, len(data), mtu, proto.digest(data))
    result = proto.send_message(psgwd["ib"], env, data)
    (received,) = receiver.join()
    assert result["match"] and result["bytes"] == nbytes
    assert received["sha256"] == proto.digest(data)
    assert received["fragments"] == -(-nbytes // mtu)
    assert received["envelope"]["via"] == {"gateway": "gw01", "direction": "ib->extoll"}


def test_bytes_are_counted_per_direction_in_the_stats_file_and_on_the_socket(psgwd):
    receiver_b, receiver_c = Receiver(EXTOLL), Receiver(IB)
    up = pingpong.payload(5000, "up")
    down = pingpong.payload(7000, "down")
    proto.send_message(psgwd["ib"], proto.envelope("42", "c1", "b1", receiver_b.addr, 5000, 1000,
                                                   proto.digest(up)), up)
    proto.send_message(psgwd["extoll"], proto.envelope("42", "b1", "c1", receiver_c.addr, 7000, 3000,
                                                       proto.digest(down)), down)
    receiver_b.join(), receiver_c.join()
    stats = json.loads(psgwd["stats"].read_text())
    assert stats["directions"] == {"ib->extoll": {"bytes": 5000, "fragments": 5, "messages": 1},
                                   "extoll->ib": {"bytes": 7000, "fragments": 3, "messages": 1}}
    live = proto.query_stats(psgwd["ib"])
    assert live["directions"] == stats["directions"] and live["job"] == "42"


def test_envelope_for_another_job_is_refused_and_nothing_reaches_the_receiver(psgwd):
    listener = socket.socket()
    listener.bind((EXTOLL, 0))
    listener.listen(1)
    with listener:
        addr = "%s:%d" % listener.getsockname()
        env = proto.envelope("43", "c1", "b1", addr, 10, 10, proto.digest(b"x" * 10))
        with pytest.raises(proto.ProtocolError, match="job 43 refused: this psgwd serves job 42"):
            proto.send_message(psgwd["ib"], env, b"x" * 10)
        listener.settimeout(0.3)
        with pytest.raises(socket.timeout):
            listener.accept()
    assert proto.query_stats(psgwd["ib"])["refused"] == 1


def test_unreachable_destination_is_reported_to_the_sender(psgwd):
    closed = socket.socket()
    closed.bind((EXTOLL, 0))
    addr = "%s:%d" % closed.getsockname()
    closed.close()
    env = proto.envelope("42", "c1", "b1", addr, 10, 10, proto.digest(b"y" * 10))
    with pytest.raises(proto.ProtocolError, match="unreachable"):
        proto.send_message(psgwd["ib"], env, b"y" * 10)


def test_receiver_flags_a_checksum_mismatch(psgwd):
    receiver = Receiver(EXTOLL)
    env = proto.envelope("42", "c1", "b1", receiver.addr, 4, 2, proto.digest(b"abcd"))
    result = proto.send_message(psgwd["ib"], env, b"abce")
    assert result["match"] is False
    assert receiver.join()[0]["match"] is False


def test_pingpong_programs_find_the_gateway_in_the_routing_file(psgwd, tmp_path):
    route = tmp_path / "psgw-route-42"
    route.write_text("%s cluster01 booster01\n" % psgwd["ib"])
    ready = tmp_path / "ready"
    recv = subprocess.Popen([sys.executable, "-m", "msa_sim.psgwd.pingpong", "recv", "--listen", EXTOLL + ":0",
                             "--ready-file", str(ready), "--job", "42", "--timeout", "20"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV, text=True)
    try:
        for _ in range(200):
            if ready.exists() and ready.read_text().endswith("\n"):
                break
            threading.Event().wait(0.05)
        to = ready.read_text().strip()
        send = subprocess.run([sys.executable, "-m", "msa_sim.psgwd.pingpong", "send", "--peer", "booster01",
                               "--to", to, "--bytes", "300000", "--node", "cluster01", "--job", "42"],
                              capture_output=True, text=True, env=dict(ENV, MSA_GW_ROUTING_FILE=str(route),
                                                                        PSP_GW_MTU="8192"), timeout=60)
        out, err = recv.communicate(timeout=30)
    finally:
        if recv.poll() is None:
            recv.kill()
    assert send.returncode == 0, send.stderr
    assert "sent 300000 bytes" in send.stdout and "mtu 8192" in send.stdout and "verified" in send.stdout
    assert recv.returncode == 0 and "received 300000 bytes in 37 fragments" in out and "via gw01: OK" in out


def test_booster_side_sender_uses_the_gateway_address_on_its_own_fabric(tmp_path):
    pool = tmp_path / "pool.json"
    pool.write_text(json.dumps({"gateways": [{"name": "gw01", "addresses": {"ib": IB, "extoll": EXTOLL}}]}))
    route = tmp_path / "route"
    route.write_text("%s:4000 cluster01 booster01\n" % IB)
    endpoint, side = pingpong.find_route(str(route), "booster01", "cluster01")
    assert side == "booster"
    assert pingpong.translate(endpoint, str(pool), "extoll") == "%s:4000" % EXTOLL
    with pytest.raises(proto.ProtocolError, match="no line for nodes booster01 and cluster09"):
        pingpong.find_route(str(route), "booster01", "cluster09")


def test_fragment_size_comes_from_psp_gw_mtu(monkeypatch):
    monkeypatch.setenv("PSP_GW_MTU", "1000000")
    assert proto.mtu_from_env() == 1_000_000
    monkeypatch.setenv("PSP_GW_MTU", "0")
    with pytest.raises(proto.ProtocolError, match="PSP_GW_MTU=0 is outside"):
        proto.mtu_from_env()
