# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

"""The slurm.conf model: node, partition, licence and gres.conf lines from plain data, with validation."""

import re

from ansible_collections.msa.hpc.plugins.module_utils import _sizes
from ansible_collections.msa.hpc.plugins.module_utils._hostlist import compress, natural_key

# Cluster licences that stand for the MSA global resources (seed 004 §4.2.2, §5.3). One name each, shared by
# the slurm.conf model (Licenses=) and the job side (--licenses=) so they can never drift apart.
LICENSE_GATEWAY = "gateway"   # one licence per gateway node; a job asks for gateway:<N>
LICENSE_NAM = "nam"           # NAM capacity, counted in NAM_LICENSE_UNIT blocks
LICENSE_GCE = "gce"           # one licence per GCE instance; a job that wants the GCE asks for gce:1
NAM_LICENSE_UNIT = 1 << 30    # one nam licence = 1 GiB; capacity rounds down, a request rounds up
NAM_LICENSE_UNIT_NAME = "GiB"

_GRES = re.compile(r"^([A-Za-z][A-Za-z0-9_]*)(?::([A-Za-z0-9_.-]+))?(?::(\d+))?$")
_KEY = re.compile(r"^[A-Z][A-Za-z]*$")
_NODE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_PARTITION_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*$")
UNLIMITED = ("INFINITE", "UNLIMITED")


class SlurmConfError(ValueError):
    """Problems in the Slurm description; ``problems`` holds one sentence per problem."""

    def __init__(self, problems):
        self.problems = list(problems)
        super().__init__("; ".join(self.problems))


def parse_size(value, field="size"):
    """Bytes in a size (an integer, or a number with K, M, G, T, P or E: powers of 1024 whatever the spelling,
    ``16G`` = ``16GB`` = ``16GiB``, as Slurm reads them); zero allowed. Raises ValueError (SizeError) naming
    ``field`` and the value."""
    return _sizes.parse_size(value, field, minimum=0)


def nam_units(size_bytes, round_up=True):
    """NAM licence count for a size in bytes (requests round up, capacity rounds down)."""
    if round_up:
        return -(-size_bytes // NAM_LICENSE_UNIT)
    return size_bytes // NAM_LICENSE_UNIT


def parse_time(value):
    """Minutes in a Slurm time limit, or None for INFINITE/UNLIMITED. Raises ValueError when malformed.

    Accepts what sbatch accepts: ``minutes``, ``minutes:seconds``, ``hours:minutes:seconds``, ``days-hours``,
    ``days-hours:minutes`` and ``days-hours:minutes:seconds``, or an integer number of minutes. Seconds round
    up to the next minute, as Slurm does.
    """
    if isinstance(value, bool):
        raise ValueError("%r is not a time" % (value,))
    if isinstance(value, int):
        if value < 0:
            raise ValueError("%r is negative" % (value,))
        return value
    text = str(value).strip()
    if text.upper() in UNLIMITED:
        return None
    days = 0
    match = re.match(r"^(\d+)-(\d+(?::\d+){0,2})$", text)
    if match:
        days = int(match.group(1))
        fields = [int(f) for f in match.group(2).split(":")]
        fields += [0] * (3 - len(fields))
        hours, minutes, seconds = fields
        if hours > 23:
            raise ValueError("%r: hours must be below 24 after a day count" % (value,))
    elif re.match(r"^\d+(?::\d+){0,2}$", text):
        fields = [int(f) for f in text.split(":")]
        if len(fields) == 1:
            return fields[0]
        elif len(fields) == 2:
            hours, (minutes, seconds) = 0, fields
            if seconds > 59:
                raise ValueError("%r: seconds must be below 60" % (value,))
            return minutes + (1 if seconds else 0)
        else:
            hours, minutes, seconds = fields
    else:
        raise ValueError("%r is not a Slurm time (minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS)"
                         % (value,))
    if minutes > 59 or seconds > 59:
        raise ValueError("%r: minutes and seconds must be below 60" % (value,))
    return days * 1440 + hours * 60 + minutes + (1 if seconds else 0)


def format_time(minutes):
    """Slurm's own spelling of a limit in minutes: ``HH:MM:SS`` or ``D-HH:MM:SS``; None is INFINITE."""
    if minutes is None:
        return "INFINITE"
    days, rest = divmod(int(minutes), 1440)
    hours, mins = divmod(rest, 60)
    if days:
        return "%d-%02d:%02d:00" % (days, hours, mins)
    return "%02d:%02d:00" % (hours, mins)


def parse_gres(value):
    """``"gpu:2"``, ``"gpu:a100:2,nic:1"``, a list of those or ``{"gpu": 2}`` → ``[(name, type, count)]``."""
    if value in (None, "", [], {}):
        return []
    if isinstance(value, dict):
        items = ["%s:%s" % (k, v) for k, v in value.items()]
    elif isinstance(value, (list, tuple)):
        items = [str(v) for v in value]
    else:
        items = str(value).split(",")
    out = []
    for item in items:
        match = _GRES.match(item.strip())
        if not match:
            raise ValueError("%r is not a gres (name[:type][:count], e.g. gpu:2)" % (item,))
        name, gtype, number = match.groups()
        if gtype is not None and number is None and gtype.isdigit():
            gtype, number = None, gtype
        out.append((name, gtype, int(number) if number is not None else 1))
    return out


def format_gres(gres):
    return ",".join("%s:%s%d" % (n, (t + ":") if t else "", c) for n, t, c in gres)


def _int_field(record, key, where, problems, minimum=1, default=None, aliases=()):
    value = record.get(key)
    for alias in aliases:
        if value is None:
            value = record.get(alias)
    if value is None:
        if default is None:
            problems.append("%s.%s: missing" % (where, key))
        return default
    try:
        if isinstance(value, bool):
            raise ValueError
        number = int(value)
        if isinstance(value, float) and number != value:
            raise ValueError
    except (TypeError, ValueError):
        problems.append("%s.%s: %r is not an integer" % (where, key, value))
        return None
    if number < minimum:
        problems.append("%s.%s: %r is below %d" % (where, key, value, minimum))
        return None
    return number


def _as_list(value):
    if value in (None, ""):
        return []
    if isinstance(value, (list, tuple)):
        return list(value)
    return [v.strip() for v in str(value).split(",") if v.strip()]


def _key_values(mapping, where, problems):
    out = []
    for key, value in sorted((mapping or {}).items()):
        if not _KEY.match(str(key)):
            problems.append("%s: %r is not a slurm.conf key (CamelCase, e.g. Weight)" % (where, key))
            continue
        if isinstance(value, bool):
            value = "YES" if value else "NO"
        text = str(value)
        if not text or any(c.isspace() for c in text):
            problems.append("%s.%s: %r is empty or has white space" % (where, key, value))
            continue
        out.append("%s=%s" % (key, text))
    return out


def _partitions(data, problems):
    raw = data.get("partitions") or {}
    if isinstance(raw, list):
        items = []
        for i, part in enumerate(raw):
            if not isinstance(part, dict) or not part.get("name"):
                problems.append("partitions[%d].name: missing" % i)
                continue
            items.append((part["name"], part))
    else:
        items = list(raw.items())
    parts = {}
    for name, part in items:
        where = "partitions.%s" % name
        part = part or {}
        if not _PARTITION_NAME.match(str(name)):
            problems.append("%s: %r is not a partition name" % (where, name))
            continue
        if name in parts:
            problems.append("%s: defined twice" % where)
            continue
        entry = {"name": name, "module": part.get("module", name), "default": bool(part.get("default", False))}
        for key in ("default_time", "max_time"):
            if part.get(key) is not None:
                try:
                    entry[key] = parse_time(part[key])
                except ValueError as exc:
                    problems.append("%s.%s: %s" % (where, key, exc))
        if (entry.get("default_time") is not None and entry.get("max_time") is not None
                and entry["default_time"] > entry["max_time"]):
            problems.append("%s.default_time: %r is longer than max_time %r"
                            % (where, part["default_time"], part["max_time"]))
        entry["options"] = _key_values(part.get("options"), where + ".options", problems)
        parts[name] = entry
    if sum(1 for p in parts.values() if p["default"]) > 1:
        problems.append("partitions: more than one partition has default: true (%s)"
                        % ", ".join(sorted(p["name"] for p in parts.values() if p["default"])))
    return parts


def _resolve_partition(ref, parts):
    if ref in parts:
        return ref
    matches = [p["name"] for p in parts.values() if p["module"] == ref]
    return matches[0] if len(matches) == 1 else None


def normalise(data):
    """Check the description and return ``(nodes, partitions, licenses, problems)`` in canonical form."""
    problems = []
    if not isinstance(data, dict):
        raise SlurmConfError(["the Slurm description must be a mapping with nodes, partitions, licenses"])
    parts = _partitions(data, problems)
    overrides = data.get("overrides") or {}
    node_overrides = overrides.get("nodes") or {}
    for key, value in (overrides.get("partitions") or {}).items():
        if key not in parts:
            problems.append("overrides.partitions.%s: no such partition" % key)
        else:
            parts[key]["options"] = sorted(set(parts[key]["options"]) | set(
                _key_values(value, "overrides.partitions.%s" % key, problems)))
    nodes, seen_names, seen_addresses = [], {}, {}
    for i, raw in enumerate(data.get("nodes") or []):
        name = raw.get("name") if isinstance(raw, dict) else None
        where = "nodes[%d]" % i if not name else "nodes.%s" % name
        if not isinstance(raw, dict) or not name:
            problems.append("nodes[%d].name: missing" % i)
            continue
        if not _NODE_NAME.match(str(name)):
            problems.append("%s.name: %r is not a host name" % (where, name))
            continue
        if name in seen_names:
            problems.append("%s: defined twice (nodes[%d] and nodes[%d])" % (where, seen_names[name], i))
            continue
        seen_names[name] = i
        address = raw.get("address")
        if address:
            if address in seen_addresses:
                problems.append("%s.address: %r is also the address of %s" % (where, address, seen_addresses[address]))
            seen_addresses[address] = name
        node = {"name": name, "address": address}
        node["sockets"] = _int_field(raw, "sockets", where, problems, default=1)
        node["cores_per_socket"] = _int_field(raw, "cores_per_socket", where, problems, default=1)
        node["threads_per_core"] = _int_field(raw, "threads_per_core", where, problems, default=1)
        node["real_memory"] = _int_field(raw, "real_memory", where, problems, aliases=("memory_mb",))
        try:
            node["gres"] = parse_gres(raw.get("gres"))
        except ValueError as exc:
            problems.append("%s.gres: %s" % (where, exc))
            node["gres"] = []
        files = raw.get("gres_files") or {}
        node["gres_files"] = {k: ",".join(v) if isinstance(v, (list, tuple)) else str(v) for k, v in files.items()}
        for gname in node["gres_files"]:
            if gname not in {g[0] for g in node["gres"]}:
                problems.append("%s.gres_files.%s: the node has no gres %r" % (where, gname, gname))
        node["features"] = sorted(set(str(f) for f in _as_list(raw.get("features"))))
        refs = _as_list(raw.get("partitions")) or _as_list(raw.get("partition")) or _as_list(raw.get("module"))
        node["partitions"] = []
        for ref in refs:
            resolved = _resolve_partition(ref, parts)
            if resolved is None:
                problems.append("%s.partition: %r is neither a partition nor the module of exactly one partition"
                                " (partitions: %s)" % (where, ref, ", ".join(sorted(parts)) or "none"))
            elif resolved not in node["partitions"]:
                node["partitions"].append(resolved)
        node["options"] = _key_values(node_overrides.get(name), "overrides.nodes.%s" % name, problems)
        nodes.append(node)
    for name in node_overrides:
        if name not in seen_names:
            problems.append("overrides.nodes.%s: no such node" % name)
    for part in parts.values():
        if not any(part["name"] in n["partitions"] for n in nodes):
            problems.append("partitions.%s: no node belongs to it" % part["name"])
    licenses = {}
    for key, value in sorted((data.get("licenses") or {}).items()):
        where = "licenses.%s" % key
        if not re.match(r"^[A-Za-z][A-Za-z0-9_]*$", str(key)):
            problems.append("%s: %r is not a licence name" % (where, key))
            continue
        if key == LICENSE_NAM:
            try:
                licenses[key] = nam_units(parse_size(value, where), round_up=False)
            except ValueError as exc:
                problems.append(str(exc))
                continue
            if licenses[key] < 1 and parse_size(value) > 0:
                problems.append("%s: %r is less than one licence unit (1 %s)" % (where, value, NAM_LICENSE_UNIT_NAME))
        else:
            number = _int_field({key: value}, key, "licenses", problems, minimum=0)
            if number is not None:
                licenses[key] = number
    licenses = {k: v for k, v in licenses.items() if v}
    for key, value in sorted((data.get("topologies") or {}).items()):
        # Slurm 25.05+: the partition's topology of topology.yaml (msa.hpc.slurm_topology)
        if key not in parts:
            problems.append("topologies.%s: no such partition" % key)
        elif not isinstance(value, str) or not _PARTITION_NAME.match(value):
            problems.append("topologies.%s: %r is not a topology name" % (key, value))
        else:
            parts[key]["topology"] = value
    return nodes, parts, licenses, problems


def _hardware_key(node):
    return (node["sockets"], node["cores_per_socket"], node["threads_per_core"], node["real_memory"],
            tuple(node["gres"]), tuple(node["features"]), tuple(node["options"]))


def _grouped(nodes, key):
    groups, order = {}, []
    for node in nodes:
        k = key(node)
        if k not in groups:
            groups[k] = []
            order.append(k)
        groups[k].append(node)
    return [(k, groups[k]) for k in order]


def _gpu_files(count):
    return "/dev/nvidia0" if count == 1 else "/dev/nvidia[0-%d]" % (count - 1)


def render(data):
    """Lines for slurm.conf and gres.conf from a Slurm description.

    ``data``: ``nodes`` (list of ``name, address, partition|partitions|module, sockets, cores_per_socket,
    threads_per_core, real_memory (or memory_mb), gres, gres_files, features``), ``partitions`` (name →
    ``module, default, default_time, max_time, options``), ``licenses`` (``gateway: N, nam: <size>, gce: N``, …)
    ``overrides`` (``nodes: {name: {Key: value}}``, ``partitions: {name: {Key: value}}``) and, for Slurm 25.05 on,
    ``topologies`` (partition → its topology of topology.yaml: ``Topology=``).
    Returns ``node_lines, partition_lines, licenses_line, gres_lines, gres_types, licenses``; raises
    SlurmConfError listing every problem.
    """
    nodes, parts, licenses, problems = normalise(data)
    if problems:
        raise SlurmConfError(problems)
    node_lines = []
    for (sockets, cores, threads, memory, gres, features, options), members in _grouped(nodes, _hardware_key):
        line = "NodeName=%s" % compress([n["name"] for n in members])
        if all(n["address"] for n in members):
            line += " NodeAddr=%s" % ",".join(n["address"] for n in sorted_like(members))
        line += " Sockets=%d CoresPerSocket=%d ThreadsPerCore=%d RealMemory=%d" % (sockets, cores, threads, memory)
        if gres:
            line += " Gres=%s" % format_gres(gres)
        if features:
            line += " Feature=%s" % ",".join(features)
        for option in options:
            line += " " + option
        node_lines.append(line + " State=UNKNOWN")
    partition_lines = []
    for part in parts.values():
        members = [n["name"] for n in nodes if part["name"] in n["partitions"]]
        line = "PartitionName=%s Nodes=%s" % (part["name"], compress(members))
        if part["default"]:
            line += " Default=YES"
        if "default_time" in part:
            line += " DefaultTime=%s" % format_time(part["default_time"])
        line += " MaxTime=%s" % format_time(part.get("max_time"))
        explicit = {o.split("=", 1)[0] for o in part["options"]}
        line += "".join(" " + o for o in part["options"])
        if part.get("topology") and "Topology" not in explicit:
            line += " Topology=%s" % part["topology"]
        if "State" not in explicit:
            line += " State=UP"
        partition_lines.append(line)
    gres_lines = []
    gres_types = sorted({g[0] for n in nodes for g in n["gres"]})
    per_node = [dict(n, _gres_entry=tuple((g, tuple(sorted(n["gres_files"].items()))) for g in n["gres"]))
                for n in nodes if n["gres"]]
    for _entry, members in _grouped(per_node, lambda n: n["_gres_entry"]):
        names = compress([n["name"] for n in members])
        files = members[0]["gres_files"]
        for name, gtype, number in members[0]["gres"]:
            line = "NodeName=%s Name=%s" % (names, name)
            if gtype:
                line += " Type=%s" % gtype
            if name in files:
                line += " File=%s" % files[name]
            elif name == "gpu":
                line += " File=%s" % _gpu_files(number)
            else:
                line += " Count=%d" % number
            gres_lines.append(line)
    licenses_line = ("Licenses=" + ",".join("%s:%d" % kv for kv in sorted(licenses.items()))) if licenses else ""
    return {"node_lines": node_lines, "partition_lines": partition_lines, "licenses_line": licenses_line,
            "gres_lines": gres_lines, "gres_types": gres_types, "licenses": licenses}


def sorted_like(members):
    """Members in the order the compressed NodeName expands to, so NodeAddr entries line up with names."""
    return sorted(members, key=lambda n: natural_key(n["name"]))


def problems(data):
    """Every problem in a Slurm description (an empty list when it is consistent)."""
    try:
        return normalise(data)[3]
    except SlurmConfError as exc:
        return exc.problems


def node_records(hosts, hostvars, modules=None, management_fabric="mgmt"):
    """Node records for ``render`` from the inventory's host variables (msa_module, msa_hardware, …)."""
    modules = modules or {}
    records = []
    for host in hosts:
        hv = hostvars[host]
        hw = dict(hv.get("msa_hardware") or {})
        module = hv.get("msa_module")
        partition = (modules.get(module) or {}).get("partition", module)
        record = {"name": host, "address": (hv.get("msa_addresses") or {}).get(management_fabric),
                  "partition": partition, "sockets": hw.get("sockets", 1),
                  "cores_per_socket": hw.get("cores_per_socket", 1), "threads_per_core": hw.get("threads_per_core", 1),
                  "real_memory": hw.get("memory_mb", hw.get("real_memory", 1000)),
                  "features": list(hv.get("msa_features") or [])}
        gres = list(hw.get("gres") or [])
        if hw.get("gpus"):
            gres.append("gpu:%d" % int(hw["gpus"]))
            if hw.get("gpu_files"):
                record["gres_files"] = {"gpu": hw["gpu_files"]}
        record["gres"] = gres
        records.append(record)
    return records


def controllers(primary, backup="", candidates=None):
    """The controllers of slurm.conf's SlurmctldHost lines, primary first: ``[primary]``, or ``[primary, backup]``
    when a backup is named. ``candidates`` (the hosts that run slurmctld, the inventory's slurm_controller group),
    when given, must hold both. Raises SlurmConfError naming the variable and the value."""
    found = []
    if not isinstance(primary, str) or not _NODE_NAME.match(primary):
        found.append("slurm_controller_host: %r is not a host name" % (primary,))
    backup = "" if backup is None else backup
    if not isinstance(backup, str) or (backup and not _NODE_NAME.match(backup)):
        found.append("slurm_backup_controller_host: %r is not a host name (empty: no backup)" % (backup,))
    elif backup and backup == primary:
        found.append("slurm_backup_controller_host: %r is the primary controller too; name another host, or none"
                     % (backup,))
    if candidates is not None:
        pool = list(candidates)
        for field, host in (("slurm_controller_host", primary), ("slurm_backup_controller_host", backup)):
            if host and isinstance(host, str) and host not in pool:
                found.append("%s: %r is not in the slurm_controller group (%s), so no slurmctld would run there"
                             % (field, host, ", ".join(pool) or "empty"))
    if found:
        raise SlurmConfError(found)
    return [primary] + ([backup] if backup else [])


def conf_server(addresses, port):
    """slurmd's --conf-server value: ``addr:port`` of each controller, primary first, joined by commas."""
    addresses = list(addresses)
    if not addresses:
        raise SlurmConfError(["conf-server: no controller address"])
    port = int(port)
    if not 0 < port < 65536:
        raise SlurmConfError(["SlurmctldPort: %r is not a TCP port" % (port,)])
    return ",".join("%s:%d" % (address, port) for address in addresses)
