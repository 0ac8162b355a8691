# SPDX-License-Identifier: GPL-3.0-or-later
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Vars plugin: give what a system description says of its module groups and of `all` the rank of group_vars files."""
from __future__ import annotations

DOCUMENTATION = r"""
name: system
short_description: Rank a system description's group values as the system layer's own group_vars files
version_added: 0.2.0
author:
  - msa.hpc maintainers (@msa-hpc)
description:
  - Companion of the C(msa.hpc.system) inventory plugin. Ansible ranks group variables set by an inventory plugin
    below every C(group_vars/all) file, so without this plugin a site's C(group_vars/all.yml) default for
    C(msa_hardware), C(msa_features) or C(msa_partition) would replace what the description says of every
    module, and the bundle's C(group_vars/all.yml) would replace C(msa_modules).
  - For the inventory directory of each loaded C(.msa.yml) description, this plugin returns the same values
    (C(msa_hardware), C(msa_features), C(msa_partition) on each module group; C(msa_system), C(msa_fabrics),
    C(msa_management_fabric), C(msa_modules) on C(all)) as if they were written in that directory's
    C(group_vars/<module>.yml) and C(group_vars/all.yml). Earlier inventory sources (the bundle defaults) lose
    to them; later ones (the site layer) win, each at its own group; a site's C(group_vars/<module>.yml)
    overrides a module, its C(group_vars/all.yml) does not.
  - List it before C(host_group_vars) (C(vars_plugins_enabled = msa.hpc.system, host_group_vars) in
    C([defaults]) of C(ansible.cfg), or C(ANSIBLE_VARS_ENABLED)), so that the system layer's own C(group_vars)
    files still override its description. Collection vars plugins only run when enabled there.
  - The precedence of every layer is documented and tested in the collection's C(docs/inventories.md).
"""

import functools
import os

from ansible.inventory.group import Group
from ansible.plugins.vars import BaseVarsPlugin

from ansible_collections.msa.hpc.plugins.module_utils._system import LOADED_GROUP_VARS


# called for every inventory source, host and task: resolve each source directory once
_realpath = functools.lru_cache(maxsize=64)(os.path.realpath)


class VarsModule(BaseVarsPlugin):
    def get_vars(self, loader, path, entities, cache=True):
        super().get_vars(loader, path, entities)
        by_group = LOADED_GROUP_VARS.get(_realpath(path))
        if not by_group:
            return {}
        data = {}
        for entity in entities if isinstance(entities, list) else [entities]:
            if isinstance(entity, Group) and entity.name in by_group:
                data.update(by_group[entity.name])
        return data
