# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

"""The per-job gateway daemon: accepts envelopes on both fabrics, stores and forwards each fragment, counts bytes."""

import json
import logging
import os
import socket
import socketserver
import threading
import time

from msa_sim.psgwd import protocol as proto

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


class Gateway:
    """One psgwd for one job. ``listen`` is ``[(fabric, address), ...]``: one entry per fabric it bridges."""

    def __init__(self, job, listen, port=0, name=None, stats_file=None, max_fragment=proto.MAX_FRAGMENT,
                 connect_timeout=10.0):
        if not listen:
            raise ValueError("psgwd needs at least one --listen address")
        self.job = str(job)
        self.name = name or socket.gethostname()
        self.max_fragment = max_fragment
        self.connect_timeout = connect_timeout
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
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        reader = proto.Reader(sock)
        try:
            env = reader.line()
        except proto.ProtocolError:
            return
        if env.get("op") == "stats":
            proto.send_line(sock, dict(self.stats.snapshot(), ok=True))
            return
        if env.get("op") != "forward":
            proto.send_line(sock, {"ok": False, "error": "unknown op %r" % env.get("op")})
            return
        if str(env.get("job")) != self.job:
            self.stats.bump("refused")
            log.warning("refused envelope for job %s from %s", env.get("job"), sock.getpeername())
            proto.send_line(sock, {"ok": False, "error": "envelope for job %s refused: this psgwd serves job %s"
                                   % (env.get("job"), self.job)})
            return
        out_fabric, out_addr = self._other(fabric)
        direction = "%s->%s" % (fabric, out_fabric)
        self.stats.bump("active", delta=1)
        try:
            self._forward(sock, reader, env, direction, out_addr)
        except (proto.ProtocolError, OSError, ValueError, KeyError) as exc:
            self.stats.bump("errors")
            log.warning("message of job %s failed: %s", self.job, exc)
            try:
                proto.send_line(sock, {"ok": False, "error": str(exc)})
            except OSError:
                pass
        finally:
            self.stats.bump("active", delta=-1)

    def _forward(self, sock, reader, env, direction, out_addr):
        length, mtu = int(env["length"]), int(env["mtu"])
        if length < 0 or not 0 < mtu <= self.max_fragment:
            raise proto.ProtocolError("envelope length %d / mtu %d not acceptable" % (length, mtu))
        host, port = proto.split_endpoint(env["dst"]["addr"])
        source = (out_addr, 0) if out_addr else None
        try:
            out = socket.create_connection((host, port), timeout=self.connect_timeout, source_address=source)
        except OSError as exc:
            raise proto.ProtocolError("destination %s unreachable from %s: %s" % (env["dst"]["addr"], self.name, exc))
        with out:
            out.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            out_reader = proto.Reader(out)
            proto.send_line(out, dict(env, via={"gateway": self.name, "direction": direction}))
            accepted = out_reader.line()
            if not accepted.get("ok"):
                raise proto.ProtocolError("receiver refused: %s" % accepted.get("error", accepted))
            proto.send_line(sock, {"ok": True, "gateway": self.name, "direction": direction})
            moved = 0
            while moved < length:  # store and forward, one fragment at a time
                fragment = reader.fragment(self.max_fragment)
                proto.send_fragment(out, fragment)
                moved += len(fragment)
                self.stats.add_fragment(direction, len(fragment))
            result = out_reader.line()
        self.stats.bump("messages", key=direction)
        proto.send_line(sock, dict(result, gateway=self.name, direction=direction))
