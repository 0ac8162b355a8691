# SPDX-License-Identifier: GPL-3.0-or-later
"""The DCDB daemons' MQTT network loop outlives an error paho 1.6 does not catch: an ``ssl.SSLEOFError`` while it
writes to a broker that has just gone away (seen in CI: the Collect Agent's loop thread died at a broker restart and
the agent stored nothing more)."""
from __future__ import annotations

import ssl
import threading

from msa_sim.dcdb.info import NetworkLoop


class Client:
    """paho's client as NetworkLoop uses it: the first loop dies of SSLEOFError, the next runs until disconnect."""

    def __init__(self):
        self.loops, self.reconnects = 0, 0
        self.disconnected = threading.Event()
        self.running = threading.Event()

    def loop_forever(self, retry_first_connection=False):
        assert retry_first_connection
        self.loops += 1
        if self.loops == 1:
            raise ssl.SSLEOFError(8, "EOF occurred in violation of protocol (_ssl.c:2393)")
        self.running.set()
        self.disconnected.wait(10)

    def reconnect(self):
        self.reconnects += 1

    def disconnect(self):
        self.disconnected.set()


def test_the_loop_reconnects_after_an_ssl_eof_and_stops_when_asked():
    client = Client()
    loop = NetworkLoop(client, "test-mqtt", retry=0.01).start()
    assert client.running.wait(5), "the loop did not run again after the SSLEOFError"
    assert (client.loops, client.reconnects) == (2, 1)
    loop.stop(timeout=5)
    assert not loop._thread.is_alive()
    assert client.loops == 2
