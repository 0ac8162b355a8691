# SPDX-License-Identifier: GPL-3.0-or-later
"""msa-image-store: the site's container images (tarballs and their SHA256SUMS), read-only over https.

Files of the store directory only (no listings, no other methods than GET and HEAD), to clients that present the
store's credentials with HTTP Basic authentication, over TLS 1.2 or newer with the host's certificate. Run by
systemd as an unprivileged account with ``python3 -I``; tlsserver.py (the collection's module_utils/node/tlsserver.py)
is installed beside it.
"""
from __future__ import annotations

import argparse
import base64
import binascii
import hmac
import os
import sys
from http.server import SimpleHTTPRequestHandler

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tlsserver import BoundedRequests, TLSThreadingHTTPServer  # noqa: E402  (installed beside this file, root-owned)

REALM = "msa-image-store"


class StoreHandler(BoundedRequests, SimpleHTTPRequestHandler):
    """GET/HEAD of the store's files for the store's one account; 401 otherwise, 404 for directories. It reads no
    body: a request that carries one is answered and its connection closed (tlsserver's deadlines and caps)."""

    server_version = "msa-image-store"
    sys_version = ""
    credentials = (b"", b"")  # (user, password), set by make_server; an empty password is never accepted
    max_body = 0

    def _authorized(self):
        scheme, value = ((self.headers.get("Authorization") or "").split(" ", 1) + [""])[:2]
        if scheme.lower() != "basic":
            return False
        try:
            user, password = (base64.b64decode(value.strip(), validate=True).split(b":", 1) + [b""])[:2]
        except (binascii.Error, ValueError):
            return False
        want_user, want_password = self.credentials[0], self.credentials[1]
        if not want_password:
            return False
        # both compared in full, so the time taken tells nothing about either
        return hmac.compare_digest(user, want_user) & hmac.compare_digest(password, want_password)

    def send_head(self):
        if not self._authorized():
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="%s", charset="UTF-8"' % REALM)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return None
        if os.path.isdir(self.translate_path(self.path)):
            self.send_error(404, "no listings in the image store")
            return None
        return super().send_head()

    def log_message(self, fmt, *args):  # one line per request on stderr, for the journal
        sys.stderr.write("%s %s\n" % (self.address_string(), fmt % args))


def make_server(address, port, directory, cert, key, user, password):
    """The store's server, bound and with its certificate loaded (an unreadable file raises before the port is taken)."""
    handler = type("Handler", (StoreHandler,), {"credentials": (user.encode(), password.encode())})

    def factory(*args, **kwargs):
        return handler(*args, directory=directory, **kwargs)
    return TLSThreadingHTTPServer((address, port), factory, tls=(cert, key))


def main(argv=None):
    parser = argparse.ArgumentParser(prog="msa-image-store", description=__doc__.split("\n", maxsplit=1)[0])
    parser.add_argument("--bind", required=True, help="address to listen on (the management network's)")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--directory", required=True, help="the store: image tarballs and SHA256SUMS")
    parser.add_argument("--cert", required=True, help="PEM certificate (chain) of this host")
    parser.add_argument("--key", required=True, help="its PEM key")
    parser.add_argument("--user", default="images", help="the account clients present (HTTP Basic)")
    parser.add_argument("--password-file", required=True, help="file holding that account's password")
    args = parser.parse_args(argv)
    try:
        with open(args.password_file, encoding="utf-8") as handle:
            password = handle.read().strip()
        if not password:
            raise OSError("%s is empty" % args.password_file)
        server = make_server(args.bind, args.port, args.directory, args.cert, args.key, args.user, password)
    except OSError as exc:
        print("msa-image-store: %s" % exc, file=sys.stderr)
        return 1
    print("msa-image-store: serving %s on https://%s:%d" % (args.directory, args.bind, args.port), file=sys.stderr,
          flush=True)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
