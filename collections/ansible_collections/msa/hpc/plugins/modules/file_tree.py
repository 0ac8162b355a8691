#!/usr/bin/python
# SPDX-License-Identifier: GPL-3.0-or-later
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

"""Ansible module msa.hpc.file_tree: install a tree of files from the control host in one pass."""

DOCUMENTATION = r"""
module: file_tree
short_description: Install a tree of files from the control host in one pass, each written only when it differs
version_added: 0.6.0
author:
  - msa.hpc maintainers (@msa-hpc)
description:
  - Copies the files O(files) (paths relative to O(src) on the control host) to the same relative paths under
    O(dest), makes the directories they need, writes a file only when its content, mode or owner differs
    (atomically - a temporary file beside it, renamed over it), and removes the files O(absent) names.
  - One module call for the whole tree, where a C(ansible.builtin.copy) loop makes one round trip per file on every
    run; the collection installs its on-node programs this way (role C(msa.hpc.hook_runtime)).
  - O(empty) names files created empty (a Python package's C(__init__.py)), inside O(dest) or above it.
  - Files only; a directory where a file should be, or in O(absent), is an error.
attributes:
  action:
    description: Indicates this has a corresponding action plugin so some parts of the options can be executed on the controller.
    support: full
    details: The action plugin reads O(src) on the control host and sends the files' contents to the module.
  check_mode:
    support: full
  diff_mode:
    support: full
    details: The diff lists the paths written and removed, not their contents.
extends_documentation_fragment:
  - msa.hpc.attributes
options:
  src:
    description: The directory on the control host the relative paths of O(files) are read from.
    type: path
    required: true
  files:
    description: The files to install, as paths relative to O(src) (and to O(dest)); no absolute path, no C(..).
    type: list
    elements: str
    required: true
  dest:
    description: The directory on the node the files go under.
    type: path
    required: true
  empty:
    description: Files (absolute paths on the node) created empty, for example a Python package's C(__init__.py).
    type: list
    elements: path
    default: []
  absent:
    description: Files (absolute paths on the node) to remove, for example a former copy of a program.
    type: list
    elements: path
    default: []
  mode:
    description: The mode of every file (an octal string).
    type: str
    default: "0644"
  dir_mode:
    description: The mode of every directory the module makes (an octal string); existing directories are left.
    type: str
    default: "0755"
  owner:
    description: The owner of the files and the directories made; the connecting user's when not given.
    type: str
  group:
    description: The group of the files and the directories made; the connecting user's when not given.
    type: str
  _contents:
    description:
      - Internal, filled by the action plugin - the files' contents (base64) by relative path. Do not set it.
    type: dict
    default: {}
seealso:
  - module: ansible.builtin.copy
  - module: ansible.posix.synchronize
"""

EXAMPLES = r"""
- name: Install the on-node programs' code in one pass
  msa.hpc.file_tree:
    src: "{{ role_path }}/../../plugins/module_utils"
    files: [node/__init__.py, node/healthcheck.py, _rest.py]
    dest: /usr/lib/msa-hpc/python/ansible_collections/msa/hpc/plugins/module_utils
    empty: [/usr/lib/msa-hpc/python/ansible_collections/__init__.py]
    absent: [/usr/lib/msa-hpc/python/ansible_collections/msa/hpc/plugins/module_utils/_healthcheck.py]
    owner: root
    group: root
"""

RETURN = r"""
written:
  description: The files written (relative to O(dest); O(empty) ones by their path), or that would be in check mode.
  returned: always
  type: list
  elements: str
  sample: [node/healthcheck.py]
made:
  description: The directories made.
  returned: always
  type: list
  elements: str
removed:
  description: The files of O(absent) that were there and are removed.
  returned: always
  type: list
  elements: str
"""

import base64

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.msa.hpc.plugins.module_utils._file_tree import TreeError, install, octal_mode
from ansible_collections.msa.hpc.plugins.module_utils._module_run import run_module


def main():
    module = AnsibleModule(
        argument_spec={"src": {"type": "path", "required": True},
                       "files": {"type": "list", "elements": "str", "required": True},
                       "dest": {"type": "path", "required": True},
                       "empty": {"type": "list", "elements": "path", "default": []},
                       "absent": {"type": "list", "elements": "path", "default": []},
                       "mode": {"type": "str", "default": "0644"},
                       "dir_mode": {"type": "str", "default": "0755"},
                       "owner": {"type": "str"},
                       "group": {"type": "str"},
                       # filled by the action plugin: {relative path: base64 content}
                       "_contents": {"type": "dict", "default": {}}},
        supports_check_mode=True)
    p = module.params
    missing = sorted(set(p["files"]) - set(p["_contents"]))
    if missing:
        module.fail_json(msg="files: %s not sent by the action plugin (call the module as msa.hpc.file_tree)"
                         % ", ".join(missing))
    contents = {rel: base64.b64decode(p["_contents"][rel]) for rel in p["files"]}
    run_module(module, lambda: install(p["dest"], contents, mode=octal_mode(p["mode"], "mode"),
                                       dir_mode=octal_mode(p["dir_mode"], "dir_mode"),
                                       owner=p["owner"], group=p["group"],
                                       empty=p["empty"], absent=p["absent"], check_mode=module.check_mode),
               [(TreeError, lambda exc: {"msg": str(exc)}), (OSError, lambda exc: {"msg": "cannot install: %s" % exc})])


if __name__ == "__main__":
    main()
