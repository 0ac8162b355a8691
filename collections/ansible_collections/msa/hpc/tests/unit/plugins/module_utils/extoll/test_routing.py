# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

"""Tests of the routing engines and their checker, against a networkx reference kept here only."""

import itertools
import pathlib

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from ansible_collections.msa.hpc.plugins.module_utils.extoll import plan as P
from ansible_collections.msa.hpc.plugins.module_utils.extoll import routing as R
from ansible_collections.msa.hpc.plugins.module_utils.extoll import topology as T

FIXTURES = pathlib.Path(__file__).parent / "fixtures" / "td"


@st.composite
def connected_graphs(draw, max_nodes=14):
    n = draw(st.integers(2, max_nodes))
    edges = set()
    for v in range(1, n):  # a random spanning tree keeps it connected
        edges.add((draw(st.integers(0, v - 1)), v))
    extra = draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=2 * n))
    edges |= {(min(a, b), max(a, b)) for a, b in extra if a != b}
    edges = sorted(edges)
    order = draw(st.permutations(range(len(edges))))
    return n, [edges[i] for i in order]


def nx_graph(n, edges):
    g = nx.Graph()
    g.add_nodes_from(range(n))
    g.add_edges_from(edges)
    return g


def reference_updown_lengths(g, root=0):
    """Up*/down* route lengths with the destination-based rule of _routing.route_updown, via networkx:
    the shortest down-only path if one exists, else one up link plus the up-neighbour's route."""
    level = nx.single_source_shortest_path_length(g, root)
    rank = {v: (level[v], v) for v in g}
    down = nx.DiGraph()
    down.add_nodes_from(g)
    down.add_edges_from((u, v) for u, v in g.edges if rank[v] > rank[u])
    down.add_edges_from((v, u) for u, v in g.edges if rank[u] > rank[v])
    lengths = {}
    for t in g:
        dist_down = dict(nx.single_target_shortest_path_length(down, t))
        length = {}
        for u in sorted(g, key=rank.get):  # up-neighbours have a smaller rank: already known
            if u in dist_down:
                length[u] = dist_down[u]
            else:
                length[u] = 1 + min(length[w] for w in g[u] if rank[w] < rank[u])
        for u in g:
            lengths[u, t] = length[u]
    return lengths, rank


def assert_updown_legal(fab, port, rank):
    for s, t in itertools.permutations(range(fab.n), 2):
        path = R.route(fab, port, s, t)
        went_down = False
        for a, b in zip(path, path[1:]):
            if rank[b] > rank[a]:
                went_down = True
            else:
                assert not went_down, "route %d -> %d goes up after down: %s" % (s, t, path)


@settings(max_examples=40, deadline=None)
@given(connected_graphs())
def test_updown_routes_reach_destinations_without_loops_and_are_deadlock_free(graph):
    n, edges = graph
    fab = R.Fabric.from_edges(n, edges)
    port = R.route_updown(fab)
    summary = P.check_routes(fab, port)
    assert summary["reachable"] and summary["deadlock_free"], summary["problems"]
    hops, reached = R.hop_counts(fab, port)
    assert reached.all()
    lengths, rank = reference_updown_lengths(nx_graph(n, edges))
    expected = np.array([[lengths[u, t] for t in range(n)] for u in range(n)])
    assert (hops == expected).all()
    assert_updown_legal(fab, port, rank)


@settings(max_examples=40, deadline=None)
@given(connected_graphs())
def test_shortest_path_tables_match_networkx_distances(graph):
    n, edges = graph
    fab = R.Fabric.from_edges(n, edges)
    port = R.route_shortest_path(fab)
    hops, reached = R.hop_counts(fab, port)
    assert reached.all()
    dist = dict(nx.all_pairs_shortest_path_length(nx_graph(n, edges)))
    assert (hops == np.array([[dist[u][t] for t in range(n)] for u in range(n)])).all()


@settings(max_examples=15, deadline=None)
@given(st.lists(st.integers(1, 6), min_size=1, max_size=3), st.sampled_from(["Torus", "Mesh"]))
def test_dimension_order_is_minimal_and_vc_cdg_is_acyclic(dims, kind):
    topo = T.generate(kind, dims)
    fab = R.Fabric.from_topology(topo)
    port, summary = P.plan(fab, "DimensionOrder")
    assert summary["reachable"] and summary["deadlock_free"], summary["problems"]
    hops, reached = R.hop_counts(fab, port)
    C = fab.coords
    delta = np.abs(C[:, None, :] - C[None, :, :])
    if kind == "Torus":
        delta = np.minimum(delta, np.asarray(dims) - delta)
    assert (hops == delta.sum(axis=2)).all()
    # dimension order: along every route the dimension index never decreases
    dim_of = R._direction_ports(fab)[1]
    for s, t in itertools.islice(itertools.permutations(range(fab.n), 2), 200):
        path = [fab.node_index(i) for i in R.route(fab, port, fab.ids[s], fab.ids[t])]
        dims_used = [dim_of[a, port[a, t]] for a in path[:-1]]
        assert dims_used == sorted(dims_used)


def test_torus_dimension_order_needs_the_dateline_virtual_channels():
    fab = R.Fabric.from_topology(T.generate("torus", [4, 4]))
    port = R.route_dimension_order(fab)
    without = P.check_routes(fab, port)
    with_vcs = P.check_routes(fab, port, vcs="dateline")
    assert not without["deadlock_free"] and len(without["cycle"]) == 4
    assert with_vcs["deadlock_free"] and with_vcs["virtual_channels"] == 2


def test_bitset_engines_are_right_beyond_one_64_bit_word():
    topo = T.generate("torus", [9, 8])
    fab = R.Fabric.from_topology(topo)
    g = nx.Graph((a, b) for a, pa, b, pb in topo.links)
    dist = dict(nx.all_pairs_shortest_path_length(g))
    expected = np.array([[dist[a][b] for b in fab.ids] for a in fab.ids])
    for algorithm in ("ShortestPath", "DimensionOrder"):
        hops, reached = R.hop_counts(fab, R.compute(fab, algorithm))
        assert reached.all() and (hops == expected).all()
    port, summary = P.plan(fab, "UpDown")
    assert summary["deadlock_free"] and summary["reachable"]


def test_checker_finds_loops_and_dead_ends():
    fab = R.Fabric.from_edges(4, [(0, 1), (1, 2), (2, 3), (3, 0)])
    port = R.route_shortest_path(fab)
    looping = port.copy()
    # 0 sends towards 2 via 1, and 1 sends it back to 0
    looping[1, 2] = int(np.nonzero(fab.nbr[1] == 0)[0][0])
    looping[0, 2] = int(np.nonzero(fab.nbr[0] == 1)[0][0])
    summary = P.check_routes(fab, looping)
    assert not summary["reachable"] and "route 0 -> 2 does not reach its destination" in summary["problems"]
    with pytest.raises(R.RoutingError, match="loops"):
        R.route(fab, looping, 0, 2)
    dead = port.copy()
    dead[3, 1] = -1
    assert P.check_routes(fab, dead)["unreachable_pairs"] >= 1


def test_cdg_acyclicity_check_detects_a_cycle():
    ok, left = R.acyclic(3, [0, 1, 2], [1, 2, 0])
    assert not ok and sorted(left.tolist()) == [0, 1, 2]
    ok, left = R.acyclic(4, [0, 1, 0], [1, 2, 3])
    assert ok and left.size == 0


def test_figure3_routes_with_updown_and_reports_shortest_path_deadlock_risk():
    fab = R.Fabric.from_topology(T.load_td(str(FIXTURES / "figure3.td")))
    port, summary = P.plan(fab, "UpDown")
    assert summary["deadlock_free"] and summary["reachable"]
    assert R.route(fab, port, 1, 1) == [1]
    assert R.route(fab, port, 19, 129)[0] == 19 and R.route(fab, port, 19, 129)[-1] == 129
    assert R.next_hop(fab, port, 1, 2) == 2
    sp = P.check_routes(fab, R.route_shortest_path(fab))
    assert sp["reachable"] and not sp["deadlock_free"] and sp["cycle"]
    layered = P.plan(fab, "ShortestPath")[1]
    assert layered["deadlock_free"] and layered["scheme"] == "layers" and layered["virtual_channels"] >= 2
    with pytest.raises(R.RoutingError, match="DimensionOrder needs"):
        P.plan(fab, "DimensionOrder")


def test_dimension_order_reports_a_missing_link():
    topo = T.generate("torus", [3, 3])
    topo.links.pop(0)
    with pytest.raises(R.RoutingError, match="no link to use from node 1"):
        R.route_dimension_order(R.Fabric.from_topology(topo))


def test_updown_refuses_a_disconnected_fabric():
    fab = R.Fabric.from_edges(4, [(0, 1), (2, 3)])
    with pytest.raises(R.RoutingError, match="not connected"):
        R.route_updown(fab)


def test_dot_export_lists_every_link_once_with_ports():
    topo = T.generate("torus", [3, 2])
    fab = R.Fabric.from_topology(topo)
    dot = R.to_dot(fab, algorithm="UpDown")
    assert dot.startswith("graph extoll {") and dot.rstrip().endswith("}")
    assert dot.count(" -- ") == len(topo.links)
    assert 'n1 -- n2 [taillabel="1", headlabel="0"]' in dot and "level 0" in dot


def test_table_changes_list_the_entries_that_differ():
    before = {1: {2: 0, 3: 1}, 2: {1: 0}}
    after = {1: {2: 0, 3: 2}, 2: {1: 0}, 3: {1: 1}}
    assert R.table_changes(before, after) == ["node 1: dst 3 port 1 -> 2", "node 3: dst 1 port - -> 1"]


def test_unknown_algorithm_is_named_in_the_error():
    with pytest.raises(R.RoutingError, match="'Spiral'"):
        R.algorithm_name("Spiral")
