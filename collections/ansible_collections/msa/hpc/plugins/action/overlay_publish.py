# SPDX-License-Identifier: GPL-3.0-or-later
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action of msa.hpc.overlay_publish: read each file's ``src`` on the control host (found as ansible.builtin.copy
finds it) and run the module with the contents, so secrets the control host keeps reach only the store."""
from __future__ import annotations

import base64

from ansible.errors import AnsibleActionFail, AnsibleError
from ansible.plugins.action import ActionBase


class ActionModule(ActionBase):
    TRANSFERS_FILES = False

    def _read(self, where, src):
        try:
            path = self._find_needle("files", src)
            with open(path, "rb") as handle:
                return base64.b64encode(handle.read()).decode("ascii")
        except (AnsibleError, OSError) as exc:
            raise AnsibleActionFail("%s: cannot read src %r on the control host: %s" % (where, src, exc)) from None

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        args = dict(self._task.args)
        nodes = args.get("nodes")
        if not isinstance(nodes, dict):
            raise AnsibleActionFail("nodes: a mapping of node names to lists of files is required")
        sent = {}
        for node, items in nodes.items():
            if not isinstance(items, list):
                raise AnsibleActionFail("nodes.%s: a list of files is required" % node)
            sent[node] = []
            for index, item in enumerate(items):
                item = dict(item) if isinstance(item, dict) else item
                if isinstance(item, dict) and item.get("src") is not None:
                    if item.get("content") is not None:
                        raise AnsibleActionFail("nodes.%s[%d] (%s): give content or src, not both"
                                                % (node, index, item.get("dest")))
                    item["_content_b64"] = self._read("nodes.%s[%d]" % (node, index), item.pop("src"))
                sent[node].append(item)
        args["nodes"] = sent
        result.update(self._execute_module(module_name="msa.hpc.overlay_publish", module_args=args,
                                           task_vars=task_vars))
        return result
