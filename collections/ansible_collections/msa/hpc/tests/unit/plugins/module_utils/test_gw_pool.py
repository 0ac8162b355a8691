# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

"""Tests of the gateway pool: pool-file validation and job-exclusive allocation in SQLite."""

import json
import os
import tempfile
import threading

import pytest
from hypothesis import given, settings, strategies as st

from ansible_collections.msa.hpc.plugins.module_utils import _gw_pool as P


def pool_data(n=4, **extra):
    data = {"route_fabric": "ib", "gateways": [
        {"name": "gw%02d" % i, "addresses": {"ib": "10.1.0.%d" % (200 + i), "extoll": "10.2.0.%d" % (200 + i)}}
        for i in range(1, n + 1)]}
    data.update(extra)
    return data


def make_pool(path, n=4):
    pool = P.GatewayPool(str(path))
    gateways, pool_settings = P.parse_pool(pool_data(n))
    pool.sync(gateways)
    return pool


@pytest.fixture
def pool(tmp_path):
    with make_pool(tmp_path / "pool.db") as p:
        yield p


def names(allocation):
    return [g["name"] for g in allocation["gateways"]]


def test_pool_file_gives_route_address_on_the_named_fabric_and_default_agent(tmp_path):
    path = tmp_path / "pool.json"
    path.write_text(json.dumps(pool_data(2, agent_port=7500)))
    gateways, settings_ = P.load_pool_file(str(path))
    assert [g.route_address for g in gateways] == ["10.1.0.201", "10.1.0.202"]
    # the agents speak TLS only: https unless the pool file says otherwise
    assert gateways[0].agent == "https://gw01:7500"
    assert settings_["port"] == 0 and settings_["agent_scheme"] == "https"
    path.write_text(json.dumps(dict(pool_data(2, agent_port=7500), agent_scheme="http")))
    assert P.load_pool_file(str(path))[0][0].agent == "http://gw01:7500"
    path.write_text(json.dumps(dict(pool_data(2), agent_scheme="ftp")))
    with pytest.raises(P.PoolError, match="agent_scheme is 'ftp', expected https or http"):
        P.load_pool_file(str(path))


def test_yaml_pool_file_is_read(tmp_path):
    path = tmp_path / "pool.yml"
    path.write_text("route_fabric: extoll\ngateways:\n  - name: gw1\n    addresses: {ib: 10.1.0.1, extoll: 10.2.0.1}\n"
                    "    agent: https://10.0.0.1:7433\n")
    gateways, pool_settings = P.load_pool_file(str(path))
    assert (gateways[0].route_address, gateways[0].agent) == ("10.2.0.1", "https://10.0.0.1:7433")


@pytest.mark.parametrize("data, words", [
    ({"gateways": "gw1"}, "'gateways' list"),
    ({"gateways": [{"name": "gw1", "addresses": {"ib": "a"}}, {"name": "gw1", "addresses": {"ib": "b"}}]},
     "gateways[1]: gateway 'gw1' is listed twice"),
    ({"gateways": [{"name": "gw 1", "addresses": {"ib": "a"}}]}, "name 'gw 1' is not a host name"),
    ({"gateways": [{"name": "gw1"}]}, "gateways[0] (gw1): 'addresses'"),
    ({"route_fabric": "opa", "gateways": [{"name": "gw1", "addresses": {"ib": "a"}}]}, "route_fabric 'opa'"),
    ({"port": 70000, "gateways": []}, "port is 70000"),
])
def test_bad_pool_file_names_the_field_and_value(data, words):
    with pytest.raises(P.PoolError) as exc:
        P.parse_pool(data, source="pool.yml")
    assert words in str(exc.value)


def test_allocation_is_all_or_nothing_when_too_few_are_free(pool):
    pool.allocate("100", 3)
    with pytest.raises(P.GatewaysBusy) as exc:
        pool.allocate("101", 2)
    assert exc.value.code == "busy"
    assert exc.value.details == {"requested": 2, "free": 1, "total": 4}
    assert pool.allocation("101") is None
    assert pool.counts() == {"total": 4, "up": 4, "free": 1, "allocated": 3}


def test_request_larger_than_the_pool_is_rejected_not_queued(pool):
    with pytest.raises(P.PoolTooSmall) as exc:
        pool.allocate("100", 5)
    assert exc.value.code == "too_small"
    assert "only 4" in str(exc.value)


def test_allocating_again_for_the_same_job_returns_the_same_gateways(pool):
    first, changed = pool.allocate("7", 2)
    again, changed_again = pool.allocate("7", 2)
    assert changed and not changed_again
    assert names(first) == names(again)


def test_allocating_a_different_count_for_a_held_job_is_a_conflict(pool):
    pool.allocate("7", 2)
    with pytest.raises(P.PoolError) as exc:
        pool.allocate("7", 3)
    assert exc.value.code == "conflict"


def test_release_is_idempotent_and_frees_the_gateways(pool):
    pool.allocate("9", 4)
    released = pool.release("9")
    assert names(released) == ["gw01", "gw02", "gw03", "gw04"]
    assert pool.release("9") is None
    assert pool.counts()["free"] == 4


def test_down_and_drained_gateways_are_never_allocated(pool):
    pool.set_state(["gw01"], "down", "psgwd stop failed")
    pool.set_state(["gw03"], "drain", "maintenance")
    alloc, changed = pool.allocate("1", 2)
    assert names(alloc) == ["gw02", "gw04"]
    with pytest.raises(P.GatewaysBusy):
        pool.allocate("2", 1)
    assert pool.set_state(["gw01"], "up") == ["gw01"]
    assert pool.set_state(["gw01"], "up") == []
    assert names(pool.allocate("2", 1)[0]) == ["gw01"]


def test_marking_an_unknown_gateway_is_an_error(pool):
    with pytest.raises(P.PoolError, match="'gw99' is not in the pool"):
        pool.set_state(["gw99"], "down")


def test_lru_selection_picks_the_least_recently_used_gateways(pool):
    pool.allocate("1", 2)          # gw01, gw02
    pool.release("1")
    alloc, changed = pool.allocate("2", 2)
    assert names(alloc) == ["gw03", "gw04"]
    pool.release("2")
    assert names(pool.allocate("3", 3)[0]) == ["gw01", "gw02", "gw03"]


def test_round_robin_selection_continues_after_the_last_gateway_given(pool):
    assert names(pool.allocate("1", 3, selection="round_robin")[0]) == ["gw01", "gw02", "gw03"]
    pool.release("1")
    assert names(pool.allocate("2", 2, selection="round_robin")[0]) == ["gw01", "gw04"]


def test_dry_run_reports_the_allocation_and_keeps_the_pool_unchanged(pool):
    alloc, changed = pool.allocate("5", 2, dry_run=True)
    assert changed and len(alloc["gateways"]) == 2
    assert pool.allocation("5") is None
    pool.allocate("5", 2)
    assert pool.release("5", dry_run=True) is not None
    assert pool.allocation("5") is not None


def test_gateway_removed_from_the_pool_file_stays_with_its_job_until_released(pool):
    pool.allocate("1", 4)
    gateways, pool_settings = P.parse_pool(pool_data(3))
    assert pool.sync(gateways) == ["gw04"]
    assert [g["name"] for g in pool.gateways()] == ["gw01", "gw02", "gw03", "gw04"]
    pool.release("1")
    assert [g["name"] for g in pool.gateways()] == ["gw01", "gw02", "gw03"]
    with pytest.raises(P.PoolTooSmall):
        pool.allocate("2", 4)


def test_ports_reported_by_agents_become_routing_endpoints(pool):
    alloc, changed = pool.allocate("3", 2)
    with pytest.raises(P.PoolError, match="no psgwd port yet"):
        P.endpoints(alloc)
    pool.set_port("3", "gw01", 40158)
    pool.set_port("3", "gw02", 40889)
    assert P.endpoints(pool.allocation("3")) == ["10.1.0.201:40158", "10.1.0.202:40889"]
    with pytest.raises(P.PoolError):
        pool.set_port("3", "gw04", 1)


def test_job_info_is_kept_with_the_allocation(pool):
    pool.allocate("3", 1, info={"routing_file": "/home/u/psgw-route-3", "cleanup": True})
    pool.update_info("3", user="u")
    assert pool.allocation("3")["info"] == {"routing_file": "/home/u/psgw-route-3", "cleanup": True, "user": "u"}


def test_concurrent_allocations_from_two_processes_never_share_a_gateway(tmp_path):
    make_pool(tmp_path / "pool.db", n=6).close()
    results, errors = {}, []

    def worker(job):
        with P.GatewayPool(str(tmp_path / "pool.db")) as p:
            try:
                results[job] = names(p.allocate(job, 2)[0])
            except P.GatewaysBusy as exc:
                errors.append(exc)

    threads = [threading.Thread(target=worker, args=(str(j),)) for j in range(5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    held = [g for gws in results.values() for g in gws]
    assert len(held) == len(set(held)) == 6
    assert len(results) == 3 and len(errors) == 2


ops = st.lists(st.tuples(st.sampled_from(["alloc", "release", "down", "up"]), st.integers(0, 5), st.integers(1, 4)),
               max_size=25)


@settings(max_examples=30, deadline=None)
@given(ops)
def test_gateways_are_never_held_by_two_jobs_and_counts_add_up(sequence):
    with tempfile.TemporaryDirectory() as tmp:
        with make_pool(os.path.join(tmp, "pool.db"), n=5) as pool:
            for op, job, count in sequence:
                if op == "alloc":
                    try:
                        pool.allocate(str(job), count)
                    except P.PoolError as exc:
                        assert exc.code in ("busy", "conflict")
                elif op == "release":
                    pool.release(str(job))
                else:
                    pool.set_state(["gw%02d" % count], op)
                holders = {}
                for gw in pool.gateways():
                    if gw["job_id"] is not None:
                        holders.setdefault(gw["job_id"], []).append(gw["name"])
                held = [g for v in holders.values() for g in v]
                assert len(held) == len(set(held))
                for job_id, gws in holders.items():
                    assert len(gws) == pool.allocation(job_id)["count"]
                counts = pool.counts()
                assert counts["allocated"] == len(held)
                assert counts["free"] == sum(g["state"] == "up" and g["job_id"] is None for g in pool.gateways())


def test_the_database_keeps_a_rollback_journal_for_the_file_system_both_controllers_share(tmp_path):
    """WAL's shared-memory index is shared by one host's processes only; the pool lives on a network file system."""
    import sqlite3
    with make_pool(tmp_path / "pool.db"):
        pass
    with sqlite3.connect(str(tmp_path / "pool.db")) as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    assert not (tmp_path / "pool.db-wal").exists() and not (tmp_path / "pool.db-shm").exists()
