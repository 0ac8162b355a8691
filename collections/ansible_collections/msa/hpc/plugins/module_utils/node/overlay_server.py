# SPDX-License-Identifier: GPL-3.0-or-later
"""msa-overlay-server: each node's overlay, served to that node only, over TLS (issue 38), on the management node.

``GET /v1/overlay/<node>`` answers the node's overlay (its manifest with every file's content in base64);
``GET /v1/overlay/<node>/hash`` its content hash alone; ``GET /v1/health`` is open. A node authenticates with its own
bearer token. The server holds only the tokens' SHA-256 digests, one ``<node> <sha256>`` line each: an unknown token
is answered 401, another node's overlay 403, a malformed node name 400, an overlay not published 404. Answers name
nothing secret. It runs on the collection's bounded TLS server path (``node/tlsserver.py``), reads no body, and is
run by systemd as an unprivileged account with ``python3 -I``.
"""
from __future__ import annotations

import argparse
import hashlib
import hmac
import json
import logging
import os
import re
import sys
import threading

from ansible_collections.msa.hpc.plugins.module_utils import _overlay as O
from ansible_collections.msa.hpc.plugins.module_utils import _overlay_store as S
from ansible_collections.msa.hpc.plugins.module_utils.node.tlsserver import TLSThreadingHTTPServer, dispatching

log = logging.getLogger("msa_hpc.overlay")
ROUTE = re.compile(r"/v1/overlay/(?P<node>[^/?#]*)(?P<hash>/hash)?\Z")
MAX_TOKEN = 512
# Overlays built at once (each up to _overlay.MAX_DOCUMENT_BYTES in memory, held while it is sent), one at a time
# per node, and the seconds a request waits for a turn before it is answered 503 (the client tries again).
MAX_BUILDS = 8
BUILD_WAIT = 30.0


class TokenError(Exception):
    """The digests file is unreadable or malformed: the message names the file, the line and the field."""


def parse_digests(text, source="tokens"):
    """{sha256 digest: node} from ``<node> <sha256 of its token>`` lines (``#`` comments and blank lines skipped)."""
    digests = {}
    for number, line in enumerate(text.splitlines(), 1):
        words = line.split("#", 1)[0].split()
        if not words:
            continue
        if len(words) != 2:
            raise TokenError("%s line %d: expected '<node> <sha256>', got %d words" % (source, number, len(words)))
        node, digest = words
        try:
            O.check_node(node)
        except O.OverlayError as exc:
            raise TokenError("%s line %d: %s" % (source, number, exc)) from None
        if not O.SHA256.match(digest):
            raise TokenError("%s line %d: the digest of %s is not a SHA-256 in lower-case hex" % (source, number, node))
        if digest in digests:
            raise TokenError("%s line %d: %s has the same token as %s" % (source, number, node, digests[digest]))
        digests[digest] = node
    return digests


class Tokens:
    """The digests file, read again when it changes on disk (a new node needs no restart)."""

    def __init__(self, path):
        self.path = path
        self._lock = threading.Lock()
        self._stamp = None
        self._digests = {}
        self.reload()

    def reload(self):
        try:
            stat = os.stat(self.path)
            stamp = (stat.st_ino, stat.st_mtime_ns, stat.st_size)
            if stamp == self._stamp:
                return
            with open(self.path, encoding="utf-8") as handle:
                digests = parse_digests(handle.read(), self.path)
        except (OSError, UnicodeDecodeError) as exc:
            raise TokenError("cannot read the token digests %s: %s" % (self.path, exc)) from None
        with self._lock:
            self._stamp, self._digests = stamp, digests

    def node_of(self, token):
        """The node whose token this is, or None; every digest is compared in constant time."""
        try:
            self.reload()
        except TokenError as exc:  # a bad edit keeps the digests last read
            log.error("%s (the digests read before stay in force)", exc)
        digest = hashlib.sha256(token.encode("utf-8", "surrogateescape")).hexdigest().encode()
        found = None
        with self._lock:
            for known, node in self._digests.items():
                if hmac.compare_digest(known.encode(), digest):
                    found = node
        return found


class OverlayHandler(dispatching("GET", "HEAD")):
    """The overlay API; ``server.store`` and ``server.tokens`` are set by make_server."""

    server_version = "msa-overlay-server"
    sys_version = ""
    max_body = 0

    def _answer(self, status, document):
        data = json.dumps(document, sort_keys=True).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-store")
        if status == 401:
            self.send_header("WWW-Authenticate", 'Bearer realm="msa-overlay"')
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _error(self, status, code, message):
        self._answer(status, {"error": {"code": code, "message": message}})

    def _caller(self):
        scheme, dummy, token = (self.headers.get("Authorization") or "").partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token or len(token) > MAX_TOKEN:
            return None
        return self.server.tokens.node_of(token)

    def _dispatch(self, method):
        path = self.path.split("?", 1)[0]
        if path == "/v1/health":
            return self._answer(200, {"status": "ok"})
        caller = self._caller()
        if caller is None:
            return self._error(401, "unauthorized", "a node's overlay token is required (Authorization: Bearer)")
        route = ROUTE.match(path)
        if not route:
            return self._error(404, "not_found", "no such resource (GET /v1/overlay/<node>[/hash])")
        node = route.group("node")
        if not O.NODE_NAME.match(node):
            return self._error(400, "invalid", "the node name in the path is not a node name")
        if node != caller:
            log.warning("refused: the token of %s asked for the overlay of %s", caller, node)
            return self._error(403, "forbidden", "a node's token reads that node's own overlay only")
        try:
            if route.group("hash"):
                document = S.read_manifest(self.server.store, node)
                document = document and {"node": node, "hash": document["hash"]}
            else:
                return self._serve_overlay(node)
        except S.StoreError as exc:
            log.error("overlay of %s: %s", node, exc)
            if exc.busy:
                return self._error(503, "unavailable", "the overlay is being published: try again")
            return self._error(500, "store", "the overlay cannot be served (see the server's log)")
        if document is None:
            return self._error(404, "not_found", "no overlay is published for this node")
        return self._answer(200, document)

    def _serve_overlay(self, node):
        """Build and send the node's overlay in one of the server's MAX_BUILDS turns, one turn per node at a time,
        so a node cannot hold more than one document in the server's memory."""
        server = self.server
        with server.builds_lock:
            if node in server.building:
                return self._error(503, "unavailable", "this node's overlay is being sent already: try again")
            server.building.add(node)
        try:
            if not server.builds.acquire(timeout=server.build_wait):
                return self._error(503, "unavailable", "the server is busy: try again")
            try:
                document = S.read_overlay(server.store, node)
                if document is None:
                    return self._error(404, "not_found", "no overlay is published for this node")
                return self._answer(200, document)
            finally:
                server.builds.release()
        finally:
            with server.builds_lock:
                server.building.discard(node)

    def log_message(self, fmt, *args):  # one line per request on stderr, for the journal (no header is logged)
        sys.stderr.write("%s %s\n" % (self.address_string(), fmt % args))


def make_server(address, port, store, tokens_file, cert, key):
    """The server, bound, with its certificate and token digests loaded (a bad file raises before the port is
    taken)."""
    tokens = Tokens(tokens_file)
    if not os.path.isdir(store):
        raise OSError("the overlay store %s is not a directory" % store)
    server = TLSThreadingHTTPServer((address, port), OverlayHandler, tls=(cert, key))
    server.store, server.tokens = store, tokens
    server.builds, server.build_wait = threading.BoundedSemaphore(MAX_BUILDS), BUILD_WAIT
    server.builds_lock, server.building = threading.Lock(), set()
    return server


def main(argv=None):
    parser = argparse.ArgumentParser(prog="msa-overlay-server", description=__doc__.split("\n", maxsplit=1)[0])
    parser.add_argument("--bind", required=True, help="address to listen on (the management network's)")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--store", required=True, help="the overlays: <store>/<node>/manifest.json and blobs/")
    parser.add_argument("--tokens", required=True, help="'<node> <sha256 of its token>' lines")
    parser.add_argument("--cert", required=True, help="PEM certificate (chain) of this host")
    parser.add_argument("--key", required=True, help="its PEM key")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
    try:
        server = make_server(args.bind, args.port, args.store, args.tokens, args.cert, args.key)
    except (OSError, TokenError) as exc:
        sys.stderr.write("msa-overlay-server: %s\n" % exc)
        return 1
    sys.stderr.write("msa-overlay-server: serving %s on https://%s:%d\n" % (args.store, args.bind, args.port))
    sys.stderr.flush()
    server.serve_forever()
    return 0
