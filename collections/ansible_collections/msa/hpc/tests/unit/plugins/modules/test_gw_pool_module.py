# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

"""Tests of the gw_pool module: allocation with routing file, check mode, idempotence, release, errors."""

import json

import pytest
from ansible.module_utils.testing import patch_module_args

from ansible_collections.msa.hpc.plugins.module_utils import _gw_pool as P
from ansible_collections.msa.hpc.plugins.modules import gw_pool

POOL = {"route_fabric": "ib", "port": 40158, "gateways": [
    {"name": "gw%02d" % i, "addresses": {"ib": "10.1.0.%d" % (200 + i), "extoll": "10.2.0.%d" % (200 + i)}}
    for i in (1, 2, 3)]}


def params(tmp_path, **extra):
    base = dict(state="query", db=str(tmp_path / "pool.db"), pool_file=None, pool=POOL, job_id=None, count=None,
                selection=None, strategy="balance", plugin_dirs=[], cluster_nodes=None, booster_nodes=None,
                routing_file=None, routing_file_mode="0644", port=None, gateways=None, reason="",
                return_content=False)
    base.update(extra)
    return base


def allocate(tmp_path, **extra):
    args = dict(state="allocated", job_id="4711", count=2, strategy="booster",
                cluster_nodes=["cluster016", "cluster015"], booster_nodes=["booster003", "booster010"],
                routing_file=str(tmp_path / "psgw-route-4711"))
    args.update(extra)
    return params(tmp_path, **args)


def test_allocation_writes_the_routing_file_and_a_second_run_changes_nothing(tmp_path):
    first = gw_pool.apply(allocate(tmp_path, return_content=True))
    assert first["changed"] and [g["name"] for g in first["gateways"]] == ["gw01", "gw02"]
    assert first["content"] == ("10.1.0.201:40158 cluster015 booster003\n10.1.0.201:40158 cluster016 booster003\n"
                                "10.1.0.202:40158 cluster015 booster010\n10.1.0.202:40158 cluster016 booster010\n")
    assert (tmp_path / "psgw-route-4711").read_text() == first["content"]
    assert first["free"] == 1
    second = gw_pool.apply(allocate(tmp_path))
    assert not second["changed"] and second["gateways"] == first["gateways"]


def test_check_mode_reports_the_change_and_touches_nothing(tmp_path):
    result = gw_pool.apply(allocate(tmp_path), check_mode=True)
    assert result["changed"] and result["free"] == 1
    assert result["diff"][-1]["after"].startswith("10.1.0.201:40158 cluster015 booster003")
    assert not (tmp_path / "psgw-route-4711").exists()
    assert gw_pool.apply(params(tmp_path))["free"] == 3


def test_release_frees_gateways_removes_the_file_and_is_idempotent(tmp_path):
    gw_pool.apply(allocate(tmp_path))
    rel = params(tmp_path, state="released", job_id="4711", routing_file=str(tmp_path / "psgw-route-4711"))
    result = gw_pool.apply(rel)
    assert result["changed"] and result["free"] == 3
    assert not (tmp_path / "psgw-route-4711").exists()
    assert not gw_pool.apply(rel)["changed"]


def test_marking_down_is_reported_once_and_skipped_by_allocation(tmp_path):
    down = params(tmp_path, state="down", gateways=["gw01"], reason="HCA replaced")
    assert gw_pool.apply(down)["changed"]
    assert not gw_pool.apply(down)["changed"]
    result = gw_pool.apply(allocate(tmp_path))
    assert [g["name"] for g in result["gateways"]] == ["gw02", "gw03"]
    listed = gw_pool.apply(params(tmp_path))
    assert {g["name"]: g["reason"] for g in listed["gateways"]}["gw01"] == "HCA replaced"
    assert listed["jobs"][0]["job_id"] == "4711"


def run_module(args):
    with patch_module_args({k: v for k, v in args.items() if v is not None}):
        with pytest.raises(SystemExit):
            gw_pool.main()


def test_module_fails_with_reason_busy_when_too_few_gateways_are_free(tmp_path, capsys):
    gw_pool.apply(allocate(tmp_path))
    run_module({"state": "allocated", "db": str(tmp_path / "pool.db"), "pool": POOL, "job_id": "4712", "count": 2})
    out = json.loads(capsys.readouterr().out)
    assert out["failed"] and out["reason"] == "busy" and out["free"] == 1
    assert "must wait" in out["msg"]


def test_module_fails_with_reason_too_small_naming_the_count(tmp_path, capsys):
    run_module({"state": "allocated", "db": str(tmp_path / "pool.db"), "pool": POOL, "job_id": "1", "count": 9})
    out = json.loads(capsys.readouterr().out)
    assert out["reason"] == "too_small" and out["msg"].startswith("count=9:")


def test_unknown_strategy_is_reported_against_the_strategy_option(tmp_path, capsys):
    args = allocate(tmp_path, strategy="nearest")
    args.pop("pool_file")
    run_module(args)
    out = json.loads(capsys.readouterr().out)
    assert out["failed"], out
    assert out["msg"].startswith("strategy: unknown routing strategy 'nearest'")
    with P.GatewayPool(str(tmp_path / "pool.db")) as pool:  # checked before anything was allocated
        assert pool.allocation("4711") is None
