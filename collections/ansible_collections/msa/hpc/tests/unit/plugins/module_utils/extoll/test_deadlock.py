# SPDX-License-Identifier: GPL-3.0-or-later
"""Deadlock-freedom proofs: the bitset prover against a pair-by-pair reference on random irregular fabrics."""
from __future__ import annotations

import itertools
import pathlib

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from ansible_collections.msa.hpc.plugins.module_utils.extoll import deadlock as D
from ansible_collections.msa.hpc.plugins.module_utils.extoll import hierarchy as H
from ansible_collections.msa.hpc.plugins.module_utils.extoll import plan as P
from ansible_collections.msa.hpc.plugins.module_utils.extoll import routing as R
from ansible_collections.msa.hpc.plugins.module_utils.extoll import topology as T

FIGURE3 = pathlib.Path(__file__).parent / "fixtures" / "td" / "figure3.td"


@st.composite
def irregular_fabrics(draw, max_nodes=14):
    """A connected graph: a random spanning tree plus random extra links (parallel links allowed)."""
    n = draw(st.integers(2, max_nodes))
    edges = [(draw(st.integers(0, v - 1)), v) for v in range(1, n)]
    extra = draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=2 * n))
    edges += [(a, b) for a, b in extra if a != b]
    return R.Fabric.from_edges(n, edges, ids=[10 + 3 * i for i in range(n)])


def reference_up(fab):
    """up[i, p] from a networkx BFS from node 0: the link leads to a smaller (level, id)."""
    g = nx.MultiGraph()
    g.add_nodes_from(range(fab.n))
    g.add_edges_from((i, int(j)) for i in range(fab.n) for j in fab.nbr[i] if j >= 0)
    level = nx.single_source_shortest_path_length(g, 0)
    rank = {i: (level[i], int(fab.ids[i])) for i in range(fab.n)}
    return [[fab.nbr[i, p] >= 0 and rank[int(fab.nbr[i, p])] < rank[i] for p in range(fab.P)]
            for i in range(fab.n)]


def reference_verdict(fab, port, scheme, vcs):
    """Walk every route hop by hop with the scheme's VC rule; True when all arrive within the VCs and the
    (node, port, VC) dependency graph is a DAG."""
    up = reference_up(fab) if scheme == "layers" else None
    cdg = nx.DiGraph()
    for s, t in itertools.permutations(range(fab.n), 2):
        u, vc, prev, seen = s, 0, None, set()
        while u != t:
            p = int(port[u, t])
            if p < 0 or fab.nbr[u, p] < 0 or u in seen:
                return False
            seen.add(u)
            if prev is not None:
                if scheme == "layers" and up[u][prev[2]] and up[u][p]:  # arrived down, leaves up
                    vc += 1
                if vc >= vcs:
                    return False
                cdg.add_edge(prev[:2] + (prev[3],), (u, p, vc))
            prev = (u, p, int(fab.nbr_port[u, p]), vc)
            u = int(fab.nbr[u, p])
    return nx.is_directed_acyclic_graph(cdg)


def perturbed_table(fab, data, engine):
    port = R.compute(fab, engine).copy()
    for attempt in range(data.draw(st.integers(0, 3))):
        u = data.draw(st.integers(0, fab.n - 1))
        t = data.draw(st.integers(0, fab.n - 1))
        valid = np.nonzero(fab.nbr[u] >= 0)[0].tolist()
        if u != t:
            port[u, t] = data.draw(st.sampled_from(valid))
    return port


@settings(max_examples=60, deadline=None)
@given(irregular_fabrics(), st.data(), st.sampled_from(["single", "layers"]), st.integers(1, D.MODEL_VCS),
       st.sampled_from(["ShortestPath", "UpDown"]))
def test_prover_agrees_with_a_pair_by_pair_reference(fab, data, scheme, vcs, engine):
    port = perturbed_table(fab, data, engine)
    cert = D.prove(fab, port, scheme, vcs)
    expected = reference_verdict(fab, port, scheme, 1 if scheme == "single" else vcs)
    assert (cert["acyclic"] and cert["reachable"]) == expected, cert["problems"]
    if not cert["acyclic"] and cert["reachable"] and cert["cycle"]:
        assert len(cert["cycle"]) >= 2


@settings(max_examples=60, deadline=None)
@given(irregular_fabrics(), st.integers(1, D.MODEL_VCS),
       st.lists(st.sampled_from(["ShortestPath", "UpDown"]), min_size=1, max_size=2))
def test_any_table_the_manager_accepts_is_acyclic_on_its_vcs(fab, vcs, engines):
    try:
        port, cert = P.plan(fab, engines[0], fallback=engines[1:], vcs=vcs)
    except D.Refused as exc:
        assert "UpDown" not in engines, "up*/down* is deadlock-free on any connected fabric: %s" % exc
        assert exc.attempts and all(a["reason"] for a in exc.attempts)
        return
    assert cert["deadlock_free"] and cert["virtual_channels"] <= vcs
    assert reference_verdict(fab, port, cert["scheme"], vcs if cert["scheme"] == "layers" else 1)
    hops, reached = R.hop_counts(fab, port)
    assert reached.all() and cert["max_hops"] == hops.max()


@pytest.mark.parametrize("dims", [[4, 4], [5, 3], [4, 4, 4]])
def test_torus_dimension_order_with_datelines_matches_the_reference_walk(dims):
    fab = R.Fabric.from_topology(T.generate("torus", dims))
    port, cert = P.plan(fab, "DimensionOrder")
    assert cert["scheme"] == "dateline" and cert["virtual_channels"] == 2 and cert["deadlock_free"]
    single = D.prove(fab, port, "single")
    assert not single["acyclic"] and "has a cycle through" in single["problems"][0]


def test_shortest_path_on_a_torus_is_layered_over_vcs_or_refused_naming_the_cycle():
    fab = R.Fabric.from_topology(T.generate("torus", [4, 4]))
    port, cert = P.plan(fab, "ShortestPath")
    assert cert["algorithm"] == "ShortestPath" and cert["scheme"] == "layers" and cert["virtual_channels"] >= 2
    assert cert["attempts"][0]["scheme"] == "single" and cert["attempts"][0]["cycle"]
    with pytest.raises(D.Refused, match=r"ShortestPath \(single\): the channel-dependency graph on 1 VC has a cycle "
                                        r"through 4 channels: node \d+ port \d vc 0 ->"):
        P.plan(fab, "ShortestPath", vcs=1)
    port, cert = P.plan(fab, "ShortestPath", fallback=["UpDown"], vcs=1)
    assert cert["algorithm"] == "UpDown" and cert["requested"] == "ShortestPath" and cert["virtual_channels"] == 1


def test_virtual_channel_budget_is_the_model_s():
    fab = R.Fabric.from_edges(3, [(0, 1), (1, 2)])
    with pytest.raises(R.RoutingError, match="virtual_channels must be between 1 and 4"):
        P.plan(fab, "UpDown", vcs=5)


def test_figure3_routes_every_block_by_its_own_algorithm_and_proves_the_whole():
    topo = T.load_td(str(FIGURE3))
    fab = R.Fabric.from_topology(topo)
    run = H.engine(topo)
    port, cert = P.plan(fab, H.PER_BLOCK, compute_fn=run)
    assert run.algorithms == {"top": "ShortestPath", "NAM1": "ShortestPath", "SUB": "ShortestPath",
                              "SDV": "DimensionOrder", "FS": "DimensionOrder"}
    assert cert["deadlock_free"] and cert["algorithm"] == "PerBlock"
    # inside the SDV hypercube: dimension order (coordinates of Figure 3: 1=(0,0,0) ... 8=(1,1,1))
    assert R.route(fab, port, 1, 8) == [1, 3, 4, 8]
    assert R.route(fab, port, 8, 1) == [8, 6, 5, 1]
    # inside FS: the mesh; between FS and SDV: SUB's shortest paths; NAM: the top level
    assert R.route(fab, port, 17, 19) == [17, 18, 19]
    assert len(R.route(fab, port, 19, 1)) - 1 == nx.shortest_path_length(
        nx.Graph((a, b) for a, pa, b, pb in topo.links if a != 129 and b != 129), 19, 1)
    assert R.route(fab, port, 129, 8)[0] == 129 and R.route(fab, port, 129, 8)[-1] == 8


def test_a_block_without_its_own_links_is_refused_by_name():
    topo = T.load_td(str(FIGURE3))
    topo.links = [link for link in topo.links if (link[0], link[2]) != (17, 18)]
    fab = R.Fabric.from_topology(topo)
    with pytest.raises(R.RoutingError, match="block FS is not connected by its own links"):
        P.plan(fab, H.PER_BLOCK, compute_fn=H.engine(topo))


def test_popcount_without_numpys_bitwise_count(monkeypatch):
    """Debian 12's numpy (1.24, what the EMP master runs with) has no bitwise_count: the byte table counts the same."""
    import numpy as np
    words = np.random.default_rng(7).integers(0, 2 ** 63, size=(9, 4), dtype=np.uint64)
    expected = sum(bin(int(w)).count("1") for w in words.ravel())
    assert D._popcount(words) == expected
    monkeypatch.delattr(np, "bitwise_count", raising=False)
    assert D._popcount(words) == expected
    assert D._popcount(words[:, 1:3]) == sum(bin(int(w)).count("1") for w in words[:, 1:3].ravel())


def _proofs(fab, port):
    schemes = ("single", "dateline", "layers") if fab.kind == "Torus" else ("single", "layers")
    return [D.prove(fab, port, scheme, vcs) for scheme in schemes for vcs in (2, 4)]


@pytest.mark.parametrize("kind, dims", [("Torus", [5, 4, 7]), ("Mesh", [6, 5, 5])])
def test_chunked_and_sparse_passes_give_the_same_tables_and_certificates(monkeypatch, kind, dims):
    """The engines and the prover work on chunks of destination words and switch to row-sparse steps when few
    nodes hold new states: one-word chunks with every step sparse, or every step dense, change nothing (the
    certificates include the named cycle of a refused table)."""
    fab = R.Fabric.from_topology(T.generate(kind, dims))
    assert fab.n > 128
    reference = {engine: R.compute(fab, engine) for engine in ("DimensionOrder", "ShortestPath", "UpDown")}
    expected = {engine: _proofs(fab, port) for engine, port in reference.items()}
    assert any(cert["cycle"] for certs in expected.values() for cert in certs) == (kind == "Torus")
    monkeypatch.setattr(R, "CHUNK_BYTES", 8)
    assert len(R.word_chunks(fab.n)) == R._words(fab.n) > 2
    for share in (0.0, 1.1):
        monkeypatch.setattr(D, "SPARSE_SHARE", share)
        for engine, port in reference.items():
            assert (R.compute(fab, engine) == port).all()
            assert _proofs(fab, port) == expected[engine]


def test_a_cyclic_table_is_refused_naming_its_cycle_across_chunks(monkeypatch):
    """A ring routed one way round: every channel waits for the next, on one VC; the proof names the whole cycle."""
    n = 70
    fab = R.Fabric.from_edges(n, [(i, (i + 1) % n) for i in range(n)])
    port = np.zeros((n, n), dtype=np.int8)  # port 0 of node i leads to i + 1 (from_edges numbers ports in order)
    port[0] = 0
    port[1:] = 1
    port[np.arange(n), np.arange(n)] = -1
    assert all(fab.nbr[i, port[i, (i + 2) % n]] == (i + 1) % n for i in range(n))
    monkeypatch.setattr(R, "CHUNK_BYTES", 8)
    cert = D.prove(fab, port, "single")
    assert cert["reachable"] and not cert["acyclic"]
    assert len(cert["cycle"]) == 13 and cert["cycle"][-1] == "… %d more" % (n - 12)
    assert "has a cycle through %d channels" % n in cert["problems"][0]
    # a route passes the far side of the ring (the one turn up*/down* forbids) at most once: two layers break it
    assert D.prove(fab, port, "layers", 2)["acyclic"] and not D.prove(fab, port, "layers", 1)["acyclic"]
