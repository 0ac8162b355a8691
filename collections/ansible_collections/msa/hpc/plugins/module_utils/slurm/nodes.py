# SPDX-License-Identifier: GPL-3.0-or-later
"""The one reader of Slurm's node records: ``sinfo --json``, ``scontrol show nodes --json`` or slurmrestd's nodes
answer, and a node's state in one form (the base state and its flags) whatever the release's layout."""
from __future__ import annotations

import json
import re

from ansible_collections.msa.hpc.plugins.module_utils.slurm.jobs import number


class NodeRecordError(ValueError):
    """The answer holds no node list; the message names the command and what it held."""


def load_nodes(text, what="sinfo --json"):
    """The node objects of the answer (JSON text, or slurmrestd's decoded answer): ``nodes`` (22.05's sinfo, every
    release's ``scontrol show nodes --json`` and slurmrestd), or the ``sinfo`` groups of 23.02 on (grouped)."""
    try:
        data = json.loads(text) if isinstance(text, (str, bytes)) else text
    except ValueError as exc:
        raise NodeRecordError("%s printed no JSON: %s" % (what, exc)) from None
    nodes = data.get("nodes") if isinstance(data, dict) else None
    if nodes is None and isinstance(data, dict) and isinstance(data.get("sinfo"), list):
        return grouped(data["sinfo"], what)
    if not isinstance(nodes, list):
        keys = ", ".join(sorted(data)) if isinstance(data, dict) else type(data).__name__
        raise NodeRecordError("%s: the answer holds no node list (keys: %s)" % (what, keys))
    return [n for n in nodes if isinstance(n, dict)]


def grouped(groups, what="sinfo --json"):
    """Node records ``{name, state, reason, partitions, grouped: True}`` from sinfo's groups of 23.02 on (one group
    per partition and set of alike nodes: ``{"nodes": {"nodes": [names]}, "node": {"state": [...]}, "reason":
    {"description": ...}, "partition": {"name": ...}}``). Only name, state, reason and partitions are a node's own
    there (cpus and memory are the group's), so a reader of more asks ``scontrol show nodes --json``."""
    out = {}
    for n, group in enumerate(groups):
        where = "%s: sinfo[%d]" % (what, n)
        names = (group.get("nodes") or {}).get("nodes") if isinstance(group, dict) else None
        state = (group.get("node") or {}).get("state") if isinstance(group, dict) else None
        if not isinstance(names, list) or not all(isinstance(x, str) for x in names):
            raise NodeRecordError("%s: field nodes.nodes: %r is not a list of node names" % (where, names))
        if not isinstance(state, list) or not all(isinstance(x, str) for x in state):
            raise NodeRecordError("%s: field node.state: %r is not a list of state words" % (where, state))
        reason = group.get("reason")
        reason = reason.get("description") if isinstance(reason, dict) else reason
        if reason is not None and not isinstance(reason, str):
            raise NodeRecordError("%s: field reason.description: %r is not text" % (where, reason))
        partition = (group.get("partition") or {}).get("name")
        for name in names:
            rec = out.setdefault(name, {"name": name, "state": list(state), "reason": reason or "",
                                        "partitions": [], "grouped": True})
            if partition and partition not in rec["partitions"]:
                rec["partitions"].append(partition)
    return list(out.values())


def state(node):
    """``(base state, flags)`` of a node record: 22.05 gives ``state`` and ``state_flags``, later releases one list
    (``["IDLE", "DRAIN"]``); the base state is lower case, the flags upper case, in the order Slurm gave them."""
    raw = node.get("state")
    words_only = isinstance(raw, (list, tuple)) and all(isinstance(w, str) for w in raw)
    if not (raw is None or isinstance(raw, str) or words_only):
        raise NodeRecordError("node %s: field state: %r is not a node state (a word, or a list of words)"
                              % (node.get("name"), raw))
    if isinstance(raw, (list, tuple)):
        words = [str(w) for w in raw if str(w)]
    else:
        words = [w for w in re.split(r"[+\s]+", str(raw or "")) if w]
    flags = [str(w).upper() for w in words[1:]] + [str(f).upper() for f in (node.get("state_flags") or [])]
    return (words[0].lower() if words else "unknown"), list(dict.fromkeys(flags))


def find(nodes, name):
    """The record of node ``name``, or None."""
    return next((n for n in nodes if n.get("name") == name), None)


def records(text, what="scontrol show nodes --json"):
    """Every node of the answer in one form, whatever the release: ``{name, state, flags, reason, boot_time,
    gres, partitions}`` - the base state lower case (``idle``), the flags upper case (``["DRAIN"]``), the reason as
    text (empty when none), boot_time in seconds since the epoch (None when the answer has none: sinfo's groups)."""
    out = []
    for node in load_nodes(text, what):
        base, flags = state(node)
        reason = node.get("reason")
        reason = reason.get("description") if isinstance(reason, dict) else reason
        out.append({"name": node.get("name"), "state": base, "flags": flags, "reason": reason or "",
                    "boot_time": number(node.get("boot_time")), "gres": node.get("gres") or "",
                    "partitions": list(node.get("partitions") or [])})
    return out
