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


OUTPUT_TAIL = 5


def _output_tail(text):
    """The last lines of a job's output that are not a part's ``RESULT``/``HOLD`` line (what went wrong, if anything)."""
    lines = [line.rstrip() for line in str(text or "").splitlines()]
    return [line for line in lines if line and not line.startswith(("RESULT ", "HOLD "))][-OUTPUT_TAIL:]


def _components(job, labels, outputs=None):
    """The job's components; ``outputs`` (job id -> the text of its output file) adds each one's ``output_tail``."""
    out = []
    outputs = outputs or {}
    for comp in job.get("components") or []:
        index = int(comp.get("index", len(out)))
        out.append({"label": labels[index] if index < len(labels) else "part %d" % index,
                    "partition": comp.get("partition"), "nodes": list(comp.get("node_list") or []),
                    "job_id": comp.get("job_id"), "role": comp.get("role"), "delay_min": comp.get("delay"),
                    "state": comp.get("state"), "exit_code": comp.get("exit_code"),
                    "output_tail": _output_tail(outputs.get(str(comp.get("job_id"))))})
    return out


def _routes(lines, names):
    """The routing file's lines (``<gateway address>:<port> <cluster node> <booster node>``) -> one dict per pair,
    the gateway by its name where ``names`` (address -> name) knows it."""
    out = []
    for line in lines or []:
        fields = str(line).split()
        if len(fields) < 3 or fields[0].startswith("#"):
            continue
        address = fields[0].rsplit(":", 1)[0]
        out.append({"gateway": (names or {}).get(address, address), "cluster": fields[1], "booster": fields[2]})
    return out


def _gateways(report, routes):
    """The gateway epilog's report (``{gateway: stats}``, the counters each gateway's agent gave at the job's end)
    and the routing file's pairs -> per gateway: the node pairs it served, bytes and packets its kernel forwarded
    per direction, their total, and what its psgwd relayed (``directions``) besides."""
    out = []
    for name, stats in sorted((report or {}).items()):
        stats = stats or {}
        forwarded = {d: {"bytes": int(v.get("bytes", 0)), "packets": int(v.get("packets", 0))}
                     for d, v in sorted((stats.get("forwarded") or {}).items())}
        relayed = sum(int(v.get("bytes", 0)) for v in (stats.get("directions") or {}).values())
        pairs = ["%s<->%s" % (r["cluster"], r["booster"]) for r in routes if r["gateway"] == name]
        out.append({"gateway": name, "pairs": pairs, "forwarded": forwarded,
                    "bytes": sum(v["bytes"] for v in forwarded.values()), "relayed": relayed})
    return out


def _nam(nam_answer):
    allocs = [{"id": a.get("id"), "name": a.get("name"), "device": a.get("device"), "offset": a.get("offset"),
               "size": int(a.get("size", 0)), "volatile": a.get("volatile")}
              for a in (nam_answer or {}).get("allocations") or []]
    return {"allocations": allocs, "bytes": sum(a["size"] for a in allocs)}


def _coupling(step, dam):
    """The coupled program's RESULT (every rank of the CM+ESB step) and the DAM part's -> placement, bytes moved,
    the GCE outcome (its path on every ESB rank, equal to MPI's own Allreduce) and the NAM write and read."""
    ranks = sorted((step or {}).get("ranks") or [], key=lambda r: r.get("rank", 0))
    placement = [{"rank": r.get("rank"), "host": r.get("host"), "module": r.get("module"), "role": r.get("role")}
                 for r in ranks]
    reducers = [r for r in ranks if r.get("role") == "reduce"]
    gces = [r.get("gce") or {} for r in reducers]
    paths = sorted({str(g.get("path")) for g in gces})
    gce = None
    if gces:
        gce = {"path": paths[0] if len(paths) == 1 else "mixed: %s" % ", ".join(paths),
               "on_gce": paths == ["gce"], "equal_to_mpi": all(g.get("equal_to_mpi") is True for g in gces),
               "communicator": gces[0].get("communicator"), "ranks": gces[0].get("ranks")}
    dam = dam or {}
    return {
        "placement": placement,
        "sent": sum(sum((r.get("sent") or {}).values()) for r in ranks),
        "received": sum(int(r.get("received") or 0) for r in reducers),
        "gce": gce,
        "nam_written": sum(int((r.get("nam") or {}).get("written") or 0) for r in reducers),
        "dam": {"host": dam.get("host"), "read": dam.get("read"), "checksum_ok": dam.get("checksum_ok"),
                "histogram_ok": dam.get("histogram_ok"), "ok": dam.get("ok") is True, "error": dam.get("error")},
    }


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
    return {
        "system": data.get("system"), "name": data.get("name"), "job_id": job.get("job_id"),
        "state": job.get("state"),
        "components": _components(job, list(data.get("labels") or []), data.get("outputs")),
        "coupling": _coupling(data.get("step"), data.get("dam")),
        "gateways": _gateways(data.get("gateways"), _routes(data.get("routes"), data.get("gateway_names"))), "nam": _nam(data.get("nam")),
        "fabric": _fabric(data.get("fabric")), "monitoring": _readings(data.get("readings")),
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
    cpl = report["coupling"]
    lines.append("ranks: %s" % ("; ".join("%s %s (%s)" % (p["rank"], p["host"], p["module"]) for p in cpl["placement"])
                                or "none reported"))
    lines.append("coupling: %s sent by the CM ranks, %s received by the ESB ranks" % (
        _size(cpl["sent"]), _size(cpl["received"])))
    gws = "; ".join("%s [%s] %s" % (g["gateway"], ", ".join(g["pairs"]) or "no pair",
                                    ", ".join("%s %s" % (d, _size(v["bytes"])) for d, v in g["forwarded"].items())
                                    or "0 B")
                    for g in report["gateways"])
    lines.append("gateways: %s" % (gws or "none"))
    gce = cpl["gce"]
    if gce is None:
        lines.append("GCE: not used")
    else:
        where = ("on the GCE (communicator %s, %s ranks)" % (gce["communicator"], gce["ranks"]) if gce["on_gce"]
                 else "software fallback (%s)" % gce["path"])
        lines.append("GCE: allreduce %s, %s MPI's own Allreduce" % (
            where, "equal to" if gce["equal_to_mpi"] else "NOT equal to"))
    nam, dam = report["nam"], cpl["dam"]
    held = "; ".join("%s on %s (allocation %s at offset %s)" % (_size(a["size"]), a["device"], a["id"], a["offset"])
                     for a in nam["allocations"]) or "no allocation"
    if dam["read"] is None:
        read = "DAM part read nothing%s" % (": %s" % dam["error"] if dam["error"] else "")
    else:
        read = "DAM part on %s read %s: checksums %s, histogram %s" % (
            dam["host"], _size(dam["read"]), "OK" if dam["checksum_ok"] else "WRONG",
            "OK" if dam["histogram_ok"] else "WRONG")
    lines.append("NAM: %s; ESB ranks wrote %s, %s" % (held, _size(cpl["nam_written"]), read))
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


def workflow_report_failures(report):
    """What the demo requires of msa.hpc.workflow_report's result, as one line per failed requirement (an empty list
    when the workflow did what it claims): every part completed with exit code 0, on the CM and the ESB; the ESB ranks
    received (MPI's own count) what the CM ranks sent; the allreduce ran on the GCE and equals MPI's; every gateway
    the routing file gave a pair carried bytes (its kernel's forwarding counters or its psgwd's relay); the ESB ranks
    wrote the NAM (the client's count of bytes written) and the DAM part read back as much, checksums right."""
    if not isinstance(report, dict) or "coupling" not in report:
        raise AnsibleFilterError("msa.hpc.workflow_report_failures: the input must be msa.hpc.workflow_report's result")
    out = []
    for comp in report.get("components") or []:
        if comp.get("state") != "COMPLETED" or comp.get("exit_code") != 0:
            tail = comp.get("output_tail") or []
            out.append("%s part: %s, exit code %s%s" % (comp.get("label"), comp.get("state"), comp.get("exit_code"),
                                                        "; its output ends: %s" % " | ".join(tail) if tail else ""))
    cpl = report["coupling"]
    modules = sorted({p.get("module") for p in cpl.get("placement") or []})
    if modules != ["cm", "esb"]:
        out.append("ranks placed on the modules %s, not on the CM and the ESB" % modules)
    if not cpl.get("sent") or cpl.get("received") != cpl.get("sent"):
        out.append("the ESB ranks received %s bytes (MPI's count) of %s sent" % (cpl.get("received"), cpl.get("sent")))
    gce = cpl.get("gce")
    if not gce:
        out.append("the GCE was not used")
    else:
        if not gce.get("on_gce"):
            out.append("the allreduce did not run on the GCE: %s" % gce.get("path"))
        if not gce.get("equal_to_mpi"):
            out.append("the GCE's allreduce differs from MPI's own")
    gateways = [g for g in report.get("gateways") or [] if g.get("pairs")]
    if not gateways:
        out.append("no gateway was given a node pair (routing file)")
    for g in gateways:
        if not (g.get("bytes") or 0) + (g.get("relayed") or 0):
            out.append("gateway %s was given %s and carried 0 bytes" % (g.get("gateway"), ", ".join(g["pairs"])))
    dam = cpl.get("dam") or {}
    if not cpl.get("nam_written") or cpl.get("nam_written") != cpl.get("received"):
        out.append("the ESB ranks wrote %s bytes into the NAM of %s received" % (cpl.get("nam_written"),
                                                                                 cpl.get("received")))
    if not dam.get("ok") or dam.get("read") != cpl.get("nam_written"):
        out.append("the DAM part read %s bytes of %s written (checksums %s, histogram %s%s)" % (
            dam.get("read"), cpl.get("nam_written"), dam.get("checksum_ok"), dam.get("histogram_ok"),
            ": %s" % dam["error"] if dam.get("error") else ""))
    return out


class FilterModule:
    """Report of a modular workflow."""

    def filters(self):
        return {"workflow_report": workflow_report, "workflow_report_lines": workflow_report_lines,
                "workflow_report_failures": workflow_report_failures}
