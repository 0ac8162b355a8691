# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

"""The gateway pool follows its gateways' health: a dead idle gateway is taken out, and comes back when it answers."""

import pytest

from ansible_collections.msa.hpc.plugins.module_utils import _gw_pool as P


@pytest.fixture
def pool(tmp_path):
    data = {"route_fabric": "ib", "gateways": [
        {"name": "gw%02d" % i, "addresses": {"ib": "10.1.0.%d" % i, "extoll": "10.2.0.%d" % i}} for i in (1, 2, 3)]}
    with P.GatewayPool(str(tmp_path / "pool.db")) as p:
        p.sync(P.parse_pool(data)[0])
        yield p


def probe_dead(*dead):
    seen = []

    def probe(gw):
        seen.append(gw["name"])
        return "connection refused" if gw["name"] in dead else None
    probe.seen = seen
    return probe


def states(pool):
    return {g["name"]: (g["state"], g["reason"]) for g in pool.gateways()}


def test_an_idle_gateway_that_does_not_answer_is_never_given_to_a_job(pool):
    assert pool.refresh_health(probe_dead("gw01")) == {"down": ["gw01"], "up": []}
    assert states(pool)["gw01"] == ("down", "unreachable: connection refused")
    alloc = pool.allocate("7", 2)[0]
    assert [g["name"] for g in alloc["gateways"]] == ["gw02", "gw03"]
    assert pool.unavailable() == ["gw01"]


def test_too_few_live_gateways_make_the_job_wait_not_fail(pool):
    pool.refresh_health(probe_dead("gw01"))
    with pytest.raises(P.GatewaysBusy):
        pool.allocate("7", 3)


def test_a_gateway_marked_unreachable_returns_to_the_pool_once_it_answers(pool):
    pool.refresh_health(probe_dead("gw02"))
    assert pool.refresh_health(probe_dead("gw02")) == {"down": [], "up": []}
    assert pool.refresh_health(probe_dead()) == {"down": [], "up": ["gw02"]}
    assert states(pool)["gw02"] == ("up", "")
    assert pool.unavailable() == []
    assert pool.allocate("8", 3)[1]


def test_operator_decisions_and_gateways_held_by_jobs_are_left_alone(pool):
    pool.set_state(["gw01"], "drain", "maintenance")
    pool.allocate("9", 1)  # lru: gw02
    probe = probe_dead("gw01", "gw02", "gw03")
    assert pool.refresh_health(probe) == {"down": ["gw03"], "up": []}
    assert probe.seen == ["gw03"]
    assert states(pool)["gw01"] == ("drain", "maintenance")
    assert states(pool)["gw02"] == ("up", "")
    assert pool.unavailable() == ["gw01", "gw03"]
    # a gateway an operator marked down stays down even when it answers
    pool.set_state(["gw03"], "down", "bad cable")
    assert pool.refresh_health(probe_dead()) == {"down": [], "up": []}
    assert states(pool)["gw03"] == ("down", "bad cable")


def test_dry_run_reports_the_changes_and_keeps_the_states(pool):
    assert pool.refresh_health(probe_dead("gw01"), dry_run=True) == {"down": ["gw01"], "up": []}
    assert states(pool)["gw01"] == ("up", "")
