# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

"""Tests of the EXTOLL topology model: .td parser and writer, YAML form, generator, comparison."""

import pathlib

import pytest

from ansible_collections.msa.hpc.plugins.module_utils.extoll import topology as T

FIXTURES = pathlib.Path(__file__).parent / "fixtures" / "td"
BAD = sorted((FIXTURES / "bad").glob("*.td"))


@pytest.fixture()
def figure3():
    return T.load_td(str(FIXTURES / "figure3.td"))


def test_figure3_parses_into_inventory_blocks_and_links(figure3):
    assert sorted(figure3.nodes) == [1, 2, 3, 4, 5, 6, 7, 8, 17, 18, 19, 129]
    assert figure3.nodes[129].marker == "NAM1"
    assert figure3.nodes[129].type == "NAM"
    assert figure3.nodes[1].type == "Tourmalet"
    assert figure3.root == "top"
    assert figure3.routing == "ShortestPath"
    assert figure3.blocks["SDV"].type == "Hypercube"
    assert figure3.blocks["SDV"].sizes() == (2, 2, 2)
    assert figure3.blocks["FS"].sizes() == (3,)
    assert len(figure3.links) == 19
    assert figure3.regular() is None  # hierarchical: no fabric-wide coordinates
    assert figure3.leaf_coordinates()[8] == ("SDV", (1, 1, 1))


def test_blocks_may_reference_topologies_defined_later(figure3):
    text = (FIXTURES / "figure3.td").read_text()
    head, rest = text.split("topology SUB", 1)
    sub, rest = rest.split("topologyend", 1)
    reordered = head + rest + "\ntopology SUB" + sub + "topologyend\n"
    again = T.parse_td(reordered, "reordered.td")
    assert again.root == "top"
    assert again.blocks["top"].members == [((0,), "NAM1"), ((1,), "SUB")]
    assert again.as_dict()["links"] == figure3.as_dict()["links"]


@pytest.mark.parametrize("path", BAD, ids=[p.stem for p in BAD])
def test_bad_td_files_fail_with_file_line_and_reason(path):
    expected = path.read_text().splitlines()[0]
    assert expected.startswith("# expect: ")
    line, reason = expected[len("# expect: "):].split(": ", 1)
    with pytest.raises(T.TopologyError) as info:
        T.load_td(str(path))
    err = info.value
    assert (err.file, err.line) == (str(path), int(line))
    assert err.reason.startswith(reason)
    assert str(err) == "%s:%s: %s" % (path, line, err.reason)


def test_missing_file_is_reported_as_topology_error(tmp_path):
    with pytest.raises(T.TopologyError, match="cannot read topology file"):
        T.load_td(str(tmp_path / "nope.td"))


@pytest.mark.parametrize("guid,kind", [(0xF00001, "NAM"), (0xE00001, "GCE"), (0x649, "Tourmalet"),
                                       (0x0FFFFF, "Tourmalet"), (0xA00000, "unknown(0xa)")])
def test_node_type_comes_from_guid_bits_23_to_20(guid, kind):
    assert T.guid_type(guid) == kind


def test_td_writer_round_trips_figure3(figure3):
    again = T.parse_td(T.to_td(figure3), "written.td")
    assert again.as_dict() == figure3.as_dict()


def test_dict_form_round_trips_and_accepts_link_variants(figure3):
    data = figure3.as_dict()
    assert T.from_dict(data).as_dict() == data
    data["links"][0] = [1, 0, 0, 2]
    data["links"][1] = {"a": 1, "port_a": 1, "b": 3, "port_b": 1}
    assert T.from_dict(data).as_dict() == figure3.as_dict()


def test_dict_form_errors_name_the_key_path(figure3):
    data = figure3.as_dict()
    data["topologies"][1]["members"][2] = {"coord": [1, 0], "node": 3}
    with pytest.raises(T.TopologyError) as info:
        T.from_dict(data, "inventory.yml")
    assert str(info.value).startswith("inventory.yml:topologies[1].members[2]: coordinate (1,0) has 2 values")
    data = figure3.as_dict()
    data["links"].append("1 0 <-> 3 17")
    with pytest.raises(T.TopologyError, match=r"links\[19\]: port 0 of node 1 is used twice"):
        T.from_dict(data)


def test_dict_form_can_ask_for_a_generated_torus():
    topo = T.from_dict({"generate": {"type": "Torus", "dims": [3, 2]}})
    assert len(topo.nodes) == 6 and topo.regular()[0] == "Torus"


@pytest.mark.parametrize("kind,dims,links", [("torus", [4, 3], 24), ("mesh", [4, 3], 17), ("hypercube", 3, 12),
                                             ("torus", [3, 2], 12), ("torus", [5, 1], 5)])
def test_generator_numbers_ports_2d_minus_and_2d_plus_1_plus(kind, dims, links):
    topo = T.generate(kind, dims)
    assert len(topo.links) == links
    block_type, sizes, coords = topo.regular()
    for a, pa, b, pb in topo.links:
        d = pa // 2
        assert pb // 2 == d and pa % 2 == 1 and pb % 2 == 0  # a's plus port meets b's minus port
        step = (coords[b][d] - coords[a][d]) % sizes[d]
        assert step == 1
    T.validate(topo)
    assert T.parse_td(T.to_td(topo)).as_dict() == topo.as_dict()


def test_comparison_reports_missing_and_unexpected_nodes_and_links(figure3):
    nodes = [{"guid": n.guid, "id": n.id} for n in figure3.nodes.values() if n.id != 19]
    nodes.append({"guid": 0x777, "id": 200})
    by_id = {n.id: n.guid for n in figure3.nodes.values()}
    links = [(by_id[a], pa, by_id[b], pb) for a, pa, b, pb in figure3.links if (a, b) != (1, 2)]
    links.append((by_id[1], 6, 0x777, 0))
    found = T.from_discovery(nodes, links)
    report = T.compare(figure3, found)
    assert report["missing_nodes"] == [{"id": 19, "guid": "0x615"}]
    assert report["unexpected_nodes"] == [{"id": 200, "guid": "0x777"}]
    assert "1 0 <-> 0 2" in report["missing_links"]
    assert "18 2 <-> 0 19" in report["missing_links"] and "8 5 <-> 1 19" in report["missing_links"]
    assert report["unexpected_links"] == ["1 6 <-> 0 200"]
    assert not T.matches(report)
    same = T.from_discovery([{"guid": n.guid, "id": n.id} for n in figure3.nodes.values()],
                            [(by_id[b], pb, by_id[a], pa) for a, pa, b, pb in figure3.links])
    assert T.matches(T.compare(figure3, same))
