# SPDX-License-Identifier: GPL-3.0-or-later
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action of msa.hpc.overlay_publish: read each file's ``src`` on the control host (found as ansible.builtin.copy
finds it), move every content out of ``nodes`` into the module's no_log ``_contents``, and run the module, so the
secrets the control host keeps reach the store and are never echoed with the arguments."""
from __future__ import annotations

import base64

from ansible.errors import AnsibleActionFail, AnsibleError
from ansible.plugins.action import ActionBase


def split_contents(nodes, read):
    """(``nodes`` with each file's ``content`` or ``src`` replaced by a reference ``_content``, {reference: base64
    content}); ``read(where, src)`` gives a control-host file's bytes. AnsibleActionFail names the node and file."""
    if not isinstance(nodes, dict):
        raise AnsibleActionFail("nodes: a mapping of node names to lists of files is required")
    sent, contents = {}, {}
    for node, items in nodes.items():
        if not isinstance(items, list):
            raise AnsibleActionFail("nodes.%s: a list of files is required" % node)
        sent[node] = []
        for index, item in enumerate(items):
            if isinstance(item, dict):  # anything else is refused by the module, naming the item
                item, where = dict(item), "nodes.%s[%d]" % (node, index)
                if item.get("src") is not None and item.get("content") is not None:
                    raise AnsibleActionFail("%s (%s): give content or src, not both" % (where, item.get("dest")))
                if item.get("src") is not None:
                    data = read(where, item.pop("src"))
                elif item.get("content") is not None:
                    data = str(item.pop("content")).encode("utf-8")
                else:
                    data = None
                if data is not None:
                    contents[where] = base64.b64encode(data).decode("ascii")
                    item["_content"] = where
            sent[node].append(item)
    return sent, contents


class ActionModule(ActionBase):
    TRANSFERS_FILES = False

    def _read(self, where, src):
        try:
            path = self._find_needle("files", src)
            with open(path, "rb") as handle:
                return handle.read()
        except (AnsibleError, OSError) as exc:
            raise AnsibleActionFail("%s: cannot read src %r on the control host: %s" % (where, src, exc)) from None

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        args = dict(self._task.args)
        args["nodes"], args["_contents"] = split_contents(args.get("nodes"), self._read)
        result.update(self._execute_module(module_name="msa.hpc.overlay_publish", module_args=args,
                                           task_vars=task_vars))
        return result
