# SPDX-License-Identifier: GPL-3.0-or-later
"""The layer rule of module_utils/_layers.py: who wins, and which layer files validate.yml names."""
from __future__ import annotations

import pytest
import yaml

from ansible_collections.msa.hpc.plugins.module_utils._layers import layer_warnings, level_of, winner

MODULES = {"cm": {}, "esb": {}}


@pytest.mark.parametrize("kind, level, after, expected", [
    ("module", "all", True, "system"),        # a site-wide default never replaces a module's hardware
    ("module", "module", True, "layer"),      # the site's group_vars/<module>.yml does
    ("module", "role", True, "layer"),        # so does any later group file (validate warns)
    ("module", "module", False, "system"),    # an earlier layer's module file loses to the description
    ("node", "module", True, "system"),       # a node's own values only move from host_vars
    ("node", "host", True, "layer"),
    ("system", "all", False, "system"),       # the bundle's all.yml no longer replaces msa_modules
    ("system", "all", True, "layer"),
    ("system", "group", False, "layer"),      # any non-all group file beats every all file
    ("module", "extra", False, "layer"),
])
def test_winner_follows_the_documented_precedence(kind, level, after, expected):
    assert winner(kind, level, after) == expected


def test_groups_are_told_apart_by_level():
    assert [level_of(g, MODULES) for g in ("all", "esb", "msa_compute", "fabric_ib", "slurm")] == \
        ["all", "module", "role", "fabric", "group"]


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_warnings_name_file_and_variable_and_spare_the_intended_places(tmp_path):
    system, site = tmp_path / "system", tmp_path / "site"
    write(system / "system.msa.yml", "plugin: msa.hpc.system\n")
    write(system / "group_vars" / "all.yml", "msa_hardware: {sockets: 1}\n")      # the system's own: not judged
    write(site / "group_vars" / "all" / "main.yml", "msa_hardware: {sockets: 2}\nmsa_site: x\n")
    write(site / "group_vars" / "all" / "vault.yml", "$ANSIBLE_VAULT;1.1;AES256\n3132\n")
    write(site / "group_vars" / "esb.yml", "msa_hardware: {sockets: 4}\n")
    write(site / "group_vars" / "fabric_ib.yml", "msa_addresses: {ib: 10.0.0.1}\n")
    write(site / "host_vars" / "cm01.yml", "msa_addresses: {ib: 10.0.0.2}\nmsa_modules: {}\n")
    warnings = layer_warnings([str(system), str(site)], MODULES, yaml.safe_load)
    assert warnings == [
        "%s: msa_hardware set for all has no effect: the system description's module value wins over it; set it "
        "in group_vars/<module>.yml or host_vars/<node>.yml" % (site / "group_vars" / "all" / "main.yml"),
        "%s: msa_addresses set for fabric_ib has no effect: the system description's node value wins over it; "
        "set it in host_vars/<node>.yml" % (site / "group_vars" / "fabric_ib.yml"),
        "%s: msa_modules set for cm01 replaces what the system description says of it (a system value) for every "
        "node there; set it in the system's system.msa.yml" % (site / "host_vars" / "cm01.yml"),
    ]


def test_no_system_layer_means_nothing_to_judge(tmp_path):
    write(tmp_path / "group_vars" / "all.yml", "msa_hardware: {}\n")
    assert layer_warnings([str(tmp_path)], MODULES, yaml.safe_load) == []


def test_inline_vars_of_a_layers_inventory_file_are_judged_too(tmp_path):
    write(tmp_path / "system" / "system.msa.yml", "plugin: msa.hpc.system\n")
    hosts = tmp_path / "site" / "hosts.yml"
    write(hosts, "all:\n  vars: {msa_partition: big}\n  hosts:\n    cm01: {msa_hardware: {sockets: 2}}\n"
                 "  children:\n    esb:\n      vars: {msa_features: [x]}\n")
    warnings = layer_warnings([str(tmp_path / "system"), str(tmp_path / "site")], MODULES, yaml.safe_load)
    assert warnings == [
        "%s: msa_partition set for all has no effect: the system description's module value wins over it; set it "
        "in group_vars/<module>.yml or host_vars/<node>.yml" % hosts,
        "%s: msa_features set for esb has no effect: the system description's module value wins over it; set it "
        "in group_vars/<module>.yml or host_vars/<node>.yml" % hosts,
    ]    # cm01's inline msa_hardware is a node's correction, where it belongs
