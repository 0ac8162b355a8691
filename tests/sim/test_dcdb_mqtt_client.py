# SPDX-License-Identifier: GPL-3.0-or-later
"""The DCDB daemons' MQTT client sees a broker gone away mid-write as a lost connection (paho reconnects), not as an
``ssl.SSLEOFError`` that ends paho's network thread for good (seen in CI: the Collect Agent stored nothing after
verify_dcdb restarted the broker)."""
from __future__ import annotations

import ssl

import paho.mqtt.client as mqtt
import pytest

from msa_sim.dcdb.info import client_class


class DeadTLS:
    """A TLS socket whose peer has closed without close_notify."""

    def send(self, buf):
        raise ssl.SSLEOFError(8, "EOF occurred in violation of protocol (_ssl.c:2393)")

    def recv(self, bufsize):
        raise ssl.SSLZeroReturnError(6, "TLS/SSL connection has been closed (EOF)")

    def close(self):
        pass


def test_an_ssl_eof_is_a_lost_connection_for_paho():
    client = client_class(mqtt)(client_id="t")
    client._sock = DeadTLS()
    with pytest.raises(ConnectionResetError):
        client._sock_send(b"x")
    with pytest.raises(ConnectionResetError):
        client._sock_recv(1)
    # paho's own writer then reports the connection lost (and its loop reconnects) instead of raising
    client._out_packet.append({"command": 0x30, "mid": 1, "qos": 0, "pos": 0, "to_process": 1, "packet": b"x",
                               "info": None})
    assert client._packet_write() == mqtt.MQTT_ERR_CONN_LOST


def test_the_plain_client_lets_the_ssl_eof_escape():
    """What the wrapper is for: paho 1.6 itself raises it out of its network loop."""
    client = mqtt.Client(client_id="t")
    client._sock = DeadTLS()
    client._out_packet.append({"command": 0x30, "mid": 1, "qos": 0, "pos": 0, "to_process": 1, "packet": b"x",
                               "info": None})
    with pytest.raises(ssl.SSLEOFError):
        client._packet_write()
