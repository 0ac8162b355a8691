# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

"""psgw-agent on loopback: token auth, start/stop of the per-job psgwd, idempotence, restart of the agent."""

import json
import os
import pathlib
import threading
import urllib.error
import urllib.request

import pytest

from msa_sim.psgwd import protocol as proto
from msa_sim.psgwd.agent import Agent, AgentServer
from tests.helpers import interfaces_up

ROOT = pathlib.Path(__file__).resolve().parents[2]
TOKEN = "s3cret-token"
SECRET = "the-jobs-gateway-secret-0123456789"  # what the prolog hands a job's psgwd


def call(base, method, path, body=None, token=TOKEN):
    req = urllib.request.Request(base + path, method=method, data=json.dumps(body).encode() if body else None,
                                 headers={"Authorization": "Bearer " + token} if token else {})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


@pytest.fixture
def agent_env(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT / "sim"), str(ROOT / "collections")]))
    started = []

    def start():
        agent = Agent("gw01", [("ib", "127.0.0.2"), ("extoll", "127.0.0.3")], str(tmp_path / "state"),
                      str(tmp_path / "run"),
                      interfaces=interfaces_up("127.0.0.2", "127.0.0.3"))
        server = AgentServer(("127.0.0.1", 0), agent, TOKEN)
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True).start()
        started.append((agent, server))
        return "http://127.0.0.1:%d" % server.server_address[1], agent, server

    yield start
    for agent, server in started:
        for rec in agent.store.all() if agent.store.db else []:
            agent.stop(rec["job"])
        server.shutdown()
        server.server_close()


def test_requests_without_the_token_are_refused_but_health_is_open(agent_env):
    base, _, _ = agent_env()
    assert call(base, "GET", "/v1/jobs", token=None)[0] == 401
    assert call(base, "GET", "/v1/jobs", token="wrong")[0] == 401
    status, body = call(base, "GET", "/v1/health", token=None)
    assert status == 200 and body["ok"] is True
    assert {f: (s["address"], s["up"]) for f, s in body["fabrics"].items()} == {"ib": ("127.0.0.2", True),
                                                                                "extoll": ("127.0.0.3", True)}


# `ip -json addr show` of a gateway: ib0 on InfiniBand, the EXTOLL address on a dummy with two torus ports
IP_ADDR = [
    {"ifname": "lo", "flags": ["LOOPBACK", "UP", "LOWER_UP"], "operstate": "UNKNOWN",
     "addr_info": [{"family": "inet", "local": "127.0.0.1", "prefixlen": 8}]},
    {"ifname": "ib0", "flags": ["BROADCAST", "UP", "LOWER_UP"], "operstate": "UP",
     "addr_info": [{"family": "inet", "local": "10.23.0.80", "prefixlen": 24}]},
    {"ifname": "extoll0", "flags": ["BROADCAST", "NOARP", "UP", "LOWER_UP"], "operstate": "UNKNOWN",
     "addr_info": [{"family": "inet", "local": "10.24.0.80", "prefixlen": 32}]},
    {"ifname": "ext0", "flags": ["BROADCAST", "UP", "LOWER_UP"], "operstate": "UP", "addr_info": []},
    {"ifname": "ext1", "flags": ["BROADCAST", "UP", "LOWER_UP"], "operstate": "UP", "addr_info": []},
]


def _with(name, **changes):
    return [dict(i, **changes) if i["ifname"] == name else i for i in IP_ADDR]


def test_health_reports_each_fabric_link_as_the_kernel_sees_it(tmp_path):
    view = {"now": IP_ADDR}
    agent = Agent("gw01", [("ib", "10.23.0.80"), ("extoll", "10.24.0.80")], str(tmp_path / "s"), str(tmp_path / "r"),
                  ports={"extoll": "ext"}, interfaces=lambda: view["now"])
    health = agent.health()
    assert health["ok"] and health["fabrics"]["extoll"]["ports_up"] == ["ext0", "ext1"]
    assert health["fabrics"]["ib"]["interface"] == "ib0"
    view["now"] = _with("ib0", flags=["BROADCAST", "UP"], operstate="DOWN")           # cable pulled: no carrier
    health = agent.health()
    assert not health["ok"] and health["fabrics"]["ib"] == {
        "address": "10.23.0.80", "interface": "ib0", "up": False, "reason": "interface ib0 is down"}
    assert health["fabrics"]["extoll"]["up"]
    one_port = _with("ext0", flags=["BROADCAST"], operstate="DOWN")                    # one torus port down: still up
    view["now"] = one_port
    assert agent.health()["ok"]
    view["now"] = [dict(i, flags=["BROADCAST"], operstate="DOWN") if i["ifname"] == "ext1" else i for i in one_port]
    health = agent.health()
    assert not health["ok"] and health["fabrics"]["extoll"]["reason"] == "no ext* port has its link up (ext0, ext1)"
    view["now"] = [i for i in IP_ADDR if i["ifname"] != "ib0"]                         # address gone
    assert agent.health()["fabrics"]["ib"]["reason"] == "no interface holds 10.23.0.80"


def test_health_is_not_ok_when_the_interfaces_cannot_be_read(tmp_path):
    def broken():
        raise OSError("ip: command not found")
    agent = Agent("gw01", [("ib", "10.23.0.80")], str(tmp_path / "s"), str(tmp_path / "r"), interfaces=broken)
    health = agent.health()
    assert not health["ok"] and "ip: command not found" in health["fabrics"]["ib"]["reason"]


def test_start_reports_a_daemon_listening_on_both_fabrics_and_is_idempotent(agent_env):
    base, _, _ = agent_env()
    status, rec = call(base, "POST", "/v1/jobs", {"job": "77", "secret": SECRET})
    assert status == 201 and rec["running"]
    port = rec["port"]
    assert rec["endpoints"] == {"ib": "127.0.0.2:%d" % port, "extoll": "127.0.0.3:%d" % port}
    for endpoint in rec["endpoints"].values():
        assert proto.query_stats(endpoint, SECRET)["job"] == "77"
    status, again = call(base, "POST", "/v1/jobs", {"job": "77", "secret": SECRET})
    assert status == 200 and again["pid"] == rec["pid"]


def test_stop_is_idempotent_and_returns_the_final_counters(agent_env):
    base, _, _ = agent_env()
    _, rec = call(base, "POST", "/v1/jobs", {"job": "78", "secret": SECRET})
    status, res = call(base, "DELETE", "/v1/jobs/78")
    assert status == 200 and res["stopped"] and res["stats"]["job"] == "78"
    with pytest.raises(OSError):
        proto.query_stats(rec["endpoints"]["ib"], SECRET, timeout=2)
    status, res = call(base, "DELETE", "/v1/jobs/78")
    assert status == 200 and res["stopped"] is False
    assert call(base, "GET", "/v1/jobs/78")[0] == 404


def test_bad_job_id_is_rejected_with_the_value_named(agent_env):
    base, _, _ = agent_env()
    status, body = call(base, "POST", "/v1/jobs", {"job": "../etc"})
    assert status == 400 and "'../etc'" in body["error"]["message"]


def test_a_restarted_agent_still_knows_and_stops_running_daemons(agent_env):
    base, _, server = agent_env()
    _, rec = call(base, "POST", "/v1/jobs", {"job": "79", "secret": SECRET})
    server.shutdown()
    server.server_close()
    base2, _, _ = agent_env()
    status, listed = call(base2, "GET", "/v1/jobs")
    assert [(r["job"], r["pid"], r["running"]) for r in listed] == [("79", rec["pid"], True)]
    assert call(base2, "DELETE", "/v1/jobs/79")[1]["stopped"] is True


def test_a_psgwd_is_started_only_with_the_jobs_secret_which_it_asks_of_every_client(agent_env, tmp_path):
    base, agent, _ = agent_env()
    status, body = call(base, "POST", "/v1/jobs", {"job": "80"})
    assert status == 400 and "carries no 'secret'" in body["error"]["message"]
    status, body = call(base, "POST", "/v1/jobs", {"job": "80", "secret": "too-short-a-secret"})
    assert status == 400 and body["error"]["message"] == "secret: not 32 to 128 characters of A-Z a-z 0-9 _ -"
    assert agent.list() == []
    status, rec = call(base, "POST", "/v1/jobs", {"job": "80", "secret": SECRET})
    assert status == 201
    with open("/proc/%d/cmdline" % rec["pid"], "rb") as fh:
        assert SECRET.encode() not in fh.read()  # on its standard input, not in its arguments
    assert proto.query_stats(rec["endpoints"]["ib"], SECRET)["job"] == "80"
    answer = proto.query_stats(rec["endpoints"]["ib"], "a-forged-secret-of-the-right-shape-000")
    assert answer == {"ok": False, "error": "refused connection from 127.0.0.1 on ib: wrong job secret"}
    # the daemon runs: a later POST (the prolog's pairs) needs no secret
    assert call(base, "POST", "/v1/jobs", {"job": "80", "pairs": [["127.0.0.1", "127.0.0.3"]]})[0] == 200
    log = (tmp_path / "run" / "psgwd-80.log").read_text()
    assert "wrong job secret" in log and SECRET not in log
