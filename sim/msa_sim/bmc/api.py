# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

"""HTTP(S) front of the BMCs: one ThreadingHTTPServer per BMC address:port, all in one process."""

import socket
import ssl
import sys
import threading
from http.server import BaseHTTPRequestHandler

from ansible_collections.msa.hpc.plugins.module_utils.node.tlsserver import (BodyError, BoundedRequests,
                                                                             TLSThreadingHTTPServer, server_context)
from msa_sim.bmc.backend import make_backend
from msa_sim.bmc.resource import Fail
from msa_sim.bmc.service import Bmc
from msa_sim.bmc.store import Store
from msa_sim.bmc.update import MAX_IMAGE


# Redfish requests are small JSON documents (a session login, a reset, a PATCH); only an authenticated multipart
# firmware upload is larger (the UpdateService's MaxImageSizeBytes and its form around it).
MAX_BODY = 16 << 10
MAX_UPLOAD = MAX_IMAGE + (64 << 10)


class Handler(BoundedRequests, BaseHTTPRequestHandler):
    server_version = "msa-bmc/1.0"
    sys_version = ""
    protocol_version = "HTTP/1.1"
    max_body = MAX_UPLOAD  # and MAX_BODY unless the request is an authenticated upload (_body_limit)

    def setup(self):
        super().setup()
        # headers and body leave in separate writes: without this, Nagle + delayed ACK cost ~40 ms a request
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if isinstance(self.request, ssl.SSLSocket):
            self.request.do_handshake()

    def _body_limit(self):
        """MAX_UPLOAD for a multipart POST whose credentials are valid (checked before a byte of it is read),
        MAX_BODY for everything else: a session login carries its credentials in a small body."""
        if self.command != "POST" or \
                not (self.headers.get("Content-Type") or "").lower().startswith("multipart/form-data"):
            return MAX_BODY
        try:
            who = self.server.bmc._authenticate({k.lower(): v for k, v in self.headers.items()}, optional=True)
        except Fail:
            who = None
        return MAX_UPLOAD if who is not None else MAX_BODY

    def _serve(self):
        try:
            body = bytes(self.read_body(self._body_limit()))
        except BodyError as exc:
            response = Fail(exc.status, "GeneralError", exc.message, "Send the body with a Content-Length of at "
                            "most the size this resource takes.", args=[exc.header, str(exc.value)]).response()
        else:
            response = self.server.bmc.handle(self.command, self.path, self.headers, body)
        payload = response.payload()
        self.send_response(response.status)
        for key, value in response.headers.items():
            self.send_header(key, value)
        if response.status not in (204, 304):
            self.send_header("Content-Type", "%s; charset=utf-8" % (response.content_type or "application/json"))
            self.send_header("Content-Length", str(len(payload)))
        self.send_header("Cache-Control", "no-store")
        if self.close_connection:
            # The client asked for "Connection: close" (sushy does on every request) or spoke HTTP/1.0, so this
            # connection ends after the answer; say so (RFC 9112 9.6). Without the header an HTTP/1.1 client takes
            # the answer as keep-alive and pools the socket: a next request on it races the close, and a POST's
            # body written into the closed TLS connection fails with SSLEOFError.
            self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD" and response.status not in (204, 304):
            self.wfile.write(payload)

    def __getattr__(self, name):
        # every method reaches the BMC, which answers 405 or 501 with a Redfish error body
        if name.startswith("do_") and name[3:].isalpha():
            return self._serve
        raise AttributeError(name)

    def log_message(self, fmt, *args):  # the Bmc logs requests itself, without headers
        pass


class BmcHTTPServer(TLSThreadingHTTPServer):
    allow_reuse_address = True

    def __init__(self, bmc, address, port, tls=None):
        self.bmc = bmc
        self.address_family = socket.AF_INET6 if ":" in address else socket.AF_INET
        super().__init__((address, port), Handler, tls=tls)

    def handle_error(self, request, client_address):
        exc = sys.exc_info()[1]
        if self.bmc.log:
            self.bmc.log("%s connection from %s failed: %s" % (self.bmc.name, client_address[0], exc))


class BmcService:
    """All BMCs of one configuration: build, start (one thread per server), stop."""

    def __init__(self, conf, backend=None, store=None, log=None):
        self.conf = conf
        self.store = store or Store(conf["database"])
        self.backend = backend or make_backend(conf["backend"])
        self.bmcs = {b["name"]: Bmc(b, self.backend, self.store, log=log) for b in conf["bmcs"]}
        self.servers = {}
        self._threads = []

    def start(self):
        try:
            for name, bmc in self.bmcs.items():
                conf = bmc.conf
                # the certificate first: an SSLError is an OSError, so one handler for both read it as a port
                try:
                    context = server_context(conf["tls"]["cert"], conf["tls"]["key"]) if conf["tls"] else None
                except OSError as exc:
                    raise OSError("BMC %s %s" % (name, exc)) from None
                try:
                    server = BmcHTTPServer(bmc, conf["address"], conf["port"], context)
                except OSError as exc:
                    raise OSError("BMC %s cannot listen on %s port %s: %s"
                                  % (name, conf["address"], conf["port"], exc.strerror or exc)) from None
                self.servers[name] = server
                bmc.start_events()
                thread = threading.Thread(target=server.serve_forever, name="bmc-" + name, daemon=True)
                thread.start()
                self._threads.append(thread)
        except Exception:
            self.stop()
            raise
        return self

    def url(self, name):
        server = self.servers[name]
        host, port = server.server_address[:2]
        scheme = "https" if self.bmcs[name].conf["tls"] else "http"
        return "%s://%s:%d" % (scheme, "[%s]" % host if ":" in host else host, port)

    def stop(self):
        servers, self.servers = list(self.servers.values()), {}
        # shutdown() returns once the server's loop has noticed (up to its poll interval): all servers at once, or
        # a 64-node system's service took over 30 s to stop and outlived `sim_down`
        stoppers = [threading.Thread(target=server.shutdown, daemon=True) for server in servers]
        for thread in stoppers:
            thread.start()
        for thread in stoppers:
            thread.join()
        for server in servers:
            server.server_close()
        for bmc in self.bmcs.values():
            bmc.stop_events()
            bmc.wait_idle(5)
        self.store.close()
