# SPDX-License-Identifier: GPL-3.0-or-later
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action of msa.hpc.file_tree: read the files on the control host, then run the module on the node with their
contents, so a whole tree costs one round trip."""
from __future__ import annotations

import base64
import os

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase


class ActionModule(ActionBase):
    TRANSFERS_FILES = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        args = dict(self._task.args)
        src, files = args.get("src"), args.get("files")
        if not isinstance(src, str) or not src:
            raise AnsibleActionFail("src: a directory on the control host is required, got %r" % (src,))
        if not isinstance(files, list) or not all(isinstance(f, str) for f in files):
            raise AnsibleActionFail("files: a list of paths relative to src is required, got %r" % (files,))
        src = os.path.realpath(src)
        contents = {}
        for rel in files:
            path = os.path.realpath(os.path.join(src, rel))
            if os.path.isabs(rel) or not path.startswith(src + os.sep):
                raise AnsibleActionFail("files: %r is not a path inside src %s" % (rel, src))
            try:
                with open(path, "rb") as handle:
                    contents[rel] = base64.b64encode(handle.read()).decode("ascii")
            except OSError as exc:
                raise AnsibleActionFail("files: cannot read %s on the control host: %s" % (path, exc)) from None
        args["_contents"] = contents
        result.update(self._execute_module(module_name="msa.hpc.file_tree", module_args=args, task_vars=task_vars))
        return result
