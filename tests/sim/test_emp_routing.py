# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

"""The EMP master never installs a cyclic table: VC certificates, refusals, per-block routing, the routing cache."""

import pathlib

import pytest

from ansible_collections.msa.hpc.plugins.module_utils.extoll import topology as T
from msa_sim.emp import ctrl

from test_emp_master import call, start_master

FIGURE3 = (pathlib.Path(__file__).resolve().parents[2] / "collections/ansible_collections/msa/hpc/tests/unit"
           / "plugins/module_utils/extoll/fixtures/td/figure3.td")


@pytest.fixture()
def master_on(tmp_path):
    started = []

    def start(topo, **extra):
        master, server, url = start_master(tmp_path, topo, topo, **extra)
        started.append((master, server))
        return master, url

    yield start
    for master, server in started:
        server.shutdown()
        server.server_close()
        master.store.close()


def test_shortest_path_on_a_torus_is_installed_only_with_vc_layers_and_an_acyclic_certificate(master_on):
    master, url = master_on(T.generate("torus", [4, 4], routing="ShortestPath"))
    call(url, "POST", "emp/run", {"mode": "topology"})
    status = master.wait(10)
    assert status["state"] == "done", status
    cert = call(url, "GET", "emp/routes")["certificate"]
    assert cert["algorithm"] == "ShortestPath" and cert["scheme"] == "layers" and cert["acyclic"]
    assert 2 <= cert["virtual_channels"] <= cert["virtual_channels_available"] == 4
    assert cert["attempts"][0]["scheme"] == "single" and "has a cycle" in cert["attempts"][0]["reason"]
    assert cert["channels"] > 0 and cert["max_hops"] == 4


def test_a_routing_that_cannot_be_made_deadlock_free_is_refused_and_nothing_installed(master_on):
    master, url = master_on(T.generate("torus", [4, 4], routing="ShortestPath"))
    call(url, "POST", "emp/run", {"mode": "topology", "routing": "UpDown"})
    assert master.wait(10)["state"] == "done"
    before = call(url, "GET", "emp/routes")
    with pytest.raises(ctrl.CtrlError, match=r"HTTP 409: routing ShortestPath refused, nothing installed: no "
                                             r"deadlock-free routing on 1 VC: ShortestPath \(single\): the channel-"
                                             r"dependency graph on 1 VC has a cycle through 4 channels: node \d+"):
        call(url, "POST", "emp/run", {"mode": "topology", "dry_run": True, "virtual_channels": 1, "fallback": []})
    call(url, "POST", "emp/run", {"mode": "topology", "virtual_channels": 1, "fallback": []})
    status = master.wait(10)
    assert status["state"] == "failed" and "cycle through 4 channels" in status["message"]
    assert call(url, "GET", "emp/routes") == before
    with pytest.raises(ctrl.CtrlError, match=r"HTTP 400: virtual_channels must be an integer from 1 to 4"):
        call(url, "POST", "emp/run", {"mode": "topology", "virtual_channels": 8})
    with pytest.raises(ctrl.CtrlError, match=r"HTTP 400: fallback: unknown routing algorithm 'minhop'"):
        call(url, "POST", "emp/run", {"mode": "topology", "fallback": ["minhop"]})
    plan = call(url, "POST", "emp/run", {"mode": "topology", "dry_run": True, "virtual_channels": 1,
                                         "fallback": ["UpDown"]})
    assert plan["algorithm"] == "UpDown" and plan["certificate"]["requested"] == "ShortestPath"


def test_figure3_hierarchy_is_routed_per_block_and_proved(master_on):
    master, url = master_on(T.load_td(str(FIGURE3)))
    call(url, "POST", "emp/run", {"mode": "topology"})
    assert master.wait(10)["state"] == "done"
    routes = call(url, "GET", "emp/routes")
    cert = routes["certificate"]
    assert routes["algorithm"] == "PerBlock" and cert["acyclic"] and cert["deadlock_free"]
    assert cert["blocks"] == {"top": "ShortestPath", "NAM1": "ShortestPath", "SUB": "ShortestPath",
                              "SDV": "DimensionOrder", "FS": "DimensionOrder"}
    # SDV node 8 (1,1,1) to node 1 (0,0,0): dimension 0 first, through node 6 (0,1,1)
    assert routes["tables"]["8"]["1"] == 1 and routes["tables"]["6"]["1"] == 0


def test_the_routing_cache_skips_recomputation_for_an_unchanged_topology(master_on):
    master, url = master_on(T.generate("torus", [4, 3], routing="DimensionOrder"))
    first = call(url, "POST", "emp/run", {"mode": "topology", "dry_run": True})
    again = call(url, "POST", "emp/run", {"mode": "topology", "dry_run": True})
    other = call(url, "POST", "emp/run", {"mode": "topology", "dry_run": True, "routing": "UpDown"})
    assert (first["cached"], again["cached"], other["cached"]) == (False, True, False)
    assert first["tables"] == again["tables"] and first["certificate"]["scheme"] == "dateline"
