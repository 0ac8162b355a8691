#!/usr/bin/python
# SPDX-License-Identifier: GPL-3.0-or-later
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

"""Ansible module msa.hpc.image_hash: the content hash and labels of a node image (its action plugin does the work)."""

DOCUMENTATION = r"""
module: image_hash
short_description: The content hash and labels of a node image, from its roles' files and variables
version_added: 0.7.0
author:
  - msa.hpc maintainers (@msa-hpc)
description:
  - Computes on the control host the hash a node image of one software set is labelled with
    (C(msa.hpc.image.hash)), so an image is rebuilt only when something that goes into it changed
    (C(playbooks/image.yml) of the bundle, collection docs C(images.md)).
  - "The hash covers: every file of each role the image mode runs (the set's roles and every role their image
    task files include or take templates from), the collection's C(plugins/) (the modules the roles call and the
    code C(msa.hpc.hook_runtime) installs), the set's name and roles, and the variables the image task files and
    templates read, with every variable their values refer to, as the inventory and the play define them
    (templates are not rendered, so a value that depends on the node alone, such as its addresses, is not read)."
  - Variables whose names end in C(password), C(secret), C(_token) or C(_tokens) are left out, as are Ansible's
    own (C(ansible_*), C(groups), C(hostvars) and the like), since an image holds no secret and no per-node value.
  - The image task file of a role's main entry point is C(tasks/install.yml); of an entry point C(tasks_from=name),
    C(tasks/name_install.yml).
  - Reads files only; never changes anything (C(changed) is always false).
attributes:
  action:
    description: Indicates this has a corresponding action plugin so some parts of the options can be executed on the controller.
    support: full
    details: Everything runs in the action plugin on the control host; nothing runs on the target.
  check_mode:
    support: full
  diff_mode:
    support: none
extends_documentation_fragment:
  - msa.hpc.attributes
options:
  set:
    description: The name of the software set (for example C(compute)); part of the hash and of the labels.
    type: str
    required: true
  roles:
    description:
      - The set's roles, in the order the image applies them; each a role name (C(msa.hpc.slurm)) or a dict with
        C(role) and C(tasks_from).
    type: list
    elements: raw
    required: true
  variables:
    description: Further variable names whose values go into the image (for example C(msa_deploy_mode)).
    type: list
    elements: str
    default: []
  files:
    description:
      - Further files on the control host whose content goes into the hash, each a component C(file.<name>) (the
        playbook that builds the image, so a changed build step gives a new image).
    type: list
    elements: path
    default: []
  old_labels:
    description: The labels of an older image of the set; RV(changed_since) then names what differs from it.
    type: dict
    default: {}
notes:
  - Run it on the host that stands for the image (a build container added with C(add_host) to the set's groups), so
    that the set's group variables are the ones read. It connects to nothing.
"""

EXAMPLES = r"""
- name: Compute the image's content hash
  msa.hpc.image_hash:
    set: compute
    roles: [msa.hpc.common, msa.hpc.munge, {role: msa.hpc.nam_manager, tasks_from: client_library}]
    variables: [msa_deploy_mode]
  register: image
"""

RETURN = r"""
hash:
  description: The image's content hash (sha256, hex).
  returned: always
  type: str
hash12:
  description: Its first 12 characters, the image's tag.
  returned: always
  type: str
  sample: 3f5c0a1b2c3d
labels:
  description:
    - The image's labels - C(msa.hpc.image.hash), C(.set), C(.collection) (its version), C(.roles) (each role at
      the collection's version), and one per component (C(.role.<name>), C(.plugins), C(.vars)) with the first 12
      characters of that component's digest (C(.file.<name>) for O(files)), which show why two images differ.
  returned: always
  type: dict
components:
  description: The full digest of each component (C(role.<name>), C(plugins), C(vars)).
  returned: always
  type: dict
variables:
  description: The names of the variables whose values are hashed (C(_set) is the set itself).
  returned: always
  type: list
  elements: str
files:
  description: The role files (task files and templates) the image mode runs, relative to the collection's roles.
  returned: always
  type: list
  elements: str
changed_since:
  description: The components whose digest differs from O(old_labels) (empty without O(old_labels)).
  returned: always
  type: list
  elements: str
  sample: [role.slurm, vars]
"""

from ansible.module_utils.basic import AnsibleModule


def main():
    module = AnsibleModule(argument_spec={"set": {"type": "str", "required": True},
                                          "roles": {"type": "list", "elements": "raw", "required": True},
                                          "variables": {"type": "list", "elements": "str", "default": []},
                                          "files": {"type": "list", "elements": "path", "default": []},
                                          "old_labels": {"type": "dict", "default": {}}},
                           supports_check_mode=True)
    module.fail_json(msg="msa.hpc.image_hash runs on the control host through its action plugin; it cannot run on a node")


if __name__ == "__main__":
    main()
