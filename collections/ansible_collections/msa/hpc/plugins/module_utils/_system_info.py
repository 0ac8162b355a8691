# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

"""The system as structured facts (modules, partitions, nodes, global resources, fabric) and their JSON schema."""

import re

from ansible_collections.msa.hpc.plugins.module_utils._hostlist import HostlistError, expand
from ansible_collections.msa.hpc.plugins.module_utils._slurm_conf import (
    LICENSE_GATEWAY, LICENSE_GCE, LICENSE_NAM, NAM_LICENSE_UNIT_NAME, parse_time)
from ansible_collections.msa.hpc.plugins.module_utils.slurm import jobs as S
from ansible_collections.msa.hpc.plugins.module_utils.slurm import nodes as N
from ansible_collections.msa.hpc.plugins.module_utils.slurm.reservations import parse_licenses

SCHEMA_VERSION = 1

_COUNTS = {"type": "object", "additionalProperties": {"type": "integer", "minimum": 0}}
_RESOURCE = {
    "type": "object",
    "required": ["total", "used", "free"],
    "additionalProperties": False,
    "properties": {
        "total": {"type": ["integer", "null"], "minimum": 0},
        "used": {"type": "integer", "minimum": 0},
        "free": {"type": ["integer", "null"], "minimum": 0},
        "unit": {"type": "string"},
        "available": {"type": "boolean"},
    },
}
_AGGREGATE = {
    "node_count": {"type": "integer", "minimum": 0},
    "nodes": {"type": "array", "items": {"type": "string"}},
    "states": _COUNTS,
    "cpus": {"type": "integer", "minimum": 0},
    "cpus_allocated": {"type": "integer", "minimum": 0},
    "memory_mb": {"type": "integer", "minimum": 0},
    "gpus": {"type": "integer", "minimum": 0},
}
_AGGREGATE_KEYS = ["node_count", "nodes", "states", "cpus", "cpus_allocated", "memory_mb", "gpus"]

# The schema of the facts, written down once: docs/system_info.schema.json is this mapping (a unit test checks).
SCHEMA = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "$id": "https://msa-hpc.example/schemas/system_info/1",
    "title": "msa.hpc.system_info",
    "description": "An MSA system as the batch system (and the fabric manager) report it.",
    "type": "object",
    "required": ["schema_version", "source", "cluster", "totals", "modules", "partitions", "nodes", "licenses",
                 "resources", "fabric"],
    "additionalProperties": False,
    "properties": {
        "schema_version": {"type": "integer", "enum": [SCHEMA_VERSION]},
        "source": {"type": "string", "enum": ["rest", "cli"]},
        "cluster": {"type": ["string", "null"]},
        "totals": {
            "type": "object", "required": _AGGREGATE_KEYS, "additionalProperties": False,
            "properties": dict(_AGGREGATE),
        },
        "modules": {
            "type": "array",
            "items": {
                "type": "object", "required": ["name", "partitions"] + _AGGREGATE_KEYS, "additionalProperties": False,
                "properties": dict(_AGGREGATE, name={"type": "string"},
                                   partitions={"type": "array", "items": {"type": "string"}}),
            },
        },
        "partitions": {
            "type": "array",
            "items": {
                "type": "object", "required": ["name", "module", "state", "default", "max_time_minutes"]
                + _AGGREGATE_KEYS,
                "additionalProperties": False,
                "properties": dict(_AGGREGATE, name={"type": "string"}, module={"type": "string"},
                                   state={"type": "string"}, default={"type": ["boolean", "null"]},
                                   max_time_minutes={"type": ["integer", "null"], "minimum": 0}),
            },
        },
        "nodes": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["name", "state", "flags", "partitions", "cpus", "cpus_allocated", "memory_mb",
                             "memory_allocated_mb", "gpus", "gres", "features", "address"],
                "additionalProperties": False,
                "properties": {
                    "name": {"type": "string"},
                    "state": {"type": "string"},
                    "flags": {"type": "array", "items": {"type": "string"}},
                    "partitions": {"type": "array", "items": {"type": "string"}},
                    "cpus": {"type": "integer", "minimum": 0},
                    "cpus_allocated": {"type": "integer", "minimum": 0},
                    "memory_mb": {"type": "integer", "minimum": 0},
                    "memory_allocated_mb": {"type": "integer", "minimum": 0},
                    "gpus": {"type": "integer", "minimum": 0},
                    "gres": {"type": "string"},
                    "features": {"type": "array", "items": {"type": "string"}},
                    "address": {"type": ["string", "null"]},
                },
            },
        },
        "licenses": {"type": "object", "additionalProperties": _RESOURCE},
        "resources": {
            "type": "object", "required": ["gateways", "nam", "gce"], "additionalProperties": False,
            "properties": {"gateways": _RESOURCE, "nam": _RESOURCE, "gce": _RESOURCE},
        },
        "fabric": {
            "type": ["object", "null"],
            "required": ["status", "up", "nodes", "nodes_up", "routing"],
            "additionalProperties": False,
            "properties": {
                "status": {"type": "string"},
                "up": {"type": "boolean"},
                "nodes": {"type": "integer", "minimum": 0},
                "nodes_up": {"type": "integer", "minimum": 0},
                "routing": {"type": ["string", "null"]},
            },
        },
    },
}


class SystemInfoError(RuntimeError):
    """Slurm's (or the fabric manager's) answer could not be read."""


# --- a validator for the subset of JSON Schema SCHEMA uses --------------------------------------------------------

_TYPES = {"object": dict, "array": list, "string": str, "boolean": bool, "null": type(None)}


def _is(value, kind):
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, _TYPES[kind])


def validate(value, schema=None, path="$"):
    """Problems of ``value`` against ``schema`` (type, enum, minimum, required, properties, additionalProperties,
    items), one sentence each naming the JSON path; ``[]`` when it validates."""
    schema = SCHEMA if schema is None else schema
    kinds = schema.get("type")
    if kinds is not None:
        kinds = kinds if isinstance(kinds, list) else [kinds]
        if not any(_is(value, k) for k in kinds):
            return ["%s: %r is not of type %s" % (path, value, " or ".join(kinds))]
    problems = []
    if "enum" in schema and value not in schema["enum"]:
        problems.append("%s: %r is not one of %r" % (path, value, schema["enum"]))
    if "minimum" in schema and _is(value, "number") and value < schema["minimum"]:
        problems.append("%s: %r is below %r" % (path, value, schema["minimum"]))
    if isinstance(value, dict):
        for key in schema.get("required", []):
            if key not in value:
                problems.append("%s: %r is missing" % (path, key))
        props = schema.get("properties", {})
        extra = schema.get("additionalProperties", True)
        for key, item in value.items():
            if key in props:
                problems += validate(item, props[key], "%s.%s" % (path, key))
            elif extra is False:
                problems.append("%s: %r is not allowed" % (path, key))
            elif isinstance(extra, dict):
                problems += validate(item, extra, "%s.%s" % (path, key))
    if isinstance(value, list) and "items" in schema:
        for n, item in enumerate(value):
            problems += validate(item, schema["items"], "%s[%d]" % (path, n))
    return problems


# --- reading Slurm's answers ---------------------------------------------------------------------------------------

def _number(value, default=0):
    return S.number(value, default, minimum=0)


def _words(value):
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return [str(v) for v in value if str(v)]
    return [w for w in re.split(r"[,\s]+", str(value)) if w and w != "(null)"]


_PARENS = re.compile(r"\([^)]*\)")


def gres_count(gres, name="gpu"):
    """How many of one generic resource a GRES string names: ``gpu:1``, ``gpu:a100:2(S:0-1),nic:1`` → 1, 2."""
    total = 0
    for item in _PARENS.sub("", str(gres or "")).split(","):
        parts = item.strip().split(":")
        if parts[0] != name or len(parts) < 2:
            continue
        count = parts[-1]
        multiplier = {"k": 1024, "m": 1024 ** 2, "g": 1024 ** 3}.get(count[-1:].lower(), 1)
        digits = count[:-1] if multiplier != 1 else count
        if digits.isdigit():
            total += int(digits) * multiplier
    return total


def read_nodes(payload):
    """Node facts from ``sinfo --json``, ``scontrol show nodes --json`` or ``GET /slurm/v0.0.38/nodes``."""
    try:
        nodes = N.load_nodes(payload, "the nodes answer")
    except N.NodeRecordError as exc:
        raise SystemInfoError(str(exc)) from None
    out = []
    for node in nodes:
        state, flags = N.state(node)
        flags = sorted(set(flags))
        gres = str(node.get("gres") or "")
        out.append({
            "name": str(node.get("name") or node.get("hostname")),
            "state": state,
            "flags": flags,
            "partitions": _words(node.get("partitions")),
            "cpus": _number(node.get("cpus")),
            "cpus_allocated": _number(node.get("alloc_cpus")),
            "memory_mb": _number(node.get("real_memory")),
            "memory_allocated_mb": _number(node.get("alloc_memory")),
            "gpus": gres_count(gres),
            "gres": "" if gres == "(null)" else gres,
            "features": _words(node.get("active_features") or node.get("features")),
            "address": node.get("address") or None,
        })
    return sorted(out, key=lambda n: n["name"])


def _max_time(part):
    raw = part.get("max_time_limit", part.get("maximum_time", part.get("max_time")))
    if raw is None and isinstance(part.get("maximums"), dict):   # data_parser v0.0.40 on
        raw = part["maximums"].get("time")
    if isinstance(raw, dict):
        return None if raw.get("infinite") or not raw.get("set", True) else _number(raw.get("number"), None)
    if isinstance(raw, str):
        return None if raw.upper() in ("UNLIMITED", "INFINITE", "") else _number(raw, None)
    return None if isinstance(raw, int) and raw < 0 else _number(raw, None)


def parse_scontrol_partitions(text):
    """``scontrol -o show partitions`` → the v0.0.38 partition layout read_partitions reads (22.05's scontrol has no
    --json)."""
    parts = []
    for line in (text or "").splitlines():
        fields = dict(re.findall(r"(\w+)=(\S*)", line))
        if "PartitionName" not in fields:
            continue
        try:
            limit = parse_time(fields.get("MaxTime", "UNLIMITED"))
        except ValueError:
            limit = None
        parts.append({"name": fields["PartitionName"], "nodes": "" if fields.get("Nodes") == "(null)" else
                      fields.get("Nodes", ""), "flags": ["default"] if fields.get("Default") == "YES" else [],
                      "max_time_limit": -1 if limit is None else limit, "state": fields.get("State", "UP")})
    return {"partitions": parts}


def read_partitions(payload):
    """Partition records ``{name, state, default, max_time_minutes, nodes}`` from Slurm's JSON."""
    parts = payload.get("partitions") if isinstance(payload, dict) else None
    if not isinstance(parts, list):
        raise SystemInfoError("the answer holds no partition list (keys: %s)" % ", ".join(sorted(payload or {})))
    out = []
    for part in parts:
        flags = [str(f).lower() for f in (part.get("flags") or [])]
        state = part.get("state") or ((part.get("partition") or {}).get("state"))
        nodes = part.get("nodes")
        if isinstance(nodes, dict):
            nodes = nodes.get("configured")
        try:
            names = expand(nodes) if nodes else []
        except HostlistError:
            names = _words(nodes)
        # data_parser v0.0.40 to v0.0.45 (24.11 to 26.05) leave the partition flags out (Default=YES among them):
        # over their REST API whether a partition is the default is not known (None)
        default = None if "flags" not in part and "default" not in part else \
            "default" in flags or bool(part.get("default"))
        out.append({"name": str(part.get("name")), "state": str(_words(state)[0] if _words(state) else "UP").upper(),
                    "default": default, "max_time_minutes": _max_time(part),
                    "nodes": names})
    return out


def read_licenses(payload):
    """``GET /slurm/v0.0.39+/licenses`` (``{"licenses": [{LicenseName, Total, Used, Free}]}``) → the same shape."""
    out = {}
    for lic in (payload or {}).get("licenses") or []:
        name = lic.get("LicenseName") or lic.get("name")
        if name:
            total = _number(lic.get("Total", lic.get("total")))
            used = _number(lic.get("Used", lic.get("used")))
            out[str(name)] = {"total": total, "used": used,
                              "free": _number(lic.get("Free", lic.get("free")), max(total - used, 0))}
    return out


def licenses_in_use(jobs):
    """``{licence: count}`` held by running jobs (``licenses`` of each job record of ``/jobs`` or squeue --json)."""
    used = {}
    try:
        records = S.load_jobs(jobs or {}, "the job list", required=False)
    except S.JobRecordError as exc:
        raise SystemInfoError(str(exc)) from None
    for job in records:
        state = job.get("job_state")
        state = state[0] if isinstance(state, list) and state else state
        if str(state).upper() not in ("RUNNING", "COMPLETING", "SUSPENDED"):
            continue
        try:
            held = S.parse_licenses(job.get("licenses"))
        except S.JobRecordError as exc:
            raise SystemInfoError("job %s: %s" % (job.get("job_id"), exc)) from None
        for name, count in held.items():
            used[name] = used.get(name, 0) + count
    return used


def licenses_from_totals(totals, used):
    """Licence records from configured totals (``{name: count}``) and what running jobs hold."""
    out = {}
    for name in sorted(set(totals or {}) | set(used or {})):
        total = (totals or {}).get(name)
        total = int(total) if total is not None and str(total).isdigit() else None
        in_use = int((used or {}).get(name, 0))
        out[name] = {"total": total, "used": in_use, "free": None if total is None else max(total - in_use, 0)}
    return out


# --- assembling the facts ------------------------------------------------------------------------------------------

def _aggregate(nodes):
    states = {}
    for node in nodes:
        states[node["state"]] = states.get(node["state"], 0) + 1
    return {"node_count": len(nodes), "nodes": [n["name"] for n in nodes], "states": states,
            "cpus": sum(n["cpus"] for n in nodes), "cpus_allocated": sum(n["cpus_allocated"] for n in nodes),
            "memory_mb": sum(n["memory_mb"] for n in nodes), "gpus": sum(n["gpus"] for n in nodes)}


def _resource(licenses, name, unit=None):
    lic = licenses.get(name) or {"total": 0, "used": 0, "free": 0}
    out = {"total": lic["total"], "used": lic["used"], "free": lic["free"]}
    if unit:
        out["unit"] = unit
    return out


def _fabric(status, nodes, routing=None):
    if status is None:
        return None
    nodes = nodes or []
    return {"status": str(status.get("status", "unknown")), "up": bool(status.get("up", status.get("status") == "up")),
            "nodes": len(nodes), "nodes_up": sum(1 for n in nodes if n.get("state") == "up"),
            "routing": routing}


def build(nodes_payload, partitions_payload, licenses, source, cluster=None, partition_modules=None,
          fabric_status=None, fabric_nodes=None, fabric_routing=None):
    """The facts, from Slurm's node and partition JSON, licence records and (optionally) the EMP's answers."""
    nodes = read_nodes(nodes_payload)
    by_name = {n["name"]: n for n in nodes}
    partition_modules = partition_modules or {}
    partitions, modules = [], {}
    for part in read_partitions(partitions_payload):
        members = [by_name[n] for n in part["nodes"] if n in by_name] or \
            [n for n in nodes if part["name"] in n["partitions"]]
        module = str(partition_modules.get(part["name"], part["name"]))
        entry = dict(part, module=module, **_aggregate(members))
        partitions.append(entry)
        modules.setdefault(module, {"partitions": [], "members": {}})
        modules[module]["partitions"].append(part["name"])
        modules[module]["members"].update((n["name"], n) for n in members)
    module_list = [dict({"name": name, "partitions": m["partitions"]},
                        **_aggregate([m["members"][k] for k in sorted(m["members"])]))
                   for name, m in sorted(modules.items())]
    gce = _resource(licenses, LICENSE_GCE)
    gce["available"] = bool(gce["free"])
    info = {
        "schema_version": SCHEMA_VERSION,
        "source": source,
        "cluster": cluster,
        "totals": _aggregate(nodes),
        "modules": module_list,
        "partitions": sorted(partitions, key=lambda p: p["name"]),
        "nodes": nodes,
        "licenses": {k: dict(v) for k, v in sorted(licenses.items())},
        "resources": {"gateways": _resource(licenses, LICENSE_GATEWAY),
                      "nam": _resource(licenses, LICENSE_NAM, NAM_LICENSE_UNIT_NAME), "gce": gce},
        "fabric": _fabric(fabric_status, fabric_nodes, fabric_routing),
    }
    return info


# --- where the answers come from -----------------------------------------------------------------------------------

def from_cli(run, partition_modules=None, fabric=None):
    """Facts through Slurm's commands; ``run(argv)`` returns ``(rc, stdout, stderr)``."""
    def command(argv):
        rc, out, err = run(argv)
        if rc != 0:
            raise SystemInfoError("%s failed (exit %s): %s" % (" ".join(argv), rc, (err or out or "").strip()[:300]))
        return out

    try:   # the node list in the layout of GET /slurm/v0.0.38/nodes
        nodes = N.load_nodes(command(["sinfo", "--json"]), "sinfo --json")
        if any(n.get("grouped") for n in nodes):   # 23.02 on: sinfo groups nodes; scontrol gives each its own
            nodes = N.load_nodes(command(["scontrol", "show", "nodes", "--json"]), "scontrol show nodes --json")
        nodes = {"nodes": nodes}
    except N.NodeRecordError as exc:
        raise SystemInfoError(str(exc)) from None
    parts = parse_scontrol_partitions(command(["scontrol", "-o", "show", "partitions"]))
    licenses = parse_licenses(command(["scontrol", "-o", "show", "licenses"]))
    cluster = None
    match = re.search(r"^ClusterName\s*=\s*(\S+)", command(["scontrol", "show", "config"]), re.M)
    if match:
        cluster = match.group(1)
    return build(nodes, parts, licenses, "cli", cluster, partition_modules, **(fabric or {}))


def from_rest(call, license_totals=None, partition_modules=None, fabric=None, api_version="v0.0.38"):
    """Facts through slurmrestd in API version ``api_version`` (RestTransport.api: v0.0.38 for 22.05, v0.0.42 from
    24.11); ``call(path)`` returns the decoded JSON of a GET (raising on failure) and None for a path the API does
    not have (HTTP 404)."""
    nodes = call("/slurm/%s/nodes" % api_version)
    parts = call("/slurm/%s/partitions" % api_version)
    lic = call("/slurm/%s/licenses" % api_version)   # v0.0.39 on; 22.05's v0.0.38 has none
    if lic is not None:
        licenses = read_licenses(lic)
    else:
        licenses = licenses_from_totals(license_totals, licenses_in_use(call("/slurm/%s/jobs" % api_version)))
    meta = (nodes or {}).get("meta") or {}
    cluster = (meta.get("Slurm") or meta.get("slurm") or {}).get("cluster")
    return build(nodes, parts, licenses, "rest", cluster, partition_modules, **(fabric or {}))


def fabric_from_emp(get):
    """The EMP master's network status, nodes and routing for build(); ``get(path)`` returns decoded JSON."""
    status = get("network/status") or {}
    nodes = get("nodes") or []
    info = get("network/info") or {}
    routing = ((info.get("routing") or {}).get("algorithm")) or ((info.get("topology") or {}).get("routing"))
    return {"fabric_status": status, "fabric_nodes": nodes, "fabric_routing": routing}
