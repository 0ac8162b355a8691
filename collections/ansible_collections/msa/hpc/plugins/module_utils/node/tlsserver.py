# SPDX-License-Identifier: GPL-3.0-or-later
"""The one server path of every http.server API here (the stand-ins' and the image store's): TLS only, and bounded.

- The handshake runs in the request's own thread (not in ``accept``), so a slow or plain-HTTP client holds up nobody;
  a client that does not speak TLS (a plain ``GET``) fails the handshake and its connection is closed unanswered.
- Every phase of a request has a deadline: the handshake, the request line with its headers (a total, so a client
  that drips one byte a second is cut), the body (a total that grows with its length), and the wait for the next
  request on a kept-alive connection. Headers are bounded in size (431), the request line too (414).
- Connections are capped per peer address and in all; the excess is closed at once, unanswered.
- A handler reads a body only through ``read_body``, after it has authenticated the client: ``Content-Length`` is
  required on POST, PUT and PATCH (411), a number (400) and at most the service's ``max_body`` (413); chunked or
  other transfer codings are refused (411, 501). A body left unread closes the connection after the answer.
Standard library only: node services run it with the system's ``python3 -I``. Clients use ``_rest.tls_context``.
"""
from __future__ import annotations

import email.errors
import http.client
import io
import json
import logging
import ssl
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

log = logging.getLogger("msa_hpc.tls")
# Seconds a client has to complete the TLS handshake.
HANDSHAKE_TIMEOUT = 10.0
# Seconds a client has for its request line and headers, in all, once the request has begun.
HEADER_TIMEOUT = 10.0
# Seconds a kept-alive connection may wait for its next request.
IDLE_TIMEOUT = 30.0
# Seconds a body may take, plus one second per BODY_RATE bytes of it.
BODY_TIMEOUT = 10.0
BODY_RATE = 1 << 20
# Seconds one write of the answer may block.
WRITE_TIMEOUT = 30.0
# Bytes of request line and headers together.
MAX_HEADER_BYTES = 64 << 10
# Connections at once from one peer address, and in all.
MAX_PER_PEER = 32
MAX_CONNECTIONS = 256
BODY_METHODS = ("POST", "PUT", "PATCH")


class BodyError(Exception):
    """A request body refused (400, 411, 413, 501) or cut short (400, 408): the status, the header and its value."""

    def __init__(self, status, message, header, value):
        super().__init__(message)
        self.status, self.message, self.header, self.value = status, message, header, value

    CODES = {400: "invalid", 408: "timeout", 411: "length_required", 413: "too_large", 501: "not_implemented"}

    def document(self):
        """The JSON error answer: ``{"error": {code, message, header, value}}``."""
        return {"error": {"code": self.CODES[self.status], "message": self.message, "header": self.header,
                          "value": self.value}}


class _HeadersTooLarge(http.client.LineTooLong):
    """Raised by the reader when the request line and headers pass MAX_HEADER_BYTES (http.server answers 431)."""


class _DeadlineReader(io.RawIOBase):
    """The connection's raw reads, each bounded by the handler's current deadline (one total per phase)."""

    def __init__(self, handler):
        super().__init__()
        self.handler = handler

    def readable(self):
        return True

    def readinto(self, buffer):
        handler = self.handler
        left = handler.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the client took longer than its %s deadline" % handler.phase)
        if handler.phase == "headers":
            if handler.header_bytes > handler.server.max_header_bytes:
                raise _HeadersTooLarge("request line and headers longer than %d bytes"
                                       % handler.server.max_header_bytes)
        connection = handler.connection
        connection.settimeout(left)
        try:
            count = connection.recv_into(buffer)
        finally:
            connection.settimeout(handler.server.write_timeout)
        if handler.phase == "headers":
            handler.header_bytes += count
        return count


class BoundedRequests:
    """Mixin of a BaseHTTPRequestHandler (before it in the bases): the deadlines, the header bound and
    ``read_body``. A service sets ``max_body``, the largest body it takes (bytes)."""

    max_body = 64 << 10
    default_request_version = "HTTP/1.1"  # errors in the request line are answered with a status line too
    phase = "idle"
    deadline = 0.0
    header_bytes = 0

    def setup(self):
        super().setup()
        self._served = 0
        self.connection.settimeout(self.server.write_timeout)
        self.rfile.close()  # the socket's own reader: an open one would keep the socket from closing
        self.rfile = io.BufferedReader(_DeadlineReader(self))

    def _enter(self, phase, seconds):
        self.phase, self.deadline = phase, time.monotonic() + seconds

    def handle_one_request(self):
        server = self.server
        self._enter("idle", server.idle_timeout if self._served else server.header_timeout)
        self._body_read, self.headers = False, None
        try:
            if not self.rfile.peek(1):
                self.close_connection = True
                return
        except (TimeoutError, OSError):
            self.close_connection = True
            return
        self._served += 1
        self._enter("headers", server.header_timeout)
        self.header_bytes = 0
        try:
            super().handle_one_request()
        except _HeadersTooLarge as exc:  # in the request line (in the headers, http.server answers 431 itself)
            self.requestline = self.request_version = self.command = ""
            self.send_error(431, str(exc))
            self.close_connection = True
        finally:
            self._enter("idle", server.idle_timeout)

    def parse_request(self):
        words = str(self.raw_requestline, "iso-8859-1").split()
        if words and len(words) != 3:
            # no HTTP/0.9 (whose answers have no status line): a request line is METHOD TARGET VERSION
            self.command, self.requestline = "", str(self.raw_requestline, "iso-8859-1").rstrip("\r\n")
            self.request_version = "HTTP/1.1"
            self.close_connection = True
            self.send_error(400, "Bad request line (not METHOD TARGET HTTP/1.x)")
            return False
        if not super().parse_request():
            return False
        if any(isinstance(d, email.errors.MissingHeaderBodySeparatorDefect) for d in self.headers.defects):
            # a header line without a colon: the parser took it and all after it for the body (the message's other
            # defects are about that body, such as a multipart boundary it cannot see: not ours to judge here)
            self.send_error(400, "Malformed header line (no colon)")
            return False
        try:  # the headers' own errors are answered before anybody is asked who the client is: nothing is read
            self.body_length(self.max_body, required=False)
        except BodyError as exc:
            self.refuse_body(exc)
            return False
        return True

    def refuse_body(self, exc):
        """Answer BodyError ``exc`` with its JSON document and end the connection."""
        data = json.dumps(exc.document(), sort_keys=True).encode()
        self.close_connection = True
        self.send_response(exc.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _body_pending(self):
        if self._body_read or self.headers is None:
            return False
        return bool(self.headers.get("Transfer-Encoding")) or (self.headers.get("Content-Length") or "0").strip() \
            not in ("0", "")

    def end_headers(self):
        if self._body_pending() and not self.close_connection:
            # the body was not read (refused, or the client was not authenticated): it must not be taken for the
            # next request, so the connection ends with this answer
            self.send_header("Connection", "close")
        super().end_headers()

    def body_length(self, maximum=None, required=True):
        """The request's validated ``Content-Length`` (0 when there is no body); BodyError when refused, and when
        ``required`` and a POST, PUT or PATCH has none."""
        maximum = self.max_body if maximum is None else maximum
        coding = self.headers.get("Transfer-Encoding")
        if coding is not None:
            if coding.strip().lower() == "chunked":
                raise BodyError(411, "Transfer-Encoding chunked is not accepted: send the body with a "
                                "Content-Length of at most %d bytes" % maximum, "Transfer-Encoding", coding)
            raise BodyError(501, "Transfer-Encoding %r is not implemented: send the body with a Content-Length"
                            % coding, "Transfer-Encoding", coding)
        values = self.headers.get_all("Content-Length") or []
        if not values:
            if required and self.command in BODY_METHODS:
                raise BodyError(411, "Content-Length is required on %s (at most %d bytes)" % (self.command, maximum),
                                "Content-Length", None)
            return 0
        raw = values[0].strip()
        if len(values) > 1 or not raw.isdigit() or not raw.isascii():
            raise BodyError(400, "Content-Length %r is not a non-negative number of bytes" % ", ".join(values),
                            "Content-Length", ", ".join(values))
        length = int(raw)
        if length > maximum:
            raise BodyError(413, "Content-Length %d is more than the %d bytes this service takes in one request"
                            % (length, maximum), "Content-Length", raw)
        return length

    def read_body(self, maximum=None):
        """The request's body (bytes, a bytearray), read under a deadline once its length passed ``body_length``.
        Call it after authenticating the client. BodyError when refused (its length), cut short (400) or not in
        before its deadline (408); the connection then ends with the answer."""
        try:
            length = self.body_length(maximum)
        except BodyError:
            self.close_connection = True
            raise
        self._body_read = True
        if not length:
            return bytearray()
        self._enter("body", self.server.body_timeout + length / BODY_RATE)
        view = bytearray(length)
        got = 0
        try:
            while got < length:
                count = self.rfile.readinto(memoryview(view)[got:])
                if not count:
                    raise BodyError(400, "the body ended after %d of the %d bytes of its Content-Length"
                                    % (got, length), "Content-Length", str(length))
                got += count
        except (TimeoutError, OSError) as exc:
            self.close_connection = True
            raise BodyError(408, "the body did not arrive in time (%d of %d bytes): %s" % (got, length, exc),
                            "Content-Length", str(length)) from None
        except BodyError:
            self.close_connection = True
            raise
        finally:
            self._enter("answer", self.server.write_timeout)
        return view


BoundedHandler = type("BoundedHandler", (BoundedRequests, BaseHTTPRequestHandler), {})


def dispatching(*methods, handler="_dispatch"):
    """A request handler base (with ``read_body`` and the deadlines) whose ``do_<METHOD>`` for each of ``methods``
    calls ``self.<handler>(METHOD)``; a method it does not list is answered 501 by BaseHTTPRequestHandler."""
    def method(name):
        return lambda self: getattr(self, handler)(name)
    return type("DispatchingHandler", (BoundedHandler,), {"do_" + m: method(m) for m in methods})


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
    """A ThreadingHTTPServer that serves TLS only when given a ``tls`` pair (cert, key) or an SSLContext, with the
    connection caps and (through handlers built on BoundedRequests) the deadlines of this module."""

    daemon_threads = True
    handshake_timeout = HANDSHAKE_TIMEOUT
    header_timeout = HEADER_TIMEOUT
    idle_timeout = IDLE_TIMEOUT
    body_timeout = BODY_TIMEOUT
    write_timeout = WRITE_TIMEOUT
    max_header_bytes = MAX_HEADER_BYTES
    max_per_peer = MAX_PER_PEER
    max_connections = MAX_CONNECTIONS

    def __init__(self, address, handler, tls=None, bind_and_activate=True):
        # the certificate is loaded before the port is taken: a missing or broken file binds nothing
        self.tls = None if tls is None else tls if isinstance(tls, ssl.SSLContext) else server_context(*tls)
        self._peers = {}
        self._peers_lock = threading.Lock()
        self.refused_connections = 0
        super().__init__(address, handler, bind_and_activate)
        if self.tls is not None:
            self.socket = self.tls.wrap_socket(self.socket, server_side=True, do_handshake_on_connect=False)

    @property
    def scheme(self):
        return "https" if self.tls is not None else "http"

    def connections(self, peer=None):
        """Connections open now, from ``peer`` or in all."""
        with self._peers_lock:
            return self._peers.get(peer, 0) if peer is not None else sum(self._peers.values())

    def process_request(self, request, client_address):
        peer = client_address[0]
        with self._peers_lock:
            full = sum(self._peers.values()) >= self.max_connections or \
                self._peers.get(peer, 0) >= self.max_per_peer
            if full:
                self.refused_connections += 1
            else:
                self._peers[peer] = self._peers.get(peer, 0) + 1
        if full:
            if self.refused_connections % 100 == 1:  # the first of each hundred: a flood must not flood the log
                log.warning("connection from %s closed: %d connections from it or %d in all are open (%d closed so "
                            "far)", peer, self.max_per_peer, self.max_connections, self.refused_connections)
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except Exception:
            self._release(peer)
            raise

    def _release(self, peer):
        with self._peers_lock:
            left = self._peers.get(peer, 1) - 1
            if left > 0:
                self._peers[peer] = left
            else:
                self._peers.pop(peer, None)

    def process_request_thread(self, request, client_address):
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._release(client_address[0])

    def finish_request(self, request, client_address):
        request.settimeout(self.handshake_timeout)
        if isinstance(request, ssl.SSLSocket):
            try:
                request.do_handshake()
            except (ssl.SSLError, OSError) as exc:
                # a plain-HTTP client, a client that does not trust us, or one that went away: no answer
                log.info("TLS handshake with %s failed: %s", client_address[0], exc)
                return
        request.settimeout(self.write_timeout)
        super().finish_request(request, client_address)
