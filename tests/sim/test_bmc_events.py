# SPDX-License-Identifier: GPL-3.0-or-later
"""EventService of the BMC stand-in: subscriptions persist, power-state and health events reach an HTTPS listener
(verified against the test CA) that the subscription names, filters hold, destinations outside
outbound_networks are refused."""
from __future__ import annotations

import base64
import http.server
import json
import queue
import ssl
import threading
import time
import urllib.error
import urllib.request

import pytest

from msa_sim.bmc import testing
from msa_sim.bmc.backend import FileBackend

USERS = {"admin": ("Adm1n-pass", "Administrator"), "ops": ("0ps-passw", "Operator")}
SUBS = "/redfish/v1/EventService/Subscriptions"
EVENT_DEADLINE = 5.0  # the requirement: an event within 5 s of the change


class Listener:
    """An HTTPS event listener: every POST body lands on a queue with its arrival time."""

    def __init__(self, tls, token="s3cret"):
        self.events = queue.Queue()
        listener = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                listener.events.put((time.monotonic(), json.loads(body), self.headers.get("X-Listener-Token")))
                self.send_response(204)
                self.end_headers()

            def log_message(self, *_):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(tls["cert"], tls["key"])
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.url = "https://127.0.0.1:%d/events" % self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def next(self, timeout=EVENT_DEADLINE):
        try:
            return self.events.get(timeout=timeout)
        except queue.Empty:
            return None

    def close(self):
        self.server.shutdown()


@pytest.fixture()
def setup(tmp_path):
    ca, tls = testing.make_tls(str(tmp_path))
    listener = Listener(tls)
    conf = dict(defaults={"tls": tls, "ca_bundle": ca, "event_poll_seconds": 0.5})
    service = testing.start(str(tmp_path), [{"name": "n1"}], USERS, **conf)
    context = ssl.create_default_context(cafile=ca)
    yield {"service": service, "url": service.url("n1"), "listener": listener, "ctx": context, "dir": str(tmp_path),
           "conf": conf, "backend": FileBackend(str(tmp_path / "power.json"))}
    service.stop()
    listener.close()


def call(setup, method, path, body=None, user="admin"):
    raw = ("%s:%s" % (user, USERS[user][0])).encode()
    req = urllib.request.Request(setup["url"] + path, method=method,
                                 data=json.dumps(body).encode() if body is not None else None,
                                 headers={"Content-Type": "application/json",
                                          "Authorization": "Basic " + base64.b64encode(raw).decode()})
    try:
        with urllib.request.urlopen(req, timeout=10, context=setup["ctx"]) as resp:
            data = resp.read()
            return resp.status, json.loads(data) if data else None, dict(resp.headers)
    except urllib.error.HTTPError as exc:
        data = exc.read()
        return exc.code, json.loads(data) if data else None, dict(exc.headers)


def subscribe(setup, **extra):
    body = dict({"Destination": setup["listener"].url, "Protocol": "Redfish", "Context": "rack-7",
                 "HttpHeaders": [{"X-Listener-Token": "s3cret"}]}, **extra)
    status, sub, headers = call(setup, "POST", SUBS, body)
    assert status == 201, sub
    assert headers["Location"] == sub["@odata.id"]
    assert sub["HttpHeaders"] == []  # write-only: never shown back
    return sub


def test_power_change_made_outside_the_bmc_reaches_the_listener_within_5_s(setup, capsys):
    subscribe(setup, RegistryPrefixes=["ResourceEvent"])
    call(setup, "GET", "/redfish/v1/Systems/1")  # the BMC has seen the node off
    changed = time.monotonic()
    setup["backend"].power_on("n1")  # the node starts without the BMC (as `podman start` from a shell would)
    arrival = setup["listener"].next()
    assert arrival is not None, "no event within %.0f s of the power change" % EVENT_DEADLINE
    when, payload, token = arrival
    event = payload["Events"][0]
    assert event["MessageId"] == "ResourceEvent.1.3.ResourcePoweredOn"
    assert event["OriginOfCondition"] == {"@odata.id": "/redfish/v1/Systems/1"}
    assert payload["Context"] == "rack-7" and token == "s3cret"
    with capsys.disabled():
        print("\npower-state event latency (change outside the BMC, poll 0.5 s): %.2f s" % (when - changed))


def test_reset_and_health_events_follow_the_subscription_filters(setup):
    subscribe(setup, MessageIds=["ResourceEvent.1.3.ResourcePoweredOff", "ResourceEvent.1.3.ResourceStatusChangedCritical"])
    assert call(setup, "POST", "/redfish/v1/Systems/1/Actions/ComputerSystem.Reset", {"ResetType": "On"})[0] == 204
    assert call(setup, "POST", "/redfish/v1/Systems/1/Actions/ComputerSystem.Reset", {"ResetType": "ForceOff"})[0] == 204
    _, payload, _ = setup["listener"].next()
    assert payload["Events"][0]["MessageId"].endswith("ResourcePoweredOff")  # PoweredOn was filtered out
    assert call(setup, "POST", "/msa-bmc/health", {"Health": "Critical"})[0] == 204
    _, payload, _ = setup["listener"].next()
    assert payload["Events"][0]["MessageId"].endswith("ResourceStatusChangedCritical")
    assert payload["Events"][0]["Severity"] == "Critical"
    assert call(setup, "GET", "/redfish/v1/Systems/1")[1]["Status"]["Health"] == "Critical"
    # the manager's event log keeps every event, filtered or not
    entries = call(setup, "GET", "/redfish/v1/Managers/BMC/LogServices/EventLog/Entries")[1]["Members"]
    assert [e["MessageId"].rsplit(".", 1)[1] for e in entries] == [
        "ResourcePoweredOn", "ResourcePoweredOff", "ResourceStatusChangedCritical"]


def test_subscriptions_persist_and_only_administrators_manage_them(setup):
    sub = subscribe(setup)
    assert call(setup, "POST", SUBS, {"Destination": setup["listener"].url}, user="ops")[0] == 403
    assert call(setup, "POST", SUBS, {"Destination": "ftp://x/y"})[0] == 400
    assert call(setup, "POST", SUBS, {"Destination": setup["listener"].url, "Protocol": "FTP"})[0] == 400
    setup["service"].stop()
    again = testing.BmcService(setup["service"].conf).start()
    try:
        setup["url"] = again.url("n1")
        status, members, _ = call(setup, "GET", SUBS)
        assert [m["@odata.id"] for m in members["Members"]] == [sub["@odata.id"]]
        assert call(setup, "DELETE", sub["@odata.id"])[0] == 204
        assert call(setup, "GET", sub["@odata.id"])[0] == 404
    finally:
        again.stop()
        setup["service"] = again


def test_listener_outside_outbound_networks_gets_nothing(setup):
    bmc = setup["service"].bmcs["n1"]
    bmc.conf["outbound_networks"] = ["10.255.255.0/24"]
    subscribe(setup)
    call(setup, "POST", "/redfish/v1/EventService/Actions/EventService.SubmitTestEvent", {"Message": "hello"})
    assert setup["listener"].next(timeout=1.5) is None
    assert "outside outbound_networks" in str(bmc.deliveries[-1][2])


def test_a_failing_power_backend_is_a_critical_health_event_and_its_recovery_ok(setup):
    subscribe(setup, RegistryPrefixes=["ResourceEvent"])
    with open(setup["backend"].path, "w", encoding="utf-8") as handle:
        handle.write("{not json")  # the backend cannot tell the node's power any more
    _, payload, _ = setup["listener"].next()
    assert payload["Events"][0]["MessageId"].endswith("ResourceStatusChangedCritical")
    with open(setup["backend"].path, "w", encoding="utf-8") as handle:
        handle.write("{}")
    _, payload, _ = setup["listener"].next()
    assert payload["Events"][0]["MessageId"].endswith("ResourceStatusChangedOK")
