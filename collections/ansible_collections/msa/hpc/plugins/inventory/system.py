# SPDX-License-Identifier: GPL-3.0-or-later
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Inventory plugin: expand a compact MSA system description into hosts and module groups."""
from __future__ import annotations

DOCUMENTATION = r"""
name: system
short_description: Expand a compact MSA system description into hosts and groups
version_added: 0.1.0
author:
  - msa.hpc maintainers (@msa-hpc)
description:
  - Reads a YAML file whose name ends in C(.msa.yml) or C(.msa.yaml) describing one Modular Supercomputing
    Architecture system (its fabrics with address ranges, its modules with node counts, hardware and fabrics)
    and adds one host per node, so a site never lists hundreds of nodes by hand.
  - Every node gets C(msa_module), C(msa_module_role), C(msa_index), C(msa_addresses) (fabric name to address),
    C(ansible_host) (its management address) and, on EXTOLL fabrics, C(msa_extoll_guid).
  - Groups made are one per module (for example C(cm), C(esb)), one per role (C(msa_compute), C(msa_mpi_gateway), ...)
    and one per fabric (C(fabric_ib), ...), and C(msa_management_primary) with the first management node (the
    services there is one of; every management node is a Slurm controller). The group C(all) gets C(msa_system), C(msa_fabrics),
    C(msa_management_fabric) and C(msa_modules).
  - Module groups get C(msa_hardware), C(msa_features) and C(msa_partition).
  - Every problem in the description fails the parse, naming the field and the value.
  - Enable the C(msa.hpc.system) vars plugin as well (C(vars_plugins_enabled = msa.hpc.system, host_group_vars));
    it gives the values of the module groups and of C(all) the rank of the system layer's own C(group_vars) files.
    Without it they rank below every C(group_vars/all) file, so a site-wide default in C(group_vars/all.yml)
    would replace every module's hardware.
options:
  plugin:
    description: Marks this file as an msa.hpc.system description.
    required: true
    choices: [msa.hpc.system]
    type: str
  system:
    description: Name of the system (lower-case letters, digits, C(-)).
    required: true
    type: str
  management_fabric:
    description: Fabric whose address is each node's C(ansible_host).
    type: str
    default: mgmt
  fabrics:
    description:
      - Fabric name to C({kind, cidr}); kind is one of C(ethernet), C(infiniband), C(extoll).
      - An C(extoll) fabric may add C(topology), either C({type, dims, routing}) (a generated Mesh, Torus or
        Hypercube over the fabric's nodes in the order of their EXTOLL addresses) or C({file}) (a C(.td) file
        whose inventory lists the nodes' GUIDs); the C(msa.hpc.extoll_td) filter turns it into the C(.td) text.
      - An C(infiniband) fabric may add C(switches), switch name to C({nodes}) (a leaf, a hostlist) or C({switches})
        (the switches under it), for the tree topology of the fabric's modules in Slurm 25.05 and later
        (C(msa.hpc.slurm_topology)); without it, one switch per module.
    type: dict
    required: true
  modules:
    description:
      - Module name to its description. Keys are C(role), C(count) or C(names), C(prefix), C(digits),
        C(offset) (node I(i) gets host address C(offset + i) on every fabric of the module), C(fabrics),
        C(hardware) (C(sockets), C(cores_per_socket), C(threads_per_core), C(memory_mb), C(gpus)),
        C(features), C(description), C(partition), C(guid_base), C(capacity) and C(nonvolatile_capacity) (NAM).
    type: dict
    required: true
"""

EXAMPLES = r"""
# inventories/systems/mini/system.msa.yml
plugin: msa.hpc.system
system: mini
fabrics:
  mgmt: {kind: ethernet, cidr: 10.42.0.0/24}
  ib: {kind: infiniband, cidr: 10.43.0.0/24}
modules:
  mgmt: {role: management, count: 1, offset: 10, fabrics: [mgmt]}
  cm:
    role: compute
    count: 2
    offset: 20
    fabrics: [mgmt, ib]
    hardware: {sockets: 2, cores_per_socket: 2, threads_per_core: 1, memory_mb: 1024}
"""

from ansible.errors import AnsibleParserError
from ansible.plugins.inventory import BaseInventoryPlugin

import os

from ansible_collections.msa.hpc.plugins.module_utils._system import LOADED_GROUP_VARS, SystemError_, expand, group_vars


class InventoryModule(BaseInventoryPlugin):
    NAME = "msa.hpc.system"

    def verify_file(self, path):
        return super().verify_file(path) and path.endswith((".msa.yml", ".msa.yaml"))

    def parse(self, inventory, loader, path, cache=True):
        super().parse(inventory, loader, path, cache)
        raw = self.loader.load_from_file(path, cache=False)
        if not isinstance(raw, dict) or raw.get("plugin") not in (self.NAME, "system"):
            raise AnsibleParserError("%s: not an msa.hpc.system description (plugin: %s)" % (path, self.NAME))
        try:
            model = expand(raw)
        except SystemError_ as exc:
            raise AnsibleParserError("%s: invalid system description:\n  - %s" % (path, "\n  - ".join(exc.problems)))
        for group, members in model["groups"].items():
            self.inventory.add_group(group)
            for host in members:
                self.inventory.add_host(host, group=group)
        for host, hostvars in model["hosts"].items():
            for key, value in hostvars.items():
                self.inventory.set_variable(host, key, value)
        # Set here they rank lowest (inventory group vars); the msa.hpc.system vars plugin raises them to the
        # rank of this directory's group_vars files (docs/inventories.md "Precedence").
        by_group = group_vars(model)
        for group, values in by_group.items():
            for key, value in values.items():
                self.inventory.set_variable(group, key, value)
        LOADED_GROUP_VARS.setdefault(os.path.realpath(os.path.dirname(path)), {}).update(by_group)
