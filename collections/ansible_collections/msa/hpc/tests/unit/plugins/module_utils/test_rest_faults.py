# SPDX-License-Identifier: GPL-3.0-or-later
"""RestClient against a real loopback server that fails mid-exchange: two error meanings, retries that never duplicate."""
from __future__ import annotations

import http.client
import http.server
import subprocess
import threading

import pytest

from ansible_collections.msa.hpc.plugins.module_utils._rest import (
    NotDoneError, OutcomeUnknownError, RestClient, RestError)
from ansible_collections.msa.hpc.tests.unit.plugins.module_utils.faulty_http import FaultyServer, free_port

CREATED = ("answer", 201, {"id": 7, "name": "a"})


def client(url, **kw):
    kw.setdefault("sleep", lambda s: None)
    return RestClient(url, **kw)


@pytest.fixture
def server():
    srv = FaultyServer()
    yield srv
    srv.close()


@pytest.mark.parametrize("end, cause", [("half", http.client.IncompleteRead), ("half-reset", ConnectionResetError)])
def test_half_a_body_then_a_close_is_outcome_unknown_never_incomplete_read(server, end, cause):
    server.script = [end]
    with pytest.raises(OutcomeUnknownError) as err:
        client(server.url, retries=0).post("/things", {"name": "a"})
    assert not isinstance(err.value, http.client.HTTPException)
    assert err.value.outcome == "unknown" and err.value.status is None
    assert isinstance(err.value.cause, cause)
    assert str(err.value).startswith("POST /things: the request was sent to 127.0.0.1:%d but the answer was lost ("
                                     % server.port) and str(err.value).endswith("may have carried it out")


def test_a_post_whose_answer_was_cut_is_never_sent_again_without_a_lookup(server):
    server.script = ["half", "drop", "garbage"]
    waits = []
    with pytest.raises(OutcomeUnknownError):
        client(server.url, retries=3, sleep=waits.append).post("/things", {"name": "a"})
    assert server.count("POST") == 1 and waits == []


def test_a_get_whose_answer_was_cut_is_sent_again(server):
    server.script = ["half", "drop", "garbage"]
    waits = []
    assert client(server.url, retries=3, backoff=0.5, sleep=waits.append).get("/things") == {"ok": True}
    assert server.count("GET") == 4 and waits == [0.5, 1.0, 2.0]


def test_a_refused_connection_is_not_done_after_the_retries():
    url = "http://127.0.0.1:%d" % free_port()
    waits = []
    with pytest.raises(NotDoneError) as err:
        client(url, retries=2, backoff=0.1, sleep=waits.append).post("/things", {"name": "a"})
    assert err.value.outcome == "not_done" and err.value.status is None
    assert "cannot reach %s after 3 attempts" % url in str(err.value) and "refused" in str(err.value)
    assert waits == [0.1, 0.2]


def test_a_post_refused_before_sending_is_retried_and_done_once():
    port = free_port()
    started = []

    def start_the_service(seconds):   # the back-off: the service comes up while the client waits
        if not started:
            started.append(FaultyServer(script=[CREATED], port=port))

    try:
        rest = client("http://127.0.0.1:%d" % port, retries=2, sleep=start_the_service)
        assert rest.request("POST", "/things", {"name": "a"})[:2] == (201, {"id": 7, "name": "a"})
        assert started[0].count("POST") == 1
    finally:
        for srv in started:
            srv.close()


def test_a_timed_out_post_that_happened_is_not_repeated(server):
    # The service carries out the POST and stalls before answering; the lookup finds what it made.
    server.script = ["stall", ("answer", 200, {"things": [{"id": 7, "name": "a"}]})]
    rest = client(server.url, timeout=0.3, retries=3)
    status, body = rest.request("POST", "/things", {"name": "a"}, expect=(201,),
                                lookup=lambda: (rest.get("/things?name=a")["things"] or [None])[0])[:2]
    assert (status, body) == (201, {"id": 7, "name": "a"})
    assert server.count("POST") == 1 and server.count("GET", "/things?name=a") == 1


def test_a_dropped_post_that_did_not_happen_is_sent_again_once(server):
    server.script = ["drop", ("answer", 200, {"things": []}), CREATED]
    rest = client(server.url, retries=3)
    body = rest.post("/things", {"name": "a"}, lookup=lambda: (rest.get("/things?name=a")["things"] or [None])[0])
    assert body == {"id": 7, "name": "a"}
    assert [seen[0] for seen in server.seen] == ["POST", "GET", "POST"]


def test_without_retries_a_lost_answer_is_still_checked_but_never_sent_again(server):
    server.script = ["drop", ("answer", 200, {"things": [{"id": 7}]}), "drop", ("answer", 200, {"things": []})]
    rest = client(server.url, retries=0)

    def lookup():
        return (rest.get("/things")["things"] or [None])[0]

    assert rest.post("/things", {"name": "a"}, lookup=lookup) == {"id": 7}
    with pytest.raises(NotDoneError, match="a check found it was not carried out, and no retry is left"):
        rest.post("/things", {"name": "a"}, lookup=lookup)
    assert [seen[0] for seen in server.seen] == ["POST", "GET", "POST", "GET"]


def test_a_timed_out_post_without_lookup_is_outcome_unknown(server):
    server.script = ["stall"]
    with pytest.raises(OutcomeUnknownError, match="timed out"):
        client(server.url, timeout=0.3, retries=3).post("/things", {"name": "a"})
    assert server.count("POST") == 1


def test_a_failing_lookup_leaves_the_outcome_unknown(server):
    server.script = ["drop"] + ["drop"] * 10
    rest = client(server.url, retries=1)

    def lookup():
        return rest.get("/things?name=a")

    with pytest.raises(OutcomeUnknownError, match="checking whether it was carried out failed too"):
        rest.post("/things", {"name": "a"}, lookup=lookup)
    assert server.count("POST") == 1


def test_a_gateway_error_to_a_post_is_not_retried_blindly(server):
    server.script = [("answer", 502, {"error": {"message": "upstream"}})]
    with pytest.raises(RestError) as err:
        client(server.url, retries=3).post("/things", {"name": "a"})
    assert err.value.status == 502 and server.count("POST") == 1


def test_a_gateway_error_to_a_post_is_looked_up_before_sending_again(server):
    server.script = [("answer", 504, {}), ("answer", 200, {"things": []}), CREATED]
    rest = client(server.url, retries=3)
    assert rest.post("/things", {"name": "a"}, lookup=lambda: rest.get("/things")["things"] or None)["id"] == 7
    assert [seen[0] for seen in server.seen] == ["POST", "GET", "POST"]


def test_a_delete_whose_answer_was_lost_is_not_sent_again(server):
    server.script = ["drop"]
    with pytest.raises(OutcomeUnknownError):
        client(server.url, retries=3).delete("/things/7")
    assert server.count("DELETE") == 1


@pytest.mark.parametrize("endpoint", ["bmc01", "ftp://bmc01", "https://bmc01:https", "http://:8080"])
def test_an_endpoint_that_is_not_an_http_url_is_refused_before_any_call(endpoint):
    with pytest.raises(RestError, match="endpoint %r is not a URL" % endpoint):
        RestClient(endpoint)


def test_a_2xx_body_that_is_not_json_is_an_error_not_a_value_error(server):
    server.script = ["text"]
    with pytest.raises(OutcomeUnknownError, match="not JSON"):
        client(server.url, retries=0).post("/things", {"name": "a"})


# ---------------------------------------------------------------- TLS without Ansible

@pytest.fixture(scope="module")
def tls_server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("tls")
    cert, key = tmp / "cert.pem", tmp / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True)

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", "11")
            self.end_headers()
            self.wfile.write(b'{"tls": 1} ')

    import ssl
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    srv.socket = context.wrap_socket(srv.socket, server_side=True)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield "https://127.0.0.1:%d" % srv.server_address[1], str(cert)
    srv.shutdown()
    srv.server_close()


def test_tls_is_verified_by_default_and_an_untrusted_certificate_is_not_retried(tls_server):
    url, _cert = tls_server
    waits = []
    with pytest.raises(NotDoneError, match="not trusted.*ca_path") as err:
        client(url, retries=3, sleep=waits.append).get("/")
    assert err.value.retryable is False and waits == []


def test_tls_with_the_ca_path_or_validation_off_on_request(tls_server):
    url, cert = tls_server
    assert client(url, ca_path=cert).get("/") == {"tls": 1}
    assert client(url, validate_certs=False).get("/") == {"tls": 1}


def test_an_unreadable_ca_path_names_the_option(tls_server):
    with pytest.raises(RestError, match="ca_path: the CA certificates in '/nonexistent.pem' cannot be read"):
        client(tls_server[0], ca_path="/nonexistent.pem").get("/")


def test_the_client_imports_and_works_without_ansible(server):
    # -S: no site-packages, so no Ansible, as for Debian's /usr/bin/python3 in a Slurm hook
    import pathlib
    import sys
    collections = pathlib.Path(__file__).resolve().parents[7]
    code = ("import sys; sys.path.insert(0, %r)\n"
            "from ansible_collections.msa.hpc.plugins.module_utils._rest import RestClient\n"
            "print(RestClient(%r).get('/x'), any(m.split('.')[0] == 'ansible' for m in sys.modules))"
            % (str(collections), server.url))
    out = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["{'ok':", "True}", "False"]
