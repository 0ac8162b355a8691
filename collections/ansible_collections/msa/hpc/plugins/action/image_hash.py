# SPDX-License-Identifier: GPL-3.0-or-later
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action of msa.hpc.image_hash: the content hash of a node image, computed on the control host from the roles'
files and the host's variables as the inventory and the play define them (not rendered)."""
from __future__ import annotations

import os

import yaml
from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from ansible_collections.msa.hpc.plugins.module_utils import _image_hash as H

COLLECTION = os.path.realpath(os.path.join(os.path.dirname(__file__), "..", ".."))
LABEL = "msa.hpc.image."


def _entries(roles):
    """(role, image task file) of each entry of the set: install.yml for a role's main, <name>_install.yml for
    tasks_from <name>."""
    entries = []
    for entry in roles:
        if isinstance(entry, str):
            entry = {"role": entry}
        if not isinstance(entry, dict) or not isinstance(entry.get("role"), str):
            raise AnsibleActionFail("roles: each entry is a role name or {role, tasks_from}, got %r" % (entry,))
        role = entry["role"].rsplit(".", 1)[-1]
        tasks_from = entry.get("tasks_from") or "main"
        entries.append((role, "install.yml" if tasks_from == "main" else "%s_install.yml" % tasks_from))
    return entries


def _load(path):
    try:
        with open(path, encoding="utf-8") as handle:
            return yaml.safe_load(handle) or {}
    except FileNotFoundError:
        return {}


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("roles", "set", "variables", "files", "old_labels"))

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        args = self._task.args
        roles, name = args.get("roles"), args.get("set")
        if not isinstance(roles, list) or not roles:
            raise AnsibleActionFail("roles: a non-empty list of the set's roles is required, got %r" % (roles,))
        if not isinstance(name, str) or not name:
            raise AnsibleActionFail("set: the name of the software set is required, got %r" % (name,))
        seeds = args.get("variables") or []
        if not isinstance(seeds, list) or not all(isinstance(v, str) for v in seeds):
            raise AnsibleActionFail("variables: a list of variable names is required, got %r" % (seeds,))
        extra = args.get("files") or []
        if not isinstance(extra, list) or not all(isinstance(f, str) for f in extra):
            raise AnsibleActionFail("files: a list of control-host files is required, got %r" % (extra,))
        old_labels = args.get("old_labels") or {}
        if not isinstance(old_labels, dict):
            raise AnsibleActionFail("old_labels: a dict of an older image's labels is required, got %r" % (old_labels,))

        roles_dir = os.path.join(COLLECTION, "roles")
        try:
            files, touched = H.image_files(roles_dir, _entries(roles))
            components = {"role." + role: H.tree_digest(os.path.join(roles_dir, role)) for role in touched}
            components["plugins"] = H.tree_digest(os.path.join(COLLECTION, "plugins"))
            for path in extra:
                components["file." + os.path.basename(path)] = H.file_digest(path)
        except (OSError, UnicodeDecodeError) as exc:
            raise AnsibleActionFail("roles: cannot read the image's roles under %s: %s" % (roles_dir, exc)) from None
        defaults = {}
        for role in touched:
            defaults.update(_load(os.path.join(roles_dir, role, "defaults", "main.yml")))
        names = set(seeds)
        for rel in files:
            with open(os.path.join(roles_dir, rel), encoding="utf-8") as handle:
                names |= H.words(handle.read())
        variables = H.variable_closure(task_vars, defaults, sorted(names))
        variables["_set"] = {"name": name, "roles": roles}
        digest = H.image_hash(components, variables)
        version = str(_load(os.path.join(COLLECTION, "galaxy.yml")).get("version", ""))
        labels = {LABEL + "hash": digest["hash"], LABEL + "set": name, LABEL + "collection": version,
                  LABEL + "roles": ",".join("%s@%s" % (r[len("role."):], version) for r in sorted(components)
                                            if r.startswith("role."))}
        labels.update({LABEL + part: value[:12] for part, value in digest["components"].items()})
        result.update(changed=False, hash=digest["hash"], hash12=digest["hash"][:12], labels=labels,
                      components=digest["components"], variables=sorted(variables), files=files,
                      changed_since=H.changed_components(old_labels, digest["components"], LABEL) if old_labels else [])
        return result
