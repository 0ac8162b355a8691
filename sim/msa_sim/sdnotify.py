# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

"""systemd's readiness protocol (sd_notify(3)) without libsystemd: one datagram to ``$NOTIFY_SOCKET``.

A ``Type=notify`` service that calls ``notify("READY=1")`` once its signal handlers are installed makes
``systemctl start/restart`` wait until then, so a reload (SIGHUP) queued right after a restart can no longer reach
the process before Python has installed its handler (SIGHUP's default action ends the process, and systemd counts
that as a clean exit that ``Restart=on-failure`` does not restart).
"""

import os
import socket


def notify(state, environ=None):
    """Send `state` (e.g. ``"READY=1"``) to the service manager; return False when not run under one."""
    address = (environ if environ is not None else os.environ).get("NOTIFY_SOCKET", "")
    if not address:
        return False
    if address.startswith("@"):  # abstract namespace
        address = "\0" + address[1:]
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
        sock.connect(address)
        sock.sendall(state.encode())
    return True
