# SPDX-License-Identifier: GPL-3.0-or-later
"""The overlay server's store (issue 38): one directory per node, ``<store>/<node>/manifest.json`` and its files'
contents as ``<store>/<node>/blobs/<sha256>``. ``publish`` (module msa.hpc.overlay_publish) writes it with
msa.hpc.file_tree's logic: each blob and the manifest atomically and only when they differ, the manifest after the
blobs it names, the blobs no manifest names any more last. ``read_overlay`` and ``read_hash`` (the server) read it
back, checking every bound and digest, so a store damaged on disk is never served. Standard library only."""
from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil

from ansible_collections.msa.hpc.plugins.module_utils import _overlay as O
from ansible_collections.msa.hpc.plugins.module_utils._file_tree import install

MANIFEST = "manifest.json"
BLOBS = "blobs"


class StoreError(Exception):
    """The store cannot give a node's overlay: damaged (``busy`` false) or being republished (``busy`` true)."""

    def __init__(self, message, busy=False):
        super().__init__(message)
        self.busy = busy


ITEM_FIELDS = ("dest", "content", "_content", "mode", "owner", "group", "restart")


def decode_request(nodes, contents=None):
    """The module's ``nodes`` ({node: [{dest, content or _content, mode, owner, group, restart}]}) as publish's
    request: each item with its ``data`` (bytes). ``_content`` names an entry of ``contents`` (base64), where the
    action plugin puts every file's content (``content`` or ``src``), so no secret is echoed with the arguments.
    Errors name the node and item."""
    if not isinstance(nodes, dict):
        raise O.OverlayError("nodes: %r is not a mapping of node names to lists of files" % (type(nodes).__name__,))
    contents = contents or {}
    request = {}
    for node, items in nodes.items():
        O.check_node(node)
        if not isinstance(items, list):
            raise O.OverlayError("nodes.%s: not a list of files" % node)
        request[node] = []
        for index, item in enumerate(items):
            where = "nodes.%s[%d]" % (node, index)
            if not isinstance(item, dict):
                raise O.OverlayError("%s: not a mapping {dest, content or src, mode, owner, group, restart}" % where)
            unknown = sorted(set(item) - set(ITEM_FIELDS) - {"src"})
            if unknown:
                raise O.OverlayError("%s: unknown field %s" % (where, ", ".join(unknown)))
            if (item.get("content") is None) == (item.get("_content") is None):
                raise O.OverlayError("%s (%s): give exactly one of content and src" % (where, item.get("dest")))
            if item.get("content") is not None:
                data = str(item["content"]).encode("utf-8")
            elif item["_content"] in contents:
                data = base64.b64decode(contents[item["_content"]])
            else:
                raise O.OverlayError("%s (%s): its content was not sent (call the module as msa.hpc.overlay_publish)"
                                     % (where, item.get("dest")))
            restart = item.get("restart")
            request[node].append({"dest": item.get("dest"), "data": data, "mode": item.get("mode"),
                                  "owner": item.get("owner"), "group": item.get("group"),
                                  "restart": [restart] if isinstance(restart, str) else restart})
    return request


def entry_for(item, node, index):
    """The manifest entry of one requested file {dest, data (bytes), mode, owner, group, restart}, checked."""
    where = "nodes.%s[%d]" % (node, index)
    data = item.get("data")
    if not isinstance(data, bytes):
        raise O.OverlayError("%s: no content (give content or src)" % where)
    entry = {"path": item.get("dest"), "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    for field in ("mode", "owner", "group", "restart"):
        if item.get(field) is not None:
            entry[field] = item[field]
    try:
        return O.check_entry(entry, where=where)
    except O.OverlayError as exc:
        raise O.OverlayError(str(exc).replace(".path:", ".dest:", 1)) from None


def _prepare(node, items):
    """(manifest, {sha256: content}) of one node's request, checked whole (entries, bounds, one path twice)."""
    O.check_node(node)
    if not isinstance(items, list):
        raise O.OverlayError("nodes.%s: %r is not a list of files" % (node, items))
    entries, blobs = [], {}
    for index, item in enumerate(items):
        entry = entry_for(item, node, index)
        entries.append(entry)
        blobs[entry["sha256"]] = item["data"]
    document = O.manifest(node, entries)
    O.check_manifest(document, node)
    return document, blobs


def _publish_node(store, node, document, blobs, common):
    node_dir = os.path.join(store, node)
    blob_dir = os.path.join(node_dir, BLOBS)
    written = install(blob_dir, blobs, **common)
    stale = sorted(name for name in (os.listdir(blob_dir) if os.path.isdir(blob_dir) else ()) if name not in blobs)
    text = json.dumps(document, indent=1, sort_keys=True).encode() + b"\n"
    top = install(node_dir, {MANIFEST: text}, absent=[os.path.join(blob_dir, name) for name in stale], **common)
    return {"hash": document["hash"], "changed": written["changed"] or top["changed"],
            "files": [entry["path"] for entry in document["files"]],
            "written": [os.path.join(BLOBS, name) for name in written["written"]] + top["written"],
            "removed": top["removed"]}


def publish(store, nodes, prune=False, mode=0o640, dir_mode=0o750, owner=None, group=None, check_mode=False):
    """Write each node's overlay ({node: [{dest, data, mode, owner, group, restart}]}) into ``store``; with
    ``prune``, remove the overlays of nodes not named. Returns {changed, nodes: {node: {hash, changed, files,
    written, removed}}, pruned, diff}. Every node's request is checked before anything is written."""
    if not isinstance(store, str) or not os.path.isabs(store):
        raise O.OverlayError("store: %r is not an absolute path" % (store,))
    prepared = {node: _prepare(node, items) for node, items in nodes.items()}
    common = {"mode": mode, "dir_mode": dir_mode, "owner": owner, "group": group, "check_mode": check_mode}
    result = {"nodes": {}, "pruned": []}
    for node in sorted(prepared):
        result["nodes"][node] = _publish_node(store, node, *prepared[node], common)
    if prune and os.path.isdir(store):
        for name in sorted(os.listdir(store)):
            path = os.path.join(store, name)
            if name not in nodes and O.NODE_NAME.match(name) and os.path.isdir(path) and not os.path.islink(path):
                result["pruned"].append(name)
                if not check_mode:
                    shutil.rmtree(path)
    changed_nodes = sorted(node for node, one in result["nodes"].items() if one["changed"])
    result["changed"] = bool(changed_nodes or result["pruned"])
    result["diff"] = {"before": "".join("%s\n" % n for n in result["pruned"]),
                      "after": "".join("%s %s\n" % (n, result["nodes"][n]["hash"]) for n in changed_nodes),
                      "before_header": "%s (overlays removed)" % store,
                      "after_header": "%s (overlays published)" % store}
    return result


def _read(path, limit, what):
    try:
        with open(path, "rb") as handle:
            data = handle.read(limit + 1)
    except FileNotFoundError:
        return None
    if len(data) > limit:
        raise StoreError("%s %s is larger than %d bytes" % (what, path, limit))
    return data


def read_manifest(store, node):
    """The checked manifest of ``node`` in ``store``, or None when none is published."""
    path = os.path.join(store, O.check_node(node), MANIFEST)
    raw = _read(path, O.MAX_MANIFEST_BYTES, "manifest")
    if raw is None:
        return None
    try:
        return O.check_manifest(json.loads(raw), node)
    except (ValueError, UnicodeDecodeError) as exc:
        raise StoreError("manifest %s is not JSON: %s" % (path, exc)) from None
    except O.OverlayError as exc:
        raise StoreError("manifest %s: %s" % (path, exc)) from None


def read_overlay(store, node):
    """The overlay document of ``node``: its manifest with each file's ``content`` (base64), every blob checked
    against its size and sha256; None when none is published."""
    document = read_manifest(store, node)
    if document is None:
        return None
    for entry in document["files"]:
        path = os.path.join(store, node, BLOBS, entry["sha256"])
        data = _read(path, entry["size"], "content")
        if data is None:
            raise StoreError("content %s of %s is missing (the overlay is being published)" % (path, entry["path"]),
                             busy=True)
        if len(data) != entry["size"] or hashlib.sha256(data).hexdigest() != entry["sha256"]:
            raise StoreError("content %s of %s does not match its size and sha256" % (path, entry["path"]))
        entry["content"] = base64.b64encode(data).decode("ascii")
    return document
