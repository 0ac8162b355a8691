# SPDX-License-Identifier: GPL-3.0-or-later
"""extoll_fabric's states over a scripted EMP master: the plan is computed and proved here, check mode installs nothing."""
from __future__ import annotations

import pytest

from ansible_collections.msa.hpc.plugins.module_utils.extoll import fabric_state as F
from ansible_collections.msa.hpc.plugins.module_utils.extoll import plan as P
from ansible_collections.msa.hpc.plugins.module_utils.extoll import topology as T
from ansible_collections.msa.hpc.plugins.module_utils.extoll.emp import FabricError
from ansible_collections.msa.hpc.tests.unit.plugins.module_utils.extoll.fake_emp import emp

OPTIONS = {"routing": None, "fallback": [], "virtual_channels": 4, "updown_root": None}


def master(td, dry_run, routes=None):
    return emp({("GET", "emp/topology"): [{"td": None}], ("GET", "emp/routes"): [routes or {"version": 0}],
                ("GET", "network/status"): [{"status": "un-configured"}], ("POST", "emp/run"): [dry_run]})[0]


def params(td_path, **extra):
    base = dict(state="started", topology_file=str(td_path), topology=None, routing=None, mode=None,
                fallback=None, virtual_channels=None, wait_timeout=5, poll_interval=0.1)
    base.update(extra)
    return base


def dry_run_of(topo, **kw):
    plan = P.fabric_plan(topo, topo, mode="topology", **kw)
    return dict({k: v for k, v in plan.items() if k not in ("fabric", "port", "topology")}, options=OPTIONS,
                discovered=T.to_td(topo))


@pytest.fixture()
def mesh(tmp_path):
    topo = T.generate("mesh", [3, 2], routing="DimensionOrder")
    (tmp_path / "topology.td").write_text(T.to_td(topo))
    return topo, tmp_path / "topology.td"


def test_check_mode_reports_the_plan_changes_and_certificate_and_only_dry_runs(mesh):
    topo, path = mesh
    client = master(T.to_td(topo), dry_run_of(topo))
    result = F.apply(client, params(path), check_mode=True)
    assert result["changed"] and result["status"] == "up" and result["table_changes"] == 30
    assert result["plan"]["computed_by"] == "collection" and result["plan"]["matches_emp"] is True
    assert result["plan"]["certificate"] == result["certificate"] and result["certificate"]["deadlock_free"]
    assert result["diff"]["before"] == "" and result["diff"]["after"].startswith(T.to_td(topo))
    assert "node 1 dst 2 port " in result["diff"]["after"] and "certificate deadlock_free True\n" in result["diff"]["after"]
    sent = [(m, p, body) for m, p, body in client.rest.calls if m != "GET"]
    assert [(m, p) for m, p, body in sent] == [("POST", "emp/run")] and sent[0][2]["dry_run"] is True


def test_installed_tables_equal_to_the_plan_change_nothing(mesh):
    topo, path = mesh
    dry = dry_run_of(topo)
    client = emp({("GET", "emp/topology"): [{"td": T.to_td(topo)}], ("POST", "emp/run"): [dry],
                  ("GET", "emp/routes"): [{"version": 1, "algorithm": dry["algorithm"], "tables": dry["tables"],
                                           "certificate": dry["certificate"]}],
                  ("GET", "network/status"): [{"status": "up"}]})[0]
    result = F.apply(client, params(path))
    assert not result["changed"] and result["plan"]["changes"] == [] and result["table_changes"] == 0
    assert result["diff"]["before"] == result["diff"]["after"]
    assert [m for m, path, body in client.rest.calls if m != "GET"] == ["POST"]


def test_a_master_planning_other_tables_is_refused_before_anything_is_installed(mesh):
    topo, path = mesh
    dry = dry_run_of(topo, routing="UpDown")
    client = master(T.to_td(topo), dry)
    with pytest.raises(FabricError, match=r"other routing tables \(UpDown\) than the collection's plan \(DimensionOrder\)"):
        F.apply(client, params(path))
    assert [m for m, path, body in client.rest.calls if m != "GET"] == ["POST"]


def test_the_masters_options_are_planned_with_and_the_modules_win(mesh):
    topo, path = mesh
    dry = dict(dry_run_of(topo, routing="UpDown", vcs=2), options=dict(OPTIONS, routing="UpDown", virtual_channels=2))
    result = F.apply(master(T.to_td(topo), dry), params(path), check_mode=True)
    assert result["plan"]["algorithm"] == "UpDown" and result["plan"]["matches_emp"]
    assert result["certificate"]["virtual_channels_available"] == 2
    mine = F.own_plan(T.to_td(topo), T.to_td(topo), params(path, routing="ShortestPath"), "topology", dry["options"])
    assert mine["algorithm"] == "ShortestPath"


def test_a_master_that_does_not_say_what_it_discovered_leaves_the_plan_to_it(mesh):
    topo, path = mesh
    dry = dry_run_of(topo)
    del dry["discovered"]
    result = F.apply(master(T.to_td(topo), dry), params(path), check_mode=True)
    assert result["plan"]["computed_by"] == "emp" and result["plan"]["matches_emp"] is None
