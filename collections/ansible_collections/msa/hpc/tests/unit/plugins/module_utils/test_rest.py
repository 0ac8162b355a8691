# SPDX-License-Identifier: GPL-3.0-or-later
"""The shared REST client: auth headers, retries with back-off, clear errors."""
from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ansible_collections.msa.hpc.plugins.module_utils._rest import RestClient, RestError


class Handler(BaseHTTPRequestHandler):
    script = []      # statuses to answer, in order; then 200
    seen = []

    def log_message(self, *args):
        pass

    def _answer(self):
        Handler.seen.append((self.command, self.path, dict(self.headers)))
        status = Handler.script.pop(0) if Handler.script else 200
        body = {"path": self.path} if status < 400 else {"error": {"code": "x", "message": "nope: %s" % status}}
        raw = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    do_GET = do_POST = do_DELETE = do_PATCH = _answer


@pytest.fixture
def server():
    Handler.script, Handler.seen = [], []
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield "http://127.0.0.1:%d" % srv.server_address[1]
    srv.shutdown()
    srv.server_close()


def test_bearer_token_and_json_body_reach_the_server(server):
    client = RestClient(server, token="t0k", sleep=lambda s: None)
    assert client.post("/a", {"x": 1}) == {"path": "/a"}
    method, path, headers = Handler.seen[-1]
    assert (method, path, headers["Authorization"]) == ("POST", "/a", "Bearer t0k")


def test_basic_auth_when_no_token(server):
    RestClient(server, username="u", password="p", sleep=lambda s: None).get("/b")
    assert Handler.seen[-1][2]["Authorization"] == "Basic dTpw"


def test_redfish_style_token_header_is_sent_as_is(server):
    RestClient(server, token="abc", token_header="X-Auth-Token", sleep=lambda s: None).get("/c")
    assert Handler.seen[-1][2]["X-Auth-Token"] == "abc"


def test_two_503_answers_are_retried_with_growing_back_off(server):
    Handler.script = [503, 503]
    waits = []
    client = RestClient(server, retries=3, backoff=0.5, sleep=waits.append)
    assert client.get("/d") == {"path": "/d"}
    assert waits == [0.5, 1.0]
    assert len(Handler.seen) == 3


def test_5xx_beyond_the_retries_names_the_status_and_message(server):
    Handler.script = [503, 503, 503]
    with pytest.raises(RestError) as err:
        RestClient(server, retries=1, sleep=lambda s: None).get("/e")
    assert err.value.status == 503
    assert "GET /e answered HTTP 503: nope: 503" in str(err.value)


def test_401_is_explained_and_not_retried(server):
    Handler.script = [401]
    with pytest.raises(RestError) as err:
        RestClient(server, username="u", password="wrong", retries=3, sleep=lambda s: None).get("/f")
    assert "authentication failed" in str(err.value)
    assert "wrong" not in str(err.value)
    assert len(Handler.seen) == 1


def test_unreachable_endpoint_says_so_after_the_retries():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    waits = []
    with pytest.raises(RestError) as err:
        RestClient("http://127.0.0.1:%d" % port, retries=2, backoff=0.1, sleep=waits.append).get("/g")
    assert "cannot reach http://127.0.0.1:%d after 3 attempts" % port in str(err.value)
    assert waits == [0.1, 0.2]


def test_endpoint_that_is_not_a_url_is_rejected():
    with pytest.raises(RestError, match="is not a URL"):
        RestClient("bmc01")
