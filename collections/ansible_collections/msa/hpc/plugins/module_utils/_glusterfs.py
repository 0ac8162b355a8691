# SPDX-License-Identifier: GPL-3.0-or-later
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""GlusterFS's own answers, read (role msa.hpc.glusterfs_server): ``gluster volume info --xml`` as volumes with their
options, which options differ from the inventory's, and ``gluster volume quota <vol> list --xml`` as a usage report
per user (a user's quota is the limit on their directory at the top of the volume, e.g. /alice on a home volume)."""
from __future__ import annotations

import xml.etree.ElementTree as ET

_BOOLEAN = {"on": "on", "off": "off", "yes": "on", "no": "off", "true": "on", "false": "off", "enable": "on",
            "disable": "off", "1": "on", "0": "off"}


class GlusterOutputError(ValueError):
    """gluster answered something that is not the XML it documents."""


def _root(text, what):
    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        raise GlusterOutputError("%s: not gluster's XML (%s)" % (what, exc)) from None
    if root.tag != "cliOutput":
        raise GlusterOutputError("%s: the XML's root is <%s>, not <cliOutput>" % (what, root.tag))
    return root


def _text(node, tag, default=""):
    found = node.find(tag)
    return (found.text or "").strip() if found is not None and found.text is not None else default


def volume_info(text):
    """``gluster volume info [<vol>] --xml`` -> {name: {status, type, replica, arbiter, bricks, options}}; a volume that
    does not exist gives {} (gluster answers opRet -1, "Volume ... does not exist", and exit status 0 or 1)."""
    root = _root(text, "gluster volume info")
    volumes = {}
    for vol in root.iter("volume"):
        name = _text(vol, "name")
        if not name:
            continue
        bricks = [_text(b, "name") or (b.text or "").strip() for b in vol.iter("brick")]
        options = {_text(o, "name"): _text(o, "value") for o in vol.iter("option") if _text(o, "name")}
        volumes[name] = {"status": _text(vol, "statusStr"), "type": _text(vol, "typeStr"),
                         "replica": int(_text(vol, "replicaCount", "0") or 0),
                         "arbiter": int(_text(vol, "arbiterCount", "0") or 0), "bricks": bricks, "options": options}
    if not volumes and _text(root, "opRet") not in ("", "0") and "does not exist" not in _text(root, "opErrstr"):
        raise GlusterOutputError("gluster volume info failed: %s" % (_text(root, "opErrstr") or _text(root, "opRet")))
    return volumes


def _normal(value):
    value = str(value).strip()
    return _BOOLEAN.get(value.lower(), value)


def options_to_set(current, desired):
    """The options of ``desired`` whose value differs from ``current`` (gluster's reconfigured options), as strings;
    on/off, yes/no, true/false and enable/disable compare as the same switch."""
    return {key: str(value) for key, value in sorted(desired.items())
            if _normal(current.get(key, "\0unset")) != _normal(value)}


def quota_list(text):
    """``gluster volume quota <vol> list --xml`` -> [{path, hard_limit, soft_limit, used, available, soft_exceeded,
    hard_exceeded}], sizes in bytes; a volume with quota off or no limit gives []."""
    root = _root(text, "gluster volume quota list")
    rows = []
    for limit in root.iter("limit"):
        try:
            rows.append({"path": _text(limit, "path"), "hard_limit": int(_text(limit, "hard_limit", "0")),
                         "soft_limit": int(_text(limit, "soft_limit_value", "0")),
                         "used": int(_text(limit, "used_space", "0")),
                         "available": int(_text(limit, "avail_space", "0")),
                         "soft_exceeded": _text(limit, "sl_exceeded") == "Yes",
                         "hard_exceeded": _text(limit, "hl_exceeded") == "Yes"})
        except ValueError as exc:
            raise GlusterOutputError("gluster volume quota list: a size that is not a number (%s)" % exc) from None
    return rows


def usage_report(volume, rows):
    """One record per user directory (a limit on a directory at the top of the volume, /<user>), sorted by use:
    {volume, user, path, used, hard_limit, percent, state} where state is ok, soft or hard (limit exceeded)."""
    report = []
    for row in rows:
        parts = row["path"].strip("/").split("/")
        if len(parts) != 1 or not parts[0]:
            continue
        percent = round(100.0 * row["used"] / row["hard_limit"], 1) if row["hard_limit"] else 0.0
        state = "hard" if row["hard_exceeded"] else "soft" if row["soft_exceeded"] else "ok"
        report.append({"volume": volume, "user": parts[0], "path": row["path"], "used": row["used"],
                       "hard_limit": row["hard_limit"], "percent": percent, "state": state})
    return sorted(report, key=lambda r: (-r["used"], r["user"]))


def report_lines(report):
    """The usage report as aligned text lines (what an administrator reads)."""
    lines = ["%-16s %-12s %12s %12s %7s %s" % ("volume", "user", "used", "limit", "use%", "state")]
    for r in report:
        fields = (r["volume"], r["user"], _size(r["used"]), _size(r["hard_limit"]), r["percent"], r["state"])
        lines.append("%-16s %-12s %12s %12s %6.1f%% %s" % fields)
    return lines


def _size(num):
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if num < 1024 or unit == "TiB":
            return ("%d %s" % (num, unit)) if unit == "B" else "%.1f %s" % (num, unit)
        num /= 1024.0
    return str(num)  # pragma: no cover
