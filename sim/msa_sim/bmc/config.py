# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

"""The BMC service's configuration (/etc/msa-bmc/bmcs.yaml or .json): loading, defaults and validation."""

import copy
import ipaddress
import json
import re
import uuid

try:
    import yaml
except ImportError:  # python3-yaml is optional when the file is JSON
    yaml = None

from msa_sim.bmc.auth import HashError, parse_hash

DEFAULT_PATH = "/etc/msa-bmc/bmcs.yaml"
RESET_TYPES = ("On", "ForceOff", "GracefulShutdown", "GracefulRestart", "ForceRestart", "PowerCycle", "Nmi",
               "PushPowerButton", "FullPowerCycle")
BOOT_TARGETS = ("None", "Pxe", "Hdd", "Cd", "Usb", "BiosSetup", "UefiShell", "UefiHttp")
ROLES = ("Administrator", "Operator", "ReadOnly", "SystemResetOperator", "MsaReimageOperator")
BACKENDS = ("podman", "file")

SERVICE_DEFAULTS = {
    "database": "/var/lib/msa-bmc/bmc.sqlite",
    "backend": {"type": "podman", "podman": "podman", "state_file": "/var/lib/msa-bmc/power.json",
                "graceful_timeout": 30, "graceful_delay": 0.0, "command_timeout": 90, "post_power_on": [], "carry_paths": []},
    "defaults": {},
    "bmcs": [],
}

BMC_DEFAULTS = {
    "address": "127.0.0.1",
    "port": 8000,
    "system_id": "1",
    "chassis_id": None,          # defaults to system_id
    "manager_id": "BMC",
    "container": None,           # defaults to name
    "users": [],
    "tls": None,                 # {"cert": path, "key": path}
    "manufacturer": "MSA Simulated Systems",
    "model": "MSA-Node",
    "serial": None,              # defaults to SIM-<NAME>
    "uuid": None,                # defaults to a UUID derived from the name
    "sku": None,
    "bios_version": "1.0.0",
    "firmware_version": "msa-bmc 1.0",
    "hostname": None,            # defaults to name
    "cpus": {"count": 2, "model": "Simulated x86-64 CPU", "cores": 8, "threads": 16, "speed_mhz": 2400},
    "memory_gib": 64,
    "disk_gib": 240,             # the root disk Storage reports
    "dimms": None,               # defaults to one DIMM per 16 GiB (at least 1)
    "nics": [],
    "power": {"idle_watts": 150, "max_watts": 450, "standby_watts": 8},
    "reset_types": list(RESET_TYPES),
    "boot_targets": list(BOOT_TARGETS),
    # The images Boot.HttpBootUri may name (containers-storage:<reference>, the reference matched whole): the
    # simulation's HTTP boot boots a local node image (issue 38); anything else is refused before a boot uses it.
    "boot_image_pattern": r"localhost/msa-[a-z0-9-]+:[a-z0-9][a-z0-9._-]{0,127}",
    "session_timeout": 1800,
    "max_sessions": 16,
    "session_service": True,     # false: no SessionService, basic auth only (like sushy-tools)
    # true: also serve the deprecated forms (Chassis Power and Thermal, IndicatorLED, the Manager's VirtualMedia
    # link) for clients that read only those; false: the current forms only (like bmcweb built without
    # redfish-allow-deprecated-power-thermal)
    "deprecated_resources": True,
    "faults": None,              # {"status": 503, "count": 2} answers the first requests with that status
    "ca_bundle": None,           # CA file for HTTPS firmware downloads and event listeners (None: system CAs)
    "update_seconds": 2.0,       # how long applying a SimpleUpdate image takes
    "event_poll_seconds": 1.0,   # how often a BMC with subscribers looks for power changes made outside it
    # event listeners and firmware sources must resolve into these networks (a BMC is no relay to anywhere)
    "outbound_networks": ["127.0.0.0/8", "::1/128"],
}

_MAC = re.compile(r"^[0-9a-fA-F]{2}(:[0-9a-fA-F]{2}){5}$")
_ID = re.compile(r"^[A-Za-z0-9._-]+$")


class ConfigError(ValueError):
    """A configuration value that is wrong; the message names the field and the value."""


def load(path=DEFAULT_PATH):
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    return parse(text, path)


def parse(text, source="bmcs.yaml"):
    if source.endswith(".json") or text.lstrip().startswith("{"):
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise ConfigError("%s: not valid JSON: %s" % (source, exc)) from None
    else:
        if yaml is None:
            raise ConfigError("%s: python3-yaml is needed to read YAML (or write the file as JSON)" % source)
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise ConfigError("%s: not valid YAML: %s" % (source, exc)) from None
    return validate(data, source)


def _merge(base, over):
    out = copy.deepcopy(base)
    for key, value in (over or {}).items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _unknown(data, allowed, where):
    extra = sorted(set(data) - set(allowed))
    if extra:
        raise ConfigError("%s: unknown key %r (known: %s)" % (where, extra[0], ", ".join(sorted(allowed))))


def _int(value, where, low, high):
    if isinstance(value, bool) or not isinstance(value, (int, str)) or not str(value).isdigit():
        raise ConfigError("%s: %r is not a whole number" % (where, value))
    value = int(value)
    if not low <= value <= high:
        raise ConfigError("%s: %r is outside %d..%d" % (where, value, low, high))
    return value


def _number(value, where):
    if isinstance(value, bool):
        raise ConfigError("%s: %r is not a number" % (where, value))
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise ConfigError("%s: %r is not a number" % (where, value)) from None
    if value < 0:
        raise ConfigError("%s: %r must not be negative" % (where, value))
    return value


def _choices(values, allowed, where):
    if not isinstance(values, list) or not values:
        raise ConfigError("%s: %r is not a non-empty list" % (where, values))
    for value in values:
        if isinstance(value, bool):
            raise ConfigError("%s: %r is not one of %s (YAML reads unquoted On/Off/Yes/No as booleans: "
                              "quote them)" % (where, value, ", ".join(allowed)))
        if value not in allowed:
            raise ConfigError("%s: %r is not one of %s" % (where, value, ", ".join(allowed)))
    return list(values)


def validate(data, source="bmcs.yaml"):
    if not isinstance(data, dict):
        raise ConfigError("%s: the top level must be a mapping with 'bmcs'" % source)
    _unknown(data, SERVICE_DEFAULTS, source)
    conf = _merge(SERVICE_DEFAULTS, {k: v for k, v in data.items() if k != "bmcs"})
    backend = conf["backend"]
    _unknown(backend, SERVICE_DEFAULTS["backend"], "%s: backend" % source)
    if backend["type"] not in BACKENDS:
        raise ConfigError("%s: backend.type: %r is not one of %s" % (source, backend["type"], ", ".join(BACKENDS)))
    for key in ("graceful_timeout", "graceful_delay", "command_timeout"):
        backend[key] = _number(backend[key], "%s: backend.%s" % (source, key))
    hook = backend["post_power_on"]
    if not isinstance(hook, list) or not all(isinstance(arg, str) and arg for arg in hook):
        raise ConfigError("%s: backend.post_power_on: %r is not a list of command-line words" % (source, hook))
    carried = backend["carry_paths"]
    if not isinstance(carried, list) or not all(isinstance(p, str) and p.startswith("/") and "/../" not in p + "/"
                                                for p in carried):
        raise ConfigError("%s: backend.carry_paths: %r is not a list of absolute paths" % (source, carried))
    if not isinstance(conf["defaults"], dict):
        raise ConfigError("%s: defaults: %r is not a mapping" % (source, conf["defaults"]))
    _unknown(conf["defaults"], BMC_DEFAULTS, "%s: defaults" % source)
    bmcs = data.get("bmcs")
    if not isinstance(bmcs, list) or not bmcs:
        raise ConfigError("%s: bmcs: %r is not a non-empty list of BMCs" % (source, bmcs))
    conf["bmcs"] = [validate_bmc(_merge(conf["defaults"], b) if isinstance(b, dict) else b,
                                 "%s: bmcs[%d]" % (source, i)) for i, b in enumerate(bmcs)]
    seen_names, seen_binds = set(), set()
    for i, bmc in enumerate(conf["bmcs"]):
        where = "%s: bmcs[%d]" % (source, i)
        if bmc["name"] in seen_names:
            raise ConfigError("%s.name: %r is used twice" % (where, bmc["name"]))
        bind = (bmc["address"], bmc["port"])
        if bmc["port"] and bind in seen_binds:
            raise ConfigError("%s: address %s port %d is used twice" % (where, bmc["address"], bmc["port"]))
        seen_names.add(bmc["name"])
        seen_binds.add(bind)
    return conf


def validate_bmc(data, where):
    if not isinstance(data, dict):
        raise ConfigError("%s: %r is not a mapping" % (where, data))
    _unknown(data, set(BMC_DEFAULTS) | {"name"}, where)
    name = data.get("name")
    if not isinstance(name, str) or not _ID.match(name or ""):
        raise ConfigError("%s.name: %r is not a name (letters, digits, '.', '_', '-')" % (where, name))
    bmc = _merge(BMC_DEFAULTS, data)
    where = "%s (%s)" % (where, name)
    try:
        ipaddress.ip_address(bmc["address"])
    except ValueError:
        raise ConfigError("%s.address: %r is not an IP address" % (where, bmc["address"])) from None
    bmc["port"] = _int(bmc["port"], where + ".port", 0, 65535)
    for key in ("system_id", "manager_id"):
        bmc[key] = str(bmc[key])
        if not _ID.match(bmc[key]):
            raise ConfigError("%s.%s: %r is not a Redfish Id" % (where, key, bmc[key]))
    bmc["chassis_id"] = str(bmc["chassis_id"] or bmc["system_id"])
    bmc["container"] = bmc["container"] or name
    bmc["serial"] = str(bmc["serial"] or "SIM-" + name.upper())
    bmc["uuid"] = str(bmc["uuid"] or uuid.uuid5(uuid.NAMESPACE_DNS, name + ".msa-bmc"))
    bmc["hostname"] = bmc["hostname"] or name
    users = bmc["users"]
    if not isinstance(users, list) or not users:
        raise ConfigError("%s.users: %r is not a non-empty list of accounts" % (where, users))
    names = set()
    for i, user in enumerate(users):
        uwhere = "%s.users[%d]" % (where, i)
        if not isinstance(user, dict):
            raise ConfigError("%s: %r is not a mapping" % (uwhere, user))
        _unknown(user, ("username", "password_hash", "role"), uwhere)
        if not user.get("username") or not isinstance(user["username"], str):
            raise ConfigError("%s.username: %r is not a user name" % (uwhere, user.get("username")))
        if user["username"] in names:
            raise ConfigError("%s.username: %r is listed twice" % (uwhere, user["username"]))
        names.add(user["username"])
        user.setdefault("role", "Administrator")
        if user["role"] not in ROLES:
            raise ConfigError("%s.role: %r is not one of %s" % (uwhere, user["role"], ", ".join(ROLES)))
        try:
            parse_hash(str(user.get("password_hash") or ""))
        except HashError as exc:
            raise ConfigError("%s.password_hash: %s" % (uwhere, exc)) from None
    if bmc["tls"] is not None:
        tls = bmc["tls"]
        if not isinstance(tls, dict) or not tls.get("cert") or not tls.get("key"):
            raise ConfigError("%s.tls: %r needs 'cert' and 'key' paths" % (where, tls))
        _unknown(tls, ("cert", "key"), where + ".tls")
    cpus = bmc["cpus"]
    _unknown(cpus, BMC_DEFAULTS["cpus"], where + ".cpus")
    for key in ("count", "cores", "threads", "speed_mhz"):
        cpus[key] = _int(cpus[key], "%s.cpus.%s" % (where, key), 1 if key != "speed_mhz" else 0, 100000)
    bmc["memory_gib"] = _int(bmc["memory_gib"], where + ".memory_gib", 1, 1 << 20)
    bmc["disk_gib"] = _int(bmc["disk_gib"], where + ".disk_gib", 1, 1 << 20)
    bmc["dimms"] = _int(bmc["dimms"] or max(1, bmc["memory_gib"] // 16), where + ".dimms", 1, 4096)
    nics = bmc["nics"]
    if not isinstance(nics, list):
        raise ConfigError("%s.nics: %r is not a list" % (where, nics))
    for i, nic in enumerate(nics):
        nwhere = "%s.nics[%d]" % (where, i)
        if not isinstance(nic, dict):
            raise ConfigError("%s: %r is not a mapping" % (nwhere, nic))
        _unknown(nic, ("id", "name", "mac", "speed_mbps", "ipv4"), nwhere)
        if not _MAC.match(str(nic.get("mac", ""))):
            raise ConfigError("%s.mac: %r is not a MAC address" % (nwhere, nic.get("mac")))
        nic["mac"] = nic["mac"].upper()
        nic["id"] = str(nic.get("id") or i + 1)
        if not _ID.match(nic["id"]):
            raise ConfigError("%s.id: %r is not a Redfish Id" % (nwhere, nic["id"]))
        nic.setdefault("name", "eth%d" % i)
        nic["speed_mbps"] = _int(nic.get("speed_mbps", 1000), nwhere + ".speed_mbps", 0, 10 ** 7)
    power = bmc["power"]
    _unknown(power, BMC_DEFAULTS["power"], where + ".power")
    for key in power:
        power[key] = _number(power[key], "%s.power.%s" % (where, key))
    bmc["reset_types"] = _choices(bmc["reset_types"], RESET_TYPES, where + ".reset_types")
    bmc["boot_targets"] = _choices(bmc["boot_targets"], BOOT_TARGETS, where + ".boot_targets")
    if "None" not in bmc["boot_targets"]:
        bmc["boot_targets"].insert(0, "None")
    pattern = bmc["boot_image_pattern"]
    try:
        if not isinstance(pattern, str) or not pattern:
            raise re.error("not a non-empty string")
        re.compile(pattern)
    except re.error as exc:
        raise ConfigError("%s.boot_image_pattern: %r is not a regular expression (%s)"
                          % (where, pattern, exc)) from None
    bmc["session_timeout"] = _int(bmc["session_timeout"], where + ".session_timeout", 30, 86400)
    for key in ("session_service", "deprecated_resources"):
        if not isinstance(bmc[key], bool):
            raise ConfigError("%s.%s: %r is not true or false" % (where, key, bmc[key]))
    bmc["max_sessions"] = _int(bmc["max_sessions"], where + ".max_sessions", 1, 1024)
    if bmc["faults"] is not None:
        bmc["faults"] = validate_fault(bmc["faults"], where + ".faults")
    if bmc["ca_bundle"] is not None and not isinstance(bmc["ca_bundle"], str):
        raise ConfigError("%s.ca_bundle: %r is not a file path" % (where, bmc["ca_bundle"]))
    for key in ("update_seconds", "event_poll_seconds"):
        bmc[key] = _number(bmc[key], "%s.%s" % (where, key))
    if bmc["event_poll_seconds"] < 0.1:
        raise ConfigError("%s.event_poll_seconds: %r is below 0.1" % (where, bmc["event_poll_seconds"]))
    networks = bmc["outbound_networks"]
    if not isinstance(networks, list):
        raise ConfigError("%s.outbound_networks: %r is not a list of networks" % (where, networks))
    for network in networks:
        try:
            ipaddress.ip_network(str(network), strict=False)
        except ValueError:
            raise ConfigError("%s.outbound_networks: %r is not a network (CIDR)" % (where, network)) from None
    bmc["outbound_networks"] = [str(ipaddress.ip_network(str(n), strict=False)) for n in networks]
    return bmc


def validate_fault(fault, where):
    if not isinstance(fault, dict):
        raise ConfigError("%s: %r is not a mapping with 'status' and 'count'" % (where, fault))
    _unknown(fault, ("status", "count", "delay", "path"), where)
    status = _int(fault.get("status", 503), where + ".status", 0, 599)
    if status and status < 400:
        raise ConfigError("%s.status: %r is not an error status (400..599, or 0 for delay only)" % (where, status))
    return {"status": status, "count": _int(fault.get("count", 1), where + ".count", 1, 1000000),
            "delay": _number(fault.get("delay", 0), where + ".delay"), "path": str(fault.get("path") or "")}
