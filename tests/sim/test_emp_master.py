# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

"""The EMP master on 127.0.0.1 with the file discovery backend: REST API, token auth, SQLite state, emp-ctrl."""

import json
import threading

import pytest

from ansible_collections.msa.hpc.plugins.module_utils.extoll import topology as T
from msa_sim.emp import config, ctrl
from msa_sim.emp.api import make_server
from msa_sim.emp.engine import EmpError, Master
from msa_sim.emp.store import Store


def start_master(tmp_path, physical, expected=None, token="t0ken", **extra):
    (tmp_path / "physical.td").write_text(T.to_td(physical))
    conf = dict(config.MASTER_DEFAULTS, state_dir=str(tmp_path / "state"), discovery="file",
                discovery_file=str(tmp_path / "physical.td"), discovery_interval="0.05", **extra)
    if expected is not None:
        (tmp_path / "topology.td").write_text(T.to_td(expected))
        conf["topology_file"] = str(tmp_path / "topology.td")
    master = Master(conf, Store(str(tmp_path / "state" / "master.sqlite")))
    server = make_server(master, "127.0.0.1", 0, token)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return master, server, "http://127.0.0.1:%d" % server.server_address[1]


@pytest.fixture()
def torus(tmp_path):
    topo = T.generate("torus", [4, 3], routing="DimensionOrder")
    master, server, url = start_master(tmp_path, topo, topo)
    yield master, url, topo, tmp_path
    server.shutdown()
    server.server_close()
    master.store.close()


def call(url, method, path, body=None, token="t0ken"):
    return ctrl.call(url, method, path, body, token)


def test_config_files_are_key_value_and_unknown_keys_are_rejected():
    conf = config.parse("# comment\nlisten_port = 9100\nauto_configuration = on\n", config.MASTER_DEFAULTS)
    assert conf["listen_port"] == "9100" and config.flag(conf["auto_configuration"])
    with pytest.raises(config.ConfigError, match=r"master.conf:2: unknown key 'listen_prot'"):
        config.parse("\nlisten_prot = 1\n", config.MASTER_DEFAULTS, "master.conf")


def test_requests_without_the_bearer_token_are_refused(torus):
    _, url, _, _ = torus
    with pytest.raises(ctrl.CtrlError, match="HTTP 401"):
        call(url, "GET", "network/status", token="wrong")
    assert call(url, "GET", "network/status")["status"] == "un-configured"


def test_run_installs_dimension_order_tables_and_network_can_start_and_stop(torus):
    master, url, topo, _ = torus
    with pytest.raises(ctrl.CtrlError, match="HTTP 409: the network is not configured"):
        call(url, "POST", "network/start", {})
    call(url, "POST", "emp/run", {"mode": "topology"})
    status = master.wait(10)
    assert status["state"] == "done" and status["algorithm"] == "DimensionOrder"
    assert status["summary"]["deadlock_free"] and status["summary"]["max_hops"] == 3
    routes = call(url, "GET", "emp/routes")
    assert routes["version"] == 1 and len(routes["tables"]) == 12 and len(routes["tables"]["1"]) == 11
    assert call(url, "GET", "network/status")["status"] == "configured"
    assert call(url, "POST", "network/start", {})["changed"] is True
    assert call(url, "POST", "network/start", {})["changed"] is False
    assert call(url, "GET", "network/status")["status"] == "up"
    assert call(url, "POST", "network/stop", {})["status"] == "down"
    info = call(url, "GET", "network/info")
    assert info["topology"]["type"] == "Torus" and info["routing"]["algorithm"] == "DimensionOrder"
    assert "routing tables version 1 installed" in call(url, "GET", "log")


def test_node_endpoints_report_links_crossbar_and_units(torus):
    master, url, _, _ = torus
    call(url, "POST", "emp/run", {"mode": "auto"})
    master.wait(10)
    nodes = call(url, "GET", "nodes")
    assert [n["id"] for n in nodes] == list(range(1, 13)) and nodes[0]["type"] == "Tourmalet"
    assert call(url, "GET", "nodes/5")["address"] == "10.44.0.5"
    links = call(url, "GET", "nodes/1/link")
    assert {entry["port"] for entry in links} == {0, 1, 2, 3}
    assert all(entry["state"] == "up" for entry in links)
    xbar = call(url, "GET", "nodes/1/xbar")
    assert xbar["entries"] == 11 and sum(xbar["destinations_per_port"].values()) == 11
    for unit in ("pcie", "velo", "rma"):
        assert "state" in call(url, "GET", "nodes/1/%s" % unit)
    with pytest.raises(ctrl.CtrlError, match="HTTP 404: node 99 is unknown"):
        call(url, "GET", "nodes/99")
    assert call(url, "GET", "emp/getdot").startswith("graph extoll {")


def test_missing_link_is_listed_and_topology_mode_waits_while_auto_mode_reroutes(torus):
    master, url, topo, tmp_path = torus
    broken = T.parse_td(T.to_td(topo))
    lost = broken.links.pop(0)
    (tmp_path / "physical.td").write_text(T.to_td(broken))
    assert call(url, "GET", "network/missinglinks") == [T.format_link(lost)]
    assert call(url, "GET", "network/missingnodes") == []
    call(url, "POST", "emp/run", {"mode": "topology", "timeout": 0.2})
    status = master.wait(10)
    assert status["state"] == "failed" and "did not match the topology" in status["message"]
    assert status["missing_links"] == [T.format_link(lost)]
    call(url, "POST", "emp/run", {"mode": "auto"})
    status = master.wait(10)
    assert status["state"] == "done" and status["algorithm"] == "UpDown" and status["summary"]["deadlock_free"]
    assert status["summary"]["links"] == len(topo.links) - 1
    # dimension order cannot route around the hole
    call(url, "POST", "emp/run", {"mode": "auto", "routing": "DimensionOrder"})
    status = master.wait(10)
    assert status["state"] == "failed" and "DimensionOrder" in status["message"]


def test_dry_run_computes_without_installing_and_accepts_a_definition(torus):
    master, url, topo, _ = torus
    plan = call(url, "POST", "emp/run", {"dry_run": True, "mode": "topology", "routing": "ShortestPath"})
    assert plan["algorithm"] == "ShortestPath" and plan["summary"]["reachable"]
    assert call(url, "GET", "emp/routes")["version"] == 0
    bad = T.to_td(topo).replace("routing DimensionOrder", "routing Zigzag")
    with pytest.raises(ctrl.CtrlError, match=r"HTTP 400: <request>:\d+: unknown routing 'Zigzag'"):
        call(url, "POST", "emp/run", {"dry_run": True, "td": bad})


def test_topology_upload_is_validated_and_stored(torus):
    _, url, topo, _ = torus
    assert call(url, "PUT", "emp/topology", {"td": T.to_td(topo)})["changed"] is False
    with pytest.raises(ctrl.CtrlError, match=r"HTTP 400: up.td:\d+: link to a missing node 99"):
        call(url, "PUT", "emp/topology", {"td": T.to_td(topo).replace("linksend", "1 9 <-> 9 99\nlinksend"),
                                          "source": "up.td"})
    stored = call(url, "GET", "emp/topology")
    assert T.parse_td(stored["td"]).as_dict() == topo.as_dict()


def test_state_survives_a_master_restart(tmp_path):
    topo = T.generate("mesh", [3])
    master, server, url = start_master(tmp_path, topo, topo)
    call(url, "POST", "emp/run", {"mode": "topology"})
    assert master.wait(10)["state"] == "done"
    call(url, "POST", "network/start", {})
    server.shutdown()
    server.server_close()
    master.store.close()
    again = Master(dict(master.conf), Store(str(tmp_path / "state" / "master.sqlite")))
    assert again.network_status()["status"] == "up" and again.status()["version"] == 1
    again.store.close()


def test_slave_reports_get_ids_from_the_inventory_and_their_routes(tmp_path):
    topo = T.generate("torus", [3], routing="UpDown")
    conf = dict(config.MASTER_DEFAULTS, state_dir=str(tmp_path), topology_file="")
    master = Master(conf, Store(":memory:"))
    master.set_topology(td=T.to_td(topo))
    guid = {n.id: n.guid for n in topo.nodes.values()}
    adj = topo.adjacency()
    for nid in topo.nodes:
        reply = master.report({"guid": hex(guid[nid]), "node_id": 7, "ports": {
            p: {"state": "up", "peer_guid": hex(guid[peer]), "peer_port": pp} for p, (peer, pp) in adj[nid].items()}})
        assert reply["node_id"] == nid and reply["address"] == "10.44.0.%d" % nid
    master.run(mode="topology")
    status = master.wait(0.5)
    assert status["state"] == "installing"  # waits for every slave to acknowledge
    for nid in topo.nodes:
        reply = master.report({"guid": hex(guid[nid])})
        assert reply["routes_version"] == 1 and len(reply["routes"]) == 2
        assert all(entry["dst"].startswith("10.44.0.") for entry in reply["routes"])
        master.report({"guid": hex(guid[nid]), "routes_version": 1, "ports": {
            p: {"state": "up", "peer_guid": hex(guid[peer]), "peer_port": pp} for p, (peer, pp) in adj[nid].items()}})
    assert master.wait(5)["state"] == "done"
    with pytest.raises(EmpError, match="report needs guid"):
        master.report({})


def test_emp_ctrl_cli_prints_json_and_fails_clearly(torus, capsys):
    _, url, _, tmp_path = torus
    (tmp_path / "token").write_text("t0ken\n")
    base = ["--endpoint", url, "--token-file", str(tmp_path / "token")]
    assert ctrl.main(base + ["emp", "run", "--mode", "topology", "--wait", "--timeout", "10"]) == 0
    assert json.loads(capsys.readouterr().out)["state"] == "done"
    assert ctrl.main(base + ["network", "listnodes"]) == 0
    assert len(json.loads(capsys.readouterr().out)) == 12
    assert ctrl.main(base + ["node", "link", "--i", "3"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["port"] == 0
    assert ctrl.main(["--endpoint", "http://127.0.0.1:9", "network", "status"]) == 1
    assert "cannot reach the EMP master" in capsys.readouterr().err
