# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

"""The EMP as seed 004 §2.1 lists it: node coordinate, units from node state, the module on the seed's endpoints."""

import pathlib
import threading

import pytest

from ansible_collections.msa.hpc.plugins.module_utils.extoll import topology as T
from ansible_collections.msa.hpc.plugins.module_utils._rest import RestClient
from ansible_collections.msa.hpc.plugins.modules import extoll_fabric
from msa_sim.emp import config, ctrl
from msa_sim.emp.api import make_server
from msa_sim.emp.engine import Master
from msa_sim.emp.store import Store

from test_emp_master import call, start_master

FIGURE3 = (pathlib.Path(__file__).resolve().parents[2] / "collections/ansible_collections/msa/hpc/tests/unit"
           / "plugins/module_utils/extoll/fixtures/td/figure3.td")


@pytest.fixture()
def figure3(tmp_path):
    topo = T.load_td(str(FIGURE3))
    master, server, url = start_master(tmp_path, topo, topo)
    yield master, url, topo
    server.shutdown()
    server.server_close()
    master.store.close()


def test_node_coordinate_answers_the_block_path_and_coordinate(figure3, capsys):
    master, url, _ = figure3
    assert call(url, "GET", "nodes/7/coordinate") == {"id": 7, "block": "SDV", "type": "Hypercube",
                                                       "coordinate": [1, 0, 1], "path": ["top", "SUB", "SDV"]}
    assert ctrl.main(["--endpoint", url, "--token-file", "/dev/null", "node", "coordinate", "--i", "18"]) == 1
    assert "HTTP 401" in capsys.readouterr().err


def test_pcie_velo_rma_come_from_the_slave_report_and_the_network_state(figure3):
    master, url, topo = figure3
    call(url, "POST", "emp/run", {"mode": "topology"})
    assert master.wait(10)["state"] == "done"
    call(url, "POST", "network/start", {})
    version = call(url, "GET", "emp/routes")["version"]
    report = {"guid": "0x649", "ports": {"0": {"state": "up", "peer_guid": "0x5e1", "peer_port": 0},
                                         "1": {"state": "down"}},
              "counters": {"ext0": {"rx_packets": 5, "tx_packets": 7}, "ext1": {"rx_packets": 1}},
              "routes_version": version - 1, "network": "down"}
    call(url, "POST", "slaves/report", report)
    rma = call(url, "GET", "nodes/1/rma")
    assert rma["state"] == "disabled" and not rma["routes_in_sync"]
    assert rma["counters"]["rx_packets"] == 6 and rma["counters"]["tx_packets"] == 7
    call(url, "POST", "slaves/report", dict(report, routes_version=version, network="up"))
    velo = call(url, "GET", "nodes/1/velo")
    assert velo["state"] == "enabled" and velo["routes_in_sync"] and velo["links_up"] == [0]
    pcie = call(url, "GET", "nodes/1/pcie")
    assert pcie["state"] == "up" and pcie["device"] == "0x649" and pcie["links_up"] == [0]


@pytest.fixture()
def seed_only(tmp_path):
    topo = T.generate("torus", [4, 3], routing="ShortestPath")
    (tmp_path / "physical.td").write_text(T.to_td(topo))
    (tmp_path / "topology.td").write_text(T.to_td(topo))
    conf = dict(config.MASTER_DEFAULTS, state_dir=str(tmp_path), discovery="file", topology_file=str(
        tmp_path / "topology.td"), discovery_file=str(tmp_path / "physical.td"), discovery_interval="0.05")
    master = Master(conf, Store(str(tmp_path / "master.sqlite")))
    server = make_server(master, "127.0.0.1", 0, "t", seed_only=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield "http://127.0.0.1:%d" % server.server_address[1], tmp_path
    server.shutdown()
    server.server_close()
    master.store.close()


def test_extoll_fabric_works_against_the_seed_endpoint_list_alone(seed_only):
    url, tmp_path = seed_only
    client = RestClient(url, token="t", retries=0)
    with pytest.raises(extoll_fabric.RestError) as info:
        client.get("emp/routes")
    assert info.value.status == 404
    params = dict(endpoint=url, token="t", validate_certs=True, timeout=5, state="started",
                  topology_file=str(tmp_path / "topology.td"), topology=None, routing=None, mode=None,
                  wait_timeout=10, poll_interval=0.05, fallback=None, virtual_channels=None)
    checked = extoll_fabric.apply(client, params, check_mode=True)
    assert checked["changed"] and checked["seed_endpoints_only"]
    assert client.get("network/status")["status"] == "un-configured"
    first = extoll_fabric.apply(client, params)
    assert first["changed"] and first["status"] == "up" and first["seed_endpoints_only"]
    assert first["certificate"]["algorithm"] == "ShortestPath" and first["certificate"]["deadlock_free"]
    assert first["certificate"]["scheme"] == "layers"
    assert not extoll_fabric.apply(client, params)["changed"]


def test_extoll_fabric_plans_and_proves_against_the_seed_endpoints_what_the_master_then_installs(seed_only):
    url, tmp_path = seed_only
    client = RestClient(url, token="t", retries=0)
    params = dict(endpoint=url, token="t", validate_certs=True, timeout=5, state="started",
                  topology_file=str(tmp_path / "topology.td"), topology=None, routing=None, mode=None,
                  wait_timeout=10, poll_interval=0.05, fallback=None, virtual_channels=None)
    checked = extoll_fabric.apply(client, params, check_mode=True)
    plan = checked["plan"]
    assert plan["computed_by"] == "collection" and plan["matches_emp"] is None and len(plan["changes"]) == 132
    assert checked["certificate"] == plan["certificate"] and plan["certificate"]["deadlock_free"]
    assert "node 1 dst 2 port " in checked["diff"]["after"] and "certificate scheme layers\n" in checked["diff"]["after"]
    assert client.get("network/status")["status"] == "un-configured"
    assert extoll_fabric.apply(client, params)["changed"]
    installed = client.get("network/info")["routing"]
    assert installed["algorithm"] == plan["algorithm"] and installed["summary"] == plan["certificate"]
