# SPDX-License-Identifier: GPL-3.0-or-later
"""A loopback HTTP server that fails on cue (half a body, a drop after the request, a stall), for client tests."""
from __future__ import annotations

import json
import socket
import threading
import time

# What the server does with one request, in the order the requests arrive (then ``default``):
#   ("answer", status, body)  a whole JSON answer
#   "half"                    headers and half the body, then the connection closes (a process killed mid-answer)
#   "half-reset"              the same, closed with a reset
#   "drop"                    read the request, close without a word (RemoteDisconnected)
#   "stall"                   read the request, answer nothing until the test is over (the client times out)
#   "garbage"                 a status line that is not HTTP (BadStatusLine)
#   "text"                    200 with a body that is not JSON


class FaultyServer:
    def __init__(self, script=(), default=("answer", 200, {"ok": True}), port=0, tls=None):
        self.script = list(script)
        self.tls = tls            # an ssl.SSLContext (server side): the same faults behind TLS
        self.default = default
        self.seen = []            # (method, path, body) of every request read whole
        self._sock = socket.socket()
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", port))
        self._sock.listen(16)
        self.port = self._sock.getsockname()[1]
        self.url = "%s://127.0.0.1:%d" % ("https" if tls else "http", self.port)
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def count(self, method, path=None):
        return sum(1 for seen in self.seen if seen[0] == method and (path is None or seen[1] == path))

    def close(self):
        self._stop.set()
        self._sock.close()
        self._thread.join(timeout=5)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _serve(self):
        self._sock.settimeout(0.1)
        while not self._stop.is_set():
            try:
                conn = self._sock.accept()[0]
            except OSError:
                continue
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _read_request(self, conn):
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = conn.recv(65536)
            if not chunk:
                return None
            data += chunk
        head, rest = data.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        method, path = lines[0].split(" ")[:2]
        length = 0
        for line in lines[1:]:
            name, value = (line.split(":", 1) + [""])[:2]
            if name.strip().lower() == "content-length":
                length = int(value)
        while len(rest) < length:
            chunk = conn.recv(65536)
            if not chunk:
                return None
            rest += chunk
        return method, path, json.loads(rest) if rest else None

    def _handle(self, conn):
        conn.settimeout(10)
        try:
            if self.tls is not None:
                conn = self.tls.wrap_socket(conn, server_side=True)
            request = self._read_request(conn)
            if request is None:
                return
            with self._lock:
                self.seen.append(request)
                action = self.script.pop(0) if self.script else self.default
            self._act(conn, action)
        except OSError:
            pass
        finally:
            conn.close()

    def _act(self, conn, action):
        kind = action[0] if isinstance(action, tuple) else action
        if kind == "answer":
            raw = json.dumps(action[2]).encode()
            conn.sendall(b"HTTP/1.1 %d X\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
                         b"Connection: close\r\n\r\n%s" % (action[1], len(raw), raw))
        elif kind in ("half", "half-reset"):
            conn.sendall(b"HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nContent-Length: 400\r\n\r\n"
                         b'{"id": 7, "na')
            time.sleep(0.05)
            if kind == "half-reset":   # RST, as when the kernel cleans up a SIGKILLed process with unread data
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
            # else FIN: the client reads a short body (IncompleteRead)
        elif kind == "stall":
            self._stop.wait(30)
        elif kind == "garbage":
            conn.sendall(b"SSH-2.0-OpenSSH\r\n\r\n")
        elif kind == "text":
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 9\r\n\r\nnot json!")
        # "drop": nothing, the connection is closed


def free_port():
    """A loopback port where nothing listens (a connection to it is refused)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return port
