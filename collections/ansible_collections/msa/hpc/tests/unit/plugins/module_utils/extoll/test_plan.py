# SPDX-License-Identifier: GPL-3.0-or-later
"""Plans of a discovered fabric against its definition (what the EMP master and extoll_fabric both compute)."""
from __future__ import annotations

import pathlib

import pytest

from ansible_collections.msa.hpc.plugins.module_utils.extoll import hierarchy as H
from ansible_collections.msa.hpc.plugins.module_utils.extoll import plan as P
from ansible_collections.msa.hpc.plugins.module_utils.extoll import routing as R
from ansible_collections.msa.hpc.plugins.module_utils.extoll import topology as T

FIGURE3 = pathlib.Path(__file__).parent / "fixtures" / "td" / "figure3.td"


def without_link(topo, index):
    broken = T.parse_td(T.to_td(topo))
    broken.links.pop(index)
    return broken


def test_the_algorithm_is_the_requests_then_the_configured_then_the_definitions():
    torus = T.generate("torus", [4, 4], routing="DimensionOrder")
    figure3 = T.load_td(str(FIGURE3))
    assert P.choose_algorithm("updown", "ShortestPath", "topology", torus) == "UpDown"
    assert P.choose_algorithm(None, "shortest_path", "topology", torus) == "ShortestPath"
    assert P.choose_algorithm(None, None, "auto", torus) == "UpDown"
    assert P.choose_algorithm(None, None, "topology", None) == "UpDown"
    assert P.choose_algorithm(None, None, "topology", torus) == "DimensionOrder"
    assert P.choose_algorithm(None, None, "topology", figure3) == H.PER_BLOCK
    with pytest.raises(R.RoutingError, match="unknown routing algorithm 'xy'"):
        P.choose_algorithm("xy", None, "auto", torus)


def test_a_matching_fabric_is_routed_with_the_definitions_coordinates_and_proved():
    torus = T.generate("torus", [4, 4], routing="DimensionOrder")
    discovered = T.from_discovery([{"guid": n.guid, "id": n.id} for n in torus.nodes.values()],
                                  [(torus.nodes[a].guid, pa, torus.nodes[b].guid, pb) for a, pa, b, pb in torus.links])
    plan = P.fabric_plan(torus, discovered, mode="topology")
    assert plan["topology"] is torus and T.matches(plan["comparison"])
    assert plan["algorithm"] == "DimensionOrder" and plan["certificate"]["scheme"] == "dateline"
    assert plan["certificate"]["deadlock_free"] and plan["summary"] is plan["certificate"]
    assert len(plan["tables"]) == 16 and all(len(row) == 15 for row in plan["tables"].values())
    assert plan["tables"]["1"] == {str(d): p for d, p in R.tables(plan["fabric"], plan["port"])[1].items()}
    assert plan["dot"].startswith("graph extoll")


def test_topology_mode_waits_for_a_missing_link_and_auto_mode_routes_the_discovered_fabric():
    torus = T.generate("torus", [4, 4], routing="DimensionOrder")
    broken = without_link(torus, 3)
    waiting = P.fabric_plan(torus, broken, mode="topology")
    assert waiting["waiting"] and waiting["tables"] == {} and len(waiting["comparison"]["missing_links"]) == 1
    auto = P.fabric_plan(torus, broken, mode="auto")
    assert auto["topology"] is broken and auto["algorithm"] == "UpDown" and auto["certificate"]["deadlock_free"]


def test_per_block_routing_needs_the_definition_and_falls_back_to_its_routing_on_another_fabric():
    figure3 = T.load_td(str(FIGURE3))
    plan = P.fabric_plan(figure3, figure3, mode="topology")
    assert plan["algorithm"] == H.PER_BLOCK and plan["certificate"]["blocks"]["SDV"] == "DimensionOrder"
    other = without_link(figure3, 0)
    assert P.fabric_plan(figure3, other, routing="PerBlock", mode="auto")["certificate"]["requested"] \
        == figure3.routing


def test_nothing_discovered_or_no_deadlock_free_engine_is_refused_by_name():
    torus = T.generate("torus", [4, 4])
    with pytest.raises(P.PlanRefused, match="no nodes discovered"):
        P.fabric_plan(None, T.from_discovery([], []))
    with pytest.raises(P.PlanRefused, match="routing ShortestPath refused, nothing installed: no deadlock-free"):
        P.fabric_plan(None, torus, routing="ShortestPath", vcs=1)
    assert P.fabric_plan(None, torus, routing="ShortestPath", fallback=["UpDown"], vcs=1)["algorithm"] == "UpDown"


def test_a_route_stand_in_is_called_with_the_plans_options():
    seen = []

    def route(topo, algorithm, fallback, vcs, root):
        seen.append((algorithm, tuple(fallback), vcs, root))
        return P.route_topology(topo, algorithm, fallback, vcs, root)

    P.fabric_plan(None, T.generate("mesh", [3, 3]), mode="auto", fallback=["ShortestPath"], vcs=2, root=5,
                  route=route)
    assert seen == [("UpDown", ("ShortestPath",), 2, 5)]
