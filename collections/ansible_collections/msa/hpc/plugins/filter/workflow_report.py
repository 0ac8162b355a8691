# SPDX-License-Identifier: GPL-3.0-or-later
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

"""Filters msa.hpc.workflow_report and msa.hpc.workflow_report_lines: a modular job's report from what the APIs said."""

from ansible.errors import AnsibleFilterError

from ansible_collections.msa.hpc.plugins.module_utils._hostlist import compress


def _size(nbytes):
    """Bytes as a short human figure (binary units): ``4.0 MiB``."""
    value = float(nbytes or 0)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return ("%d %s" % (value, unit)) if unit == "B" else ("%.1f %s" % (value, unit))
        value /= 1024
    return "%d B" % nbytes  # pragma: no cover (the loop always returns)


def _components(job, labels):
    out = []
    for comp in job.get("components") or []:
        index = int(comp.get("index", len(out)))
        out.append({"label": labels[index] if index < len(labels) else "part %d" % index,
                    "partition": comp.get("partition"), "nodes": list(comp.get("node_list") or []),
                    "job_id": comp.get("job_id"), "role": comp.get("role"), "delay_min": comp.get("delay"),
                    "state": comp.get("state"), "exit_code": comp.get("exit_code")})
    return out


def _gateways(agent_answers):
    """psgw-agent ``GET /v1/jobs/<job>`` answers → per gateway: bytes and messages per direction and in total."""
    out = []
    for answer in agent_answers or []:
        stats = answer.get("stats") or {}
        directions = {d: {"bytes": int(v.get("bytes", 0)), "messages": int(v.get("messages", 0))}
                      for d, v in sorted((stats.get("directions") or {}).items())}
        out.append({"gateway": answer.get("gateway") or stats.get("gateway"), "directions": directions,
                    "bytes": sum(v["bytes"] for v in directions.values()),
                    "refused": int(stats.get("refused", 0)), "errors": int(stats.get("errors", 0))})
    return sorted(out, key=lambda g: str(g["gateway"]))


def _nam(nam_answer, gce_result):
    allocs = [{"id": a.get("id"), "name": a.get("name"), "device": a.get("device"), "offset": a.get("offset"),
               "size": int(a.get("size", 0)), "volatile": a.get("volatile")}
              for a in (nam_answer or {}).get("allocations") or []]
    gce = None
    if gce_result:
        record = gce_result.get("communicator") or {}
        gce = {"id": gce_result.get("id"), "comm_id": gce_result.get("comm_id"), "device": record.get("device"),
               "size": record.get("size"), "fallback": gce_result.get("fallback")}
    return {"allocations": allocs, "bytes": sum(a["size"] for a in allocs)}, gce


def _fabric(fabric):
    fabric = fabric or {}
    status, routes = fabric.get("status") or {}, fabric.get("routes") or {}
    return {"status": status.get("status"), "routes_version": routes.get("version", status.get("routes_version")),
            "algorithm": routes.get("algorithm"), "max_hops": (routes.get("summary") or {}).get("max_hops"),
            "path": list(fabric.get("path") or []), "deadlock_free": (routes.get("summary") or {}).get("deadlock_free")}


def _readings(series):
    """Grafana ``/query`` answers → the last reading of each series as ``{node, sensor, value, at_ms}``."""
    out = []
    for entry in series or []:
        points = entry.get("datapoints") or []
        parts = [p for p in str(entry.get("target", "")).split("/") if p]
        if not points or len(parts) < 2:
            continue
        value, stamp = points[-1][0], points[-1][1]
        out.append({"node": parts[-3] if len(parts) >= 3 else parts[0], "sensor": "/".join(parts[-2:]),
                    "value": value, "at_ms": stamp, "points": len(points)})
    return sorted(out, key=lambda r: (r["sensor"], r["node"]))


def workflow_report(data):
    """Assemble the demo's report (a dict) from the raw answers of Slurm, the agents, the managers and DCDB."""
    if not isinstance(data, dict) or not isinstance(data.get("job"), dict):
        raise AnsibleFilterError("msa.hpc.workflow_report: the input needs a 'job' (msa.hpc.slurm_packjob's result), "
                                 "got %r" % (type(data).__name__,))
    job = data["job"]
    nam, gce = _nam(data.get("nam"), data.get("gce"))
    exchange = list(data.get("exchange") or [])
    return {
        "system": data.get("system"), "name": data.get("name"), "job_id": job.get("job_id"),
        "state": job.get("state"), "components": _components(job, list(data.get("labels") or [])),
        "exchange": {"messages": len(exchange), "verified": sum(1 for line in exchange if line.endswith(" OK")),
                     "lines": exchange},
        "gateways": _gateways(data.get("gateways")), "nam": nam, "gce": gce, "fabric": _fabric(data.get("fabric")),
        "monitoring": _readings(data.get("readings")),
        "wall_seconds": data.get("wall_seconds"),
    }


def workflow_report_lines(report):
    """The report of msa.hpc.workflow_report as a few lines a person reads."""
    if not isinstance(report, dict) or "components" not in report:
        raise AnsibleFilterError("msa.hpc.workflow_report_lines: the input must be msa.hpc.workflow_report's result")
    wall = ", %ss" % report["wall_seconds"] if report.get("wall_seconds") else ""
    lines = ["job %s (%s) on %s: %s%s" % (report["job_id"], report.get("name"), report.get("system"),
                                          report.get("state"), wall)]
    for comp in report["components"]:
        lines.append("  %-4s -> %-5s -> %-12s %s exit %s%s" % (
            comp["label"], comp["partition"], compress(comp["nodes"]) or "-", comp["state"], comp["exit_code"],
            " (job %s, +%s min)" % (comp["job_id"], comp["delay_min"])
            if comp.get("role") == "delayed" else ""))
    ex = report["exchange"]
    gws = "; ".join("%s %s" % (g["gateway"], ", ".join("%s %s" % (d, _size(v["bytes"]))
                                                       for d, v in g["directions"].items()) or "0 B")
                    for g in report["gateways"])
    lines.append("gateways: %s (%d/%d messages verified)" % (gws or "none", ex["verified"], ex["messages"]))
    nam, gce = report["nam"], report["gce"]
    lines.append("NAM: %s" % ("; ".join("%s on %s (allocation %s at offset %s)" % (_size(a["size"]), a["device"],
                                                                                   a["id"], a["offset"])
                                        for a in nam["allocations"]) or "no allocation"))
    if gce and gce.get("id") is not None:
        gce_text = "communicator %s on %s (comm id %s, %s ranks)" % (gce["id"], gce["device"], gce["comm_id"], gce["size"])
    else:
        gce_text = "software fallback" if gce else "not used"
    lines.append("GCE: %s" % gce_text)
    fab = report["fabric"]
    lines.append("fabric: EXTOLL %s, %s routing (tables v%s, max %s hops), %s" % (
        fab["status"], fab["algorithm"], fab["routes_version"], fab["max_hops"],
        " -> ".join(fab["path"]) if fab["path"] else "no path between the job's ESB nodes"))
    by_sensor = {}
    for r in report["monitoring"]:
        by_sensor.setdefault(r["sensor"], []).append("%s %s" % (r["node"], r["value"]))
    lines.append("monitoring: %s" % ("; ".join("%s: %s" % (s, ", ".join(v)) for s, v in by_sensor.items())
                                     or "no readings"))
    return lines


class FilterModule:
    """Report of a modular workflow."""

    def filters(self):
        return {"workflow_report": workflow_report, "workflow_report_lines": workflow_report_lines}
