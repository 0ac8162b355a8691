# SPDX-License-Identifier: GPL-3.0-or-later
"""Read the EMP `key = value` configuration files (/etc/extoll/master.conf, /etc/extoll/slave.conf)."""
from __future__ import annotations

MASTER_DEFAULTS = {
    "listen_address": "127.0.0.1",
    "listen_port": "9000",
    "topology_file": "",
    "auto_configuration": "off",
    "state_dir": "/var/lib/emp",
    "token_file": "",
    "slave_tokens_file": "",        # lines '<guid> <node id|-> <sha256 of the token>': each slave's own token
    "tls_cert": "",                 # PEM certificate and key of the API: both set, the API speaks TLS only
    "tls_key": "",
    "extoll_cidr": "10.44.0.0/24",
    "discovery": "slaves",          # slaves: from slave reports; file: discovery_file is the physical fabric
    "discovery_file": "",
    "discovery_interval": "2",      # seconds between discoveries while waiting for the topology
    "slave_timeout": "5",           # a slave silent for longer is gone
    "routing": "",                  # default routing override (DimensionOrder, ShortestPath, UpDown)
    "updown_root": "",              # node id of the up*/down* root (default: lowest id)
    "routing_fallback": "",         # engines tried in order when the routing cannot be made deadlock-free
    "virtual_channels": "4",        # VCs per EXTOLL link the routing may use (the model offers 4)
    "sweep_interval": "1",          # seconds between surveillance sweeps (0: no surveillance)
    "sensor_dir": "/run/emp/sensors",  # fabric sensor files for the DCDB Pusher ('' : none)
}

SLAVE_DEFAULTS = {
    "master": "http://127.0.0.1:9000",
    "guid": "",
    "node_id": "",
    "address": "",
    "extoll_cidr": "10.44.0.0/24",
    "interface_prefix": "ext",
    "hello_interval": "1",
    "report_interval": "1",
    "token_file": "",
    "ca_file": "",                  # CA the master's https certificate is verified against ('': system CAs)
    "route_table": "44",
    "rule_priority": "1000",
}


class ConfigError(ValueError):
    pass


def parse(text, defaults=None, source="<config>"):
    conf = dict(defaults or {})
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if "=" not in line:
            raise ConfigError("%s:%d: expected 'key = value', got %r" % (source, lineno, line))
        key, value = (part.strip() for part in line.split("=", 1))
        if defaults is not None and key not in defaults:
            raise ConfigError("%s:%d: unknown key %r" % (source, lineno, key))
        conf[key] = value
    return conf


def load(path, defaults):
    with open(path, encoding="utf-8") as handle:
        return parse(handle.read(), defaults, path)


def flag(value):
    return str(value).strip().lower() in ("1", "on", "yes", "true")


def read_token(path):
    if not path:
        return None
    with open(path, encoding="utf-8") as handle:
        return handle.read().strip() or None
