# SPDX-License-Identifier: GPL-3.0-or-later
"""The node overlay's format, one codec for the publisher, the server and the node (issue 38): node names, the
manifest's entries (path, mode, owner, group, size, sha256, units to restart), their limits and the overlay's hash.

Every value is checked before a privileged process uses it: a path is absolute, normalised, without ``..`` and inside
an allowed root; a mode has no set-id bits; owners and units are plain names. Standard library only (the node's
``python3 -I`` runs it)."""
from __future__ import annotations

import hashlib
import json
import posixpath
import re

FORMAT = 1
# Directories an overlay may write below (never the roots themselves).
ROOTS = ("/etc", "/var/lib/msa-hpc")
# Bounds: files per overlay, bytes per file, bytes per overlay, units per file, characters per path.
MAX_FILES = 512
MAX_FILE_BYTES = 1 << 20
MAX_OVERLAY_BYTES = 8 << 20
MAX_UNITS = 16
MAX_PATH = 1024
# The JSON document of an overlay with its contents in base64, and a manifest alone, at their largest.
MAX_DOCUMENT_BYTES = MAX_OVERLAY_BYTES * 4 // 3 + MAX_FILES * 2048 + 4096
MAX_MANIFEST_BYTES = MAX_FILES * 2048 + 4096

NODE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,62}(\.[A-Za-z0-9][A-Za-z0-9_-]{0,62}){0,3}\Z")
ACCOUNT = re.compile(r"[a-z_][a-z0-9_-]{0,31}\Z")
UNIT = re.compile(r"[A-Za-z0-9_][A-Za-z0-9:_.@\\-]{0,200}\.(service|socket|timer|path|mount|automount|target)\Z")
SHA256 = re.compile(r"[0-9a-f]{64}\Z")
# The fields of an entry that its hash covers (everything but the content, which its sha256 stands for).
FIELDS = ("path", "mode", "owner", "group", "size", "sha256", "restart")


class OverlayError(Exception):
    """An overlay refused: the message names the node, the entry, the field and the value."""


def check_node(name):
    """``name`` when it is a node name (letters, digits, ``-``, ``_``, dotted labels); OverlayError otherwise."""
    if not isinstance(name, str) or not NODE_NAME.match(name):
        raise OverlayError("node: %r is not a node name (letters, digits, '-' and '_', up to 63 of them per "
                           "dot-separated label)" % (name,))
    return name


def check_path(path, roots=ROOTS, where="path"):
    """``path`` when it is an absolute, normalised path strictly inside one of ``roots``; OverlayError otherwise."""
    if not isinstance(path, str) or not path or len(path) > MAX_PATH:
        raise OverlayError("%s: %r is not a path of 1 to %d characters" % (where, path, MAX_PATH))
    if not path.isprintable() or not path.startswith("/"):
        raise OverlayError("%s: %r is not an absolute path of printable characters" % (where, path))
    if ".." in path.split("/") or posixpath.normpath(path) != path:
        raise OverlayError("%s: %r is not a normalised path (no '..', '.', '//' or trailing '/')" % (where, path))
    if not any(path.startswith(root.rstrip("/") + "/") for root in roots):
        raise OverlayError("%s: %r is outside the directories an overlay may write (%s)"
                           % (where, path, ", ".join(roots)))
    return path


def _mode(value, where):
    if isinstance(value, str) and re.match(r"[0-7]{3,4}\Z", value):
        number = int(value, 8)
    elif isinstance(value, int) and not isinstance(value, bool):
        number = value
    else:
        raise OverlayError("%s: %r is not an octal mode such as \"0644\"" % (where, value))
    if not 0 <= number <= 0o777:
        raise OverlayError("%s: %r has set-id or sticky bits (at most 0777)" % (where, value))
    return "%04o" % number


def _account(value, where):
    if not isinstance(value, str) or not ACCOUNT.match(value):
        raise OverlayError("%s: %r is not a user or group name" % (where, value))
    return value


def _units(value, where):
    if not isinstance(value, list) or len(value) > MAX_UNITS:
        raise OverlayError("%s: %r is not a list of at most %d systemd units" % (where, value, MAX_UNITS))
    for unit in value:
        if not isinstance(unit, str) or not UNIT.match(unit):
            raise OverlayError("%s: %r is not a systemd unit name (such as slurmd.service)" % (where, unit))
    return sorted(set(value))


def check_entry(entry, roots=ROOTS, where="files[?]"):
    """A manifest entry checked and normalised: {path, mode ("0644"), owner, group, size, sha256, restart}."""
    if not isinstance(entry, dict):
        raise OverlayError("%s: %r is not a mapping" % (where, entry))
    unknown = sorted(set(entry) - set(FIELDS) - {"content"})
    if unknown:
        raise OverlayError("%s: unknown field %s" % (where, ", ".join(unknown)))
    path = check_path(entry.get("path"), roots, where + ".path")
    where = "%s (%s)" % (where, path)
    size = entry.get("size")
    if not isinstance(size, int) or isinstance(size, bool) or not 0 <= size <= MAX_FILE_BYTES:
        raise OverlayError("%s.size: %r is not a number of bytes up to %d" % (where, size, MAX_FILE_BYTES))
    digest = entry.get("sha256")
    if not isinstance(digest, str) or not SHA256.match(digest):
        raise OverlayError("%s.sha256: %r is not a SHA-256 in lower-case hex" % (where, digest))
    return {"path": path, "mode": _mode(entry.get("mode", "0644"), where + ".mode"),
            "owner": _account(entry.get("owner", "root"), where + ".owner"),
            "group": _account(entry.get("group", "root"), where + ".group"),
            "size": size, "sha256": digest, "restart": _units(entry.get("restart", []), where + ".restart")}


def overlay_hash(entries):
    """The overlay's content hash: SHA-256 of its entries' fields (sorted by path) as canonical JSON."""
    canonical = [[entry[field] for field in FIELDS] for entry in sorted(entries, key=lambda e: e["path"])]
    return hashlib.sha256(json.dumps(canonical, separators=(",", ":")).encode()).hexdigest()


def check_manifest(document, node, roots=ROOTS):
    """A manifest ({format, node, hash, files}) checked against ``node`` and normalised: its entries sorted by path,
    no path twice or inside another entry's path, within the bounds, and its hash that of its entries."""
    if not isinstance(document, dict):
        raise OverlayError("overlay of %s: not a JSON object" % node)
    if document.get("format") != FORMAT:
        raise OverlayError("overlay of %s: format %r, this program reads format %d"
                           % (node, document.get("format"), FORMAT))
    if document.get("node") != node:
        raise OverlayError("overlay of %s: it names node %r" % (node, document.get("node")))
    files = document.get("files")
    if not isinstance(files, list) or len(files) > MAX_FILES:
        raise OverlayError("overlay of %s: files is not a list of at most %d entries" % (node, MAX_FILES))
    entries = [check_entry(entry, roots, "overlay of %s: files[%d]" % (node, i)) for i, entry in enumerate(files)]
    entries.sort(key=lambda e: e["path"])
    paths = set()
    for entry in entries:
        path = entry["path"]
        if path in paths:
            raise OverlayError("overlay of %s: %s is listed twice" % (node, path))
        parent = posixpath.dirname(path)
        while parent not in ("/", ""):
            if parent in paths:
                raise OverlayError("overlay of %s: %s is a file, and %s would be inside it" % (node, parent, path))
            parent = posixpath.dirname(parent)
        paths.add(path)  # sorted: a path comes before every path inside it
    total = sum(entry["size"] for entry in entries)
    if total > MAX_OVERLAY_BYTES:
        raise OverlayError("overlay of %s: %d bytes in all, more than %d" % (node, total, MAX_OVERLAY_BYTES))
    digest = overlay_hash(entries)
    if document.get("hash") != digest:
        raise OverlayError("overlay of %s: hash %r is not that of its entries (%s)"
                           % (node, document.get("hash"), digest))
    return {"format": FORMAT, "node": node, "hash": digest, "files": entries}


def manifest(node, entries):
    """The manifest of ``node`` for checked entries (each with its content's size and sha256)."""
    entries = sorted(entries, key=lambda e: e["path"])
    return {"format": FORMAT, "node": check_node(node), "hash": overlay_hash(entries), "files": entries}
