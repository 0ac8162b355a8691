# SPDX-License-Identifier: GPL-3.0-or-later
"""HTTP/1.1 connection handling of the BMC stand-in over TLS: keep-alive connections carry several requests
(errors and bodies included), and a connection the client asks to close is announced as closing, so a pooling
client (urllib3, under requests and sushy) never sends its next request into it."""
from __future__ import annotations

import base64
import http.client
import json
import socket
import socketserver
import ssl
import time

import pytest
import urllib3

from msa_sim.bmc import api, testing

USERS = {"ops": ("0ps-passw", "Operator")}
AUTH = {"Authorization": "Basic " + base64.b64encode(b"ops:0ps-passw").decode(), "Content-Type": "application/json"}
SYS = "/redfish/v1/Systems/1"
RESET = SYS + "/Actions/ComputerSystem.Reset"
# requests with and without a body, answered 200, 204 and with Redfish errors (bodies of 4xx answers)
STEPS = (("GET", SYS, None), ("POST", RESET, {"ResetType": "Bogus"}), ("GET", "/redfish/v1/Nowhere", None),
         ("PATCH", SYS, {"Boot": {"BootSourceOverrideTarget": "Pxe"}}), ("POST", RESET, {"ResetType": "On"}),
         ("GET", SYS, None))
STATUSES = [200, 400, 404, 200, 204, 200]


@pytest.fixture()
def served(tmp_path):
    """One BMC over TLS from a throwaway CA; yields (url, host, port, CA file)."""
    ca, tls = testing.make_tls(str(tmp_path))
    service = testing.start(str(tmp_path), [{"name": "n1"}], USERS, defaults={"tls": tls})
    host, port = service.servers["n1"].server_address[:2]
    yield service.url("n1"), host, port, ca
    service.stop()


def _json(body):
    return json.dumps(body) if body is not None else None


def test_one_keep_alive_connection_carries_requests_with_bodies_and_error_answers(served):
    _, host, port, ca = served
    conn = http.client.HTTPSConnection(host, port, context=ssl.create_default_context(cafile=ca), timeout=10)
    conn.connect()
    sock, statuses = conn.sock, []
    for method, path, body in STEPS:
        conn.request(method, path, body=_json(body), headers=AUTH)
        response = conn.getresponse()
        response.read()
        statuses.append(response.status)
        assert not response.will_close and response.getheader("Connection") is None
    assert conn.sock is sock, "the BMC closed a keep-alive connection"
    assert statuses == STATUSES
    conn.close()


def test_a_request_asking_to_close_gets_an_answer_saying_so_and_then_the_close(served):
    _, host, port, ca = served
    request = "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n%s\r\n" % (
        SYS, host, "".join("%s: %s\r\n" % item for item in AUTH.items()))
    raw, chunk = b"", b"-"
    with ssl.create_default_context(cafile=ca).wrap_socket(socket.create_connection((host, port), timeout=10),
                                                           server_hostname=host) as sock:
        sock.sendall(request.encode())
        while chunk:  # to the end of the connection: a BMC keeping it open fails here with a timeout
            chunk = sock.recv(65536)
            raw += chunk
    head = raw.split(b"\r\n\r\n", 1)[0].decode().lower().split("\r\n")
    assert head[0] == "http/1.1 200 ok" and "connection: close" in head


def test_a_pooling_client_sending_connection_close_never_meets_a_closed_connection(served, monkeypatch):
    """sushy's way: "Connection: close" on every request through urllib3's pool, no retries. The BMC closes such a
    connection after answering; if the answer does not say so, the pool keeps the socket and the next request
    races the close (RemoteDisconnected for a GET, SSLEOFError for a POST/PATCH body). A BMC thread slowed down
    like on a loaded machine makes the client win that race every time."""
    slow_close = socketserver.TCPServer.shutdown_request

    def shutdown_request(server, request):
        time.sleep(0.2)
        slow_close(server, request)

    monkeypatch.setattr(api.BmcHTTPServer, "shutdown_request", shutdown_request)
    url, _, _, ca = served
    pool = urllib3.PoolManager(ca_certs=ca, retries=False, timeout=10, headers=dict(AUTH, Connection="close"))
    assert [pool.request(method, url + path, body=_json(body)).status for method, path, body in STEPS] == STATUSES
    pool.clear()
