# SPDX-License-Identifier: GPL-3.0-or-later
"""Slurm topology.conf from the EXTOLL fabric: switches are .td blocks and coordinate bisections."""
from __future__ import annotations

import itertools
import pathlib
import re

import pytest

from ansible_collections.msa.hpc.plugins.module_utils import _hostlist as HL
from ansible_collections.msa.hpc.plugins.module_utils.extoll import slurm_topology as ST
from ansible_collections.msa.hpc.plugins.module_utils.extoll import topology as T

FIGURE3 = pathlib.Path(__file__).parent / "fixtures" / "td" / "figure3.td"


def parse(text):
    switches = {}
    for line in text.splitlines():
        if line.startswith("#") or not line:
            continue
        m = re.match(r"^SwitchName=(\S+) (Nodes|Switches)=(\S+)$", line)
        assert m, line
        name, kind, value = m.groups()
        assert name not in switches, "switch %s twice" % name
        switches[name] = (kind, HL.expand(value) if kind == "Nodes" else value.split(","))
    return switches


def leaves_of(switches, name):
    kind, value = switches[name]
    if kind == "Nodes":
        return set(value)
    return set().union(*(leaves_of(switches, child) for child in value))


def test_torus_leaf_switches_hold_neighbouring_nodes_and_the_top_holds_all():
    topo = T.generate("torus", [4, 4, 4])
    coords = {nid: c for c, nid in topo.blocks["top"].members}
    hosts = {nid: "esb%03d" % nid for nid in topo.nodes}
    switches = parse(ST.tree(topo, hosts, leaf_size=8))
    top = [n for n in switches if not any(n in v for k, v in switches.values() if k == "Switches")]
    assert top == ["extoll_top"] and leaves_of(switches, "extoll_top") == set(hosts.values())
    leaves = [v for k, v in switches.values() if k == "Nodes"]
    assert len(leaves) == 8 and all(len(v) == 8 for v in leaves)
    by_host = {h: coords[nid] for nid, h in hosts.items()}
    for leaf in leaves:  # a 2x2x2 cube: every pair within one hop per dimension
        for a, b in itertools.combinations(leaf, 2):
            assert all(abs(x - y) <= 1 for x, y in zip(by_host[a], by_host[b]))


def test_non_slurm_devices_are_left_out_and_other_nodes_get_their_own_switch():
    topo = T.generate("torus", [5, 2])
    hosts = {nid: "n%02d" % nid for nid in topo.nodes if nid not in (9, 10)}
    switches = parse(ST.tree(topo, hosts, ["cm01", "cm02"]))
    assert switches["extoll_all"] == ("Switches", ["extoll_top", "extoll_none"])
    assert switches["extoll_none"] == ("Nodes", ["cm01", "cm02"])
    assert leaves_of(switches, "extoll_top") == set(hosts.values())


def test_figure3_blocks_become_switches():
    topo = T.load_td(str(FIGURE3))
    switches = parse(ST.tree(topo, {nid: "n%d" % nid for nid in topo.nodes if nid != 129}, leaf_size=4))
    # NAM1 has no Slurm node: the top level collapses into SUB
    assert switches["extoll_SUB"] == ("Switches", ["extoll_SDV", "extoll_FS"])
    assert switches["extoll_FS"] == ("Nodes", ["n17", "n18", "n19"])
    assert leaves_of(switches, "extoll_SDV") == {"n%d" % i for i in range(1, 9)}
    with pytest.raises(ValueError, match="leaf_size must be at least 1"):
        ST.tree(topo, {}, leaf_size=0)
