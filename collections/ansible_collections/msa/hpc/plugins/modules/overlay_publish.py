#!/usr/bin/python
# SPDX-License-Identifier: GPL-3.0-or-later
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

"""Ansible module msa.hpc.overlay_publish: write each node's overlay into the overlay server's store."""

DOCUMENTATION = r"""
module: overlay_publish
short_description: Publish each node's overlay (its own files) into the overlay server's store
version_added: 0.7.0
author:
  - msa.hpc maintainers (@msa-hpc)
description:
  - Writes, for each node of O(nodes), the files a node applies at boot (its overlay, issue 38) into O(store) on the
    management node, where C(msa-overlay-server) (role C(msa.hpc.node_overlay)) serves each node its own overlay.
  - A node's overlay is a directory C(<store>/<node>/) holding C(manifest.json) (each file's path, mode, owner,
    group, size, sha256 and the systemd units to restart when it changes, and the overlay's content hash) and the
    files' contents as C(blobs/<sha256>). Each is written atomically and only when it differs (the logic of
    M(msa.hpc.file_tree)), the manifest after the contents it names; contents no manifest names any more are
    removed.
  - Every path is checked before anything is written - absolute, normalised, no C(..), below C(/etc) or
    C(/var/lib/msa-hpc) - as are modes (no set-id bits), owners, unit names and the sizes (1 MiB a file,
    8 MiB a node). The node checks all of it again.
attributes:
  action:
    description: Indicates this has a corresponding action plugin so some parts of the options can be executed on the controller.
    support: full
    details: The action plugin reads each file's C(src) on the control host and sends its content to the module.
  check_mode:
    support: full
  diff_mode:
    support: full
    details: The diff lists the nodes whose overlay changes, with the new hash, and the overlays removed.
extends_documentation_fragment:
  - msa.hpc.attributes
options:
  store:
    description: The overlay server's store directory on the host the module runs on.
    type: path
    required: true
  nodes:
    description:
      - The overlay of each node, by node name (inventory host name) - a list of files.
      - Each file is C(dest) (absolute path on the node), C(content) (text) or C(src) (a file on the control host,
        found like M(ansible.builtin.copy)'s), C(mode) (an octal string, default V("0644")), C(owner) and C(group)
        (default V(root)), and C(restart) (systemd units the node restarts when this file changed).
    type: dict
    required: true
  prune:
    description: Remove the overlays of nodes O(nodes) does not name.
    type: bool
    default: false
  mode:
    description: The mode of the store's files (an octal string); they hold the nodes' secrets.
    type: str
    default: "0640"
  dir_mode:
    description: The mode of the store's directories the module makes (an octal string).
    type: str
    default: "0750"
  owner:
    description: The owner of the store's files and directories made.
    type: str
    default: root
  group:
    description: The group of the store's files and directories made (the server's account reads them through it).
    type: str
  _contents:
    description:
      - Internal, filled by the action plugin - every file's content (base64), which it takes out of O(nodes) so
        that no content is echoed with the module's arguments. Do not set it.
    type: dict
    default: {}
seealso:
  - module: msa.hpc.file_tree
"""

EXAMPLES = r"""
- name: Publish the overlays of the compute nodes
  msa.hpc.overlay_publish:
    store: /var/lib/msa-hpc/overlays
    group: msa-overlay
    prune: true
    nodes:
      cm01:
        - {dest: /etc/msa-hpc/node.json, content: '{"name": "cm01"}', mode: "0644"}
        - {dest: /etc/munge/munge.key, src: munge.key, mode: "0400", owner: munge, group: munge,
           restart: [munge.service]}
"""

RETURN = r"""
nodes:
  description: For each node, its overlay's content hash, whether it changed, its files and the store files written.
  returned: always
  type: dict
  sample: {cm01: {hash: 9f2c..., changed: true, files: [/etc/msa-hpc/node.json],
                 written: [blobs/5d41..., manifest.json], removed: []}}
pruned:
  description: The nodes whose overlays were removed (O(prune)).
  returned: always
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.msa.hpc.plugins.module_utils._file_tree import TreeError, octal_mode
from ansible_collections.msa.hpc.plugins.module_utils._module_run import run_module
from ansible_collections.msa.hpc.plugins.module_utils._overlay import OverlayError
from ansible_collections.msa.hpc.plugins.module_utils._overlay_store import decode_request, publish


def main():
    module = AnsibleModule(
        argument_spec={"store": {"type": "path", "required": True},
                       "nodes": {"type": "dict", "required": True},
                       # filled by the action plugin: {reference: base64 content}, never echoed
                       "_contents": {"type": "dict", "default": {}, "no_log": True},
                       "prune": {"type": "bool", "default": False},
                       "mode": {"type": "str", "default": "0640"},
                       "dir_mode": {"type": "str", "default": "0750"},
                       "owner": {"type": "str", "default": "root"},
                       "group": {"type": "str"}},
        supports_check_mode=True)
    p = module.params
    run_module(module, lambda: publish(p["store"], decode_request(p["nodes"], p["_contents"]), prune=p["prune"],
                                       mode=octal_mode(p["mode"], "mode"),
                                       dir_mode=octal_mode(p["dir_mode"], "dir_mode"),
                                       owner=p["owner"], group=p["group"], check_mode=module.check_mode),
               [((OverlayError, TreeError), lambda exc: {"msg": str(exc)}),
                (OSError, lambda exc: {"msg": "cannot write the overlay store: %s" % exc})])


if __name__ == "__main__":
    main()
