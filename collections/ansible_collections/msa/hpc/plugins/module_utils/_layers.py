# SPDX-License-Identifier: GPL-3.0-or-later
"""Which inventory layer wins for each variable the system description owns, and the layer files that set one
where it would not win (or would win where it should not). docs/inventories.md "Precedence" is this rule."""
from __future__ import annotations

import os

from ansible_collections.msa.hpc.plugins.module_utils._system import MODULE_VARS, NODE_VARS, SYSTEM_VARS

OWNED = {"node": NODE_VARS, "module": MODULE_VARS, "system": SYSTEM_VARS}
CLASS_OF = {name: kind for kind, names in OWNED.items() for name in names}
# Where a layer other than the system's may set an owned value, by class: a module's values from the module's
# group or a node, a node's values from the node; system-wide values only in system.msa.yml itself.
# A layer's own inventory file (hosts.yml) may set values inline: levels inline-all, inline-group, inline-host.
INTENDED = {"node": ("host", "inline-host"), "module": ("module", "host", "inline-host"), "system": ()}
VAR_EXTENSIONS = ("", ".yml", ".yaml", ".json")


def winner(kind, level, after_system):
    """'layer' or 'system': who wins when a layer sets a value of class ``kind`` (node, module, system) at
    ``level`` (all, module, role, fabric, group, host, extra) while the system layer sets it too.

    Ansible's order: inventory-plugin host vars (node values) rank above every group_vars file and below every
    host_vars file; the msa.hpc.system vars plugin hands out module values as the system layer's
    group_vars/<module>.yml and system-wide values as its group_vars/all.yml, so files of an earlier layer
    (``after_system`` false) lose to them at the same kind of group, a later layer's win, and any non-`all`
    group file beats every `all` file. Variables written inline in a layer's inventory file rank as inventory
    variables: below all of those on a group, beside the plugin's own on a host.
    """
    if level == "inline-host":
        # the same host object as the plugin's: the later parse wins; above every group value otherwise
        return "layer" if after_system or kind != "node" else "system"
    if level in ("host", "extra"):
        return "layer"
    if kind == "node" or level.startswith("inline-"):
        return "system"     # inline group vars rank below every vars plugin's and group_vars file's value
    if kind == "module":
        return "layer" if after_system and level != "all" else "system"
    return "layer" if (after_system or level != "all") else "system"


def level_of(group, modules):
    if group == "all":
        return "all"
    if group in modules:
        return "module"
    if group.startswith("msa_"):
        return "role"
    if group.startswith("fabric_"):
        return "fabric"
    return "group"


def _var_files(directory, name):
    """The files Ansible's host_group_vars reads for ``name`` in ``directory`` (file or directory of files)."""
    found = []
    for ext in VAR_EXTENSIONS:
        path = os.path.join(directory, name + ext)
        if os.path.isfile(path) and ext:
            found.append(path)
        elif os.path.isdir(path) and not ext:
            for root, dirs, files in os.walk(path):
                dirs.sort()
                found += [os.path.join(root, f) for f in sorted(files) if f.endswith(VAR_EXTENSIONS[1:])]
    return found


def _stem(filename):
    """Group or host name of a vars file or directory (host names may hold dots: cm01.example.org.yml)."""
    stem, ext = os.path.splitext(filename)
    return stem if ext in VAR_EXTENSIONS[1:] else filename


def _load(path, parse):
    """A vars or inventory file's data, parsed with ``parse`` (a YAML loader); None for a vaulted or broken one."""
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    if text.startswith("$ANSIBLE_VAULT"):
        return None     # a vaulted file: only vault_* references belong there (docs/inventories.md)
    try:
        return parse(text)
    except Exception:   # pylint: disable=broad-except  # Ansible itself reports a broken file
        return None


def layer_warnings(sources, modules, parse):
    """One sentence per owned variable set in a group_vars or host_vars file of a layer other than the system's,
    where it would not win or would win where it should not. ``sources`` are the inventory sources in order,
    ``parse`` turns a file's text into data (a YAML loader)."""
    sources = [s for s in sources if s and os.path.exists(s)]
    dirs = [s if os.path.isdir(s) else os.path.dirname(s) for s in sources]
    system_at = next((i for i, d in enumerate(dirs)
                      if any(f.endswith((".msa.yml", ".msa.yaml")) for f in os.listdir(d))), None)
    if system_at is None:
        return []
    warnings = []
    for index, directory in enumerate(dirs):
        if index == system_at:
            continue
        after = index > system_at
        files = [sources[index]] if os.path.isfile(sources[index]) else _inventory_files(directory)
        for path in files:
            data = _load(path, parse)
            for level, name, keys in _inline(data.get("all") if isinstance(data, dict) else None, "all", []):
                warnings += ["%s: %s" % (path, msg) for msg in (
                    _judge(CLASS_OF[key], level, after, key, name) for key in keys if key in CLASS_OF) if msg]
        for sub, is_host in (("group_vars", False), ("host_vars", True)):
            base = os.path.join(directory, sub)
            names = sorted({_stem(n) for n in os.listdir(base)}) if os.path.isdir(base) else []
            for name in names:
                level = "host" if is_host else level_of(name, modules)
                for path in _var_files(base, name):
                    data = _load(path, parse)
                    for key in data if isinstance(data, dict) else ():
                        if key in CLASS_OF:
                            message = _judge(CLASS_OF[key], level, after, key, name)
                            if message:
                                warnings.append("%s: %s" % (path, message))
    return warnings


def _inline(node, name, found):
    """(level, group or host, keys) of the inline vars of a YAML inventory ``node`` (group ``name``)."""
    if not isinstance(node, dict):
        return found
    if isinstance(node.get("vars"), dict):
        found.append(("inline-all" if name == "all" else "inline-group", name, list(node["vars"])))
    for host, values in (node.get("hosts") or {}).items() if isinstance(node.get("hosts"), dict) else ():
        if isinstance(values, dict) and values:
            found.append(("inline-host", host, list(values)))
    for child, sub in (node.get("children") or {}).items() if isinstance(node.get("children"), dict) else ():
        _inline(sub, child, found)
    return found


def _inventory_files(directory):
    """YAML inventory files of a layer directory (the ones Ansible's yaml plugin reads there)."""
    return [os.path.join(directory, f) for f in sorted(os.listdir(directory))
            if f.endswith((".yml", ".yaml")) and not f.endswith((".msa.yml", ".msa.yaml"))
            and os.path.isfile(os.path.join(directory, f))]


def _judge(kind, level, after, key, name):
    wins = winner(kind, level, after) == "layer"
    if level in INTENDED[kind] and wins:
        return None
    where = {"node": "host_vars/<node>.yml", "module": "group_vars/<module>.yml or host_vars/<node>.yml",
             "system": "the system's system.msa.yml"}[kind]
    if wins:
        return ("%s set for %s replaces what the system description says of it (a %s value) for every node "
                "there; set it in %s" % (key, name, kind, where))
    return ("%s set for %s has no effect: the system description's %s value wins over it; set it in %s"
            % (key, name, kind, where))
