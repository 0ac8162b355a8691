# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

"""Wire protocol of the stand-in psgwd: a JSON envelope line, then length-prefixed fragments, then a result line."""

import hashlib
import json
import os
import socket
import struct

from msa_sim.psgwd import DEFAULT_MTU, MTU_ENV

VERSION = 1
MAX_LINE = 65536
MAX_FRAGMENT = 64 << 20
_LEN = struct.Struct("!I")


class ProtocolError(Exception):
    """The peer broke the protocol or refused the message; the text says why."""


def mtu_from_env(value=None):
    """Fragment size: the explicit value, else $PSP_GW_MTU, else DEFAULT_MTU; must be 1..MAX_FRAGMENT."""
    raw = value if value is not None else os.environ.get(MTU_ENV) or DEFAULT_MTU
    try:
        mtu = int(raw)
    except (TypeError, ValueError):
        raise ProtocolError("%s=%r is not a number of bytes" % (MTU_ENV, raw))
    if not 0 < mtu <= MAX_FRAGMENT:
        raise ProtocolError("%s=%d is outside 1-%d" % (MTU_ENV, mtu, MAX_FRAGMENT))
    return mtu


def split_endpoint(text):
    host, sep, port = str(text).rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise ProtocolError("endpoint %r is not <address>:<port>" % (text,))
    return host.strip("[]"), int(port)


def send_line(sock, obj):
    sock.sendall(json.dumps(obj, sort_keys=True).encode() + b"\n")


class Reader:
    """Buffered reads of lines and exact byte counts from a socket."""

    def __init__(self, sock):
        self.sock = sock
        self.buf = bytearray()

    def _fill(self):
        chunk = self.sock.recv(1 << 20)
        if not chunk:
            raise ProtocolError("connection closed by the peer")
        self.buf += chunk

    def line(self):
        while True:
            i = self.buf.find(b"\n")
            if i >= 0:
                raw = bytes(self.buf[:i])
                del self.buf[:i + 1]
                try:
                    obj = json.loads(raw)
                except ValueError:
                    raise ProtocolError("not a JSON line: %r" % raw[:80])
                if not isinstance(obj, dict):
                    raise ProtocolError("expected a JSON object, got %r" % raw[:80])
                return obj
            if len(self.buf) > MAX_LINE:
                raise ProtocolError("line longer than %d bytes" % MAX_LINE)
            self._fill()

    def exact(self, n):
        while len(self.buf) < n:
            self._fill()
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out

    def fragment(self, limit=MAX_FRAGMENT):
        (n,) = _LEN.unpack(self.exact(_LEN.size))
        if not 0 < n <= limit:
            raise ProtocolError("fragment of %d bytes is outside 1-%d" % (n, limit))
        return self.exact(n)


def send_fragment(sock, data):
    if len(data) <= 65536:  # one segment for small fragments
        sock.sendall(_LEN.pack(len(data)) + data)
    else:
        sock.sendall(_LEN.pack(len(data)))
        sock.sendall(data)


def envelope(job, src_node, dst_node, dst_addr, length, mtu, sha256, src_rank=0, dst_rank=0):
    """The gateway envelope: who sends, the final destination (rank, node, address) and the message size."""
    return {"v": VERSION, "op": "forward", "job": str(job), "length": int(length), "mtu": int(mtu),
            "sha256": sha256, "src": {"node": src_node, "rank": int(src_rank)},
            "dst": {"node": dst_node, "rank": int(dst_rank), "addr": dst_addr}}


def send_message(gateway, env, data, timeout=30.0, source=None):
    """Send ``data`` through the psgwd at ``gateway`` (host:port) under envelope ``env``; return the receiver's result.

    Raise ProtocolError when the gateway refuses the envelope (wrong job, unreachable destination).
    """
    host, port = split_endpoint(gateway)
    mtu = int(env["mtu"])
    with socket.create_connection((host, port), timeout=timeout, source_address=source) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        reader = Reader(sock)
        send_line(sock, env)
        reply = reader.line()
        if not reply.get("ok"):
            raise ProtocolError("gateway %s refused the message: %s" % (gateway, reply.get("error", reply)))
        view = memoryview(data)
        for start in range(0, len(data), mtu):
            send_fragment(sock, bytes(view[start:start + mtu]))
        result = reader.line()
        result.setdefault("gateway", reply.get("gateway"))
        return result


def query_stats(gateway, timeout=10.0):
    """Ask a psgwd for its byte counters."""
    host, port = split_endpoint(gateway)
    with socket.create_connection((host, port), timeout=timeout) as sock:
        send_line(sock, {"v": VERSION, "op": "stats"})
        return Reader(sock).line()


def digest(data):
    return hashlib.sha256(data).hexdigest()
