# SPDX-License-Identifier: GPL-3.0-or-later
"""Expand a compact MSA system description into hosts and groups, and validate the result."""
from __future__ import annotations

import ipaddress
import re

FABRIC_KINDS = ("ethernet", "infiniband", "extoll")
MODULE_ROLES = ("management", "login", "compute", "mpi_gateway", "ip_gateway", "nam", "gce", "storage")
# Fabrics (by kind) a gateway must join on top of management: it exists to bridge them.
GATEWAY_FABRICS = {"mpi_gateway": ("infiniband", "extoll"), "ip_gateway": ("infiniband", "ethernet")}
# GUID type nibble (bits 23:20) per EXTOLL device role (seed 004 §2.1).
GUID_TYPE = {"nam": 0xF, "gce": 0xE}
NAME_RE = re.compile(r"^[a-z][a-z0-9-]*$")
HARDWARE_KEYS = {"sockets": 1, "cores_per_socket": 1, "threads_per_core": 1, "memory_mb": 1, "gpus": 0}
# What the description sets, by the level it is owned at (docs/inventories.md "Precedence").
NODE_VARS = ("msa_module", "msa_module_role", "msa_index", "msa_addresses", "ansible_host", "msa_extoll_guid")
MODULE_VARS = ("msa_hardware", "msa_features", "msa_partition")
SYSTEM_VARS = ("msa_system", "msa_fabrics", "msa_management_fabric", "msa_modules")


class SystemError_(ValueError):
    """Errors in a system description; ``problems`` lists every one found, each naming where."""

    def __init__(self, problems):
        self.problems = list(problems)
        super().__init__("; ".join(self.problems))


def _int(value, where, problems, minimum=0):
    try:
        if isinstance(value, bool):
            raise ValueError
        number = int(value, 0) if isinstance(value, str) else int(value)
    except (TypeError, ValueError):
        problems.append("%s: %r is not an integer" % (where, value))
        return None
    if number < minimum:
        problems.append("%s: %r is below the minimum %d" % (where, value, minimum))
        return None
    return number


def expand(description):
    """Return ``{"system", "fabrics", "modules", "hosts", "groups"}`` for a description dict.

    Raises SystemError_ listing every problem in the description itself.
    """
    problems = []
    system = description.get("system")
    if not isinstance(system, str) or not NAME_RE.match(system):
        problems.append("system: %r is not a valid system name (lower-case letters, digits, '-')" % (system,))
    fabrics = {}
    for name, fab in (description.get("fabrics") or {}).items():
        where = "fabrics.%s" % name
        if not isinstance(fab, dict):
            problems.append("%s: must be a mapping with kind and cidr" % where)
            continue
        if fab.get("kind") not in FABRIC_KINDS:
            problems.append("%s.kind: %r is not one of %s" % (where, fab.get("kind"), ", ".join(FABRIC_KINDS)))
        try:
            net = ipaddress.ip_network(str(fab.get("cidr")), strict=True)
        except ValueError as exc:
            problems.append("%s.cidr: %r is not a network (%s)" % (where, fab.get("cidr"), exc))
            continue
        fabrics[name] = {"name": name, "kind": fab.get("kind"), "cidr": str(net),
                         "gateway": str(net.network_address + 1), "prefixlen": net.prefixlen}
        if "topology" in fab:
            # the EXTOLL topology (generator or .td file); the msa.hpc.extoll_td filter checks its content
            if fab.get("kind") != "extoll":
                problems.append("%s.topology: only an extoll fabric has a topology (kind is %r)" % (where, fab.get("kind")))
            elif not isinstance(fab["topology"], dict):
                problems.append("%s.topology: %r is not a mapping (type/dims/routing or file)" % (where, fab["topology"]))
            else:
                fabrics[name]["topology"] = dict(fab["topology"])
        if "switches" in fab:
            # the InfiniBand switches (name → {nodes} or {switches}); msa.hpc.slurm_topology checks their content
            if fab.get("kind") != "infiniband" or not isinstance(fab["switches"], dict):
                problems.append("%s.switches: only an infiniband fabric has switches, as a mapping (kind %r, got %r)"
                                % (where, fab.get("kind"), fab["switches"]))
            else:
                fabrics[name]["switches"] = dict(fab["switches"])
    if not fabrics:
        problems.append("fabrics: at least one fabric is needed")
    mgmt = description.get("management_fabric", "mgmt")
    if fabrics and mgmt not in fabrics:
        problems.append("management_fabric: %r is not a declared fabric" % (mgmt,))

    modules, hosts, groups = {}, {}, {}
    for mod_name, mod in (description.get("modules") or {}).items():
        where = "modules.%s" % mod_name
        if not NAME_RE.match(str(mod_name)) or "-" in str(mod_name):
            problems.append("%s: %r is not a valid module name (lower-case letters and digits)" % (where, mod_name))
            continue
        role = mod.get("role", "compute")
        if role not in MODULE_ROLES:
            problems.append("%s.role: %r is not one of %s" % (where, role, ", ".join(MODULE_ROLES)))
        names = mod.get("names")
        if names is None:
            count = _int(mod.get("count", 0), where + ".count", problems, minimum=1)
            digits = _int(mod.get("digits", 2), where + ".digits", problems, minimum=1)
            if count is None or digits is None:
                continue
            prefix = mod.get("prefix", mod_name)
            names = ["%s%0*d" % (prefix, digits, i + 1) for i in range(count)]
        offset = _int(mod.get("offset", 0), where + ".offset", problems)
        mod_fabrics = list(mod.get("fabrics") or [])
        for fab in mod_fabrics:
            if fab not in fabrics:
                problems.append("%s.fabrics: unknown fabric %r" % (where, fab))
        if mgmt in fabrics and mgmt not in mod_fabrics:
            problems.append("%s.fabrics: every node needs the management fabric %r" % (where, mgmt))
        hardware = dict(mod.get("hardware") or {})
        for key, minimum in HARDWARE_KEYS.items():
            if key in hardware:
                hardware[key] = _int(hardware[key], "%s.hardware.%s" % (where, key), problems, minimum)
        guid_base = mod.get("guid_base")
        if guid_base is not None:
            guid_base = _int(guid_base, where + ".guid_base", problems)
        modules[mod_name] = {
            "name": mod_name, "role": role, "fabrics": mod_fabrics, "hosts": list(names),
            "hardware": hardware, "features": list(mod.get("features") or []),
            "description": mod.get("description", ""),
            "partition": mod.get("partition", mod_name if role == "compute" else None),
            "capacity": mod.get("capacity"),
            "nonvolatile_capacity": mod.get("nonvolatile_capacity") or 0,
        }
        groups.setdefault(mod_name, []).extend(names)
        groups.setdefault("msa_" + role, []).extend(names)
        for index, host in enumerate(names):
            addresses = {}
            for fab in mod_fabrics:
                if fab in fabrics and offset is not None:
                    net = ipaddress.ip_network(fabrics[fab]["cidr"])
                    addresses[fab] = str(net.network_address + offset + index + 1)
                    groups.setdefault("fabric_" + fab, []).append(host)
            hostvars = {"msa_module": mod_name, "msa_module_role": role, "msa_index": index + 1,
                        "msa_addresses": addresses}
            if mgmt in addresses:
                hostvars["ansible_host"] = addresses[mgmt]
            if any(fabrics.get(f, {}).get("kind") == "extoll" for f in mod_fabrics):
                base = guid_base if guid_base is not None else (GUID_TYPE.get(role, 0) << 20) + 0x100 + (offset or 0)
                hostvars["msa_extoll_guid"] = "0x%06x" % (base + index)
            if host in hosts:
                problems.append("%s: node %s is already in module %s" % (where, host, hosts[host]["msa_module"]))
                continue
            hosts[host] = hostvars
    if problems:
        raise SystemError_(problems)
    # The first management node runs the services there is one of (accounting, EMP master, NAM/GCE manager, DCDB
    # broker and Collect Agent, Prometheus); every management node is a Slurm controller (primary, then backup).
    groups["msa_management_primary"] = list(groups.get("msa_management", []))[:1]
    result = {"system": system, "management_fabric": mgmt, "fabrics": fabrics, "modules": modules,
              "hosts": hosts, "groups": groups}
    host_problems = validate_hosts(hosts, fabrics, modules, management_fabric=mgmt)
    if host_problems:
        raise SystemError_(host_problems)
    return result


# Directory of each description the inventory plugin loaded in this process → its group variables, for the
# msa.hpc.system vars plugin, which hands them to Ansible at the rank of that directory's group_vars files.
LOADED_GROUP_VARS = {}


def group_vars(model):
    """Group name → the variables the description sets on it: the module groups (MODULE_VARS) and `all`
    (SYSTEM_VARS). Role and fabric groups get none. Per-node values are in ``model["hosts"]``."""
    groups = {module["name"]: {"msa_hardware": module["hardware"], "msa_features": module["features"],
                               "msa_partition": module["partition"]}
              for module in model["modules"].values()}
    groups["all"] = {"msa_system": model["system"], "msa_fabrics": model["fabrics"],
                     "msa_management_fabric": model["management_fabric"], "msa_modules": model["modules"]}
    return groups


def validate_hosts(hosts, fabrics, modules=None, management_fabric="mgmt", module_groups=None):
    """Check final per-host data (after every inventory layer): return a list of problems.

    ``hosts`` maps host name → vars with ``msa_module``, ``msa_module_role`` and ``msa_addresses``;
    ``module_groups`` (module → member hosts, as the inventory has them) catches a node put in two modules.
    """
    problems = []
    member_of = {}
    for module in sorted(module_groups or {}):
        for host in module_groups[module] or ():
            if host in member_of:
                problems.append("host %s: is in two modules, %s and %s" % (host, member_of[host], module))
            else:
                member_of[host] = module
    seen = {}
    nets = {}
    for name, fab in (fabrics or {}).items():
        try:
            nets[name] = ipaddress.ip_network(fab["cidr"])
        except (KeyError, TypeError, ValueError):
            problems.append("fabric %s: cidr %r is not a network" % (name, fab.get("cidr") if isinstance(fab, dict) else fab))
    for host in sorted(hosts):
        hv = hosts[host]
        addresses = hv.get("msa_addresses") or {}
        if not isinstance(addresses, dict):
            problems.append("host %s: msa_addresses must be a mapping fabric → address, got %r" % (host, addresses))
            continue
        for fab, addr in sorted(addresses.items()):
            if fab not in nets:
                problems.append("host %s: msa_addresses.%s: unknown fabric %r" % (host, fab, fab))
                continue
            try:
                ip = ipaddress.ip_address(str(addr))
            except ValueError:
                problems.append("host %s: msa_addresses.%s: %r is not an IP address" % (host, fab, addr))
                continue
            net = nets[fab]
            if ip not in net or ip in (net.network_address, net.broadcast_address):
                problems.append("host %s: msa_addresses.%s: %s is outside the fabric's range %s" % (host, fab, ip, net))
            elif ip == net.network_address + 1:
                problems.append("host %s: msa_addresses.%s: %s is the fabric's gateway address" % (host, fab, ip))
            key = (fab, str(ip))
            if key in seen:
                problems.append("host %s: msa_addresses.%s: %s is already used by %s" % (host, fab, ip, seen[key]))
            else:
                seen[key] = host
        role = hv.get("msa_module_role")
        if role in GATEWAY_FABRICS:
            kinds = {fabrics[f].get("kind") for f in addresses if f in fabrics and f != management_fabric}
            for needed in GATEWAY_FABRICS[role]:
                if needed not in kinds:
                    problems.append("host %s: msa_addresses: a %s needs an address on a %s fabric (has %s)"
                                    % (host, role, needed, ", ".join(sorted(addresses)) or "none"))
        if modules is not None and hv.get("msa_module") not in modules:
            problems.append("host %s: msa_module: %r is not a module of the system" % (host, hv.get("msa_module")))
    return problems
