# SPDX-License-Identifier: GPL-3.0-or-later
"""HTTP API of a NAM or GCE board's data path (TLS only, on the board's EXTOLL address); every call but the health
check carries a capability the manager signed (``Authorization: Capability <token>``).

  GET  /v1/health                                      {"ok", "device", "kind"}                  (no auth)
  PUT  /v1/nam/<alloc>?offset=N                        body: the bytes -> {"written": n}
  GET  /v1/nam/<alloc>?offset=N&length=L               -> the bytes (application/octet-stream)
  POST /v1/nam/<alloc>/sync                            non-volatile writes made durable
  POST /v1/nam/<alloc>/retire                          the manager freed it: scrub and refuse it (manager only)
  POST /v1/gce/<comm>/allreduce?rank=&seq=&op=&datatype=&timeout=   body: the rank's buffer -> the reduction

Errors answer ``{"error": {"code", "message", "field", "value"}}`` with 400, 401, 403, 404, 409, 410, 413 or 504.
"""
from __future__ import annotations

import json
import logging
import re
import socket
from urllib.parse import parse_qs, urlsplit

from ansible_collections.msa.hpc.plugins.module_utils import _gce as G
from ansible_collections.msa.hpc.plugins.module_utils.node.tlsserver import BodyError, TLSThreadingHTTPServer, \
    dispatching
from msa_sim.rma import capability as C
from msa_sim.rma.collective import CollectiveError
from msa_sim.rma.memory import AccessError

log = logging.getLogger("msa-rma")
# One request moves at most this much; the client library splits larger transfers.
MAX_TRANSFER = 64 << 20
QUERY_INT = re.compile(r"^[0-9]{1,20}$")


class ApiError(Exception):
    def __init__(self, status, code, message, field=None, value=None):
        super().__init__(message)
        self.status, self.code, self.message, self.field, self.value = status, code, message, field, value


def _int(query, field, default=None):
    raw = query.get(field)
    if raw is None:
        if default is None:
            raise ApiError(400, "invalid", "%s is required" % field, field, None)
        return default
    if not QUERY_INT.match(raw):
        raise ApiError(400, "invalid", "%s %r is not a non-negative integer" % (field, raw), field, raw)
    return int(raw)


class Handler(dispatching("GET", "PUT", "POST")):
    protocol_version = "HTTP/1.1"
    server_version = "msa-rma/1"
    max_body = MAX_TRANSFER  # and, once its capability is checked, what that capability grants (_body)

    def setup(self):
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, fmt, *args):
        log.debug("%s %s", self.address_string(), fmt % args)

    def _send(self, status, data, ctype="application/json"):
        if not isinstance(data, (bytes, bytearray)):
            data = json.dumps(data, sort_keys=True).encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _error(self, status, code, message, field=None, value=None):
        err = {"code": code, "message": message}
        if field is not None:
            err.update(field=field, value=value)
        self._send(status, {"error": err})

    def _body(self, maximum):
        """The body, at most ``maximum`` bytes (the allocation's size or the GCE's operation size, and MAX_TRANSFER)
        and read only once the capability was checked."""
        return self.read_body(min(MAX_TRANSFER, maximum))

    def _claims(self, kind, ident, field):
        header = self.headers.get("Authorization") or ""
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "capability" or not token.strip():
            raise ApiError(401, "unauthorized", "a capability from the NAM/GCE manager is required "
                           "(Authorization: Capability <token>)")
        try:
            claims = C.verify(self.server.key, token.strip(), self.server.device, kind)
        except C.CapabilityError as exc:
            raise ApiError(403, "forbidden", str(exc)) from None
        if str(claims.get(field)) != ident:
            raise ApiError(403, "forbidden", "the capability is for %s %s, not %s" % (field, claims.get(field), ident),
                           field, ident)
        return claims

    def _dispatch(self, method):
        url = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        parts = [p for p in url.path.split("/") if p]
        try:
            if method == "GET" and parts == ["v1", "health"]:
                return self._send(200, {"ok": True, "device": self.server.device, "kind": self.server.kind})
            if len(parts) >= 3 and parts[:2] == ["v1", "nam"] and self.server.memory is not None:
                return self._nam(method, parts[2], parts[3:], query)
            if len(parts) == 4 and parts[:2] == ["v1", "gce"] and parts[3] == "allreduce" and \
                    self.server.engine is not None and method == "POST":
                return self._gce(parts[2], query)
            return self._error(404, "not_found", "no such endpoint on this %s board: %s %s"
                               % (self.server.kind.upper(), method, url.path))
        except ApiError as exc:
            return self._error(exc.status, exc.code, exc.message, exc.field, exc.value)
        except BodyError as exc:
            return self._error(exc.status, BodyError.CODES[exc.status], exc.message, exc.header, exc.value)
        except AccessError as exc:
            return self._error(exc.status, "out_of_bounds" if exc.status == 400 else "refused", str(exc),
                               exc.field, exc.value)
        except CollectiveError as exc:
            return self._error(exc.status, exc.code, str(exc))
        except Exception as exc:  # an unexpected fault must still answer, and be logged with its traceback
            log.exception("%s %s failed", method, self.path)
            return self._error(500, "internal", "internal error: %s" % exc.__class__.__name__)

    def _nam(self, method, alloc, rest, query):
        claims = self._claims("nam", alloc, "alloc")
        memory = self.server.memory
        if method == "PUT" and not rest:
            offset = _int(query, "offset")
            data = self._body(int(claims.get("size") or 0))
            return self._send(200, {"written": memory.put(claims, offset, data)})
        if method == "GET" and not rest:
            offset, length = _int(query, "offset"), _int(query, "length")
            if length > MAX_TRANSFER:
                raise ApiError(413, "too_large", "length %d is more than the %d bytes one request may carry"
                               % (length, MAX_TRANSFER), "length", length)
            return self._send(200, memory.get(claims, offset, length), "application/octet-stream")
        if method == "POST" and rest == ["sync"]:
            memory.sync(claims)
            return self._send(200, {"synced": True})
        if method == "POST" and rest == ["retire"]:
            if claims.get("retire") is not True:
                raise ApiError(403, "forbidden", "only the manager retires an allocation (when it frees it)")
            return self._send(200, {"scrubbed": memory.retire(claims)})
        raise ApiError(404, "not_found", "no such endpoint: %s /v1/nam/%s/%s" % (method, alloc, "/".join(rest)))

    def _gce(self, comm, query):
        claims = self._claims("gce", comm, "comm")
        data = self._body(G.MAX_OPERATION_SIZE)
        result = self.server.engine.allreduce(
            claims, _int(query, "rank"), _int(query, "seq"), query.get("op", ""), query.get("datatype", ""),
            data, _int(query, "timeout", 60))
        return self._send(200, result, "application/octet-stream")


class Server(TLSThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, address, device, kind, key, memory=None, engine=None, tls=None):
        super().__init__(address, Handler, tls=tls)
        self.device, self.kind, self.key = device, kind, key
        self.memory, self.engine = memory, engine
