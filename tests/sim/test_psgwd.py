# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

"""The stand-in psgwd on loopback: 127.0.0.2 plays the InfiniBand fabric, 127.0.0.3 the EXTOLL fabric; the job's
node pairs are (127.0.0.4 on IB, 127.0.0.3 on EXTOLL) and (127.0.0.4, 127.0.0.5): a client on 127.0.0.4 is the
job's cluster node, a receiver on 127.0.0.3 or .5 its booster node."""

import json
import os
import pathlib
import socket
import subprocess
import sys
import threading

import pytest

from msa_sim.psgwd import pingpong, policy
from msa_sim.psgwd import protocol as proto

ROOT = pathlib.Path(__file__).resolve().parents[2]
ENV = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "sim"), str(ROOT / "collections")]))
IB, EXTOLL = "127.0.0.2", "127.0.0.3"
CM, ESB2 = "127.0.0.4", "127.0.0.5"   # the job's cluster node and a second booster node
SECRET = "job-42-secret-" + "x" * 30


def start_psgwd(tmp_path, *extra, pairs=((CM, EXTOLL), (CM, ESB2)), secret=SECRET):
    """A psgwd of job 42 with its pairs file and the secret on its standard input; ``(proc, endpoints)``."""
    stats, pairs_file = tmp_path / "stats.json", tmp_path / "pairs.json"
    policy.write_pairs(str(pairs_file), "42", pairs)
    proc = subprocess.Popen([sys.executable, "-m", "msa_sim.psgwd", "--job", "42", "--listen", "ib=" + IB,
                             "--listen", "extoll=" + EXTOLL, "--name", "gw01", "--stats-file", str(stats),
                             "--pairs-file", str(pairs_file)] + list(extra),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV, text=True)
    proc.stdin.write(secret + "\n")
    proc.stdin.close()
    first, second = proc.stdout.readline().strip(), proc.stdout.readline().strip()
    if second != "pid\t%d" % proc.pid:
        proc.wait(timeout=10)
        return proc, None
    port = int(first.rsplit(":", 1)[1])
    return proc, {"port": port, "ib": "%s:%d" % (IB, port), "extoll": "%s:%d" % (EXTOLL, port), "stats": stats,
                  "pairs": pairs_file, "proc": proc}


def stop_psgwd(proc):
    """Stop it; its log (standard error)."""
    if proc.poll() is None:
        proc.terminate()
    proc.wait(timeout=10)
    return proc.stderr.read()


@pytest.fixture
def psgwd(tmp_path):
    proc, endpoints = start_psgwd(tmp_path)
    assert endpoints, proc.stderr.read()
    yield endpoints
    stop_psgwd(proc)


def send(gateway, env, data, secret=SECRET, source=CM):
    return proto.send_message(gateway, env, data, secret, source=(source, 0))


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
    result = send(psgwd["ib"], env, data)
    (received,) = receiver.join()
    assert result["match"] and result["bytes"] == nbytes
    assert received["sha256"] == proto.digest(data)
    assert received["fragments"] == -(-nbytes // mtu)
    assert received["envelope"]["via"] == {"gateway": "gw01", "direction": "ib->extoll"}


def test_bytes_are_counted_per_direction_in_the_stats_file_and_on_the_socket(psgwd):
    receiver_b, receiver_c = Receiver(EXTOLL), Receiver(CM)
    up = pingpong.payload(5000, "up")
    down = pingpong.payload(7000, "down")
    send(psgwd["ib"], proto.envelope("42", "c1", "b1", receiver_b.addr, 5000, 1000, proto.digest(up)), up)
    send(psgwd["extoll"], proto.envelope("42", "b1", "c1", receiver_c.addr, 7000, 3000, proto.digest(down)), down,
         source=ESB2)
    receiver_b.join(), receiver_c.join()
    stats = json.loads(psgwd["stats"].read_text())
    assert stats["directions"] == {"ib->extoll": {"bytes": 5000, "fragments": 5, "messages": 1},
                                   "extoll->ib": {"bytes": 7000, "fragments": 3, "messages": 1}}
    live = proto.query_stats(psgwd["ib"], SECRET)
    assert live["directions"] == stats["directions"] and live["job"] == "42"


def test_envelope_for_another_job_is_refused_and_nothing_reaches_the_receiver(psgwd):
    listener = socket.socket()
    listener.bind((EXTOLL, 0))
    listener.listen(1)
    with listener:
        addr = "%s:%d" % listener.getsockname()
        env = proto.envelope("43", "c1", "b1", addr, 10, 10, proto.digest(b"x" * 10))
        with pytest.raises(proto.ProtocolError, match="job 43 from 127.0.0.4: this psgwd serves job 42"):
            send(psgwd["ib"], env, b"x" * 10)
        listener.settimeout(0.3)
        with pytest.raises(socket.timeout):
            listener.accept()
    assert proto.query_stats(psgwd["ib"], SECRET)["refused"] == 1


def test_unreachable_destination_is_reported_to_the_sender(psgwd):
    closed = socket.socket()
    closed.bind((ESB2, 0))
    addr = "%s:%d" % closed.getsockname()
    closed.close()
    env = proto.envelope("42", "c1", "b1", addr, 10, 10, proto.digest(b"y" * 10))
    with pytest.raises(proto.ProtocolError, match="unreachable"):
        send(psgwd["ib"], env, b"y" * 10)


def test_receiver_flags_a_checksum_mismatch(psgwd):
    receiver = Receiver(EXTOLL)
    env = proto.envelope("42", "c1", "b1", receiver.addr, 4, 2, proto.digest(b"abcd"))
    result = send(psgwd["ib"], env, b"abce")
    assert result["match"] is False
    assert receiver.join()[0]["match"] is False


def test_pingpong_programs_find_the_gateway_in_the_routing_file(psgwd, tmp_path):
    route = tmp_path / "psgw-route-42"
    route.write_text("%s cluster01 booster01\n" % psgwd["ib"])
    pathlib.Path(str(route) + ".secret").write_text(SECRET + "\n")  # beside the routing file, as the prolog puts it
    # the programs connect from 127.0.0.1: the agent names that pair now (the psgwd reads the file again)
    policy.write_pairs(str(psgwd["pairs"]), "42", [("127.0.0.1", EXTOLL)])
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


# --------------------------------------------------------------------------- who the psgwd serves, and how much

def listener(host):
    """A listening socket that no one should reach (``accept`` times out when nothing did)."""
    sock = socket.socket()
    sock.bind((host, 0))
    sock.listen(1)
    sock.settimeout(0.3)
    return sock


def nothing_arrived(sock):
    with sock:
        try:
            sock.accept()
        except socket.timeout:
            return True
    return False


@pytest.mark.parametrize("secret, why", [("job-43-secret-" + "y" * 30, "wrong job secret"), (None, "no job secret")])
def test_a_connection_without_the_jobs_secret_is_refused_logged_and_never_relayed(tmp_path, secret, why):
    proc, psgwd = start_psgwd(tmp_path)
    receiver = listener(EXTOLL)
    env = proto.envelope("42", "c1", "b1", "%s:%d" % receiver.getsockname(), 10, 10, proto.digest(b"z" * 10))
    with socket.create_connection((IB, psgwd["port"]), timeout=10, source_address=(CM, 0)) as sock:
        reader = proto.Reader(sock)
        if secret:
            proto.send_authenticated(sock, reader, env, secret)
        else:
            assert "challenge" in reader.line()
            proto.send_line(sock, env)  # the envelope as it was before the secret: no proof at all
        answer = reader.line()
    assert answer == {"ok": False, "error": "refused connection from %s on ib: %s" % (CM, why)}
    assert nothing_arrived(receiver)
    log = stop_psgwd(proc)
    assert "refused connection from %s on ib: %s" % (CM, why) in log


def test_the_secret_comes_on_standard_input_never_in_argv_or_the_log(tmp_path):
    proc, psgwd = start_psgwd(tmp_path)
    with open("/proc/%d/cmdline" % proc.pid, "rb") as fh:
        assert SECRET.encode() not in fh.read()
    receiver = Receiver(EXTOLL)
    send(psgwd["ib"], proto.envelope("42", "c1", "b1", receiver.addr, 3, 3, proto.digest(b"abc")), b"abc")
    assert receiver.join()[0]["match"] and "auth" not in receiver.results[0]["envelope"]  # not passed on
    assert SECRET not in stop_psgwd(proc)
    proc, psgwd = start_psgwd(tmp_path, secret="short")
    assert psgwd is None and proc.returncode == 2
    assert "job secret on standard input: not 32 to 128 characters" in proc.stderr.read()


def test_a_destination_outside_the_jobs_node_pairs_is_refused_and_never_connected(psgwd, tmp_path):
    outside = listener("127.0.0.6")  # a booster node of no pair of the job (an ESB node outside it)
    env = proto.envelope("42", "c1", "b9", "127.0.0.6:%d" % outside.getsockname()[1], 5, 5, proto.digest(b"hello"))
    with pytest.raises(proto.ProtocolError, match=r"127\.0\.0\.4 -> 127\.0\.0\.6 is not a node pair of job 42"):
        send(psgwd["ib"], env, b"hello")
    assert nothing_arrived(outside)
    inside = Receiver(EXTOLL)  # the job's own pair, but from a cluster node of no pair
    env = proto.envelope("42", "c9", "b1", inside.addr, 5, 5, proto.digest(b"hello"))
    with pytest.raises(proto.ProtocolError, match=r"127\.0\.0\.7 -> 127\.0\.0\.3 is not a node pair"):
        send(psgwd["ib"], env, b"hello", source="127.0.0.7")
    policy.write_pairs(str(psgwd["pairs"]), "42", [("127.0.0.7", EXTOLL)])  # the agent names it: now it is one
    assert send(psgwd["ib"], env, b"hello", source="127.0.0.7")["match"]
    assert proto.query_stats(psgwd["ib"], SECRET)["refused"] == 2


@pytest.mark.parametrize("port", [22, 80, 1023])
def test_a_service_port_of_a_pair_node_is_refused_before_any_connection(psgwd, port):
    env = proto.envelope("42", "c1", "b1", "%s:%d" % (EXTOLL, port), 5, 5, proto.digest(b"hello"))
    # refused by rule, not "unreachable" (nothing listens there: a connection attempt would say so)
    with pytest.raises(proto.ProtocolError, match="destination 127.0.0.3 port %d is refused: a service port" % port):
        send(psgwd["ib"], env, b"hello")


def test_a_name_instead_of_an_address_is_refused(psgwd):
    env = proto.envelope("42", "c1", "b1", "localhost:7711", 5, 5, proto.digest(b"hello"))
    with pytest.raises(proto.ProtocolError, match="destination 'localhost:7711' is not an IP address"):
        send(psgwd["ib"], env, b"hello")


def test_a_message_over_the_byte_cap_closes_its_connection_and_the_job_goes_on(tmp_path):
    proc, psgwd = start_psgwd(tmp_path, "--max-bytes", "100000")
    receiver = listener(EXTOLL)
    big = pingpong.payload(100_001, "big")
    env = proto.envelope("42", "c1", "b1", "%s:%d" % receiver.getsockname(), len(big), 65536, proto.digest(big))
    with pytest.raises(proto.ProtocolError, match="100001 bytes exceeds this gateway's cap of 100000 bytes"):
        send(psgwd["ib"], env, big)
    assert nothing_arrived(receiver)
    ok = Receiver(EXTOLL)
    small = pingpong.payload(100_000, "small")
    assert send(psgwd["ib"], proto.envelope("42", "c1", "b1", ok.addr, len(small), 65536, proto.digest(small)),
                small)["match"]
    assert proc.poll() is None
    assert "exceeds this gateway's cap of 100000 bytes per connection" in stop_psgwd(proc)


def test_fragments_past_the_envelopes_length_close_the_connection(psgwd):
    receiver, got = listener(EXTOLL), []

    def accept():
        conn, _ = receiver.accept()
        with conn:
            reader = proto.Reader(conn)
            reader.line()
            proto.send_line(conn, {"ok": True})
            got.append(b"".join(iter(lambda: conn.recv(65536), b"")))
    receiver.settimeout(10)
    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    env = proto.envelope("42", "c1", "b1", "%s:%d" % receiver.getsockname(), 10, 64, proto.digest(b"x" * 10))
    with socket.create_connection((IB, psgwd["port"]), timeout=10, source_address=(CM, 0)) as sock:
        reader = proto.Reader(sock)
        proto.send_authenticated(sock, reader, env, SECRET)
        assert reader.line()["ok"]
        proto.send_fragment(sock, b"x" * 60)  # the envelope said 10 bytes
        answer = reader.line()
    assert "a fragment of 60 bytes would carry the message past its envelope's 10 bytes" in answer["error"]
    thread.join(10)
    receiver.close()
    assert got == [b""]  # not one byte of it went on


def _peak_rss_kib(pid):
    with open("/proc/%d/status" % pid, "r", encoding="utf-8") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith("VmHWM:"))


def test_a_large_fragment_is_relayed_in_bounded_chunks_not_buffered_whole(psgwd):
    """One 48 MiB fragment: the psgwd's peak memory grows by far less (it held up to the fragment before)."""
    before = _peak_rss_kib(psgwd["proc"].pid)
    receiver = Receiver(EXTOLL)
    data = pingpong.payload(48 << 20, "large")
    env = proto.envelope("42", "c1", "b1", receiver.addr, len(data), len(data), proto.digest(data))
    assert send(psgwd["ib"], env, data)["match"]
    grown = _peak_rss_kib(psgwd["proc"].pid) - before
    assert grown < 16 << 10, "psgwd's peak RSS grew by %d KiB relaying one 48 MiB fragment" % grown


def test_a_receiver_that_stops_reading_holds_the_sender_back_until_the_idle_timeout(tmp_path):
    proc, psgwd = start_psgwd(tmp_path, "--idle-timeout", "2")
    stalled, release = socket.socket(), threading.Event()
    stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
    stalled.bind((EXTOLL, 0))
    stalled.listen(1)

    def stall():
        conn, _ = stalled.accept()
        with conn:
            proto.Reader(conn).line()
            proto.send_line(conn, {"ok": True})
            release.wait(30)  # reads nothing more
    threading.Thread(target=stall, daemon=True).start()
    data = b"\0" * (32 << 20)
    env = proto.envelope("42", "c1", "b1", "%s:%d" % stalled.getsockname(), len(data), len(data), "0" * 64)
    with socket.create_connection((IB, psgwd["port"]), timeout=10, source_address=(CM, 0)) as sock:
        reader = proto.Reader(sock)
        proto.send_authenticated(sock, reader, env, SECRET)
        assert reader.line()["ok"]
        with pytest.raises(OSError):  # reset or closed by the psgwd once it gave up on the receiver
            sock.sendall(proto.LENGTH.pack(len(data)) + data)
            reader.line()
    release.set()
    stalled.close()
    ok = Receiver(EXTOLL)  # the job goes on
    assert send(psgwd["ib"], proto.envelope("42", "c1", "b1", ok.addr, 3, 3, proto.digest(b"abc")), b"abc")["match"]
    assert "idle for 2.0 s" in stop_psgwd(proc)


def test_one_address_holds_at_most_its_connections_and_then_may_connect_again(tmp_path):
    proc, psgwd = start_psgwd(tmp_path, "--peer-connections", "2")
    held = [socket.create_connection((IB, psgwd["port"]), timeout=10, source_address=(CM, 0)) for _ in range(2)]
    for sock in held:
        assert "challenge" in proto.Reader(sock).line()  # served, waiting for an envelope
    with socket.create_connection((IB, psgwd["port"]), timeout=10, source_address=(CM, 0)) as third:
        assert proto.Reader(third).line() == {
            "ok": False, "error": "refused connection from %s on ib: 2 connections from it are open already" % CM}
    # the client names the gateway's refusal (it said "no challenge" before: seen when the loop below retried)
    with pytest.raises(proto.ProtocolError, match="refused the connection: refused connection from .* open already"):
        send(psgwd["ib"], proto.envelope("42", "c1", "b1", "%s:1" % EXTOLL, 3, 3, proto.digest(b"abc")), b"abc")
    for sock in held:
        sock.close()
    receiver = Receiver(EXTOLL)
    env = proto.envelope("42", "c1", "b1", receiver.addr, 3, 3, proto.digest(b"abc"))
    for _ in range(100):  # the held connections' threads see them closed
        try:
            assert send(psgwd["ib"], env, b"abc")["match"]
            break
        except proto.ProtocolError as exc:
            assert "connections from it are open already" in str(exc)
            threading.Event().wait(0.05)
    else:
        pytest.fail("the address was not served again after closing its connections")
    assert "2 connections from it are open already" in stop_psgwd(proc)
