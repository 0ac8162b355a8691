# SPDX-License-Identifier: GPL-3.0-or-later
"""Every HTTP service (the six stand-in APIs, the image store and the overlay server), each a process of its own over
TLS, under malformed, oversized, negative-length, chunked, slow and idle requests, without and with credentials
(issue 34):

- while that load is on, a well-formed authenticated request from another peer answers within 1 s;
- each malformed request gets its 4xx (or its connection closed), never a 2xx, never a hang;
- 100 MiB offered with ``Content-Length: -1`` and no credentials leaves the service's peak memory (VmHWM) within
  MEMORY_BOUND of what it was before;
- idle connections from one peer beyond tlsserver's per-peer cap are closed at once; slow requests (nothing sent,
  headers or a body dripped a byte at a time) are cut at their deadline.
Each service's requests tried and peak memory are printed in the terminal summary (tests/robustness/conftest.py).
"""
from __future__ import annotations

import select
import socket
import ssl
import threading
import time

import pytest

import http_services as S
from msa_sim.bmc.testing import make_tls

GOOD_PEER, IDLE_PEER, ATTACK_PEER, SLOW_PEER = "127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"
ANSWER_WAIT = 14.0        # seconds: longer than any deadline of tlsserver that a request below meets (10 s)
SLOW_WAIT = 16.0          # seconds a slow request may go on before the service counts as hanging
IDLE_CONNECTIONS = 48     # from one peer: more than tlsserver.MAX_PER_PEER (32)
PER_PEER_CAP = 32
FLOOD = 100 << 20         # bytes offered with Content-Length: -1 and no credentials
MEMORY_BOUND = 30 << 10   # KiB the peak resident set may grow under all of it
LATENCY = 1.0             # seconds a well-formed request may take while the load is on
REPEAT = 3
# Services with no POST at all, which read no body: a POST is 501, a slow body 413 before a byte of it is read.
NO_BODY = ("image-store", "overlay-server")


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    ca, pair = make_tls(str(tmp_path_factory.mktemp("pki")))
    context = ssl.create_default_context(cafile=ca)
    return {"ca": ca, "cert": pair["cert"], "key": pair["key"], "context": context}


@pytest.fixture(scope="module")
def services(pki, tmp_path_factory):
    """All eight services, started at once (each start is mostly Python's imports)."""
    started, errors = {}, []

    def run(name):
        try:
            started[name] = S.start(name, tmp_path_factory.mktemp(name), pki)
        except Exception as exc:  # pylint: disable=broad-except  (reported below, with every other start)
            errors.append("%s: %s" % (name, exc))
    threads = [threading.Thread(target=run, args=(name,)) for name in S.STARTERS]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    try:
        assert not errors, errors
        yield started
    finally:
        for service in started.values():
            S.stop(service)


def connect(service, pki, peer, timeout=5.0):
    raw = socket.create_connection(("127.0.0.1", service.port), timeout=timeout, source_address=(peer, 0))
    try:
        return pki["context"].wrap_socket(raw, server_hostname="127.0.0.1")
    except BaseException:
        raw.close()
        raise


def request(method, path, headers=None, body=b""):
    lines = ["%s %s HTTP/1.1" % (method, path), "Host: 127.0.0.1"]
    lines += ["%s: %s" % item for item in (headers or {}).items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def read_status(sock, timeout):
    """The status of the answer on ``sock``, "closed" when it ends unanswered, "hang" when nothing comes."""
    sock.settimeout(timeout)
    data = b""
    try:
        while b"\r\n" not in data:
            chunk = sock.recv(4096)
            if not chunk:
                break
            data += chunk
    except (socket.timeout, TimeoutError):
        return "hang" if not data else "partial"
    except (OSError, ssl.SSLError):
        pass
    if not data:
        return "closed"
    try:
        return int(data.split(b" ", 2)[1])
    except (IndexError, ValueError):
        return "garbage %r" % data[:40]


def exchange(service, pki, peer, data, timeout=ANSWER_WAIT):
    try:
        sock = connect(service, pki, peer)
    except (OSError, ssl.SSLError):
        return "closed"
    with sock:
        try:
            sock.sendall(data)
        except (OSError, ssl.SSLError):
            pass  # the service closed as soon as it knew enough: its answer (if any) is still to be read
        return read_status(sock, timeout)


def malformed_cases(service, creds):
    """(case, request bytes, the status it must get with credentials) for ``service``."""
    auth = service.auth if creds else {}
    method, path = service.body
    bad_method = 501 if service.name in NO_BODY else None
    cases = [
        ("garbage request line", b"GARBAGE\r\n\r\n", 400),
        ("bad HTTP version", b"GET / HTTP/1.x\r\nHost: 127.0.0.1\r\n\r\n", 400),
        ("request line of 70 KiB", request("GET", "/" + "a" * (70 << 10), auth), (414, 431)),
        ("header line without a colon", request(service.good[0], service.good[1], dict(auth, **{"X-Ok": "1"}))
         .replace(b"X-Ok: 1", b"no colon here"), 400),
        ("one header of 70 KiB", request("GET", "/", dict(auth, **{"X-Big": "b" * (70 << 10)})), 431),
        ("200 headers", request("GET", "/", dict(auth, **{"X-H%d" % i: "v" for i in range(200)})), 431),
        ("Content-Length -1", request(method, path, dict(auth, **{"Content-Length": "-1"})), 400),
        ("Content-Length not a number", request(method, path, dict(auth, **{"Content-Length": "12abc"})), 400),
        ("Content-Length 1 TB", request(method, path, dict(auth, **{"Content-Length": str(10 ** 12)})), 413),
        ("two Content-Lengths", request(method, path, auth).replace(
            b"\r\n\r\n", b"\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}"), 400),
        ("chunked body", request(method, path, dict(auth, **{"Transfer-Encoding": "chunked"}),
                                 b"5\r\nhello\r\n0\r\n\r\n"), 411),
        ("gzip transfer coding", request(method, path, dict(auth, **{"Transfer-Encoding": "gzip"})), 501),
        ("body without Content-Length", request(method, path, auth).replace(b"\r\n\r\n", b"\r\n\r\n{}"),
         bad_method or 411),
    ]
    return cases


def expected(status, creds):
    wanted = set(status) if isinstance(status, tuple) else {status}
    return wanted if creds else wanted | {401}


def good_request(service, pki):
    """Seconds a well-formed authenticated request takes from GOOD_PEER (a fresh connection), and its status."""
    start = time.monotonic()
    with connect(service, pki, GOOD_PEER) as sock:
        sock.sendall(request(service.good[0], service.good[1], dict(service.auth, Connection="close")))
        status = read_status(sock, 10.0)
    return time.monotonic() - start, status


def flood(service, pki, outcome):
    """Offer FLOOD bytes with Content-Length: -1 and no credentials; record the bytes taken and the answer."""
    method, path = service.body
    sent = 0
    try:
        sock = connect(service, pki, ATTACK_PEER)
    except (OSError, ssl.SSLError):
        outcome.update(sent=0, status="closed")
        return
    with sock:
        chunk = b"x" * (1 << 20)
        try:
            sock.sendall(request(method, path, {"Content-Length": "-1"}))
            while sent < FLOOD:
                sock.sendall(chunk)
                sent += len(chunk)
            sock.shutdown(socket.SHUT_WR)
        except (OSError, ssl.SSLError):
            pass
        outcome.update(sent=sent, status=read_status(sock, ANSWER_WAIT))


def open_idle(service, pki, count):
    """``count`` connections from IDLE_PEER that send nothing: (the ones the service kept, how many it refused)."""
    kept, refused = [], 0
    for _ in range(count):
        try:
            sock = connect(service, pki, IDLE_PEER, timeout=3.0)
            sock.settimeout(0.02)
            try:  # a refused connection may still finish its handshake in the kernel's buffers: then it reads EOF
                if sock.recv(1) == b"":
                    sock.close()
                    refused += 1
                    continue
            except (socket.timeout, TimeoutError):
                pass
            kept.append(sock)
        except (OSError, ssl.SSLError):
            refused += 1
    return kept, refused


@pytest.mark.parametrize("name", sorted(S.STARTERS))
def test_a_service_answers_a_good_client_within_1s_and_refuses_the_rest_within_its_memory_bound(
        services, pki, name, robustness_report):
    service = services[name]
    assert good_request(service, pki)[1] == 200  # warm: the first answer loads what a service loads lazily
    base_hwm, base_rss = S.peak_memory(service.proc.pid)
    kept, refused = open_idle(service, pki, IDLE_CONNECTIONS)
    results, flooded, threads = {}, {}, []
    cases = [(creds, case, data, status) for creds in (False, True) for case, data, status in
             malformed_cases(service, creds)]

    def attack(key, data):
        results[key] = exchange(service, pki, ATTACK_PEER, data)
    for creds, case, data, _status in cases:
        threads.append(threading.Thread(target=attack, args=((creds, case), data)))
    threads.append(threading.Thread(target=flood, args=(service, pki, flooded)))
    for thread in threads:
        thread.start()
    try:
        time.sleep(0.3)
        timings = [good_request(service, pki) for _ in range(REPEAT)]
    finally:
        for thread in threads:
            thread.join(ANSWER_WAIT + 30)
        for sock in kept:
            sock.close()
    hwm, rss = S.peak_memory(service.proc.pid)
    robustness_report[name] = {
        "requests": 1 + IDLE_CONNECTIONS + len(cases) + 1 + REPEAT, "flood_bytes_taken": flooded.get("sent"),
        "base_hwm_kib": base_hwm, "peak_hwm_kib": hwm, "rss_kib": rss, "idle_refused": refused,
        "latency_s": max(t for t, _ in timings)}
    wrong = {"%s%s" % (case, " (with credentials)" if creds else ""): results.get((creds, case))
             for creds, case, _data, status in cases if results.get((creds, case)) not in expected(status, creds)
             | {"closed"}}
    assert not wrong, "%s answered malformed requests wrongly (or hung): %s" % (name, wrong)
    assert flooded.get("status") in (400, "closed"), flooded
    assert all(status == 200 for _, status in timings), timings
    assert max(t for t, _ in timings) < LATENCY, "%s: %s" % (name, timings)
    assert refused >= IDLE_CONNECTIONS - PER_PEER_CAP, "%s kept %d idle connections from one peer" % (name, len(kept))
    assert hwm - base_hwm < MEMORY_BOUND, "%s: VmHWM %d KiB -> %d KiB" % (name, base_hwm, hwm)


def drip(sock, data, deadline, start_with=b""):
    """Send ``start_with`` then ``data`` a byte each 0.5 s until the service answers or closes (its status, or
    "closed"), or ``deadline`` passes ("hang"); with the seconds it took."""
    start = time.monotonic()
    try:
        sock.sendall(start_with)
        for byte in data:
            sock.settimeout(0.5)
            try:  # (a TLS socket can be readable with no data for us: the session tickets after the handshake)
                chunk = sock.recv(4096)
            except (socket.timeout, TimeoutError):
                chunk = None
            if chunk is not None:
                return ("closed" if not chunk else int(chunk.split(b" ", 2)[1])), time.monotonic() - start
            if time.monotonic() - start > deadline:
                return "hang", time.monotonic() - start
            sock.sendall(bytes([byte]))
    except (OSError, ssl.SSLError, IndexError, ValueError):
        return "closed", time.monotonic() - start
    return "hang", time.monotonic() - start


def test_slow_and_silent_requests_are_cut_at_their_deadline(services, pki, robustness_report):
    """Every service at once (the deadlines run in parallel): a connection that sends nothing, one that drips its
    headers, and one that drips its body (with credentials) each end within SLOW_WAIT seconds."""
    outcomes, threads = {}, []
    endless = b"X-Drip: " + b"y" * 1000

    def slow(service, kind):
        sock = connect(service, pki, SLOW_PEER)
        with sock:
            if kind == "silent":
                start = time.monotonic()
                outcomes[service.name, kind] = read_status(sock, SLOW_WAIT), time.monotonic() - start
            elif kind == "headers":
                outcomes[service.name, kind] = drip(sock, endless, SLOW_WAIT, b"GET / HTTP/1.1\r\n")
            else:
                method, path = service.body
                head = request(method, path, dict(service.auth, **{"Content-Length": "1000"}))
                outcomes[service.name, kind] = drip(sock, b"z" * 1000, SLOW_WAIT, head)
    for service in services.values():
        for kind in ("silent", "headers", "body"):
            threads.append(threading.Thread(target=slow, args=(service, kind)))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(SLOW_WAIT + 10)
    for (name, kind), (status, _seconds) in outcomes.items():
        robustness_report.setdefault(name, {}).setdefault("slow", {})[kind] = status
    hung = {key: value for key, value in outcomes.items() if value[0] in ("hang", "partial")}
    assert len(outcomes) == 3 * len(services)
    assert not hung, "still open after %s s: %s" % (SLOW_WAIT, hung)
    answered = {key: value for key, value in outcomes.items()
                if value[0] not in ("closed", 408) and not (key[0] in NO_BODY and value[0] == 413)}
    assert not answered, "a slow request got an answer other than 408 or a closed connection: %s" % answered


def test_plain_http_on_the_tls_port_gets_no_answer(services):
    for service in services.values():
        with socket.create_connection(("127.0.0.1", service.port), timeout=ANSWER_WAIT,
                                      source_address=(ATTACK_PEER, 0)) as sock:
            sock.sendall(request(service.good[0], service.good[1], service.auth))
            try:
                answer = sock.recv(100)
            except OSError:
                answer = b""
            assert not answer.startswith(b"HTTP"), "%s answered plain HTTP: %r" % (service.name, answer)
