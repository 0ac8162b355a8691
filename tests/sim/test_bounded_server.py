# SPDX-License-Identifier: GPL-3.0-or-later
"""tlsserver's bounds, in one process with short deadlines: the body reader (Content-Length validated after the
handler authenticated, chunked refused), the deadline of each phase, the header size and the connection caps; and
the DCDB Collect Agent's memory bounds (issue 34)."""
from __future__ import annotations

import http.client
import json
import os
import socket
import sys
import threading
import time

import pytest

from ansible_collections.msa.hpc.plugins.module_utils.node.tlsserver import (BodyError, TLSThreadingHTTPServer,
                                                                             dispatching)
from msa_sim.bmc.testing import make_tls
from msa_sim.dcdb.collectagent import AgentConfig, CollectAgent, JobTracker
from msa_sim.rma.testing import ROOT

sys.path.insert(0, os.path.join(ROOT, "sim", "nam_client"))
import msa_nam  # noqa: E402


class Handler(dispatching("GET", "POST")):
    protocol_version = "HTTP/1.1"
    max_body = 100
    reads = []

    def log_message(self, fmt, *args):
        pass

    def _send(self, status, payload):
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _dispatch(self, method):
        if self.headers.get("X-Key") != "k":
            return self._send(401, {"error": "who are you"})
        try:
            body = self.read_body()
        except BodyError as exc:
            return self._send(exc.status, exc.document())
        self.reads.append(len(body))
        return self._send(200, {"method": method, "length": len(body)})


@pytest.fixture
def server():
    srv = TLSThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.header_timeout = srv.idle_timeout = srv.body_timeout = 0.6
    srv.max_per_peer, srv.max_connections = 3, 5
    Handler.reads = []
    threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    yield srv
    srv.shutdown()
    srv.server_close()


def connect(srv, peer="127.0.0.1"):
    return socket.create_connection(srv.server_address[:2], timeout=5, source_address=(peer, 0))


def answer(sock):
    """(status, JSON body or None, headers) of one answer, or None when the connection ends unanswered."""
    response = http.client.HTTPResponse(sock)
    try:
        response.begin()
    except http.client.RemoteDisconnected:
        return None
    body = response.read()
    document = json.loads(body) if (response.getheader("Content-Type") or "").startswith("application/json") \
        else None
    return response.status, document, {k.lower(): v for k, v in response.getheaders()}


def closed(sock, within):
    """True when the server ends the connection within ``within`` seconds."""
    sock.settimeout(within)
    try:
        while sock.recv(65536):
            pass
        return True
    except (socket.timeout, TimeoutError):
        return False
    except OSError:
        return True


def ask(srv, head, body=b"", key="k"):
    with connect(srv) as sock:
        sock.sendall(("%s\r\nHost: x\r\n%s\r\n" % (head, "X-Key: %s\r\n" % key if key else "")).encode() + body)
        return answer(sock)


@pytest.mark.parametrize("headers, status, header, value", [
    ("Content-Length: -1", 400, "Content-Length", "-1"),
    ("Content-Length: 1e3", 400, "Content-Length", "1e3"),
    ("Content-Length: 101", 413, "Content-Length", "101"),
    ("Content-Length: 5\r\nContent-Length: 6", 400, "Content-Length", "5, 6"),
    ("Transfer-Encoding: chunked", 411, "Transfer-Encoding", "chunked"),
    ("Transfer-Encoding: gzip", 501, "Transfer-Encoding", "gzip"),
])
def test_a_bad_content_length_or_transfer_coding_is_refused_naming_the_header_and_value(server, headers, status,
                                                                                          header, value):
    got = ask(server, "POST / HTTP/1.1\r\n" + headers, b"0123456789")
    assert got[0] == status and got[1]["error"]["header"] == header and got[1]["error"]["value"] == value
    assert header in got[1]["error"]["message"] and got[2]["connection"] == "close"
    assert Handler.reads == []


def test_a_post_without_content_length_is_411_once_authenticated_and_401_before(server):
    got = ask(server, "POST / HTTP/1.1")
    assert got[0] == 411 and got[1]["error"] == {"code": "length_required", "header": "Content-Length",
                                                 "value": None, "message": got[1]["error"]["message"]}
    assert ask(server, "POST / HTTP/1.1", key=None)[0] == 401
    assert ask(server, "GET / HTTP/1.1")[1] == {"method": "GET", "length": 0}  # a GET needs none


def test_the_body_is_read_only_after_authentication_and_an_unread_body_ends_the_connection(server):
    with connect(server) as sock:
        sock.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 50\r\n\r\n" + b"G" * 50)
        status, _, headers = answer(sock)
        assert (status, headers["connection"]) == (401, "close") and closed(sock, 2)
    assert Handler.reads == []
    # authenticated, the same request is read, and the connection is kept for the next one
    with connect(server) as sock:
        for _ in range(2):
            sock.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nX-Key: k\r\nContent-Length: 50\r\n\r\n" + b"G" * 50)
            assert answer(sock)[1] == {"method": "POST", "length": 50}
    assert Handler.reads == [50, 50]


@pytest.mark.parametrize("request_bytes, status", [
    (b"GARBAGE\r\n\r\n", 400),
    (b"GET /\r\n\r\n", 400),                                    # HTTP/0.9: no status line would come back
    (b"GET / HTTP/1.1\r\nHost: x\r\nno colon\r\nX-Key: k\r\n\r\n", 400),
    (b"GET / HTTP/1.1\r\nX-Big: " + b"b" * (70 << 10) + b"\r\n\r\n", 431),
    (b"GET /" + b"a" * (70 << 10) + b" HTTP/1.1\r\n\r\n", 414),
])
def test_malformed_or_oversized_request_heads_get_a_4xx_with_a_status_line(server, request_bytes, status):
    with connect(server) as sock:
        sock.sendall(request_bytes)
        assert answer(sock)[0] == status


def test_each_phase_has_a_deadline(server):
    start = time.monotonic()
    silent, dripping, body, kept = connect(server), connect(server), connect(server), connect(server, "127.0.0.2")
    kept.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nX-Key: k\r\n\r\n")
    assert answer(kept)[0] == 200
    body.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nX-Key: k\r\nContent-Length: 90\r\n\r\nabc")
    dripping.sendall(b"GET / HTTP/1.1\r\n")
    for _ in range(8):  # one byte each 0.2 s: every read is quick, the whole takes longer than the deadline
        time.sleep(0.2)
        try:
            dripping.sendall(b"X")
        except OSError:
            break
    assert closed(silent, 2) and closed(dripping, 2) and closed(kept, 2)
    status, document, _ = answer(body)
    assert (status, document["error"]["code"]) == (408, "timeout") and closed(body, 2)
    assert time.monotonic() - start < 5
    for sock in (silent, dripping, body, kept):
        sock.close()


def test_connections_are_capped_per_peer_and_in_all(server):
    held = [connect(server) for _ in range(3)]
    time.sleep(0.2)
    extra = connect(server)
    assert closed(extra, 1)  # the fourth from 127.0.0.1: closed at once, unanswered
    other = [connect(server, "127.0.0.2"), connect(server, "127.0.0.2")]
    other[0].sendall(b"GET / HTTP/1.1\r\nHost: x\r\nX-Key: k\r\n\r\n")
    assert answer(other[0])[0] == 200  # another peer is served
    assert closed(connect(server, "127.0.0.3"), 1)  # five open in all: the sixth closed
    assert server.refused_connections == 2
    for sock in held + other:
        sock.close()
    deadline = time.monotonic() + 3
    while server.connections() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.connections() == 0


def test_the_tls_handshake_has_a_deadline(tmp_path):
    _ca, pair = make_tls(str(tmp_path))
    srv = TLSThreadingHTTPServer(("127.0.0.1", 0), Handler, tls=(pair["cert"], pair["key"]))
    srv.handshake_timeout = 0.5
    threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        with connect(srv) as sock:
            sock.sendall(b"\x16\x03\x01")  # the start of a ClientHello, and no more
            assert closed(sock, 3)
    finally:
        srv.shutdown()
        srv.server_close()


def test_the_nam_client_carries_on_after_the_server_closed_its_idle_kept_alive_connection(tmp_path):
    """A job's code that keeps its manager connection idle past the keep-alive deadline (the demo's hold step polls
    the board for a minute, then detaches) gets its next call answered on a new connection, not an SSLEOFError."""
    ca, pair = make_tls(str(tmp_path))
    srv = TLSThreadingHTTPServer(("127.0.0.1", 0), Handler, tls=(pair["cert"], pair["key"]))
    srv.idle_timeout = 0.3
    threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    conn = msa_nam.Connection("https://127.0.0.1:%d" % srv.server_address[1], ca)
    try:
        assert conn.call("POST", "/x", b"12", {"X-Key": "k"})[0] == 200
        deadline = time.monotonic() + 5
        while srv.connections() and time.monotonic() < deadline:   # the server ends the idle connection
            time.sleep(0.05)
        assert srv.connections() == 0
        assert conn.call("POST", "/x", b"345", {"X-Key": "k"}) == (200, b'{"method": "POST", "length": 3}')
        assert Handler.reads[-2:] == [2, 3]
    finally:
        conn.close()
        srv.shutdown()
        srv.server_close()


def test_the_nam_client_names_the_server_when_a_new_connection_fails(tmp_path):
    ca, _pair = make_tls(str(tmp_path))
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
        threading.Thread(target=lambda: listener.accept()[0].close(), daemon=True).start()
        conn = msa_nam.Connection("https://127.0.0.1:%d" % port, ca, timeout=5)
        with pytest.raises(msa_nam.NamError, match="cannot reach https://127.0.0.1:%d" % port):
            conn.call("GET", "/x")


def test_the_collect_agent_bounds_its_pending_readings_and_its_job_table(tmp_path):
    (tmp_path / "collectagent.conf").write_text(
        "global {\n sacct none\n maxPendingReadings 25\n maxReadingsPerMessage 10\n maxJobsPerNode 2\n}\n"
        "storage {\n backend sqlite\n path %s/dcdb.sqlite\n}\n" % tmp_path)
    agent = CollectAgent(AgentConfig(str(tmp_path / "collectagent.conf")))  # no writer: everything stays pending
    now = time.time_ns()
    payload = json.dumps([[now + i, i] for i in range(15)]).encode()
    assert agent.ingest("/msa/cm/n01/t/s0", payload) == 10  # the 5 oldest of the message dropped
    for node in ("n02", "n03"):
        agent.ingest("/msa/cm/%s/t/s0" % node, payload)
    # 30 pending > 25: the oldest message (n01's) went to make room
    assert agent.counters["shed"] == 5 * 3 + 10 and agent._pending.qsize() == 2
    assert "dcdb_collectagent_readings_shed_total 25" in agent.metrics()
    assert "dcdb_collectagent_pending_readings 20" in agent.metrics()
    jobs = JobTracker(0, max_jobs=2)
    for jobid, ts in (("1", 10), ("2", 20), ("3", 30)):
        jobs.seen(jobid, "/msa/cm/n01", ts)
    assert jobs.on("/msa/cm/n01", 10) == [] and jobs.on("/msa/cm/n01", 30) == ["3"] and jobs.forgotten == 1


def test_the_bmc_takes_a_large_upload_only_from_an_authenticated_client(tmp_path):
    from msa_sim.bmc import testing
    service = testing.start(str(tmp_path), [{"name": "n1"}], {"ops": ("0ps-passw", "Administrator")})
    host, port = service.servers["n1"].server_address[:2]
    head = ("POST /redfish/v1/UpdateService/upload HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; "
            "boundary=b\r\nContent-Length: %d\r\n%s\r\n")
    try:
        for auth, status in (("", 413), ("Authorization: Basic b3BzOjBwcy1wYXNzdw==\r\n", 400)):
            with socket.create_connection((host, port), timeout=5) as sock:
                sock.sendall((head % (1 << 20, auth)).encode())  # the head: a refusal reads none of the body
                if auth:
                    sock.sendall(b"x" * (1 << 20))
                got = answer(sock)
                assert got[0] == status, got
                if status == 413:  # Redfish's error, naming the header and the value
                    assert "Content-Length" in json.dumps(got[1]) and str(1 << 20) in json.dumps(got[1])
                    assert got[2]["connection"] == "close"
                # authenticated, the MiB was read and its form judged (not a multipart form: 400), not its size
    finally:
        service.stop()
