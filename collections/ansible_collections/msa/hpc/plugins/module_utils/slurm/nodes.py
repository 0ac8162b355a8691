# SPDX-License-Identifier: GPL-3.0-or-later
"""The one reader of Slurm's node records: ``sinfo --json``, ``scontrol show nodes --json`` or slurmrestd's nodes
answer, and a node's state in one form (the base state and its flags) whatever the release's layout."""
from __future__ import annotations

import json
import re


class NodeRecordError(ValueError):
    """The answer holds no node list; the message names the command and what it held."""


def load_nodes(text, what="sinfo --json"):
    """The node objects of the answer (JSON text, or slurmrestd's decoded answer)."""
    try:
        data = json.loads(text) if isinstance(text, (str, bytes)) else text
    except ValueError as exc:
        raise NodeRecordError("%s printed no JSON: %s" % (what, exc)) from None
    nodes = data.get("nodes") if isinstance(data, dict) else None
    if not isinstance(nodes, list):
        keys = ", ".join(sorted(data)) if isinstance(data, dict) else type(data).__name__
        raise NodeRecordError("%s: the answer holds no node list (keys: %s)" % (what, keys))
    return [n for n in nodes if isinstance(n, dict)]


def state(node):
    """``(base state, flags)`` of a node record: 22.05 gives ``state`` and ``state_flags``, later releases one list
    (``["IDLE", "DRAIN"]``); the base state is lower case, the flags upper case, in the order Slurm gave them."""
    raw = node.get("state")
    if isinstance(raw, (list, tuple)):
        words = [str(w) for w in raw if str(w)]
    else:
        words = [w for w in re.split(r"[+\s]+", str(raw or "")) if w]
    flags = [str(w).upper() for w in words[1:]] + [str(f).upper() for f in (node.get("state_flags") or [])]
    return (words[0].lower() if words else "unknown"), list(dict.fromkeys(flags))


def find(nodes, name):
    """The record of node ``name``, or None."""
    return next((n for n in nodes if n.get("name") == name), None)
