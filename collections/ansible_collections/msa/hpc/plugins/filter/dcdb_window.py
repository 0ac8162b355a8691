# SPDX-License-Identifier: GPL-3.0-or-later
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

"""Filter msa.hpc.dcdb_window_check: stored per-node readings against each node's own reading before and after."""

from ansible.errors import AnsibleFilterError


def _number(value, field):
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise AnsibleFilterError("dcdb_window_check: %s %r is not a number" % (field, value))
    return int(number) if number.is_integer() else number


def dcdb_window_check(series, before, after=None):
    """``series``: the Collect Agent's /query answer (``[{target, datapoints: [[value, ms], ...]}]``).
    ``before``: ``{node: {topic, value, ms}}``, the node's own counter read just before ``ms`` (its clock, epoch ms).
    ``after``: ``{node: value}``, the same counter read after the store held the reading (None while waiting).

    Returns ``{stored: {node: value}, missing: [node], failures: [line]}``: ``stored`` is the first value of the
    node's topic taken strictly after its ``ms``; a node without one is ``missing``. With ``after``, a stored value
    outside ``[before, after]`` fails (a reading published under another node's name), as does a node without an
    ``after``, and so do stored values equal on every node (readings that cannot tell the nodes apart)."""
    if not isinstance(before, dict) or not before:
        raise AnsibleFilterError("dcdb_window_check: before must map each node to {topic, value, ms}, got %r" % (before,))
    by_topic = {}
    for entry in series or []:
        if not isinstance(entry, dict) or not isinstance(entry.get("target"), str):
            raise AnsibleFilterError("dcdb_window_check: series entry %r has no target" % (entry,))
        by_topic.setdefault(entry["target"], []).extend(entry.get("datapoints") or [])
    stored, missing, failures = {}, [], []
    for node in sorted(before):
        mine = before[node] or {}
        since = _number(mine.get("ms"), "before[%s].ms" % node)
        fresh = sorted((_number(ts, "%s timestamp" % mine.get("topic")), _number(v, "%s value" % mine.get("topic")))
                       for v, ts in by_topic.get(mine.get("topic"), []) if v is not None and ts is not None)
        fresh = [point for point in fresh if point[0] > since]
        if not fresh:
            missing.append(node)
            continue
        stored[node] = fresh[0][1]
    if after is None:
        return {"stored": stored, "missing": missing, "failures": []}
    for node in missing:
        mine = before[node]
        failures.append("%s: no reading of %s taken after %s ms in the store" % (node, mine.get("topic"), mine.get("ms")))
    for node, value in sorted(stored.items()):
        low = _number(before[node].get("value"), "before[%s].value" % node)
        if node not in after:
            failures.append("%s: stored %s, but the node's own reading after it is missing" % (node, value))
            continue
        high = _number(after[node], "after[%s]" % node)
        if not low <= value <= high:
            failures.append("%s: stored %s under %s is outside the node's own window [%s, %s]: the reading is not "
                            "this node's" % (node, value, before[node].get("topic"), low, high))
    if len(stored) > 1 and len(set(stored.values())) == 1:
        failures.append("the stored values of %s are all %s: the readings cannot tell the nodes apart"
                        % (", ".join(sorted(stored)), next(iter(stored.values()))))
    return {"stored": stored, "missing": missing, "failures": failures}


class FilterModule:
    """Per-node monitoring values checked against the nodes' own readings."""

    def filters(self):
        return {"dcdb_window_check": dcdb_window_check}
