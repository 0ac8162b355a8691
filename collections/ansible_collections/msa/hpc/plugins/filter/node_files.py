# SPDX-License-Identifier: GPL-3.0-or-later
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

"""Filter msa.hpc.node_files: a role's declaration of a node's own files (its ``<role>_node_files``) added to the
list a node's overlay is published from, so the SSH path (a task per entry) and the overlay path (msa.hpc.node_overlay)
write the same files from one declaration (collection docs/images.md)."""

import re

from ansible.errors import AnsibleFilterError

FIELDS = ("dest", "content", "src", "mode", "owner", "group", "restart", "present")
_MODE = re.compile(r"^0?[0-7]{3}$")


def _entry(name, entry):
    """One declared file checked and normalised to an overlay file: {dest, content or src, mode, owner, group,
    restart}; None when its ``present`` is false. AnsibleFilterError names the entry and the field."""
    where = "node file %r" % name
    if not isinstance(entry, dict):
        raise AnsibleFilterError("%s: a mapping is required, got %s" % (where, type(entry).__name__))
    unknown = sorted(set(entry) - set(FIELDS))
    if unknown:
        raise AnsibleFilterError("%s: unknown field %s (allowed: %s)" % (where, ", ".join(unknown), ", ".join(FIELDS)))
    present = entry.get("present", True)
    if not isinstance(present, bool):
        raise AnsibleFilterError("%s: present must be a boolean, got %r" % (where, present))
    if not present:
        return None
    dest = entry.get("dest")
    if not isinstance(dest, str) or not dest.startswith("/") or "/../" in dest + "/":
        raise AnsibleFilterError("%s: dest must be an absolute path without '..', got %r" % (where, dest))
    if (entry.get("content") is None) == (entry.get("src") is None):
        raise AnsibleFilterError("%s (%s): give content or src, exactly one" % (where, dest))
    if entry.get("src") is not None and not str(entry["src"]).strip():
        raise AnsibleFilterError("%s (%s): src must name a file on the control host, got an empty one" % (where, dest))
    mode = entry.get("mode")
    if not isinstance(mode, str) or not _MODE.match(mode):
        raise AnsibleFilterError("%s (%s): mode must be a quoted octal string such as \"0644\", got %r"
                                 % (where, dest, mode))
    restart = entry.get("restart", [])
    if isinstance(restart, str) or not isinstance(restart, list) or not all(isinstance(u, str) for u in restart):
        raise AnsibleFilterError("%s (%s): restart must be a list of unit names, got %r" % (where, dest, restart))
    result = {"dest": dest, "mode": mode.rjust(4, "0"), "owner": str(entry.get("owner", "root")),
              "group": str(entry.get("group", "root")), "restart": list(restart)}
    if entry.get("src") is not None:
        result["src"] = str(entry["src"])
    else:
        result["content"] = str(entry["content"])
    return result


def node_files(files, declaration):
    """``files`` (a node's overlay files so far) with the files of ``declaration`` added: a role's mapping of a
    short name to a file (or a list of files). A file already there with the same dest must be the same file (the
    system's CA, which several roles install), whose units to restart are then those of both; two different files
    for one dest are refused."""
    if files is None:
        files = []
    if not isinstance(files, list):
        raise AnsibleFilterError("node_files: the input must be a list of files, got %s" % type(files).__name__)
    if isinstance(declaration, dict):
        named = sorted(declaration.items())
    elif isinstance(declaration, list):
        named = [(str(index), entry) for index, entry in enumerate(declaration)]
    else:
        raise AnsibleFilterError("node_files: a declaration must be a mapping of names to files, got %s"
                                 % type(declaration).__name__)
    result = [dict(one) if isinstance(one, dict) else one for one in files]
    by_dest = {one.get("dest"): one for one in result if isinstance(one, dict)}
    for name, entry in named:
        one = _entry(name, entry)
        if one is None:
            continue
        known = by_dest.get(one["dest"])
        if known is None:
            result.append(one)
            by_dest[one["dest"]] = one
        elif _without_restart(known) != _without_restart(one):
            raise AnsibleFilterError("node file %r: %s is declared twice with different content or settings"
                                     % (name, one["dest"]))
        else:  # the same file: each role's units restart when it changes
            known["restart"] = list(known.get("restart", [])) + [u for u in one["restart"]
                                                                 if u not in known.get("restart", [])]
    return result


def _without_restart(entry):
    return {key: value for key, value in entry.items() if key != "restart"}


class FilterModule:
    """A node's own files, declared once per role."""

    def filters(self):
        return {"node_files": node_files}
