# SPDX-License-Identifier: GPL-3.0-or-later
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter naming the layer files that set a system-owned variable where it does not rank as documented."""
from __future__ import annotations

DOCUMENTATION = r"""
name: layer_warnings
short_description: Name the layer files that set a system-owned variable where it would not rank as documented
version_added: 0.2.0
author:
  - msa.hpc maintainers (@msa-hpc)
description:
  - Reads the C(group_vars) and C(host_vars) files of every inventory source other than the system layer (the
    directory holding the C(.msa.yml) description) and returns one sentence per variable the description owns
    (per node, per module, system-wide) that a file sets at a level where it would not win, or where it would
    win although it should not (a site-wide C(msa_hardware) in C(group_vars/all.yml), C(msa_features) on a
    role group, C(msa_addresses) on a group, C(msa_modules) anywhere).
  - Each sentence names the file, the variable and the group or host, and says where the value belongs.
    The rule is the precedence table of the collection's C(docs/inventories.md).
  - Vault-encrypted files are skipped (they hold C(vault_*) values only).
positional: modules
options:
  _input:
    description: The inventory sources in order (C(ansible_inventory_sources)).
    type: list
    elements: path
    required: true
  modules:
    description: C(msa_modules), to tell module groups from other groups.
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Warn about site values that do not rank as documented
  ansible.builtin.debug:
    msg: "{{ ansible_inventory_sources | msa.hpc.layer_warnings(msa_modules) }}"
"""

RETURN = r"""
_value:
  description: One sentence per misplaced variable, starting with the file's path.
  type: list
  elements: string"""

import yaml

from ansible_collections.msa.hpc.plugins.module_utils._layers import layer_warnings as _layer_warnings


def layer_warnings(sources, modules):
    return _layer_warnings(sources, modules, yaml.safe_load)


class FilterModule:
    def filters(self):
        return {"layer_warnings": layer_warnings}
