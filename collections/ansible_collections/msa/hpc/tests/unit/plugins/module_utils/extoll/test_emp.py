# SPDX-License-Identifier: GPL-3.0-or-later
"""The EMP client without a network: a fake RestClient answers from a script of replies (fake_emp.emp)."""
from __future__ import annotations

import pytest

from ansible_collections.msa.hpc.plugins.module_utils._rest import RestError
from ansible_collections.msa.hpc.plugins.module_utils.extoll.emp import FabricError
from ansible_collections.msa.hpc.tests.unit.plugins.module_utils.extoll.fake_emp import emp


def test_an_extra_endpoint_the_master_lacks_reads_as_none_and_other_errors_pass_through():
    client = emp({("GET", "emp/topology"): [RestError("no endpoint", status=404)],
                  ("GET", "emp/routes"): [RestError("authentication failed", status=401)]})[0]
    assert client.topology() is None
    with pytest.raises(RestError) as info:
        client.extra("emp/routes")
    assert info.value.status == 401


def test_wait_for_run_polls_until_done_and_names_a_failed_or_slow_run():
    client, clock = emp({("GET", "emp/status"): [{"state": "computing"}, {"state": "installing"},
                                                 {"state": "done", "version": 3}]})
    assert client.wait_for_run(10)["version"] == 3 and clock.slept == [0.2, 0.2]
    client = emp({("GET", "emp/status"): [{"state": "failed", "message": "routing UpDown refused"}]})[0]
    with pytest.raises(FabricError, match="emp run failed: routing UpDown refused"):
        client.wait_for_run(10)
    client = emp({("GET", "emp/status"): [{"state": "waiting", "message": "waiting for 1 nodes"}]})[0]
    with pytest.raises(FabricError, match=r"did not finish within 1s \(state waiting: waiting for 1 nodes\)"):
        client.wait_for_run(1)


def test_wait_for_match_dry_runs_until_the_definition_is_discovered():
    missing = {"missing_nodes": [{"id": 2, "guid": "0x2"}], "missing_links": ["1 0 <-> 0 2"]}
    client, clock = emp({("POST", "emp/run"): [{"comparison": missing}, {"comparison": dict(
        missing, missing_nodes=[], missing_links=[]), "tables": {"1": {"2": 0}}}]})
    plan = client.wait_for_match({"mode": "topology", "td": "x"}, 10, 0.5)
    assert plan["tables"] == {"1": {"2": 0}} and clock.slept == [0.5]
    assert [c[2]["dry_run"] for c in client.rest.calls] == [True, True]


def test_wait_for_match_gives_up_naming_what_is_missing_and_auto_mode_does_not_wait():
    missing = {"missing_nodes": [{"id": 2, "guid": "0x2"}], "missing_links": ["1 0 <-> 0 2"]}
    client = emp({("POST", "emp/run"): [{"comparison": missing}]})[0]
    with pytest.raises(FabricError) as info:
        client.wait_for_match({"mode": "topology"}, 2, 1.0)
    assert "lacks 1 nodes and 1 links of the topology after 2s" in str(info.value)
    assert info.value.result["missing_links"] == ["1 0 <-> 0 2"] and info.value.result["unexpected_nodes"] == []
    client, clock = emp({("POST", "emp/run"): [{"comparison": missing, "tables": {}}]})
    assert client.wait_for_match({"mode": "auto"}, 2, 1.0)["tables"] == {} and clock.slept == []


def test_state_setting_posts_and_the_topology_upload_reach_their_endpoints():
    client = emp({("POST", "network/start"): [{"changed": True}], ("POST", "network/stop"): [{"changed": True}],
                  ("PUT", "emp/topology"): [{"changed": True}], ("GET", "network/status"): [{"status": "up"}]})[0]
    client.start_network()
    client.stop_network()
    assert client.put_topology("td text", "/etc/extoll/topology.td") == {"changed": True}
    assert client.network_status() == "up"
    assert client.rest.calls[:3] == [("POST", "network/start", {}), ("POST", "network/stop", {}),
                                     ("PUT", "emp/topology", {"td": "td text", "source": "/etc/extoll/topology.td"})]
