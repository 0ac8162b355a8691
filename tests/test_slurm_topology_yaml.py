# SPDX-License-Identifier: GPL-3.0-or-later
"""Slurm 25.05+ topology.yaml from the real inventories (msa.hpc.slurm_topology through Ansible), the partitions'
Topology= in nodes.conf, and the InfiniBand switches a system description may give."""
from __future__ import annotations

import copy
import os
import subprocess

import pytest
import yaml

from ansible_collections.msa.hpc.plugins.module_utils import _hostlist as HL
from ansible_collections.msa.hpc.plugins.module_utils._slurm_conf import render as render_conf
from ansible_collections.msa.hpc.plugins.module_utils._system import SystemError_, expand
from tests.helpers import BIN, BUNDLE, render

PARTITIONS = "{'cm': {'module': 'cm'}, 'esb': {'module': 'esb'}, 'dam': {'module': 'dam'}}"
EXPRESSION = (PARTITIONS + " | msa.hpc.slurm_topology(msa_modules, msa_fabrics, groups, hostvars, "
              "groups['slurm_compute'], 2)")


@pytest.fixture(scope="module")
def mini():
    return render(EXPRESSION, "mini")


def test_mini_gives_esb_and_dam_blocks_on_the_torus_and_the_cm_one_switch(mini):
    topologies = {t["topology"]: t for t in yaml.safe_load(mini["text"])}
    assert list(topologies) == ["flat", "cm", "dam", "esb"]
    assert topologies["flat"]["cluster_default"] is True
    assert topologies["cm"]["tree"] == {"switches": [{"switch": "cm_sw", "nodes": "cm[01-02]"}]}
    # esb01-04 hold torus ids 1-4: (0,0) (1,0) (2,0) (3,0) of the 5x2 torus; base blocks of 2 neighbours each
    assert topologies["esb"]["block"] == {"block_sizes": [2, 4], "blocks": [
        {"block": "esb_b0", "nodes": "esb[01-02]"}, {"block": "esb_b1", "nodes": "esb[03-04]"}]}
    assert topologies["dam"]["block"]["blocks"] == [{"block": "dam_b0", "nodes": "dam[01-02]"}]
    assert mini["partitions"] == {"cm": "cm", "dam": "dam", "esb": "esb"}


def test_the_partitions_name_their_topology_in_nodes_conf(mini):
    nodes = [{"name": n, "partition": n.rstrip("0123456789"), "real_memory": 1000}
             for n in ("cm01", "cm02", "esb01", "dam01")]
    lines = render_conf({"nodes": nodes, "partitions": {"cm": {}, "esb": {}, "dam": {}},
                         "topologies": mini["partitions"]})["partition_lines"]
    assert sorted(line.split()[0] + " " + line.split()[-2] for line in lines) == [
        "PartitionName=cm Topology=cm", "PartitionName=dam Topology=dam", "PartitionName=esb Topology=esb"]
    without = render_conf({"nodes": nodes, "partitions": {"cm": {}, "esb": {}, "dam": {}}})["partition_lines"]
    assert not [line for line in without if "Topology=" in line]


def test_scale64_blocks_cover_every_booster_node_once_in_full_base_blocks():
    got = render(EXPRESSION.replace(", 2)", ", 4)"), "scale64")
    topologies = {t["topology"]: t for t in yaml.safe_load(got["text"])}
    blocks = topologies["esb"]["block"]["blocks"]
    members = [HL.expand(b["nodes"]) for b in blocks]
    assert sorted(n for m in members for n in m) == ["esb%02d" % i for i in range(1, 24)]
    assert [len(m) for m in members] == [4, 4, 4, 4, 4, 3]
    assert topologies["esb"]["block"]["block_sizes"] == [4, 8, 16, 32]
    assert HL.expand(topologies["cm"]["tree"]["switches"][0]["nodes"]) == ["cm%02d" % i for i in range(1, 14)]


def test_a_system_description_may_give_infiniband_switches_and_nothing_else_may():
    description = yaml.safe_load((BUNDLE / "inventories/systems/mini/system.msa.yml").read_text())
    with_switches = copy.deepcopy(description)
    with_switches["fabrics"]["ib"]["switches"] = {"leaf1": {"nodes": "cm01,gw[01-02]"}, "leaf2": {"nodes": "cm02"},
                                                  "spine": {"switches": "leaf[1-2]"}}
    assert expand(with_switches)["fabrics"]["ib"]["switches"]["spine"] == {"switches": "leaf[1-2]"}
    wrong = copy.deepcopy(description)
    wrong["fabrics"]["mgmt"]["switches"] = {"sw": {"nodes": "mgmt01"}}
    with pytest.raises(SystemError_, match=r"fabrics.mgmt.switches: only an infiniband fabric has switches"):
        expand(wrong)


ROLE = BUNDLE / "collections/ansible_collections/msa/hpc/roles/slurm"
RENDER_PLAY = """
- hosts: localhost
  gather_facts: false
  vars_files: [%s]
  tasks:
    - ansible.builtin.copy:
        dest: "%s/{{ item }}"
        content: "{{ lookup('ansible.builtin.template', '%s/templates/' ~ item ~ '.j2') }}"
        mode: "0644"
      loop: [topology.yaml, nodes.conf, slurm.conf]
"""


@pytest.mark.parametrize("release", ["24.11", "26.05"])
def test_the_roles_templates_render_through_ansible_for_each_release(tmp_path, release):
    """Through ansible-playbook (Ansible hands inventory strings over as tagged str subclasses, which
    yaml.safe_dump once refused), the role's defaults at play level and mini's inventory."""
    play = tmp_path / "render.yml"
    play.write_text(RENDER_PLAY % (ROLE / "defaults/main.yml", tmp_path, ROLE))
    env = dict(os.environ, ANSIBLE_CONFIG=str(BUNDLE / "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    run = subprocess.run([str(BIN / "ansible-playbook"), "-i", "common.yml", "-i", "inventories/systems/mini",
                          "-i", "inventories/sites/example", str(play), "-e", "slurm_release=" + release,
                          "-e", "msa_state_dir=" + str(tmp_path), "-e", "slurm_topology_block_size=2"],
                         capture_output=True, text=True, env=env, cwd=BUNDLE, check=False)
    assert run.returncode == 0, run.stdout[-2000:]
    nodes, conf = (tmp_path / "nodes.conf").read_text(), (tmp_path / "slurm.conf").read_text()
    partitions = [line for line in nodes.splitlines() if line.startswith("PartitionName=")]
    if release == "24.11":
        # (configure.yml writes no topology.yaml there: topology.conf and TopologyPlugin as before)
        assert "TopologyPlugin=topology/tree" in conf.splitlines() and "Metrics" not in conf
        assert partitions and not [line for line in partitions if "Topology=" in line]
        return
    topologies = {t["topology"]: t for t in yaml.safe_load((tmp_path / "topology.yaml").read_text())}
    assert [b["nodes"] for b in topologies["esb"]["block"]["blocks"]] == ["esb[01-02]", "esb[03-04]"]
    assert sorted(line.split()[0] + " " + next(w for w in line.split() if w.startswith("Topology="))
                  for line in partitions) == ["PartitionName=cm Topology=cm", "PartitionName=dam Topology=dam",
                                              "PartitionName=esb Topology=esb"]
    assert "TopologyPlugin" not in conf and "MetricsType=metrics/openmetrics" in conf.splitlines()
