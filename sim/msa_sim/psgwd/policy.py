# SPDX-License-Identifier: GPL-3.0-or-later
"""What a job's psgwd relays, and for whom: the job's secret, the node pairs of its routing file, which ports.

A psgwd serves one job. A connection is served only when its first line proves, by an HMAC of the psgwd's fresh
challenge (``protocol.auth_code``), that the client holds the job's secret (the prolog hands it to the job in a file
of the user's only and to the psgwd through its agent, on standard input: never in argv or a log). A message is
relayed only between the two addresses of a node pair the agent was given for the job (the pairs of the job's
routing file on this gateway, the same ones its nftables rules forward; ``write_pairs``/``PairsFile``), and only to
a destination port an MPI rank can listen on: ports below 1024 can only be bound by root, so a rank, running as the
job's user, never listens there and a connection there could only reach a system service (SSH, ...). The message
size is bounded by ``max_bytes`` per connection; a bigger one is refused, the connection closed, the job goes on.
"""
from __future__ import annotations

import hmac
import ipaddress
import json
import os
import re
import threading

from msa_sim.psgwd import protocol as proto

SECRET = re.compile(r"^[A-Za-z0-9_-]{32,128}$")
SECRET_RULE = "32 to 128 characters of A-Z a-z 0-9 _ -"
REFUSED_PORTS = "1-1023"  # privileged: only root binds them, so no rank of a job listens there
MAX_BYTES = 1 << 30       # bytes one connection may carry by default (one message: its envelope's length)
MAX_PAIRS = 65536


class Refused(Exception):
    """The gateway will not serve this connection or message; the text says why, naming the address or value."""


def check_secret(value, field="secret"):
    """The job's secret as given (a string of SECRET_RULE); the error never repeats the value."""
    if not isinstance(value, str) or not SECRET.match(value):
        raise ValueError("%s: not %s" % (field, SECRET_RULE))
    return value


def parse_ports(spec):
    """``"1-1023,6817-6819"`` -> a frozenset of port numbers; '' -> empty."""
    ports = set()
    for part in filter(None, (p.strip() for p in str(spec).split(","))):
        low, _, high = part.partition("-")
        if not low.isdigit() or (high and not high.isdigit()):
            raise ValueError("port range %r is not PORT or LOW-HIGH" % part)
        low, high = int(low), int(high or low)
        if not 0 < low <= high < 65536:
            raise ValueError("port range %r is outside 1-65535" % part)
        ports.update(range(low, high + 1))
    return frozenset(ports)


def _address(value, where):
    try:
        return str(ipaddress.ip_address(str(value)))
    except ValueError:
        raise ValueError("%s: %r is not an IP address" % (where, value)) from None


def write_pairs(path, job, pairs):
    """The job's node pairs for its psgwd: ``[[address on the first fabric, address on the second], ...]``, written
    atomically, readable by root only (the agent writes it, the psgwd reads it at each connection)."""
    body = json.dumps({"job": str(job), "pairs": [list(p) for p in pairs]}, sort_keys=True).encode()
    tmp = "%s.tmp%d" % (path, os.getpid())
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(body)
    os.replace(tmp, path)


class PairsFile:
    """The node pairs a psgwd may relay between, read again whenever the agent rewrites the file."""

    def __init__(self, path, job, log=None):
        self.path, self.job, self.log = path, str(job), log
        self.lock = threading.Lock()
        self.stamp, self.pairs = None, frozenset()

    def current(self):
        try:
            st = os.stat(self.path) if self.path else None
        except FileNotFoundError:
            st = None
        with self.lock:
            stamp = (st.st_mtime_ns, st.st_size, st.st_ino) if st else None
            if stamp != self.stamp:
                self.stamp, self.pairs = stamp, self._load() if st else frozenset()
            return self.pairs

    def _load(self):
        try:
            with open(self.path, "r", encoding="utf-8") as fh:
                data = json.load(fh)
            if not isinstance(data, dict) or str(data.get("job")) != self.job:
                raise ValueError("it is not the pairs file of job %s" % self.job)
            pairs = data.get("pairs")
            if not isinstance(pairs, list) or len(pairs) > MAX_PAIRS:
                raise ValueError("pairs must be a list of at most %d pairs" % MAX_PAIRS)
            out = set()
            for i, pair in enumerate(pairs):
                if not isinstance(pair, list) or len(pair) != 2:
                    raise ValueError("pairs[%d] %r is not [address, address]" % (i, pair))
                out.add((_address(pair[0], "pairs[%d]" % i), _address(pair[1], "pairs[%d]" % i)))
            return frozenset(out)
        except (OSError, ValueError) as exc:
            if self.log:
                self.log.error("pairs file %s unusable, relaying for no pair: %s", self.path, exc)
            return frozenset()


class Policy:
    """The job's secret, node pairs, refused ports and byte cap, as one psgwd applies them."""

    def __init__(self, job, secret, pairs, refused_ports=None, max_bytes=MAX_BYTES):
        self.job = str(job)
        self._key = check_secret(secret, "job secret")
        self.pairs = pairs
        self.refused_ports = parse_ports(REFUSED_PORTS) if refused_ports is None else frozenset(refused_ports)
        self.max_bytes = int(max_bytes)

    def authentic(self, challenge, env):
        """Whether ``env`` carries the right proof for ``challenge`` (compared in constant time)."""
        got = env.get("auth")
        if not isinstance(got, str):
            return False
        want = proto.auth_code(self._key, challenge, env)
        return hmac.compare_digest(got.encode("ascii", "replace"), want.encode())

    def destination(self, first_fabric, peer, dst):
        """``(host, port)`` a message from ``peer`` (arrived on the first fabric or not) may go to, else Refused."""
        try:
            host, port = proto.split_endpoint(dst)
        except proto.ProtocolError as exc:
            raise Refused(str(exc)) from None
        try:
            host = str(ipaddress.ip_address(host))
        except ValueError:
            raise Refused("destination %r is not an IP address" % (dst,)) from None
        if not 0 < port < 65536 or port in self.refused_ports:
            raise Refused("destination %s port %d is refused: a service port, no MPI rank of a job listens there"
                          % (host, port))
        pair = (peer, host) if first_fabric else (host, peer)
        if pair not in self.pairs.current():
            raise Refused("%s -> %s is not a node pair of job %s on this gateway (its routing file's pairs only)"
                          % (peer, host, self.job))
        return host, port

    def length(self, length):
        """The envelope's message size, within the cap per connection."""
        if length > self.max_bytes:
            raise Refused("a message of %d bytes exceeds this gateway's cap of %d bytes per connection"
                          % (length, self.max_bytes))
        return length
