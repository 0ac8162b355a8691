# SPDX-License-Identifier: GPL-3.0-or-later
"""A job model's jobs in Slurm's records: which ids it has, what to cancel, and each component's state."""
from __future__ import annotations

from ansible_collections.msa.hpc.plugins.module_utils._hostlist import HostlistError, expand
from ansible_collections.msa.hpc.plugins.module_utils.slurm.model import (
    DELAY_COMMENT_KEY, LEGACY_DELAY_KEY, NOT_CHOSEN, parse_comment)
from ansible_collections.msa.hpc.plugins.module_utils.slurm.records import ACTIVE_STATES, FINAL_STATES


def find_ids(spec, records, user):
    """The ids of the newest live instance of the job, from the queue: ``{leader, delayed, alternatives}``.

    Returns None when no job of this name and user is pending or running (so a new one may be submitted).
    """
    mine = [r for r in records if r["name"] == spec["name"] and (user is None or r["user"] == user)]
    live = [r for r in mine if r["state"] in ACTIVE_STATES]
    if not live:
        return None
    if spec["module_list"]:   # one job: the newest live one
        return {"leader": max(r["het_job_id"] or r["job_id"] for r in live), "delayed": {}, "alternatives": []}

    def leader_of(fields):
        return fields.get(DELAY_COMMENT_KEY, fields.get(LEGACY_DELAY_KEY))

    leaders = set()
    for r in live:
        fields = parse_comment(r["comment"])
        if (leader_of(fields) or "").isdigit():
            leaders.add(int(leader_of(fields)))
        else:
            leaders.add(r["het_job_id"] or r["job_id"])
    leader = max(leaders)
    delayed = {}
    for r in mine:
        fields = parse_comment(r["comment"])
        if leader_of(fields) == str(leader) and fields.get("component", "").isdigit():
            delayed[int(fields["component"])] = r["job_id"]
    return {"leader": leader, "delayed": delayed, "alternatives": []}


def cancel_targets(spec, records, user):
    """Job ids to scancel for state=absent: every live job of this name and user (hetjobs by their leader)."""
    ids = set()
    for r in records:
        if r["name"] == spec["name"] and (user is None or r["user"] == user) and r["state"] in ACTIVE_STATES:
            ids.add(r["het_job_id"] or r["job_id"])
    return sorted(ids)


def _component_result(index, record, role, extra=None):
    result = {"index": index, "role": role, "job_id": None, "het_job_offset": None, "state": "UNKNOWN",
              "nodes": "", "node_list": [], "exit_code": None, "signal": None, "partition": None}
    if record:
        try:
            node_list = expand(record["nodes"])
        except HostlistError:
            node_list = [record["nodes"]]
        result.update(job_id=record["job_id"], het_job_offset=record["het_job_offset"], state=record["state"],
                      nodes=record["nodes"], node_list=node_list, exit_code=record["exit_code"],
                      signal=record["signal"], partition=record["partition"])
    result.update(extra or {})
    return result


def results(spec, ids, records):
    """Per-component results for a job whose ids are known, from any mix of squeue/sacct/scontrol records.

    Returns ``{job_id, state, finished, failed, components, winner}``; ``state`` is the job's overall state
    (the first non-final state of a component, else FAILED/… when one failed, else COMPLETED).
    """
    by_id = {}
    for r in records:
        by_id.setdefault(r["job_id"], r)
    comps = []
    winner = None
    if spec["module_list"]:
        # one job: pending with a partition list (same shape), or in the partition it was submitted to or runs in
        record = by_id.get(ids["leader"])
        where = (record or {}).get("partition") or ""
        if record is not None and "," not in where:
            winner = next((c["index"] for c in spec["module_list"] if c["partition"] == where), None)
        for comp in spec["module_list"]:
            chosen = winner == comp["index"]
            if chosen or winner is None:
                entry = _component_result(comp["index"], record, "alternative", {"chosen": chosen})
                entry["job_id"] = ids["leader"]
            else:
                entry = _component_result(comp["index"], None, "alternative", {"chosen": False})
                entry["state"] = NOT_CHOSEN
            comps.append(entry)
        relevant = [c for c in comps if c["chosen"]] or comps[:1]
        live = [c for c in relevant if c["state"] not in FINAL_STATES]
        job_id = ids["leader"]
    else:
        leader = ids["leader"]
        het = sorted((r for r in records if r["het_job_id"] == leader), key=lambda r: r["het_job_offset"] or 0)
        together = [c for c in spec["components"] if not c["delay"]]
        for offset, comp in enumerate(together):
            record = het[offset] if offset < len(het) else (by_id.get(leader) if offset == 0 else None)
            comps.append(_component_result(comp["index"], record, "main"))
        for comp in spec["components"]:
            if comp["delay"]:
                job_id = ids["delayed"].get(comp["index"])
                entry = _component_result(comp["index"], by_id.get(job_id), "delayed", {"delay": comp["delay"]})
                entry["job_id"] = job_id
                comps.append(entry)
        comps.sort(key=lambda c: c["index"])
        relevant = comps
        live = [c for c in comps if c["state"] not in FINAL_STATES]
        job_id = leader
    finished = not live
    failed = [c for c in relevant if c["state"] in FINAL_STATES and (c["state"] != "COMPLETED" or c["exit_code"])]
    if live:
        state = live[0]["state"]
    elif failed:
        state = failed[0]["state"] if failed[0]["state"] != "COMPLETED" else "FAILED"
    else:
        state = "COMPLETED" if any(c["state"] == "COMPLETED" for c in relevant) else (
            relevant[0]["state"] if relevant else "UNKNOWN")
    return {"job_id": job_id, "state": state, "finished": finished, "failed": [c["index"] for c in failed],
            "components": comps, "winner": winner}


def all_ids(ids):
    """Every job id of an instance (leader, delayed parts, alternatives)."""
    out = [ids["leader"]] if ids.get("leader") else []
    return out + sorted(ids.get("delayed", {}).values()) + list(ids.get("alternatives", []))
