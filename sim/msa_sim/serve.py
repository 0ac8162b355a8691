# SPDX-License-Identifier: GPL-3.0-or-later
"""Run a stand-in's HTTP(S) server until SIGTERM or SIGINT, after writing its address to a ready file."""
from __future__ import annotations

import os
import signal
import threading


def serve_until_signalled(server, ready_file=None):
    """Write ``host:port`` to ``ready_file`` (atomically) if given, serve until a signal, then close the server."""
    host, port = server.server_address[:2]
    if ready_file:
        with open(ready_file + ".tmp", "w", encoding="utf-8") as fh:
            fh.write("%s:%d\n" % (host, port))
        os.replace(ready_file + ".tmp", ready_file)
    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: done.set())
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True)
    thread.start()
    done.wait()
    server.shutdown()
    server.server_close()
