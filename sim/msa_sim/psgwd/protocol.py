# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

"""Wire protocol of the stand-in psgwd: the gateway's challenge, a JSON envelope line with the proof of the job's
secret, then length-prefixed fragments, then a result line."""

import hashlib
import hmac
import json
import os
import re
import socket
import struct

from msa_sim.psgwd import DEFAULT_MTU, MTU_ENV

VERSION = 1
MAX_LINE = 65536
MAX_FRAGMENT = 64 << 20
CHUNK = 256 << 10  # bytes read from a socket at once: what a relay holds of a fragment, whatever its size
AUTH_DOMAIN = b"msa-psgwd-auth-v1\0"
_CHALLENGE = re.compile(r"^[0-9a-f]{32,128}$")
LENGTH = _LEN = struct.Struct("!I")  # the 4-byte length before each fragment


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


def canonical(env):
    """The envelope as the proof covers it: every field but ``auth``, in one fixed JSON form."""
    return json.dumps({k: v for k, v in env.items() if k != "auth"}, sort_keys=True, separators=(",", ":")).encode()


def auth_code(secret, challenge, env):
    """HMAC-SHA256 under the job's secret of the gateway's challenge and the envelope: proves the secret, shows none."""
    return hmac.new(secret.encode(), AUTH_DOMAIN + challenge.encode() + b"\0" + canonical(env),
                    hashlib.sha256).hexdigest()


def hello(challenge):
    """The gateway's first line on every connection."""
    return {"v": VERSION, "challenge": challenge}


def send_authenticated(sock, reader, env, secret):
    """Answer the gateway's challenge: send ``env`` with the proof that this client holds the job's secret."""
    first = reader.line()
    if first.get("ok") is False:  # refused before the challenge (too many connections from this address)
        raise ProtocolError("the gateway refused the connection: %s" % str(first.get("error", first))[:300])
    challenge = first.get("challenge")
    if not isinstance(challenge, str) or not _CHALLENGE.match(challenge):
        raise ProtocolError("the gateway sent no challenge (not a psgwd speaking protocol %d?)" % VERSION)
    if not secret:
        raise ProtocolError("no job secret to answer the gateway's challenge with")
    send_line(sock, dict(env, auth=auth_code(secret, challenge, env)))


def send_line(sock, obj):
    sock.sendall(json.dumps(obj, sort_keys=True).encode() + b"\n")


class Reader:
    """Buffered reads of lines and exact byte counts from a socket."""

    def __init__(self, sock):
        self.sock = sock
        self.buf = bytearray()

    def _fill(self, size=CHUNK):
        chunk = self.sock.recv(size)
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

    def fragment_length(self, limit=MAX_FRAGMENT):
        (n,) = _LEN.unpack(self.exact(_LEN.size))
        if not 0 < n <= limit:
            raise ProtocolError("fragment of %d bytes is outside 1-%d" % (n, limit))
        return n

    def fragment(self, limit=MAX_FRAGMENT):
        return self.exact(self.fragment_length(limit))

    def relay(self, n, out):
        """Pass the next ``n`` bytes on to socket ``out`` a CHUNK at a time: nothing more is read while ``out``
        does not take them, so a slow receiver slows the sender down (TCP back-pressure) instead of filling memory."""
        while n:
            if not self.buf:
                self._fill(min(n, CHUNK))
            piece = bytes(self.buf[:n])
            del self.buf[:len(piece)]
            out.sendall(piece)
            n -= len(piece)


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


def send_message(gateway, env, data, secret, timeout=30.0, source=None):
    """Send ``data`` through the psgwd at ``gateway`` (host:port) under envelope ``env``, proving the job's
    ``secret``; return the receiver's result.

    Raise ProtocolError when the gateway refuses the envelope (wrong job or secret, a destination outside the job's
    node pairs, unreachable).
    """
    host, port = split_endpoint(gateway)
    mtu = int(env["mtu"])
    with socket.create_connection((host, port), timeout=timeout, source_address=source) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        reader = Reader(sock)
        send_authenticated(sock, reader, env, secret)
        reply = reader.line()
        if not reply.get("ok"):
            raise ProtocolError("gateway %s refused the message: %s" % (gateway, reply.get("error", reply)))
        view = memoryview(data)
        for start in range(0, len(data), mtu):
            send_fragment(sock, bytes(view[start:start + mtu]))
        result = reader.line()
        result.setdefault("gateway", reply.get("gateway"))
        return result


def query_stats(gateway, secret, timeout=10.0):
    """Ask a psgwd for its byte counters (with the job's secret, like any request)."""
    host, port = split_endpoint(gateway)
    with socket.create_connection((host, port), timeout=timeout) as sock:
        reader = Reader(sock)
        send_authenticated(sock, reader, {"v": VERSION, "op": "stats"}, secret)
        return reader.line()


def digest(data):
    return hashlib.sha256(data).hexdigest()
