# SPDX-License-Identifier: GPL-3.0-or-later
"""slurm.conf of msa.hpc.slurm for each Slurm release: 22.05's and 24.11's are byte for byte what they were before
(fixtures/slurm.conf.22.05 and .24.11, rendered from the template before releases, then release features, were told
apart); later releases differ only where Slurm did (topology.yaml from 25.05, slurmctld's metrics from 26.05)."""
from __future__ import annotations

import difflib
import pathlib

import jinja2
import pytest
import yaml
from ansible.plugins.filter.core import FilterModule as CoreFilters

from ansible_collections.msa.hpc.plugins.filter.slurm_conf import FilterModule as SlurmFilters
from ansible_collections.msa.hpc.plugins.module_utils.slurm.releases import has_feature

ROLE = pathlib.Path(__file__).resolve().parents[3] / "roles" / "slurm"
FIXTURES = pathlib.Path(__file__).parent / "fixtures"
HOSTS = {"mgmt01": "10.0.0.1", "mgmt02": "10.0.0.2", "acct01": "10.0.0.3"}


def environment():
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(ROLE / "templates")), trim_blocks=True,
                             keep_trailing_newline=True, undefined=jinja2.StrictUndefined)
    env.filters.update(CoreFilters().filters())
    env.filters.update({"msa.hpc." + k: v for k, v in SlurmFilters().filters().items()})
    return env


def variables(release, **overrides):
    defaults = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    settings = {k: v for k, v in defaults["slurm_settings_default"].items() if "{{" not in str(v)}
    settings.update(StateSaveLocation="/var/lib/slurm/slurmctld", SlurmctldTimeout=60)
    out = {
        "ansible_managed": "Ansible managed", "slurm_release": release, "slurm_cluster_name": "dev",
        "slurm_controller_hosts": ["mgmt01", "mgmt02"], "msa_management_fabric": "mgmt",
        "hostvars": {h: {"msa_addresses": {"mgmt": a}} for h, a in HOSTS.items()},
        "slurm_settings_default": settings, "slurm_settings": {}, "slurm_configless": True,
        "slurm_health_check_program": defaults["slurm_health_check_program"], "slurm_health_check_interval": 60,
        "slurm_health_check_node_state": "ANY", "slurm_reboot_program": defaults["slurm_reboot_program"],
        "slurm_reboot_timeout": 300, "slurm_jwt_key": defaults["slurm_jwt_key"], "slurm_config_overrides": False,
        "slurm_accounting_host": "acct01", "slurm_topology_fabric": "extoll", "slurm_config_dir": "/etc/slurm",
        # as defaults/main.yml derives them from the release (msa.hpc.slurm_release_has)
        "slurm_topology_yaml": has_feature(release, "topology_yaml"),
        "slurm_metrics": has_feature(release, "metrics_auth"), "slurm_metrics_users": [],
        "slurm_metrics_jwt_key": defaults["slurm_metrics_jwt_key"],
        "slurm_description": {
            "nodes": [{"name": "cm%02d" % i, "partition": "cm", "address": "10.0.1.%d" % i, "sockets": 2,
                       "cores_per_socket": 4, "threads_per_core": 1, "real_memory": 4000} for i in (1, 2)]
            + [{"name": "esb01", "partition": "esb", "address": "10.0.2.1", "sockets": 1, "cores_per_socket": 8,
                "threads_per_core": 1, "real_memory": 8000, "gres": "gpu:1"}],
            "partitions": {"cm": {"default": True}, "esb": {"max_time": "12:00:00"}},
            "licenses": {"gateway": 2, "nam": "2TiB"}, "overrides": {}},
    }
    out.update(overrides)
    return out


def render(release, **overrides):
    return environment().get_template("slurm.conf.j2").render(variables(release, **overrides))


def test_22_05_renders_byte_for_byte_as_before():
    assert render("22.05") == (FIXTURES / "slurm.conf.22.05").read_text()


def test_24_11_renders_byte_for_byte_as_before():
    assert render("24.11") == (FIXTURES / "slurm.conf.24.11").read_text()


def test_24_11_differs_from_22_05_only_in_how_a_configless_slurmd_gets_the_nodes():
    old = render("22.05").splitlines()
    nodes = [line for line in old if line.startswith(("NodeName=", "PartitionName=", "Licenses="))]
    assert nodes and len(nodes) >= 4
    new = render("24.11").splitlines()
    changed = [line for line in difflib.unified_diff(old, new, lineterm="", n=0)
               if line[:1] in "+-" and not line.startswith(("+++", "---"))]
    removed = [line[1:] for line in changed if line.startswith("-")]
    added = [line[1:] for line in changed if line.startswith("+")]
    # 24.11 sends a relative Include's file to a configless slurmd: nodes.conf (which configure.yml writes)
    assert added == ["Include nodes.conf"]
    assert [line for line in removed if not line.startswith("#")] == nodes


def changes_from_24_11(release):
    old, new = render("24.11").splitlines(), render(release).splitlines()
    changed = [line for line in difflib.unified_diff(old, new, lineterm="", n=0)
               if line[:1] in "+-" and not line.startswith(("+++", "---"))]
    return ([line[1:] for line in changed if line.startswith("-")],
            [line[1:] for line in changed if line.startswith("+")])


@pytest.mark.parametrize("release", ["25.05", "25.11"])
def test_25_x_drop_only_the_topology_plugin_line_slurm_ignores_beside_topology_yaml(release):
    assert changes_from_24_11(release) == (["TopologyPlugin=topology/tree"], [])


def test_26_05_turns_on_slurmctlds_metrics_behind_jwt_of_their_own_key():
    removed, added = changes_from_24_11("26.05")
    assert removed == ["TopologyPlugin=topology/tree"]
    # MetricsAuthUsers switches authentication on (without it or PrivateData 26.05 answers /metrics to anyone):
    # SlurmUser alone unless other accounts are named; the tokens are checked against a key of their own
    assert added == ["MetricsType=metrics/openmetrics", "MetricsAuthUsers=slurm",
                     "SlurmctldHttpAuthParameters=jwt_key=/etc/slurm/jwt_metrics.key"]
    assert "SlurmctldHttpAuthParameters=jwt_key=/etc/slurm/jwt_hs256.key" not in render("26.05")
    lines = render("26.05", slurm_metrics_users=["prometheus", "ops"], slurm_settings={"SlurmUser": "slurmadm"})
    assert "MetricsAuthUsers=prometheus,ops" in lines.splitlines()
    assert "MetricsAuthUsers=slurmadm" in render("26.05", slurm_settings={"SlurmUser": "slurmadm"}).splitlines()


def test_metrics_switched_off_leave_26_05_without_them():
    text = render("26.05", slurm_metrics=False)
    assert not [line for line in text.splitlines() if line.startswith(("Metrics", "SlurmctldHttpAuth"))]


@pytest.mark.parametrize("release", ["22.05", "24.11"])
def test_without_configless_every_release_includes_the_node_file_by_its_path(release):
    text = render(release, slurm_configless=False)
    assert "Include /etc/slurm/nodes.conf" in text.splitlines() and "NodeName=" not in text
    assert "SlurmctldParameters=enable_configless" not in text


@pytest.mark.parametrize("release", ["22.05", "24.11"])
def test_cgroup_conf_is_the_same_for_every_release(release):
    defaults = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    text = environment().get_template("cgroup.conf.j2").render(
        ansible_managed="Ansible managed", slurm_release=release, slurm_cgroup_settings={},
        slurm_cgroup_settings_default=defaults["slurm_cgroup_settings_default"])
    assert text == (FIXTURES / "cgroup.conf").read_text()


def test_the_release_variable_names_the_supported_releases():
    from ansible_collections.msa.hpc.plugins.module_utils.slurm import releases
    spec = yaml.safe_load((ROLE / "meta" / "argument_specs.yml").read_text())
    option = spec["argument_specs"]["main"]["options"]["slurm_release"]
    assert tuple(option["choices"]) == releases.SUPPORTED
    assert option["default"] == yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())["slurm_release"]
