# SPDX-License-Identifier: GPL-3.0-or-later
"""The stand-ins' APIs speak TLS only when given a certificate, keep their authentication behind it, and the shared
client trusts only the system's CA (issue 19, docs/architecture.md §4.3)."""
from __future__ import annotations

import base64
import http.client
import json
import ssl
import threading
import types

import pytest

from ansible_collections.msa.hpc.plugins.module_utils._rest import NotDoneError, RestClient, RestError, tls_context
from ansible_collections.msa.hpc.plugins.module_utils.node.tlsserver import TLSThreadingHTTPServer
from msa_sim.bmc.testing import make_tls
from msa_sim.dcdb.api import make_server as dcdb_server
from msa_sim.emp.api import make_server as emp_server
from msa_sim.nammgr.api import Server as NamServer
from msa_sim.psgwd.agent import AgentServer

TOKEN = "s3cret-token"


class FakeNamStore:
    def schema_version(self):
        return 1

    def nam_devices(self):
        return []

    def gce_usage(self):
        return None, []


class NoUsers:
    """An authenticator that knows nobody (the NAM manager's Authenticator interface)."""

    def basic(self, user, password):
        return None

    def bearer(self, token):
        return None


def _emp(tls):
    return emp_server(None, "127.0.0.1", 0, TOKEN, tls=tls), "/health", "/emp/status", {}


def _nam(tls):
    manager = types.SimpleNamespace(store=FakeNamStore(), auth=NoUsers())
    return NamServer(("127.0.0.1", 0), manager, tls=tls), "/health", "/nam/allocations", {}


def _psgw(tls):
    agent = types.SimpleNamespace(health=lambda: {"ok": True, "gateway": "gw01", "fabrics": {}, "jobs": 0})
    return AgentServer(("127.0.0.1", 0), agent, TOKEN, tls=tls), "/v1/health", "/v1/jobs", {}


def _dcdb(tls):
    agent = types.SimpleNamespace(config=types.SimpleNamespace(users={"grafana": "pw"}), tree={}, connected=True)
    basic = "Basic " + base64.b64encode(b"grafana:pw").decode()
    # DCDB has no open endpoint: its health (GET /) asks for basic auth too
    return dcdb_server(agent, "127.0.0.1", 0, tls=tls), "/", "/jobs", {"Authorization": basic}


SERVERS = {"emp": _emp, "nammgr": _nam, "psgw-agent": _psgw, "dcdb": _dcdb}


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    """The system's CA with a certificate for 127.0.0.1, and another CA that signed nothing of ours."""
    ca, pair = make_tls(str(tmp_path_factory.mktemp("system")))
    rogue_ca, _ = make_tls(str(tmp_path_factory.mktemp("rogue")))
    return {"ca": ca, "cert": pair["cert"], "key": pair["key"], "rogue_ca": rogue_ca}


@pytest.fixture(params=sorted(SERVERS))
def service(request, pki):
    server, health, protected, health_headers = SERVERS[request.param]((pki["cert"], pki["key"]))
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    host, port = server.server_address[:2]
    yield types.SimpleNamespace(name=request.param, host=host, port=port, health=health, protected=protected,
                                health_headers=health_headers, server=server)
    server.shutdown()
    server.server_close()


def https(service, ca, path, headers=None):
    conn = http.client.HTTPSConnection(service.host, service.port, timeout=5, context=tls_context(ca_path=ca))
    try:
        conn.request("GET", path, headers=headers or {})
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def test_every_service_answers_https_verified_against_the_system_ca(service, pki):
    assert service.server.scheme == "https"
    status, body = https(service, pki["ca"], service.health, service.health_headers)
    assert status == 200, body
    assert json.loads(body)


def test_every_service_refuses_a_plain_http_request_on_its_tls_port(service):
    conn = http.client.HTTPConnection(service.host, service.port, timeout=5)
    with pytest.raises((OSError, http.client.HTTPException)):
        conn.request("GET", service.health)
        conn.getresponse().read()
    conn.close()
    # and the plain attempt did not break the server for the next, proper client
    assert service.server.socket.fileno() >= 0


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer wrong-token"},
                                     {"Authorization": "Basic " + base64.b64encode(b"grafana:wrong").decode()}],
                         ids=["no credentials", "wrong token", "wrong password"])
def test_every_service_refuses_requests_without_valid_credentials_over_tls(service, pki, headers):
    status, _ = https(service, pki["ca"], service.protected, headers)
    assert status == 401


def test_the_shared_client_refuses_a_certificate_not_from_the_system_ca(service, pki):
    client = RestClient("https://%s:%d" % (service.host, service.port), token=TOKEN, ca_path=pki["rogue_ca"],
                        retries=0)
    with pytest.raises(NotDoneError, match="not trusted"):
        client.get(service.health.lstrip("/"))
    # and with the system's CA the same request goes through (health endpoints or a 401: TLS itself worked)
    client = RestClient("https://%s:%d" % (service.host, service.port), ca_path=pki["ca"], retries=0)
    try:
        client.get(service.health.lstrip("/"))
    except RestError as exc:
        assert exc.status == 401


def test_the_client_verifies_by_default_and_only_an_explicit_option_turns_it_off(service):
    # no CA given: the system's trusted CAs, which do not include the simulation's CA
    with pytest.raises(NotDoneError, match="not trusted"):
        RestClient("https://%s:%d" % (service.host, service.port), retries=0).get(service.health.lstrip("/"))
    insecure = tls_context(validate_certs=False)
    assert insecure.verify_mode == ssl.CERT_NONE and tls_context().verify_mode == ssl.CERT_REQUIRED


def test_a_server_without_certificate_files_is_refused_at_start(tmp_path):
    with pytest.raises(OSError, match="cannot load the TLS certificate"):
        TLSThreadingHTTPServer(("127.0.0.1", 0), object, tls=(str(tmp_path / "none.crt"), str(tmp_path / "none.key")))


# ------------------------------------------------------------------ MQTT: the broker's TLS listener, verified

def _free_port():
    import socket
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def tls_broker(tmp_path, pki):
    """mosquitto with only a TLS listener on 127.0.0.1 (the system CA's certificate) and one account."""
    import os
    import shutil
    import subprocess
    import time
    if not shutil.which("mosquitto"):
        pytest.skip("mosquitto is not installed (scripts/setup.sh installs it)")
    port = _free_port()
    pwfile = tmp_path / "passwd"
    subprocess.run(["mosquitto_passwd", "-b", "-c", str(pwfile), "node", "pw"], check=True, capture_output=True)
    conf = tmp_path / "mosquitto.conf"
    conf.write_text("per_listener_settings false\nallow_anonymous false\npassword_file %s\npersistence false\n"
                    "user %s\nlistener %d 127.0.0.1\ncafile %s\ncertfile %s\nkeyfile %s\n"
                    % (pwfile, "root" if os.geteuid() == 0 else "nobody", port, pki["ca"], pki["cert"], pki["key"]))
    proc = subprocess.Popen(["mosquitto", "-c", str(conf)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    import socket
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                break
        time.sleep(0.05)
    yield port
    proc.terminate()
    proc.wait(5)


def _mqtt_connect(port, ca_file, tls=True):
    """The CONNACK code of one session as the Pusher and Collect Agent open it, or the exception it met on the way."""
    import time
    import paho.mqtt.client as mqtt
    from msa_sim.dcdb.info import use_tls
    answer = []
    client = mqtt.Client(client_id="tls-test")
    client.on_connect = lambda c, u, flags, rc: answer.append(rc)
    client.on_disconnect = lambda c, u, rc: answer.append("disconnected %s" % rc)
    if tls:
        use_tls(client, ca_file)
    client.username_pw_set("node", "pw")
    try:
        client.connect("127.0.0.1", port, 5)
        deadline = time.monotonic() + 5
        while not answer and time.monotonic() < deadline:
            client.loop(0.1)
    except (OSError, ssl.SSLError) as exc:
        return exc
    finally:
        client.disconnect()
    return answer[0] if answer else "no answer"


def test_mqtt_clients_connect_to_the_tls_listener_only_when_its_certificate_is_from_the_ca(tls_broker, pki):
    pytest.importorskip("paho.mqtt.client")
    assert _mqtt_connect(tls_broker, pki["ca"]) == 0
    assert isinstance(_mqtt_connect(tls_broker, pki["rogue_ca"]), ssl.SSLCertVerificationError)
    # plain MQTT on the TLS listener gets no session
    assert _mqtt_connect(tls_broker, None, tls=False) != 0


def test_the_daemons_take_the_broker_ca_from_their_configuration(tmp_path):
    from msa_sim.dcdb.info import mqtt_tls
    conf = {"mqttCAFile": "/etc/msa-hpc/tls/ca.pem"}
    assert mqtt_tls(conf.get) == ("/etc/msa-hpc/tls/ca.pem", 8883)
    assert mqtt_tls({}.get) == (None, 1883)


@pytest.mark.parametrize("settings, missing", [
    ("", "a token (token_file) and TLS (tls_cert, tls_key)"),
    ("token_file = {token}\n", "TLS (tls_cert, tls_key)"),
    ("tls_cert = {cert}\ntls_key = {key}\n", "a token (token_file)"),
])
def test_the_emp_master_daemon_does_not_serve_an_open_api(tmp_path, capsys, settings, missing):
    from msa_sim.emp import master as emp_master
    ca, pair = make_tls(str(tmp_path))
    (tmp_path / "token").write_text(TOKEN)
    conf = tmp_path / "master.conf"
    conf.write_text("state_dir = %s\nlisten_port = 0\n" % tmp_path
                    + settings.format(token=tmp_path / "token", cert=pair["cert"], key=pair["key"]))
    assert emp_master.main(["-c", str(conf)]) == 1
    assert "the API would be served without %s" % missing in capsys.readouterr().err
    # asked for explicitly (tests only), it serves
    _master, server = emp_master.build(emp_master.config.load(str(conf), emp_master.config.MASTER_DEFAULTS),
                                       insecure=True)
    server.server_close()


def test_the_nam_manager_and_the_psgw_agent_do_not_serve_plain_http_unless_asked(tmp_path, capsys):
    from msa_sim.nammgr.__main__ import main as nam_main
    from msa_sim.psgwd.agent import main as agent_main
    conf = tmp_path / "manager.conf"
    conf.write_text("[manager]\nstate_dir = %s\n\n[nam:nam01]\ncapacity = 1G\n" % tmp_path)
    assert nam_main(["serve", "--config", str(conf)]) == 2
    assert "the API would be plain HTTP" in capsys.readouterr().err
    (tmp_path / "token").write_text(TOKEN)
    with pytest.raises(SystemExit) as exited:
        agent_main(["--listen", "127.0.0.1:0", "--token-file", str(tmp_path / "token"), "--state-dir", str(tmp_path),
                    "--run-dir", str(tmp_path)])
    assert exited.value.code == 2 and "the API would be plain HTTP" in capsys.readouterr().err


def test_the_dcdb_collect_agent_does_not_serve_an_open_api_unless_asked(tmp_path, capsys):
    from msa_sim.dcdb.collectagent import main as agent_main
    conf = tmp_path / "collectagent.conf"
    conf.write_text("global {\n mqttBroker 127.0.0.1:1\n sacct none\n}\nstorage {\n path %s/s.sqlite\n}\n"
                    "restAPI {\n address 127.0.0.1:0\n}\n" % tmp_path)
    assert agent_main(["-c", str(conf)]) == 2
    assert ("the REST API would be served without a restAPI user and TLS (restAPI certificate, privateKey)"
            in capsys.readouterr().err)
