# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

"""EMP surveillance: link loss and return seen by the sweep; auto mode re-routes, topology mode reports degraded."""

import io
import time

import pytest

from ansible_collections.msa.hpc.plugins.module_utils.extoll import routing as R
from ansible_collections.msa.hpc.plugins.module_utils.extoll import topology as T
from msa_sim.emp.monitor import Monitor

from test_emp_master import call, start_master


@pytest.fixture()
def fabric(tmp_path):
    topo = T.generate("torus", [4, 3], routing="DimensionOrder")
    master, server, url = start_master(tmp_path, topo, topo)
    out = io.StringIO()
    monitor = Monitor(master, 0.05, str(tmp_path / "sensors"), out=out)
    yield master, url, topo, tmp_path, monitor, out
    server.shutdown()
    server.server_close()
    master.store.close()


def cable(tmp_path, topo, drop=()):
    physical = T.parse_td(T.to_td(topo), "<physical>")
    physical.links = [link for link in physical.links if T.format_link(link) not in drop]
    (tmp_path / "physical.td").write_text(T.to_td(physical))
    return physical


def path(tables, topo, src, dst):
    fab = R.Fabric.from_topology(topo)
    port = R.np.full((fab.n, fab.n), -1, dtype=R.np.int8)
    for s, row in tables.items():
        for d, p in row.items():
            port[fab.node_index(int(s)), fab.node_index(int(d))] = p
    return R.route(fab, port, src, dst)


def sensors(tmp_path):
    return {f.name: int(f.read_text()) for f in (tmp_path / "sensors").iterdir() if not f.name.endswith(".tmp")}


def test_auto_mode_reroutes_around_a_lost_link_and_back_when_it_returns(fabric):
    master, url, topo, tmp_path, monitor, out = fabric
    call(url, "POST", "emp/run", {"mode": "auto"})
    assert master.wait(10)["state"] == "done"
    assert monitor.sweep()["state"] == "ok"
    before = call(url, "GET", "emp/routes")
    link = T.format_link(topo.links[0])  # 1 1 <-> 0 2
    a, b = topo.links[0][0], topo.links[0][2]
    assert path(before["tables"], topo, a, b) == [a, b]
    physical = cable(tmp_path, topo, drop={link})
    lost_at = time.time()
    monitor.sweep()
    after = call(url, "GET", "emp/routes")
    assert after["version"] == before["version"] + 1 and after["certificate"]["deadlock_free"]
    assert before["installed_at"] <= lost_at <= after["installed_at"] <= time.time()  # the master's own clock
    detour = path(after["tables"], physical, a, b)
    assert detour[0] == a and detour[-1] == b and len(detour) > 2
    assert "link %s lost" % link in out.getvalue() and "re-routed 12 nodes and 23 links" in out.getvalue()
    assert "surveillance: link %s lost" % link in call(url, "GET", "log")
    assert monitor.sweep() and call(url, "GET", "emp/routes")["version"] == after["version"]  # no change, no work
    cable(tmp_path, topo)
    monitor.sweep()
    back = call(url, "GET", "emp/routes")
    assert back["version"] == after["version"] + 1 and back["tables"] == before["tables"]
    assert "link %s up" % link in out.getvalue() and "cached" in out.getvalue().splitlines()[-1]
    assert sensors(tmp_path) == {"fabric_degraded": 0, "fabric_missing_links": 0, "fabric_missing_nodes": 0,
                                 "fabric_events": 4, "fabric_reroutes": 2}


def test_topology_mode_keeps_the_last_tables_and_reports_the_fabric_degraded(fabric):
    master, url, topo, tmp_path, monitor, out = fabric
    call(url, "POST", "emp/run", {"mode": "topology"})
    assert master.wait(10)["state"] == "done"
    monitor.sweep()
    before = call(url, "GET", "emp/routes")
    link = T.format_link(topo.links[3])
    cable(tmp_path, topo, drop={link})
    state = monitor.sweep()
    assert state["state"] == "degraded" and state["missing_links"] == [link]
    assert call(url, "GET", "emp/routes") == before
    assert call(url, "GET", "network/status")["fabric"]["missing_links"] == [link]
    assert "fabric degraded: 1 links and 0 nodes of the topology missing (%s)" % link in out.getvalue()
    assert sensors(tmp_path)["fabric_degraded"] == 1 and sensors(tmp_path)["fabric_missing_links"] == 1
    cable(tmp_path, topo)
    assert monitor.sweep()["state"] == "ok" and "fabric complete again" in out.getvalue()
    assert call(url, "GET", "emp/routes") == before


def test_a_lost_node_is_an_event_and_auto_mode_routes_the_rest(fabric):
    master, url, topo, tmp_path, monitor, out = fabric
    call(url, "POST", "emp/run", {"mode": "auto"})
    assert master.wait(10)["state"] == "done"
    monitor.sweep()
    physical = T.parse_td(T.to_td(topo), "<physical>")
    gone = 5
    physical.links = [link for link in physical.links if gone not in (link[0], link[2])]
    del physical.nodes[gone]
    physical.blocks = {}
    physical.block_order = []
    (tmp_path / "physical.td").write_text(T.to_td(physical))
    monitor.sweep()
    assert "node 5 (0x104) lost" in out.getvalue()
    tables = call(url, "GET", "emp/routes")["tables"]
    assert "5" not in tables and len(tables) == 11
