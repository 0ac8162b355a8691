# SPDX-License-Identifier: GPL-3.0-or-later
"""The layered inventory: expansion of system descriptions, documented precedence, validation failures."""
from __future__ import annotations

import copy
import json
import os
import subprocess

import pytest
import yaml

from ansible_collections.msa.hpc.plugins.module_utils._system import SystemError_, expand, validate_hosts
from tests.helpers import BIN, BUNDLE, ansible_inventory, render

MINI = BUNDLE / "inventories" / "systems" / "mini" / "system.msa.yml"
ENV = dict(os.environ, ANSIBLE_CONFIG=str(BUNDLE / "ansible.cfg"), ANSIBLE_NOCOLOR="1")


def mini():
    return yaml.safe_load(MINI.read_text())


def inventory_host(host, *layers):
    args = ["--host", host]
    for layer in layers:
        args += ["-i", layer]
    return ansible_inventory(*args)


def test_mini_expands_to_every_module_with_fabric_addresses():
    model = expand(mini())
    assert len(model["hosts"]) == 18
    # two storage nodes (each holds a replica of the shared file systems); the management nodes on storage too
    assert model["groups"]["msa_storage"] == ["sssm01", "sssm02"]
    assert model["hosts"]["mgmt01"]["msa_addresses"] == {"mgmt": "10.42.0.11", "storage": "10.45.0.11"}
    # two management nodes: both Slurm controllers, the first alone runs the services there is one of
    assert model["groups"]["msa_management"] == ["mgmt01", "mgmt02"]
    assert model["groups"]["msa_management_primary"] == ["mgmt01"]
    assert model["groups"]["esb"] == ["esb01", "esb02", "esb03", "esb04"]
    assert model["hosts"]["cm01"]["msa_addresses"] == {"mgmt": "10.42.0.21", "ib": "10.43.0.21"}
    assert model["hosts"]["gw02"]["msa_addresses"]["extoll"] == "10.44.0.82"
    assert model["hosts"]["gw01"]["ansible_host"] == "10.42.0.81"
    assert set(model["groups"]["fabric_ib"]) == {"cm01", "cm02", "gw01", "gw02", "ipgw01", "ipgw02"}


def test_extoll_guids_carry_the_device_type_in_bits_23_to_20():
    hosts = expand(mini())["hosts"]
    assert (int(hosts["nam01"]["msa_extoll_guid"], 16) >> 20) & 0xF == 0xF
    assert (int(hosts["gce01"]["msa_extoll_guid"], 16) >> 20) & 0xF == 0xE
    assert (int(hosts["esb01"]["msa_extoll_guid"], 16) >> 20) & 0xF == 0x0
    assert "msa_extoll_guid" not in hosts["cm01"]


@pytest.mark.parametrize("change, expected", [
    (lambda d: d["fabrics"].__setitem__("ib", {"kind": "myrinet", "cidr": "10.43.0.0/24"}),
     "fabrics.ib.kind: 'myrinet' is not one of"),
    (lambda d: d["modules"]["cm"]["fabrics"].append("omnipath"), "modules.cm.fabrics: unknown fabric 'omnipath'"),
    (lambda d: d["modules"]["esb"].__setitem__("names", ["cm01"]), "node cm01 is already in module cm"),
    (lambda d: d["modules"]["cm"].__setitem__("offset", 300), "outside the fabric's range 10.42.0.0/24"),
    (lambda d: d["modules"]["esb"].__setitem__("offset", 21), "host esb01: msa_addresses.mgmt: 10.42.0.22 is already used by cm02"),
    (lambda d: d["modules"]["gw"].__setitem__("fabrics", ["mgmt", "ib"]),
     "host gw01: msa_addresses: a mpi_gateway needs an address on a extoll fabric"),
    (lambda d: d["modules"]["cm"].__setitem__("count", 0), "modules.cm.count: 0 is below the minimum 1"),
    (lambda d: d["modules"]["cm"]["hardware"].__setitem__("memory_mb", "lots"),
     "modules.cm.hardware.memory_mb: 'lots' is not an integer"),
])
def test_bad_descriptions_fail_naming_the_field_and_value(change, expected):
    description = copy.deepcopy(mini())
    change(description)
    with pytest.raises(SystemError_) as err:
        expand(description)
    assert any(expected in p for p in err.value.problems), err.value.problems


def test_a_node_listed_in_two_module_groups_is_reported():
    model = expand(mini())
    groups = {"cm": ["cm01", "cm02"], "esb": ["esb01", "cm02"]}
    problems = validate_hosts(model["hosts"], model["fabrics"], model["modules"], module_groups=groups)
    assert "host cm02: is in two modules, cm and esb" in problems


def test_site_layer_wins_over_system_layer_as_documented():
    fixtures = BUNDLE / "tests" / "fixtures" / "precedence"
    hv = inventory_host("cm01", BUNDLE / "common.yml", fixtures / "system", fixtures / "site")
    # bundle defaults (group_vars/ beside common.yml) are the lowest layer
    assert hv["msa_timezone"] == "Etc/UTC"
    assert hv["probe_all_in_system_only"] == "system"
    # same group in both layers: the site (later -i) wins
    assert hv["probe_all_overridden_by_site"] == "site"
    assert hv["probe_cm_overridden_by_site_cm"] == "site-cm"
    # a site's group_vars/<module> replaces what the system description says of the module's hardware
    assert hv["msa_hardware"]["cores_per_socket"] == 8
    # Ansible's group depth comes first: a system's module group beats the site's `all`
    # (docs/inventories.md: to override a module value, a site uses group_vars/<module>)
    assert hv["probe_system_cm_vs_site_all"] == "system-cm"


def test_example_site_overrides_bundle_defaults():
    hv = inventory_host("esb01", BUNDLE / "common.yml", BUNDLE / "inventories/systems/mini",
                        BUNDLE / "inventories/sites/example")
    assert hv["msa_timezone"] == "Europe/Berlin"
    assert hv["msa_module"] == "esb"
    assert hv["slurm_config_overrides"] is True


def test_inventory_graph_shows_module_groups():
    out = subprocess.run([str(BIN / "ansible-inventory"), "--graph"], check=True, capture_output=True,
                         text=True, env=ENV, cwd=BUNDLE).stdout
    for group in ("@cm:", "@esb:", "@dam:", "@msa_mpi_gateway:", "@slurm_compute:", "@fabric_extoll:"):
        assert group in out


BAD_SITES = {
    "address_outside_range": ({"cm01": {"msa_addresses": {"mgmt": "10.42.0.21", "ib": "10.99.0.5"}}},
                              "host cm01: msa_addresses.ib: 10.99.0.5 is outside the fabric's range 10.43.0.0/24"),
    "duplicate_address": ({"cm02": {"msa_addresses": {"mgmt": "10.42.0.21", "ib": "10.43.0.22"}}},
                          "host cm02: msa_addresses.mgmt: 10.42.0.21 is already used by cm01"),
    "unknown_fabric": ({"esb01": {"msa_addresses": {"mgmt": "10.42.0.41", "tofu": "10.46.0.41"}}},
                       "host esb01: msa_addresses.tofu: unknown fabric 'tofu'"),
    "gateway_missing_fabric": ({"gw01": {"msa_addresses": {"mgmt": "10.42.0.81", "ib": "10.43.0.81"}}},
                               "host gw01: msa_addresses: a mpi_gateway needs an address on a extoll fabric"),
}


@pytest.mark.parametrize("case", sorted(BAD_SITES))
def test_site_playbook_stops_at_validation_before_touching_any_node(case, tmp_path):
    host_vars, expected = BAD_SITES[case]
    (tmp_path / "host_vars").mkdir()
    (tmp_path / "hosts.yml").write_text("all: {}\n")
    for host, values in host_vars.items():
        (tmp_path / "host_vars" / (host + ".yml")).write_text(yaml.safe_dump(values))
    run = subprocess.run([str(BIN / "ansible-playbook"), "playbooks/site.yml", "-i", "common.yml",
                          "-i", "inventories/systems/mini", "-i", str(tmp_path)],
                         capture_output=True, text=True, env=ENV, cwd=BUNDLE)
    assert run.returncode != 0
    assert expected in run.stdout
    assert "PLAY [Base configuration of every node]" not in run.stdout


def test_node_in_two_modules_through_a_site_group_fails_validation(tmp_path):
    (tmp_path / "hosts.yml").write_text("all:\n  children:\n    esb:\n      hosts:\n        cm02: {}\n")
    run = subprocess.run([str(BIN / "ansible-playbook"), "playbooks/validate.yml", "-i", "common.yml",
                          "-i", "inventories/systems/mini", "-i", str(tmp_path)],
                         capture_output=True, text=True, env=ENV, cwd=BUNDLE)
    assert run.returncode != 0
    assert "host cm02: is in two modules, cm and esb" in run.stdout


def test_broken_system_description_fails_the_inventory_parse(tmp_path):
    description = mini()
    description["modules"]["cm"]["fabrics"] = ["mgmt", "omnipath"]
    (tmp_path / "bad.msa.yml").write_text(yaml.safe_dump(description))
    run = subprocess.run([str(BIN / "ansible-inventory"), "--list", "-i", str(tmp_path / "bad.msa.yml")],
                         capture_output=True, text=True, env=ENV, cwd=BUNDLE)
    assert run.returncode != 0
    assert "modules.cm.fabrics: unknown fabric 'omnipath'" in run.stderr


def test_deep_est_sized_system_generates_slurm_and_fabric_configuration():
    hv = inventory_host("esb75", BUNDLE / "common.yml", BUNDLE / "inventories/systems/deep_est",
                        BUNDLE / "inventories/sites/example")
    assert hv["msa_module"] == "esb" and hv["msa_addresses"]["extoll"] == "10.62.1.19"
    assert render("groups['slurm_compute'] | length", "deep_est") == 141   # 50 CM + 75 ESB + 16 DAM
    conf = render("{'nodes': groups['slurm_compute'] | msa.hpc.slurm_node_records(hostvars, msa_modules, "
                  "msa_management_fabric), 'partitions': {'cm': {'module': 'cm'}, 'esb': {'module': 'esb'}, "
                  "'dam': {'module': 'dam'}}, 'licenses': {'gateway': groups['msa_mpi_gateway'] | length}}"
                  " | msa.hpc.slurm_nodes_conf", "deep_est")
    lines = "\n".join(conf["node_lines"] + conf["partition_lines"] + [conf["licenses_line"]])
    for line in ("NodeName=cm[01-50]", "PartitionName=esb Nodes=esb[01-75]", "PartitionName=dam Nodes=dam[01-16]",
                 "Gres=gpu:1", "Licenses=gateway:4"):
        assert line in lines, line
    td = render("groups['fabric_extoll'] | msa.hpc.extoll_td(hostvars, msa_fabrics.extoll.topology, 'extoll')",
                "deep_est")
    assert "type Torus" in td and "dimension 3" in td
    assert td.count("t=NAM") == 2 and td.count("t=GCE") == 1
