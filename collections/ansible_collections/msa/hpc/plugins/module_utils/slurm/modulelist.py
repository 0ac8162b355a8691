# SPDX-License-Identifier: GPL-3.0-or-later
"""Module lists (seed 004 §5.1.2): which alternatives share one job, and Slurm's start-time estimates to choose."""
from __future__ import annotations

import re
import time

from ansible_collections.msa.hpc.plugins.module_utils.slurm.records import TransportError

# Alternatives that differ only in their partition are one job with a partition list, the job record that
# ``sbatch --module-list=m1,m2`` gets from job_submit.lua: Slurm starts it in whichever partition can start it
# first, and exactly one instance exists, so nothing has to be arbitrated. Alternatives of different shapes
# (node count, time, …) cannot share one job: Slurm is asked when each would start (``sbatch --test-only``), the
# one with the lowest expected slowdown ((expected wait + requested time) / requested time) is chosen, ties to the
# shorter request (fewer node-minutes), and only that one is submitted.
SHAPE_FIELDS = ("nodes", "ntasks", "cpus_per_task", "time", "constraint", "gres", "command", "script",
                "container_image")
_TEST_ONLY = re.compile(r"Job (\d+) to start at (\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d) using (\d+) processors? on nodes? "
                        r"(\S+) in partition (\S+)")


def same_shape(alternatives):
    """Whether the alternatives differ in nothing but their partition (one job with a partition list serves)."""
    return all(all(c[f] == alternatives[0][f] for f in SHAPE_FIELDS) for c in alternatives[1:])


def partition_list(alternatives):
    """The partitions of the alternatives, in their order, each once (sbatch's ``--partition=a,b``)."""
    out = []
    for comp in alternatives:
        if comp["partition"] not in out:
            out.append(comp["partition"])
    return ",".join(out)


def _local_epoch(text):
    return int(time.mktime(time.strptime(text, "%Y-%m-%dT%H:%M:%S")))


def parse_test_only(text, to_epoch=_local_epoch):
    """What ``sbatch --test-only`` answered (its standard output and error, any order).

    ``{job_id, start, start_epoch, cpus, nodes, partition}`` for ``Job N to start at T using C processors on nodes X
    in partition P`` (T in the controller's local time, read with ``to_epoch``); TransportError with Slurm's own
    words when it answered that the job cannot run (``error: …``, ``Unable to allocate resources: …``) or printed
    nothing it recognises.
    """
    text = text or ""
    match = _TEST_ONLY.search(text)
    if match:
        return {"job_id": int(match.group(1)), "start": match.group(2), "start_epoch": to_epoch(match.group(2)),
                "cpus": int(match.group(3)), "nodes": match.group(4), "partition": match.group(5)}
    lines = [re.sub(r"^\s*(sbatch|srun|salloc):\s*", "", line).strip() for line in text.splitlines() if line.strip()]
    said = [line for line in lines if re.search(r"error|unable|fail|denied|invalid", line, re.I)] or lines
    raise TransportError("sbatch --test-only: %s" % ("; ".join(said)[:500] if said else "printed nothing"))


def expected_slowdown(wait_seconds, requested_minutes):
    """(expected wait + requested time) / requested time, the seed's measure (1.0: starts now)."""
    requested = 60.0 * requested_minutes
    return (max(0.0, float(wait_seconds)) + requested) / requested


def choose(alternatives, estimates, now):
    """The alternative with the lowest expected slowdown; ties to the shorter request (fewer node-minutes), then to
    the earlier one in the list.

    ``estimates``: alternative index → parse_test_only's dict, or a message (str) when Slurm said it cannot run
    there. Returns ``(index, ranking)`` where ranking has one dict per alternative, best first, with ``index``,
    ``partition``, ``start``, ``wait`` (s), ``slowdown`` and ``node_minutes``, and ``error`` for those that cannot
    run. Raises TransportError naming every alternative when none can run.
    """
    ranked, refused = [], []
    for comp in alternatives:
        est = estimates.get(comp["index"])
        minutes = comp.get("time_minutes")
        entry = {"index": comp["index"], "partition": comp["partition"], "node_minutes": None, "start": None,
                 "wait": None, "slowdown": None}
        if not minutes:
            entry["error"] = "no finite time to compare (give module_list[%d].time)" % comp["index"]
        elif not isinstance(est, dict):
            entry["error"] = str(est or "no estimate")
        else:
            wait = max(0, est["start_epoch"] - int(now))
            entry.update(start=est["start"], wait=wait, slowdown=round(expected_slowdown(wait, minutes), 6),
                         node_minutes=comp["nodes"] * minutes, partition=est["partition"])
            ranked.append(entry)
            continue
        refused.append(entry)
    if not ranked:
        raise TransportError("no alternative of the module list can run: %s" % "; ".join(
            "module_list[%d] (%s): %s" % (e["index"], e["partition"], e["error"]) for e in refused))
    ranked.sort(key=lambda e: (e["slowdown"], e["node_minutes"], e["index"]))
    return ranked[0]["index"], ranked + refused
