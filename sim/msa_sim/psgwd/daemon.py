# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

"""The per-job gateway daemon: accepts envelopes on both fabrics from the job's own ranks only (its secret, its node
pairs: msa_sim.psgwd.policy), relays each fragment a bounded chunk at a time, counts bytes."""

import json
import logging
import os
import secrets
import socket
import socketserver
import threading
import time

from msa_sim.psgwd import protocol as proto
from msa_sim.psgwd.policy import Refused

log = logging.getLogger("psgwd")


class Stats:
    """Bytes, fragments and messages per direction (``<in fabric>-><out fabric>``), saved to a JSON file."""

    def __init__(self, job, name, listen, path=None):
        self.lock = threading.Lock()
        self.path = path
        self.data = {"job": job, "gateway": name, "listen": listen, "pid": os.getpid(), "started": time.time(),
                     "directions": {}, "refused": 0, "errors": 0, "active": 0}

    def _direction(self, key):
        return self.data["directions"].setdefault(key, {"bytes": 0, "fragments": 0, "messages": 0})

    def add_fragment(self, key, nbytes):
        with self.lock:
            d = self._direction(key)
            d["bytes"] += nbytes
            d["fragments"] += 1

    def bump(self, field, key=None, delta=1):
        with self.lock:
            target = self._direction(key) if key else self.data
            target[field] += delta
        if field != "active":
            self.save()

    def snapshot(self):
        with self.lock:
            return json.loads(json.dumps(self.data))

    def save(self):
        if not self.path:
            return
        snap = self.snapshot()
        snap["updated"] = time.time()
        tmp = "%s.tmp%d" % (self.path, os.getpid())
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(snap, fh, sort_keys=True)
        os.replace(tmp, self.path)


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address, gateway, fabric):
        self.gateway = gateway
        self.fabric = fabric
        self.address_family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        super().__init__(address, _Handler)


class _Handler(socketserver.BaseRequestHandler):
    def handle(self):
        self.server.gateway.serve(self.request, self.server.fabric)


class PeerLimit:
    """At most ``limit`` connections open at once from one peer address."""

    def __init__(self, limit):
        self.limit, self.open, self.lock = limit, {}, threading.Lock()

    def enter(self, peer):
        with self.lock:
            if self.open.get(peer, 0) >= self.limit:
                return False
            self.open[peer] = self.open.get(peer, 0) + 1
            return True

    def leave(self, peer):
        with self.lock:
            self.open[peer] -= 1
            if not self.open[peer]:
                del self.open[peer]


class Gateway:
    """One psgwd for one job. ``listen`` is ``[(fabric, address), ...]``: one entry per fabric it bridges, the
    cluster side first (the order of the pairs in ``policy``: msa_sim.psgwd.policy.Policy)."""

    def __init__(self, job, listen, policy, port=0, name=None, stats_file=None, max_fragment=proto.MAX_FRAGMENT,
                 connect_timeout=10.0, idle_timeout=60.0, peer_connections=64):
        if not listen:
            raise ValueError("psgwd needs at least one --listen address")
        self.job = str(job)
        self.policy = policy
        self.name = name or socket.gethostname()
        self.max_fragment = max_fragment
        self.connect_timeout = connect_timeout
        self.idle_timeout = idle_timeout
        self.peers = PeerLimit(peer_connections)
        self.servers = []
        self._bind(listen, port)
        self.port = self.servers[0].server_address[1]
        self.listen = [(s.fabric, s.server_address[0]) for s in self.servers]
        self.stats = Stats(self.job, self.name, ["%s=%s:%d" % (f, a, self.port) for f, a in self.listen], stats_file)
        self.threads = []

    def _bind(self, listen, port, attempts=20):
        """Bind every fabric address on the same port (the routing file names one port per gateway)."""
        for _ in range(attempts):
            servers = []
            try:
                for fabric, addr in listen:
                    servers.append(_Server((addr, port or (servers[0].server_address[1] if servers else 0)),
                                           self, fabric))
                self.servers = servers
                return
            except OSError:
                for s in servers:
                    s.server_close()
                if port:
                    raise
        raise OSError("no common free port on %s" % ", ".join(a for _, a in listen))

    def start(self):
        for s in self.servers:
            t = threading.Thread(target=s.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True)
            t.start()
            self.threads.append(t)
        self.stats.save()
        return self

    def stop(self):
        for s in self.servers:
            s.shutdown()
            s.server_close()
        self.stats.save()

    def endpoint(self, index=0):
        fabric, addr = self.listen[index]
        return ("[%s]:%d" if ":" in addr else "%s:%d") % (addr, self.port)

    def _other(self, fabric):
        """The fabric (and our address on it) that traffic arriving on ``fabric`` leaves by."""
        for f, addr in self.listen:
            if f != fabric:
                return f, addr
        return fabric, None

    def serve(self, sock, fabric):
        try:
            peer = sock.getpeername()[0]
        except OSError:  # gone before it was served
            return
        if not self.peers.enter(peer):
            return self._refuse(sock, "connection from %s on %s: %d connections from it are open already"
                                % (peer, fabric, self.peers.limit))
        try:
            sock.settimeout(self.idle_timeout)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._serve(sock, fabric, peer)
        except socket.timeout:
            self.stats.bump("errors")
            log.warning("connection from %s on %s closed: idle for %s s", peer, fabric, self.idle_timeout)
        except (proto.ProtocolError, OSError) as exc:
            log.info("connection from %s on %s closed: %s", peer, fabric, exc)
        finally:
            self.peers.leave(peer)

    def _refuse(self, sock, why):
        """One log line and one answer naming what was refused; the connection is then closed (the job goes on)."""
        self.stats.bump("refused")
        log.warning("refused %s", why)
        try:
            proto.send_line(sock, {"ok": False, "error": "refused " + why})
        except OSError:
            pass

    def _serve(self, sock, fabric, peer):
        challenge = secrets.token_hex(16)
        proto.send_line(sock, proto.hello(challenge))
        reader = proto.Reader(sock)
        env = reader.line()
        if not self.policy.authentic(challenge, env):
            return self._refuse(sock, "connection from %s on %s: %s job secret" % (
                peer, fabric, "wrong" if "auth" in env else "no"))
        env.pop("auth")
        if env.get("op") == "stats":
            return proto.send_line(sock, dict(self.stats.snapshot(), ok=True))
        if env.get("op") != "forward":
            return proto.send_line(sock, {"ok": False, "error": "unknown op %r" % env.get("op")})
        if str(env.get("job")) != self.job:
            return self._refuse(sock, "envelope for job %s from %s: this psgwd serves job %s"
                                % (env.get("job"), peer, self.job))
        out_fabric, out_addr = self._other(fabric)
        direction = "%s->%s" % (fabric, out_fabric)
        try:
            length, mtu = int(env["length"]), int(env["mtu"])
            if length < 0 or not 0 < mtu <= self.max_fragment:
                raise proto.ProtocolError("envelope length %d / mtu %d not acceptable" % (length, mtu))
            dst = self.policy.destination(fabric == self.listen[0][0], peer, env["dst"]["addr"])
            self.policy.length(length)
        except Refused as exc:
            return self._refuse(sock, "message of job %s from %s on %s: %s" % (self.job, peer, fabric, exc))
        except (proto.ProtocolError, ValueError, KeyError, TypeError) as exc:
            return self._refuse(sock, "envelope from %s on %s: %s" % (peer, fabric, exc))
        self.stats.bump("active", delta=1)
        try:
            self._forward(sock, reader, env, dst, length, direction, out_addr)
        except Refused as exc:
            self._refuse(sock, "message of job %s from %s on %s: %s; connection closed" % (self.job, peer, fabric,
                                                                                          exc))
        except socket.timeout:
            raise
        except (proto.ProtocolError, OSError) as exc:
            self.stats.bump("errors")
            log.warning("message of job %s from %s failed: %s", self.job, peer, exc)
            try:
                proto.send_line(sock, {"ok": False, "error": str(exc)})
            except OSError:
                pass
        finally:
            self.stats.bump("active", delta=-1)

    def _forward(self, sock, reader, env, dst, length, direction, out_addr):
        source = (out_addr, 0) if out_addr else None
        try:
            out = socket.create_connection(dst, timeout=self.connect_timeout, source_address=source)
        except OSError as exc:
            raise proto.ProtocolError("destination %s unreachable from %s: %s" % (env["dst"]["addr"], self.name, exc))
        with out:
            out.settimeout(self.idle_timeout)
            out.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            out_reader = proto.Reader(out)
            proto.send_line(out, dict(env, via={"gateway": self.name, "direction": direction}))
            accepted = out_reader.line()
            if not accepted.get("ok"):
                raise proto.ProtocolError("receiver refused: %s" % accepted.get("error", accepted))
            proto.send_line(sock, {"ok": True, "gateway": self.name, "direction": direction})
            moved = 0
            while moved < length:  # relay fragment by fragment, a bounded chunk at a time
                n = reader.fragment_length(self.max_fragment)
                if moved + n > length:
                    raise Refused("a fragment of %d bytes would carry the message past its envelope's %d bytes"
                                  % (n, length))
                out.sendall(proto.LENGTH.pack(n))
                reader.relay(n, out)
                moved += n
                self.stats.add_fragment(direction, n)
            result = out_reader.line()
        self.stats.bump("messages", key=direction)
        proto.send_line(sock, dict(result, gateway=self.name, direction=direction))
