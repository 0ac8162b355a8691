# SPDX-License-Identifier: GPL-3.0-or-later
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters over the expanded system description (validation for the validate play)."""
from __future__ import annotations

DOCUMENTATION = r"""
name: system_problems
short_description: List every inconsistency in the system description after all inventory layers
version_added: 0.1.0
author:
  - msa.hpc maintainers (@msa-hpc)
description:
  - Checks every host's C(msa_module), C(msa_module_role) and C(msa_addresses) against the system's fabrics
    and modules as the inventory has them after every layer (common, system, site), and returns one sentence
    per problem naming the host and the field; an empty list means the description is consistent.
  - Catches a node in two modules, an address outside its fabric's range or equal to the fabric gateway,
    duplicate addresses, an unknown fabric and a gateway that lacks one of the fabrics it bridges.
positional: hostvars, fabrics, modules, management_fabric, groups
options:
  _input:
    description: Host names to check (usually C(groups['all'])).
    type: list
    elements: str
    required: true
  hostvars:
    description: The C(hostvars) of the play.
    type: dict
    required: true
  fabrics:
    description: C(msa_fabrics).
    type: dict
    required: true
  modules:
    description: C(msa_modules).
    type: dict
    required: true
  management_fabric:
    description: C(msa_management_fabric).
    type: str
    default: mgmt
  groups:
    description: The C(groups) of the play, to find nodes listed in two module groups.
    type: dict
"""

EXAMPLES = r"""
- name: Fail before changing anything when the description is inconsistent
  ansible.builtin.assert:
    that: problems | length == 0
    fail_msg: "{{ problems | join('\n') }}"
  vars:
    problems: "{{ groups['all'] | msa.hpc.system_problems(hostvars, msa_fabrics, msa_modules, msa_management_fabric, groups) }}"
"""

RETURN = r"""
_value:
  description: One sentence per problem, naming the host and the field.
  type: list
  elements: str
"""

from ansible_collections.msa.hpc.plugins.module_utils._system import validate_hosts


def system_problems(hosts, hostvars, fabrics, modules, management_fabric="mgmt", groups=None):
    data = {}
    for host in hosts:
        hv = hostvars[host]
        data[host] = {key: hv.get(key) for key in ("msa_module", "msa_module_role", "msa_addresses")}
    module_groups = {name: list((groups or {}).get(name, [])) for name in modules}
    return validate_hosts(data, fabrics, modules, management_fabric=management_fabric, module_groups=module_groups)


class FilterModule:
    def filters(self):
        return {"system_problems": system_problems}
