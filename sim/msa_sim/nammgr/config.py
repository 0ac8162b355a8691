# SPDX-License-Identifier: GPL-3.0-or-later
"""Reads /etc/nam-manager/manager.conf (INI): the listener, state directory, credentials and every NAM/GCE board.

    [manager]
    listen = 0.0.0.0
    port = 8780
    state_dir = /var/lib/nam-manager
    users_file = /etc/nam-manager/users.conf
    admin_reserve_percent = 10    ; share of every NAM pool only administrators may allocate
    aat_size = 64                 ; entries of the attached-allocation table of each NAM board
    granularity = 4K              ; sizes are rounded up to a multiple of this
    synchronous = full            ; SQLite: full (fsync per commit) or normal
    token_ttl = 3600
    device_key_file = /etc/nam-manager/device.key   ; key shared with the boards' data paths (capabilities)
    device_ca_path = /etc/msa-hpc/tls/ca.pem         ; CA of the boards' certificates (scrub on free)
    capability_ttl = 86400        ; seconds a capability for a board stays valid
    job_token_ttl = 86400         ; longest life of a job's token (POST /auth/job-token; its job's time limit bounds it)
    nonvolatile_quota = 64G       ; non-volatile NAM one owner may hold (0: no limit)
    nonvolatile_quota_count = 8   ; non-volatile allocations one owner may hold (0: no limit)
    nonvolatile_expiry_days = 30  ; a non-volatile allocation is freed this long after its creation (0: never)

    [nam:nam01]
    node_id = 129                 ; EXTOLL node id of the board
    capacity = 64G                ; fast volatile memory
    nonvolatile_capacity = 1T     ; slower non-volatile memory (default 0)
    aat_size = 128                ; overrides [manager] aat_size
    admin_reserve_percent = 5     ; overrides [manager] admin_reserve_percent
    data_url = https://10.3.0.9:8790   ; the board's data path (msa_sim.rma), on its EXTOLL address

    [gce:gce01]
    node_id = 130
    data_url = https://10.3.0.10:8790
"""
from __future__ import annotations

import configparser
import glob
import os

from ansible_collections.msa.hpc.plugins.module_utils._nam import SizeError, parse_size

DEFAULTS = {
    "listen": "127.0.0.1",
    "port": "8780",
    "state_dir": "/var/lib/nam-manager",
    "users_file": "/etc/nam-manager/users.conf",
    "admin_reserve_percent": "10",
    "aat_size": "64",
    "granularity": "4K",
    "synchronous": "full",
    "token_ttl": "3600",
    # PEM certificate and key of the API: both set, the manager speaks TLS only (https)
    "tls_cert": "",
    "tls_key": "",
    # the boards' data paths: without a key, no capabilities are issued (the access endpoints answer 409)
    "device_key_file": "",
    "device_ca_path": "",
    "capability_ttl": "86400",
    "job_token_ttl": "86400",
    "nonvolatile_quota": "0",
    "nonvolatile_quota_count": "0",
    "nonvolatile_expiry_days": "0",
}
DEFAULT_PATH = "/etc/nam-manager/manager.conf"


class ConfigError(ValueError):
    """A configuration the manager cannot run with; the message names the file, section and key."""


class Config:
    def __init__(self, path, listen, port, state_dir, users_file, granularity, synchronous, token_ttl,
                 nam_devices, gce_devices):
        self.path = path
        self.listen = listen
        self.port = port
        self.state_dir = state_dir
        self.users_file = users_file
        self.granularity = granularity
        self.synchronous = synchronous
        self.token_ttl = token_ttl
        self.nam_devices = nam_devices
        self.gce_devices = gce_devices
        self.tls_cert = ""
        self.tls_key = ""
        self.device_key_file = ""
        self.device_ca_path = ""
        self.capability_ttl = 86400
        self.job_token_ttl = 86400
        self.nonvolatile_quota = 0
        self.nonvolatile_quota_count = 0
        self.nonvolatile_expiry_days = 0

    @property
    def tls(self):
        """(cert, key) when the API speaks TLS, else None."""
        return (self.tls_cert, self.tls_key) if self.tls_cert else None

    @property
    def db_path(self):
        return os.path.join(self.state_dir, "nam-manager.db")


def _get(section, key, path, convert, lower=None, upper=None):
    raw = section.get(key)
    try:
        value = convert(raw)
    except (TypeError, ValueError) as exc:
        raise ConfigError("%s [%s] %s = %r: %s" % (path, section.name, key, raw, exc)) from None
    if (lower is not None and value < lower) or (upper is not None and value > upper):
        raise ConfigError("%s [%s] %s = %r is outside %s..%s" % (path, section.name, key, raw, lower, upper))
    return value


def _size(raw):
    if str(raw).strip() in ("0", ""):
        return 0
    return parse_size(str(raw).strip(), "size")


def parse(text, path="manager.conf", extra=()):
    """manager.conf's text, then each (text, source) of extra: the drop-ins add keys and sections or override."""
    cp = configparser.ConfigParser(inline_comment_prefixes=(";", "#"), interpolation=None)
    for piece, source in [(text, path)] + list(extra):
        try:
            cp.read_string(piece, source=source)
        except configparser.Error as exc:
            raise ConfigError("%s: %s" % (source, exc)) from None
    if not cp.has_section("manager"):
        cp.add_section("manager")
    main = cp["manager"]
    for key, value in DEFAULTS.items():
        main.setdefault(key, value)
    unknown = set(main) - set(DEFAULTS)
    if unknown:
        raise ConfigError("%s [manager]: unknown keys %s (known: %s)" % (path, ", ".join(sorted(unknown)),
                                                                         ", ".join(sorted(DEFAULTS))))
    if main["synchronous"].lower() not in ("full", "normal"):
        raise ConfigError("%s [manager] synchronous = %r: expected full or normal" % (path, main["synchronous"]))
    granularity = _get(main, "granularity", path, _size, 1)
    reserve = _get(main, "admin_reserve_percent", path, float, 0, 100)
    aat_size = _get(main, "aat_size", path, int, 1)
    nam, gce = [], []
    for name in cp.sections():
        if name == "manager":
            continue
        kind, sep, dev = name.partition(":")
        if not sep or kind not in ("nam", "gce") or not dev.strip():
            raise ConfigError("%s: section [%s] is not [manager], [nam:<name>] or [gce:<name>]" % (path, name))
        sec = cp[name]
        node_id = _get(sec, "node_id", path, int, 0, 0xFFFF) if "node_id" in sec else None
        data_url = sec.get("data_url", "").strip()
        if data_url and not data_url.startswith(("https://", "http://")):
            raise ConfigError("%s [%s] data_url = %r is not an http(s) URL" % (path, name, data_url))
        if kind == "gce":
            if set(sec) - {"node_id", "data_url"}:
                raise ConfigError("%s [%s]: unknown keys %s (known: data_url, node_id)"
                                  % (path, name, ", ".join(sorted(set(sec) - {"node_id", "data_url"}))))
            gce.append({"name": dev.strip(), "node_id": node_id, "data_url": data_url})
            continue
        known = {"node_id", "capacity", "nonvolatile_capacity", "aat_size", "admin_reserve_percent", "data_url"}
        if set(sec) - known:
            raise ConfigError("%s [%s]: unknown keys %s (known: %s)" % (path, name, ", ".join(sorted(set(sec) - known)),
                                                                     ", ".join(sorted(known))))
        if "capacity" not in sec:
            raise ConfigError("%s [%s]: capacity is missing (e.g. capacity = 64G)" % (path, name))
        dev_cfg = {"name": dev.strip(), "node_id": node_id, "data_url": data_url,
                   "capacity": _get(sec, "capacity", path, _size, 0),
                   "nonvolatile_capacity": _get(sec, "nonvolatile_capacity", path, _size, 0)
                   if "nonvolatile_capacity" in sec else 0,
                   "aat_size": _get(sec, "aat_size", path, int, 1) if "aat_size" in sec else aat_size,
                   "reserve_percent": _get(sec, "admin_reserve_percent", path, float, 0, 100)
                   if "admin_reserve_percent" in sec else reserve}
        for key in ("capacity", "nonvolatile_capacity"):
            if dev_cfg[key] % granularity:
                raise ConfigError("%s [%s] %s = %s is not a multiple of the granularity %d"
                                  % (path, name, key, sec.get(key), granularity))
        nam.append(dev_cfg)
    if bool(main["tls_cert"]) != bool(main["tls_key"]):
        raise ConfigError("%s [manager]: tls_cert and tls_key must be set together" % path)
    cfg = Config(path, main["listen"], _get(main, "port", path, int, 0, 65535), main["state_dir"],
                 main["users_file"], granularity, main["synchronous"].lower(),
                 _get(main, "token_ttl", path, int, 1), nam, gce)
    cfg.tls_cert, cfg.tls_key = main["tls_cert"], main["tls_key"]
    cfg.device_key_file, cfg.device_ca_path = main["device_key_file"], main["device_ca_path"]
    cfg.capability_ttl = _get(main, "capability_ttl", path, int, 1)
    cfg.job_token_ttl = _get(main, "job_token_ttl", path, int, 1)
    cfg.nonvolatile_quota = _get(main, "nonvolatile_quota", path, _size, 0)
    cfg.nonvolatile_quota_count = _get(main, "nonvolatile_quota_count", path, int, 0)
    cfg.nonvolatile_expiry_days = _get(main, "nonvolatile_expiry_days", path, float, 0, 36500)
    return cfg


def load(path=DEFAULT_PATH):
    """path, then the drop-ins <path>.d/*.conf in name order (the harness puts its stand-in's own settings there)."""
    try:
        with open(path, "r", encoding="utf-8") as fh:
            text = fh.read()
        extra = []
        for dropin in sorted(glob.glob(glob.escape(path + ".d") + "/*.conf")):
            with open(dropin, "r", encoding="utf-8") as fh:
                extra.append((fh.read(), dropin))
        return parse(text, path, extra)
    except OSError as exc:
        raise ConfigError("cannot read %s: %s" % (path, exc.strerror)) from None
    except SizeError as exc:
        raise ConfigError("%s: %s" % (path, exc)) from None
