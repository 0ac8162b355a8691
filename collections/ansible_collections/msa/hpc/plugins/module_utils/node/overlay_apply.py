# SPDX-License-Identifier: GPL-3.0-or-later
"""msa-overlay-apply: fetch this node's overlay from the management node with the node's own token and apply it
(issue 38); run at every boot by ``msa-overlay.service`` and by hand.

The server is verified against the system's CA (no option turns that off). The whole overlay is fetched (bounded),
checked (every path inside the allowed roots with no symlink on the way, every file's size and sha256, the overlay's
hash, every owner known) and staged beside its targets before any file is replaced, so a failed fetch or check
changes nothing. Files that differ are replaced atomically with their modes and owners; the units they name are
restarted (``systemctl try-restart``) only when one of their files changed, and the applied hash is recorded. A
second run changes nothing. Standard library only, run with ``python3 -I``.
"""
from __future__ import annotations

import argparse
import base64
import binascii
import functools
import hashlib
import http.client
import json
import os
import socket
import ssl
import stat
import subprocess
import sys
import time

from ansible_collections.msa.hpc.plugins.module_utils import _overlay as O
from ansible_collections.msa.hpc.plugins.module_utils import _file_tree as F
from ansible_collections.msa.hpc.plugins.module_utils._rest import RestError, tls_context

CONFIG = "/etc/msa-hpc/overlay.json"
DEFAULTS = {"ca_file": "/etc/msa-hpc/tls/ca.pem", "token_file": "/etc/msa-hpc/overlay.token",
            "state_dir": "/var/lib/msa-hpc", "timeout": 30, "retries": 5}
HASH_FILE = "overlay.hash"
PENDING_FILE = "overlay.restart"  # units whose files were replaced but which are not restarted yet
MAX_TOKEN = 512


class FetchError(Exception):
    """The overlay could not be fetched; nothing was changed."""


def load_config(path, node=None):
    """The client's settings ({url, node, ca_file, token_file, state_dir, timeout, retries}), checked."""
    try:
        with open(path, encoding="utf-8") as handle:
            given = json.load(handle)
    except (OSError, ValueError) as exc:
        raise O.OverlayError("%s: cannot read the settings: %s" % (path, exc)) from None
    if not isinstance(given, dict):
        raise O.OverlayError("%s: not a JSON object" % path)
    unknown = sorted(set(given) - set(DEFAULTS) - {"url", "node"})
    if unknown:
        raise O.OverlayError("%s: unknown setting %s" % (path, ", ".join(unknown)))
    config = dict(DEFAULTS, **given)
    url = config.get("url")
    if not isinstance(url, str) or not url.startswith("https://") or "/" in url[len("https://"):].rstrip("/"):
        raise O.OverlayError("%s: url %r is not https://<host>:<port> (the overlay is served over TLS only)"
                             % (path, url))
    config["url"] = url.rstrip("/")
    config["node"] = O.check_node(node or config.get("node") or socket.gethostname().split(".")[0])
    for key in ("ca_file", "token_file", "state_dir"):
        if not isinstance(config[key], str) or not os.path.isabs(config[key]):
            raise O.OverlayError("%s: %s %r is not an absolute path" % (path, key, config[key]))
    for key in ("timeout", "retries"):
        if not isinstance(config[key], int) or isinstance(config[key], bool) or not 0 <= config[key] <= 600:
            raise O.OverlayError("%s: %s %r is not a number from 0 to 600" % (path, key, config[key]))
    return config


def read_token(path):
    """The node's token: a root-only file (no group or other bits) holding one printable line."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        with os.fdopen(fd, "rb") as handle:
            mode = stat.S_IMODE(os.fstat(handle.fileno()).st_mode)
            raw = handle.read(MAX_TOKEN + 2)
    except OSError as exc:
        raise O.OverlayError("token_file %s: cannot read the node's token (%s); the provisioner writes it"
                             % (path, exc.strerror or exc)) from None
    if mode & 0o077:
        raise O.OverlayError("token_file %s: mode %04o lets others read the token; it must be 0600" % (path, mode))
    token = raw.decode("ascii", "replace").strip()
    if not token or len(token) > MAX_TOKEN or not token.isprintable() or " " in token:
        raise O.OverlayError("token_file %s: does not hold one token of 1 to %d printable characters"
                             % (path, MAX_TOKEN))
    return token


def fetch(config, token, sleep=time.sleep):
    """The raw overlay document of ``config["node"]``, read up to its bound. A connection failure or a 503 is tried
    again ``retries`` times; any other answer but 200 is a FetchError naming the status and the server's reason."""
    host = config["url"][len("https://"):]
    target = "/v1/overlay/%s" % config["node"]
    try:
        context = tls_context(True, config["ca_file"])
    except RestError as exc:
        raise FetchError("ca_file: %s" % exc) from None
    attempt = 0
    while True:
        attempt += 1
        conn = http.client.HTTPSConnection(host, timeout=config["timeout"], context=context)
        try:
            conn.request("GET", target, headers={"Authorization": "Bearer " + token, "Accept": "application/json"})
            response = conn.getresponse()
            length = response.getheader("Content-Length")
            if length is not None and (not length.isdigit() or int(length) > O.MAX_DOCUMENT_BYTES):
                raise FetchError("GET %s%s: Content-Length %r is more than the %d bytes an overlay may take"
                                 % (config["url"], target, length, O.MAX_DOCUMENT_BYTES))
            body = response.read(O.MAX_DOCUMENT_BYTES + 1)
            status = response.status
        except (OSError, http.client.HTTPException) as exc:
            failure = "GET %s%s: %s" % (config["url"], target, exc)
            if isinstance(exc, ssl.SSLCertVerificationError):
                raise FetchError("%s (the server's certificate is not from the CA in %s)"
                                 % (failure, config["ca_file"])) from None
            status, body = None, failure
        finally:
            conn.close()
        if status == 200:
            if len(body) > O.MAX_DOCUMENT_BYTES:
                raise FetchError("GET %s%s: the answer is longer than %d bytes" % (config["url"], target,
                                                                                   O.MAX_DOCUMENT_BYTES))
            return body
        if status in (None, 503) and attempt <= config["retries"]:
            sleep(min(2 ** attempt, 30))
            continue
        if status is None:
            raise FetchError(body)
        raise FetchError("GET %s%s: %d %s" % (config["url"], target, status, _reason(body)))


def _reason(body):
    try:
        return str(json.loads(body)["error"]["message"])[:200]
    except (ValueError, KeyError, TypeError):
        return "(no reason given)"


def parse_overlay(raw, node, roots=O.ROOTS):
    """The overlay document checked whole: its manifest (paths, modes, owners, units, bounds, hash) and each file's
    content against its size and sha256. Each entry gets its ``data`` (bytes)."""
    try:
        document = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise O.OverlayError("overlay of %s: not JSON (%s)" % (node, exc)) from None
    checked = O.check_manifest(document, node, roots)
    contents = {entry.get("path"): entry.get("content") for entry in document["files"]}
    for entry in checked["files"]:
        where = "overlay of %s: %s" % (node, entry["path"])
        try:
            data = base64.b64decode(contents[entry["path"]] or "", validate=True)
        except (binascii.Error, TypeError, ValueError):
            raise O.OverlayError("%s: content is not base64" % where) from None
        if len(data) != entry["size"] or hashlib.sha256(data).hexdigest() != entry["sha256"]:
            raise O.OverlayError("%s: content (%d bytes, sha256 %s) does not match the manifest (%d bytes, sha256 %s)"
                                 % (where, len(data), hashlib.sha256(data).hexdigest(), entry["size"],
                                    entry["sha256"]))
        entry["data"] = data
    return checked


def check_parents(path, roots=O.ROOTS):
    """Refuse a path whose directories, from its allowed root down, include anything but real directories (a
    symlink could lead the write out of the root)."""
    current = next(r.rstrip("/") for r in roots if path.startswith(r.rstrip("/") + "/"))
    for part in [""] + path[len(current) + 1:].split("/")[:-1]:
        current = current + "/" + part if part else current
        try:
            mode = os.lstat(current).st_mode
        except FileNotFoundError:
            return
        if not stat.S_ISDIR(mode):
            kind = "a symlink" if stat.S_ISLNK(mode) else "a file"
            raise O.OverlayError("%s: %s is %s, not a directory" % (path, current, kind))


def systemctl(units, daemon_reload, no_block=False, run=subprocess.run, action="try-restart"):
    """Restart the running ones of ``units`` (a unit not running starts later with its new files), or with
    ``action`` ``start`` start those not running; returns the units systemd does not know (not installed on this
    node), which are left out. ``no_block`` only queues the jobs: at boot the units are ordered after this
    program's own unit, and waiting for them from inside it would wait for ever."""
    def call(argv):
        done = run(argv, capture_output=True, text=True, check=False)
        if done.returncode:
            raise O.OverlayError("%s failed (%d): %s" % (" ".join(argv), done.returncode,
                                                         (done.stderr or done.stdout).strip()[:300]))
        return done.stdout

    if daemon_reload:
        call(["systemctl", "daemon-reload"])
    states = call(["systemctl", "show", "--property=LoadState", "--value", "--"] + list(units)).split()
    unknown = [u for u, state in zip(units, states) if state == "not-found"] if len(states) == len(units) else []
    known = [u for u in units if u not in unknown]
    if known:
        call(["systemctl", action] + (["--no-block"] if no_block else []) + ["--"] + known)
    return unknown


def _state_file(state_dir, name):
    return os.path.join(state_dir, name)


def _read_state(path):
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read().strip()
    except FileNotFoundError:
        return ""


def _write_state(path, text):
    tmp = F.stage_file(path, text.encode() + b"\n", 0o644, -1, -1)
    os.replace(tmp, path)


def plan(document, token_file, state_dir, roots=O.ROOTS, protected=()):
    """The entries that differ on disk, each with its (uid, gid); errors name the file and the field. The client's
    own files (its token, state, and the ``protected`` ones such as its settings) are never written."""
    protected = {token_file, _state_file(state_dir, HASH_FILE), _state_file(state_dir, PENDING_FILE)} | set(protected)
    changes = []
    for entry in document["files"]:
        path = entry["path"]
        if path in protected:
            raise O.OverlayError("overlay of %s: %s is the overlay client's own file" % (document["node"], path))
        check_parents(path, roots)
        try:
            uid, gid = F.owner_ids(entry["owner"], entry["group"])
            have = F.file_state(path) if os.path.isdir(os.path.dirname(path)) else None
        except F.TreeError as exc:
            raise O.OverlayError("overlay of %s: %s: %s" % (document["node"], path, exc)) from None
        if have != (entry["sha256"], int(entry["mode"], 8), uid, gid):
            changes.append((entry, uid, gid))
    return changes


def apply(document, token_file, state_dir, restart=systemctl, check_mode=False, roots=O.ROOTS, protected=()):
    """Apply a checked overlay document; returns {changed, hash, written, restarted}."""
    changes = plan(document, token_file, state_dir, roots, protected)
    pending_path = _state_file(state_dir, PENDING_FILE)
    hash_path = _state_file(state_dir, HASH_FILE)
    units = [u for u in _read_state(pending_path).split() if O.UNIT.match(u)]
    for entry, _uid, _gid in changes:
        units += [u for u in entry["restart"] if u not in units]
    recorded = _read_state(hash_path)
    result = {"changed": bool(changes) or recorded != document["hash"], "hash": document["hash"],
              "written": [entry["path"] for entry, _uid, _gid in changes], "restarted": units}
    if check_mode:
        return result
    staged = []
    try:
        made = []
        for entry, uid, gid in changes:
            F.make_dirs(os.path.dirname(entry["path"]), 0o755, -1, -1, made, False)
            staged.append((F.stage_file(entry["path"], entry["data"], int(entry["mode"], 8), uid, gid), entry["path"]))
        F.make_dirs(state_dir, 0o755, -1, -1, made, False)
        if units:  # before any file is replaced: a crash from here on restarts them at the next run
            _write_state(pending_path, " ".join(units))
    except (OSError, F.TreeError) as exc:
        for tmp, _path in staged:
            os.unlink(tmp)
        raise O.OverlayError("cannot stage the overlay's files (nothing was replaced): %s" % exc) from None
    for index, (tmp, path) in enumerate(staged):
        try:
            os.replace(tmp, path)
        except OSError as exc:
            for left, _path in staged[index:]:
                os.unlink(left)
            raise O.OverlayError("cannot replace %s: %s (the files before it are replaced; their units restart at "
                                 "the next run)" % (path, exc)) from None
    if units:
        unknown = restart(units, any(path.startswith("/etc/systemd/") for path in result["written"])) or []
        result["restarted"] = [u for u in units if u not in unknown]
        result["not_installed"] = unknown
        os.unlink(pending_path)
    if recorded != document["hash"]:
        _write_state(hash_path, document["hash"])
    return result


def units_of(document):
    """Every unit the overlay's files belong to, in the overlay's order, once each."""
    units = []
    for entry in document["files"]:
        units += [u for u in entry["restart"] if u not in units]
    return units


def main(argv=None, restart=systemctl, sleep=time.sleep):
    parser = argparse.ArgumentParser(prog="msa-overlay-apply", description=__doc__.split("\n", maxsplit=1)[0])
    parser.add_argument("--config", default=CONFIG, help="settings: url, ca_file, token_file, state_dir (JSON)")
    parser.add_argument("--node", help="this node's name (default: the settings' node, else the host name)")
    parser.add_argument("--check", action="store_true", help="fetch and check, say what would change, change nothing")
    parser.add_argument("--no-block", action="store_true", help="queue the restarts, do not wait for them (at boot)")
    parser.add_argument("--start", action="store_true",
                        help="then start every unit the overlay's files belong to that is not running (at boot: "
                             "the image enables none of them, so a node's services run once its own files are in)")
    args = parser.parse_args(argv)
    if args.no_block and restart is systemctl:
        restart = functools.partial(systemctl, no_block=True)
    try:
        config = load_config(args.config, args.node)
        raw = fetch(config, read_token(config["token_file"]), sleep=sleep)
        document = parse_overlay(raw, config["node"])
        result = apply(document, config["token_file"], config["state_dir"], restart=restart, check_mode=args.check,
                       protected=(os.path.abspath(args.config),))
        if args.start and not args.check:
            units = units_of(document)
            unknown = (restart(units, False, action="start") or []) if units else []
            result["started"] = [u for u in units if u not in unknown]
    except (O.OverlayError, FetchError) as exc:
        sys.stderr.write("msa-overlay-apply: %s\n" % exc)
        return 1
    sys.stdout.write(json.dumps(dict(result, node=config["node"], check=args.check), sort_keys=True) + "\n")
    return 0
