# SPDX-License-Identifier: GPL-3.0-or-later
"""topology.yaml builder: block topologies cut from torus coordinates follow Slurm's BlockSizes and aggregation
rules, trees follow the switches, and every refusal names the field and the value."""
from __future__ import annotations

import itertools

import pytest
import yaml

from ansible_collections.msa.hpc.plugins.module_utils import _hostlist as HL
from ansible_collections.msa.hpc.plugins.module_utils.slurm import topology as T


def torus(prefix, dims, count=None):
    coords = [tuple(reversed(c)) for c in itertools.product(*(range(k) for k in reversed(dims)))]
    return {"%s%02d" % (prefix, i + 1): c for i, c in enumerate(coords[:count])}


def block(name, nodes, size=4, parts=None):
    return {"name": name, "partitions": parts or [name], "kind": "block", "nodes": nodes, "block_size": size}


def tree(name, nodes, switches=None, fabric_hosts=None):
    return {"name": name, "partitions": [name], "kind": "tree", "nodes": nodes, "switches": switches,
            "fabric_hosts": fabric_hosts}


def entries(result):
    return {e["topology"]: e for e in yaml.safe_load(result["text"])}


def box(coords):
    return [max(c[d] for c in coords) - min(c[d] for c in coords) + 1 for d in range(len(coords[0]))]


def test_mini_shape_esb_and_dam_blocks_cm_tree_and_a_flat_default():
    # mini: ESB ids 1-4 and DAM ids 5-6 on the 5x2 torus (x fastest), two CM nodes on InfiniBand
    coords = torus("n", [5, 2])
    esb = {"esb%02d" % i: coords["n%02d" % i] for i in range(1, 5)}
    dam = {"dam01": coords["n05"], "dam02": coords["n06"]}
    result = T.build([block("esb", esb, 2), block("dam", dam, 2), tree("cm", ["cm01", "cm02"])])
    got = entries(result)
    assert list(got) == ["flat", "esb", "dam", "cm"]
    assert got["flat"] == {"topology": "flat", "cluster_default": True, "flat": True}
    assert got["esb"]["block"] == {"block_sizes": [2, 4], "blocks": [
        {"block": "esb_b0", "nodes": "esb[01-02]"}, {"block": "esb_b1", "nodes": "esb[03-04]"}]}
    assert got["dam"]["block"] == {"block_sizes": [2], "blocks": [{"block": "dam_b0", "nodes": "dam[01-02]"}]}
    assert got["cm"]["tree"] == {"switches": [{"switch": "cm_sw", "nodes": "cm[01-02]"}]}
    assert result["partitions"] == {"cm": "cm", "dam": "dam", "esb": "esb"}
    # Slurm wants `topology` first in each entry
    assert [line.strip() for line in result["text"].splitlines() if line.startswith("- ")] == [
        "- topology: flat", "- topology: esb", "- topology: dam", "- topology: cm"]


def test_64_nodes_cut_into_full_blocks_whose_aligned_runs_are_compact_boxes():
    nodes = torus("esb", [4, 4, 4])
    blocks, sizes = T.block_cut(nodes, 4)
    assert sizes == [4, 8, 16, 32, 64]
    assert [len(b) for b in blocks] == [4] * 16
    assert sorted(n for b in blocks for n in b) == sorted(nodes)
    # Slurm aggregates each aligned run of 2**k consecutive blocks: every run must be a box of 2**k * 4 nodes
    for level in range(5):
        run = 2 ** level
        for start in range(0, 16, run):
            members = [nodes[n] for b in blocks[start:start + run] for n in b]
            extent = box(members)
            assert extent[0] * extent[1] * extent[2] == len(members) == 4 * run, (level, start, extent)


def test_block_sizes_follow_slurms_rule_and_only_the_last_block_is_short():
    nodes = torus("esb", [5, 4, 2], count=23)
    blocks, sizes = T.block_cut(nodes, 4)
    base = sizes[0]
    assert base == 4 and all(s % base == 0 and (s // base) & (s // base - 1) == 0 for s in sizes)
    assert sizes[-1] >= len(nodes) > sizes[-2]
    assert [len(b) for b in blocks[:-1]] == [4] * (len(blocks) - 1) and 0 < len(blocks[-1]) <= 4
    assert len(blocks) == 6


def test_output_is_deterministic_whatever_the_input_order():
    nodes = torus("esb", [4, 4, 2])
    shuffled = dict(sorted(nodes.items(), reverse=True))
    assert T.build([block("esb", nodes)])["text"] == T.build([block("esb", shuffled)])["text"]


def test_two_partitions_of_one_module_share_its_topology():
    result = T.build([block("esb", torus("esb", [2, 2]), 2, parts=["esb", "esb-long"])])
    assert result["partitions"] == {"esb": "esb", "esb-long": "esb"}


def test_tree_from_the_fabrics_switches_keeps_only_the_partitions_nodes():
    switches = {"ib-leaf1": {"nodes": "cm[01-02],gw01"}, "ib-leaf2": {"nodes": ["cm03", "cm04"]},
                "ib-leaf3": {"nodes": "ipgw01"}, "ib-spine": {"switches": "ib-leaf[1-3]"}}
    hosts = ["cm01", "cm02", "cm03", "cm04", "gw01", "ipgw01"]
    got = entries(T.build([tree("cm", ["cm01", "cm02", "cm03", "cm04"], switches, hosts)]))["cm"]["tree"]
    assert got["switches"] == [{"switch": "ib-spine", "children": "ib-leaf1,ib-leaf2"},
                               {"switch": "ib-leaf2", "nodes": "cm[03-04]"},
                               {"switch": "ib-leaf1", "nodes": "cm[01-02]"}]


@pytest.mark.parametrize("group, message", [
    (block("esb", {"esb01": (0, 0)}, 0), "topologies.esb.block_size: 0 is not a positive number of nodes"),
    (block("esb", {"esb01": (0, 0)}, True), "topologies.esb.block_size: True is not a positive number"),
    (block("esb", {}), "topologies.esb.nodes: {} is not a non-empty mapping"),
    (block("esb", {"esb01": (0, -1)}), "topologies.esb.nodes.esb01: (0, -1) is not a coordinate"),
    (block("esb", {"esb01": "0,1"}), "topologies.esb.nodes.esb01: '0,1' is not a coordinate"),
    (block("esb", {"n%d" % i: (i,) for i in range(70000)}, 1),
     "topologies.esb.block_size: 1 gives 17 block levels for 70000 nodes; Slurm allows 15"),
    (block("bad name", {"esb01": (0,)}), "topologies.bad name.name: 'bad name' is not a name"),
    (block("flat", {"esb01": (0,)}), "topologies.flat.name: 'flat' is defined twice"),
    (dict(block("esb", {"esb01": (0,)}), partitions=[]), "topologies.esb.partitions: [] names no partition"),
    (dict(block("esb", {"esb01": (0,)}), kind="torus"), "topologies.esb.kind: 'torus' is not block or tree"),
    (tree("cm", []), "topologies.cm.nodes: [] holds no node"),
    (tree("cm", ["cm01"], ["sw1"]), "topologies.cm.switches: ['sw1'] is not a mapping"),
    (tree("cm", ["cm01"], {"sw1": {}}), "topologies.cm.switches.sw1: {} names neither nodes nor switches"),
    (tree("cm", ["cm01"], {"sw1": {"nodes": "cm01", "switches": "sw2"}}), "names both nodes and switches"),
    (tree("cm", ["cm01"], {"s" * 65: {"nodes": "cm01"}}), "is longer than Slurm's 64 characters"),
    (tree("cm", ["cm01"], {"sw1": {"nodes": "cm[01"}}), "topologies.cm.switches.sw1: hostlist"),
    (tree("cm", ["cm01"], {"sw1": {"nodes": "cm01,xx09"}}), "topologies.cm.switches.sw1.nodes: 'xx09' is not a host on"),
    (tree("cm", ["cm01", "cm02"], {"sw1": {"nodes": "cm01"}}),
     "topologies.cm.switches: node cm02 of partition cm is under no switch"),
    (tree("cm", ["cm01"], {"sw1": {"nodes": "cm01"}, "sw2": {"nodes": "cm01"}}),
     "topologies.cm.switches.sw2.nodes: 'cm01' is already under switch sw1"),
    (tree("cm", ["cm01"], {"sw1": {"nodes": "cm01"}, "top": {"switches": "sw9"}}),
     "topologies.cm.switches.top.switches: sw9 is not a switch of the fabric"),
    (tree("cm", ["cm01", "cm02"], {"sw1": {"nodes": "cm01"}, "sw2": {"nodes": "cm02"}}),
     "the switches form 2 trees (tops: sw1, sw2)"),
    (tree("cm", ["cm01"], {"sw1": {"nodes": "cm01"}, "a": {"switches": "sw1"}, "b": {"switches": "sw1"}}),
     "topologies.cm.switches.b: switch sw1 is already under a"),
    (tree("cm", ["cm01"], {"sw1": {"nodes": "cm01"}, "top": {"switches": "sw1"}, "a": {"switches": "b"},
                           "b": {"switches": "a"}}), "a, b not under the top switch top (they loop)"),
])
def test_refusals_name_the_field_and_the_value(group, message):
    with pytest.raises(T.TopologyError) as err:
        T.build([group])
    assert message in str(err.value)


def test_a_partition_in_two_topologies_is_refused():
    with pytest.raises(T.TopologyError, match=r"topologies.dam.partitions: 'esb' already has topology esb"):
        T.build([block("esb", {"esb01": (0,)}), dict(block("dam", {"dam01": (1,)}), partitions=["esb"])])


def test_every_problem_is_reported_at_once():
    with pytest.raises(T.TopologyError) as err:
        T.build([block("esb", {}, 0), tree("cm", [])])
    assert len(err.value.problems) == 2


def test_hostlists_in_the_yaml_expand_to_exactly_the_nodes():
    nodes = torus("esb", [5, 4, 2], count=23)
    got = entries(T.build([block("esb", nodes)]))["esb"]["block"]["blocks"]
    assert sorted(n for b in got for n in HL.expand(b["nodes"])) == sorted(nodes)


def test_release_features_switch_on_where_slurm_has_them():
    from ansible_collections.msa.hpc.plugins.module_utils.slurm import releases as R
    assert [r for r in R.SUPPORTED if R.has_feature(r, "topology_yaml")] == ["25.05", "25.11", "26.05"]
    assert [r for r in R.SUPPORTED if R.has_feature(r, "metrics_auth")] == ["26.05"]
    assert R.features("26.05.5-1") == ["metrics_auth", "topology_yaml"] and R.features("24.11.5") == []
    with pytest.raises(R.ReleaseError, match=r"slurm_release=23.11: Slurm 23.11 is not a release"):
        R.has_feature("23.11", "topology_yaml")
    with pytest.raises(ValueError, match=r"feature 'torus' is not one of metrics_auth, topology_yaml"):
        R.has_feature("26.05", "torus")


def test_names_of_str_subclasses_as_ansible_hands_them_are_written_as_plain_yaml():
    class Tagged(str):
        """Ansible 2.19 hands inventory strings over as str subclasses, which yaml.safe_dump cannot represent."""

    result = T.build([block(Tagged("esb"), {Tagged("esb01"): (0, 0), Tagged("esb02"): (1, 0)}, 2,
                            parts=[Tagged("esb")])])
    assert "!!" not in result["text"] and entries(result)["esb"]["block"]["blocks"][0]["nodes"] == "esb[01-02]"
    assert list(result["partitions"])[0].__class__ is str   # not a subclass
