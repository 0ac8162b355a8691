# SPDX-License-Identifier: GPL-3.0-or-later
"""TLS for http.server APIs (the stand-ins' and the image store's): one server class whose socket speaks TLS only.

The handshake runs in the request's own thread (not in ``accept``), so a slow or plain-HTTP client holds up nobody;
a client that does not speak TLS (a plain ``GET``) fails the handshake and its connection is closed unanswered.
Standard library only: node services run it with the system's ``python3 -I``. Clients use ``_rest.tls_context``.
"""
from __future__ import annotations

import logging
import ssl
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

log = logging.getLogger("msa_hpc.tls")
# Seconds a client has to complete the TLS handshake.
HANDSHAKE_TIMEOUT = 10.0


def dispatching(*methods, handler="_dispatch"):
    """A request handler base whose ``do_<METHOD>`` for each of ``methods`` calls ``self.<handler>(METHOD)``; a
    method it does not list is answered 501 by BaseHTTPRequestHandler, as before."""
    def method(name):
        return lambda self: getattr(self, handler)(name)
    return type("DispatchingHandler", (BaseHTTPRequestHandler,), {"do_" + m: method(m) for m in methods})


def server_context(cert, key):
    """A server context (TLS 1.2 or newer) with the PEM certificate chain ``cert`` and its key ``key``."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as exc:
        raise OSError("cannot load the TLS certificate %s / key %s: %s" % (cert, key, exc)) from None
    return context


class TLSThreadingHTTPServer(ThreadingHTTPServer):
    """A ThreadingHTTPServer that serves TLS only when given a ``tls`` pair (cert, key) or an SSLContext."""

    daemon_threads = True

    def __init__(self, address, handler, tls=None, bind_and_activate=True):
        # the certificate is loaded before the port is taken: a missing or broken file binds nothing
        self.tls = None if tls is None else tls if isinstance(tls, ssl.SSLContext) else server_context(*tls)
        super().__init__(address, handler, bind_and_activate)
        if self.tls is not None:
            self.socket = self.tls.wrap_socket(self.socket, server_side=True, do_handshake_on_connect=False)

    @property
    def scheme(self):
        return "https" if self.tls is not None else "http"

    def finish_request(self, request, client_address):
        if isinstance(request, ssl.SSLSocket):
            try:
                request.settimeout(HANDSHAKE_TIMEOUT)
                request.do_handshake()
                request.settimeout(None)
            except (ssl.SSLError, OSError) as exc:
                # a plain-HTTP client, a client that does not trust us, or one that went away: no answer
                log.info("TLS handshake with %s failed: %s", client_address[0], exc)
                return
        super().finish_request(request, client_address)
