# SPDX-License-Identifier: GPL-3.0-or-later
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

"""Filters msa.hpc.slurm_nodes_conf, slurm_conf_problems, slurm_node_records, slurm_controllers and
slurm_conf_server for the slurm.conf templates, slurm_api_version for slurmrestd's clients and slurm_release_has for
what a release gives (RELEASE_FEATURES)."""

from ansible.errors import AnsibleFilterError

from ansible_collections.msa.hpc.plugins.module_utils._slurm_conf import (
    SlurmConfError, conf_server, controllers, node_records, problems, render)
from ansible_collections.msa.hpc.plugins.module_utils.slurm.releases import ReleaseError, api_version, has_feature


def slurm_nodes_conf(data):
    """NodeName/PartitionName/Licenses lines of slurm.conf and the gres.conf lines for a Slurm description."""
    try:
        return render(data)
    except SlurmConfError as exc:
        raise AnsibleFilterError("msa.hpc.slurm_nodes_conf: the Slurm description has problems: %s" % exc)


def slurm_conf_problems(data):
    """Every problem in a Slurm description, one sentence each naming the field."""
    return problems(data)


def slurm_node_records(hosts, hostvars, modules=None, management_fabric="mgmt"):
    """Node records (the ``nodes`` of a Slurm description) from the inventory's host variables."""
    return node_records(list(hosts), hostvars, modules or {}, management_fabric)


def slurm_controllers(primary, backup="", candidates=None):
    """The SlurmctldHost hosts, primary first, after checking the backup controller named."""
    try:
        return controllers(primary, backup, None if candidates is None else list(candidates))
    except SlurmConfError as exc:
        raise AnsibleFilterError("msa.hpc.slurm_controllers: %s" % exc)


def slurm_conf_server(addresses, port):
    """slurmd's --conf-server value for the controllers' addresses, primary first."""
    try:
        return conf_server(addresses, port)
    except (SlurmConfError, TypeError, ValueError) as exc:
        raise AnsibleFilterError("msa.hpc.slurm_conf_server: %s" % exc)


def slurm_api_version(release):
    """The slurmrestd API version (``v0.0.42``) the collection speaks to a supported Slurm release."""
    try:
        return api_version(release, "slurm_release")
    except ReleaseError as exc:
        raise AnsibleFilterError("msa.hpc.slurm_api_version: %s" % exc)


def slurm_release_has(release, feature):
    """Whether Slurm ``release`` has ``feature`` (topology_yaml, metrics_auth: releases.RELEASE_FEATURES)."""
    try:
        return has_feature(release, feature, "slurm_release")
    except ValueError as exc:
        raise AnsibleFilterError("msa.hpc.slurm_release_has: %s" % exc)


class FilterModule:
    """slurm.conf model filters."""

    def filters(self):
        return {"slurm_nodes_conf": slurm_nodes_conf, "slurm_conf_problems": slurm_conf_problems,
                "slurm_node_records": slurm_node_records, "slurm_controllers": slurm_controllers,
                "slurm_conf_server": slurm_conf_server, "slurm_api_version": slurm_api_version,
                "slurm_release_has": slurm_release_has}
