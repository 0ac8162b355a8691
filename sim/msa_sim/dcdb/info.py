# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

"""The INFO configuration format of DCDB, shared with the collection (one parser for the module and the daemons)."""

import ssl

from ansible_collections.msa.hpc.plugins.module_utils._dcdb import (  # noqa: F401  (re-exported)
    DcdbConfigError, InfoError, InfoNode, dump_info, load_info, parse_info, parse_plugin, pusher_plugins,
    validate_topic)


def as_bool(value, default=False):
    if value in (None, ""):
        return default
    return str(value).strip().lower() in ("1", "true", "yes", "on")


def as_int(value, default, field):
    if value in (None, ""):
        return default
    try:
        return int(value)
    except ValueError:
        raise DcdbConfigError("%s %r is not a whole number" % (field, value))


def split_hostport(text, default_port, field):
    host, _, port = str(text).rpartition(":")
    if not host:
        return str(text), default_port
    try:
        return host.strip("[]"), int(port)
    except ValueError:
        raise DcdbConfigError("%s %r is not host:port" % (field, text))


def mqtt_tls(get, default_port=8883):
    """``(ca_file, port default)`` of the global section: ``mqttCAFile`` names the CA the broker's certificate is
    verified against and makes the connection TLS (8883 unless mqttBroker names a port); none: plain MQTT (1883)."""
    ca_file = get("mqttCAFile") or None
    return ca_file, (default_port if ca_file else 1883)


def client_class(mqtt):
    """paho's Client, with a broker gone away mid-write seen as a lost connection.

    paho 1.6 (Debian 12's python3-paho-mqtt) turns a ConnectionError on its socket into a lost connection and
    reconnects; a TLS connection the broker closed (a restart) raises ``ssl.SSLEOFError`` instead, which ends the
    network thread of ``loop_start`` for good, and the daemon never reconnects."""

    class Client(mqtt.Client):
        def _sock_send(self, buf):
            try:
                return super()._sock_send(buf)
            except (ssl.SSLEOFError, ssl.SSLZeroReturnError) as exc:
                raise ConnectionResetError(str(exc)) from exc

        def _sock_recv(self, bufsize):
            try:
                return super()._sock_recv(bufsize)
            except (ssl.SSLEOFError, ssl.SSLZeroReturnError) as exc:
                raise ConnectionResetError(str(exc)) from exc

    return Client


def use_tls(client, ca_file):
    """Make a paho client speak TLS to the broker, verifying its certificate and name against ``ca_file``."""
    if ca_file:
        context = ssl.create_default_context(cafile=ca_file)
        client.tls_set_context(context)
        client.tls_insecure_set(False)


def read_secret(path, field):
    """The first line of a password file (0600, owned by the daemon's user)."""
    if not path:
        return None
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.readline().rstrip("\r\n")
    except OSError as exc:
        raise DcdbConfigError("%s %r cannot be read: %s" % (field, path, exc.strerror))
