# SPDX-License-Identifier: GPL-3.0-or-later
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

"""Filter msa.hpc.dcdb_pusher_files: the DCDB Pusher's configuration files (dcdbpusher.conf and one file per plugin)
rendered on the control host, for a node whose files come in its overlay (msa_deploy_mode overlay). The same
functions as the msa.hpc.dcdb_plugin module, applied to an empty configuration directory, so both paths write the
same bytes."""

import os

from ansible.errors import AnsibleFilterError

from ansible_collections.msa.hpc.plugins.module_utils import _dcdb as D


def dcdb_pusher_files(plugins, config_dir=D.DEFAULT_CONFIG_DIR, pusher_global=None, mode="0644", restart=None):
    """A node-file declaration (msa.hpc.node_files) of the Pusher's files: ``plugins`` is a list of
    ``{plugin, groups, state}`` as the module takes them, applied in order; ``pusher_global`` sets dcdbpusher.conf's
    global section."""
    if not isinstance(plugins, list):
        raise AnsibleFilterError("dcdb_pusher_files: plugins must be a list, got %s" % type(plugins).__name__)
    files = {}
    pusher_conf = os.path.join(config_dir, "dcdbpusher.conf")
    for index, entry in enumerate(plugins):
        if not isinstance(entry, dict) or entry.get("plugin") not in D.PLUGINS_KNOWN:
            raise AnsibleFilterError("dcdb_pusher_files: plugins[%d].plugin: %r is not one of %s" % (
                index, entry.get("plugin") if isinstance(entry, dict) else entry, ", ".join(D.PLUGINS_KNOWN)))
        state = entry.get("state", "present")
        if state not in ("present", "absent"):
            raise AnsibleFilterError("dcdb_pusher_files: plugins[%d].state: %r is not present or absent"
                                     % (index, state))
        try:
            changes = D.plan_plugin(entry["plugin"], state, entry.get("groups") or [], entry.get("global_options"),
                                    config_dir, pusher_conf, files.get, pusher_global if index == 0 else None)[0]
        except (D.DcdbConfigError, D.InfoError) as exc:
            raise AnsibleFilterError("dcdb_pusher_files: plugin %s: %s" % (entry["plugin"], exc)) from None
        for path, (_before, after) in changes.items():
            if after is None:
                files.pop(path, None)
            else:
                files[path] = after
    units = list(restart or [])
    return {os.path.basename(path): {"dest": path, "content": text, "owner": "root", "group": "root", "mode": mode,
                                     "restart": units}
            for path, text in sorted(files.items())}


class FilterModule:
    """The DCDB Pusher's files for a node's overlay."""

    def filters(self):
        return {"dcdb_pusher_files": dcdb_pusher_files}
