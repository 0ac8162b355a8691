# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

"""Tests of a job's IP paths across the gateways: node addresses, the pairs each gateway forwards, the host routes."""

import pytest

from ansible_collections.msa.hpc.plugins.module_utils import _gw_paths as N
from ansible_collections.msa.hpc.plugins.module_utils import _gw_pool as P

GW = [{"name": "gw01", "route_address": "10.1.0.201", "addresses": {"ib": "10.1.0.201", "extoll": "10.2.0.201"}},
      {"name": "gw02", "route_address": "10.1.0.202", "addresses": {"ib": "10.1.0.202", "extoll": "10.2.0.202"}}]
ENDPOINTS = ["10.1.0.201:5000", "10.1.0.202:5001"]
NODES = {"cm01": {"ib": "10.1.0.20"}, "cm02": {"ib": "10.1.0.21"},
         "esb01": {"extoll": "10.2.0.40"}, "esb02": {"extoll": "10.2.0.41"}}
ROUTES = {(ENDPOINTS[0], "cm01", "esb01"), (ENDPOINTS[0], "cm02", "esb01"),
          (ENDPOINTS[1], "cm01", "esb02"), (ENDPOINTS[1], "cm02", "esb02")}


def test_pool_nodes_are_checked_and_reach_the_settings():
    gateways, settings = P.parse_pool({"route_fabric": "ib", "gateways": [
        {"name": "gw01", "addresses": GW[0]["addresses"]}], "nodes": NODES})
    assert settings["nodes"] == NODES and gateways[0].route_address == "10.1.0.201"
    assert P.parse_pool({"gateways": []})[1]["nodes"] == {}


@pytest.mark.parametrize("nodes, message", [
    ({"cm01": {"ib": "10.1.0.300"}}, "nodes.cm01.ib: '10.1.0.300' is not an IP address"),
    ({"cm 01": {"ib": "10.1.0.3"}}, "nodes: 'cm 01' is not a node name"),
    ({"cm01": "10.1.0.3"}, "nodes.cm01 must map fabrics to addresses"),
    ({"cm01": {"i b": "10.1.0.3"}}, "nodes.cm01: 'i b' is not a fabric name"),
    (["cm01"], "nodes must map each compute node"),
])
def test_a_bad_node_entry_in_the_pool_file_is_refused_naming_it(nodes, message):
    with pytest.raises(P.PoolError) as exc:
        P.parse_pool({"gateways": [], "nodes": nodes}, source="pool.yml")
    assert "pool.yml: " + message in str(exc.value)


def test_each_gateway_gets_the_address_pairs_of_its_routes():
    assert N.gateway_pairs(ROUTES, GW, ENDPOINTS, NODES) == {
        "gw01": [["10.1.0.20", "10.2.0.40"], ["10.1.0.21", "10.2.0.40"]],
        "gw02": [["10.1.0.20", "10.2.0.41"], ["10.1.0.21", "10.2.0.41"]]}
    assert N.gateway_pairs(set(), GW, ENDPOINTS, NODES) == {"gw01": [], "gw02": []}


def test_a_route_through_no_gateway_of_the_job_or_a_node_without_address_is_an_error():
    with pytest.raises(N.PathError, match="route 10.9.9.9:1 cm01 esb01 names no gateway of the job"):
        N.gateway_pairs({("10.9.9.9:1", "cm01", "esb01")}, GW, ENDPOINTS, NODES)
    with pytest.raises(N.PathError, match="node esb02 has no extoll address"):
        N.gateway_pairs(ROUTES, GW, ENDPOINTS, {n: a for n, a in NODES.items() if n != "esb02"})
    with pytest.raises(N.PathError, match="one address on each of two fabrics"):
        N.gateway_fabrics(dict(GW[0], addresses={"ib": "10.1.0.201"}))


def test_cluster_nodes_route_to_the_gateways_cluster_address_booster_nodes_to_its_booster_address():
    pairs = N.gateway_pairs(ROUTES, GW, ENDPOINTS, NODES)
    addresses = {g["name"]: g["addresses"] for g in GW}
    assert N.node_routes("10.1.0.20", pairs, addresses, ("ib", "extoll")) == [
        ("10.2.0.40", "10.1.0.201"), ("10.2.0.41", "10.1.0.202")]
    assert N.node_routes("10.2.0.41", pairs, addresses, ("ib", "extoll")) == [
        ("10.1.0.20", "10.2.0.202"), ("10.1.0.21", "10.2.0.202")]
    assert N.node_routes("10.1.0.99", pairs, addresses, ("ib", "extoll")) == []


def test_a_peer_behind_two_gateways_is_refused():
    pairs = {"gw01": [["10.1.0.20", "10.2.0.40"]], "gw02": [["10.1.0.20", "10.2.0.40"]]}
    with pytest.raises(N.PathError, match="peer 10.2.0.40 of 10.1.0.20 is reached through two gateways"):
        N.node_routes("10.1.0.20", pairs, {g["name"]: g["addresses"] for g in GW}, ("ib", "extoll"))
