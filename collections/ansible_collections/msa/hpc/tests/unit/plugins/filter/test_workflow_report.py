# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

"""The demo's report filters: raw answers of Slurm, psgw agents, NAM/GCE manager, EMP and DCDB → report → lines."""

import json

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.msa.hpc.plugins.filter.workflow_report import (
    workflow_report, workflow_report_failures, workflow_report_lines)

MIB = 1 << 20


def _forwarded(nbytes):
    """A gateway's stats in the gateway epilog's report: its kernel's forwarding counters and its psgwd's."""
    return {"gateway": "x", "refused": 0, "errors": 0,
            "directions": {"ib->extoll": {"bytes": 10, "fragments": 1, "messages": 1}},
            "forwarded": {"ib->extoll": {"bytes": nbytes, "packets": 64},
                          "extoll->ib": {"bytes": nbytes // 2, "packets": 32}}}


def _rank(rank, host, role, **extra):
    return dict({"rank": rank, "host": host, "module": host[:-2], "role": role}, **extra)


GCE_OK = {"path": "gce", "equal_to_mpi": True, "communicator": 3, "ranks": 2}
STEP = {"size": 4, "cells": 524288, "ranks": [
    _rank(2, "esb01", "reduce", received=2 * MIB, nam={"written": 2 * MIB}, gce=GCE_OK),
    _rank(0, "cm01", "compute", sent={"2": MIB, "3": MIB}),
    _rank(1, "cm01", "compute", sent={"2": MIB, "3": MIB}),
    _rank(3, "esb02", "reduce", received=2 * MIB, nam={"written": 2 * MIB}, gce=GCE_OK)]}
DAM = {"host": "dam01", "read": 4 * MIB, "checksum_ok": True, "histogram_ok": True, "ok": True}


RAW = {
    "system": "dev3", "name": "demo-workflow-1", "labels": ["CM", "ESB", "DAM"],
    "job": {"job_id": 41, "state": "COMPLETED", "components": [
        {"index": 0, "role": "main", "job_id": 41, "partition": "cm", "node_list": ["cm01"], "state": "COMPLETED",
         "exit_code": 0},
        {"index": 1, "role": "main", "job_id": 42, "partition": "esb", "node_list": ["esb01", "esb02"],
         "state": "COMPLETED", "exit_code": 0},
        {"index": 2, "role": "delayed", "job_id": 43, "partition": "dam", "node_list": ["dam01"], "delay": 1,
         "state": "COMPLETED", "exit_code": 0}]},
    "step": STEP, "dam": DAM,
    "gateways": {"gw02": _forwarded(2 * MIB), "gw01": _forwarded(4 * MIB)},
    "routes": ["# routing file of job 41", "10.23.0.81:7400 cm01 esb01", "10.23.0.82:7400 cm01 esb02"],
    "gateway_names": {"10.23.0.81": "gw01", "10.23.0.82": "gw02"},
    "nam": {"job": "41", "allocations": [{"id": 7, "name": "slurm-41", "device": "nam01", "offset": 0,
                                          "size": 1 << 30, "volatile": True, "job": "41"}]},
    "fabric": {"status": {"status": "up", "routes_version": 5},
               "routes": {"version": 5, "algorithm": "DimensionOrder", "summary": {"max_hops": 3}},
               "path": ["esb01", "esb02"]},
    "readings": [{"target": "/dev3/esb/esb01/load/load1", "datapoints": [[0.5, 1000], [0.75, 2000]]},
                 {"target": "/dev3/cm/cm01/load/load1", "datapoints": [[1.25, 2000]]},
                 {"target": "/dev3/esb/esb02/load/load1", "datapoints": []}],
}


def test_report_says_where_each_component_ran_and_how_it_ended():
    report = workflow_report(RAW)
    assert [(c["label"], c["partition"], c["nodes"], c["state"], c["exit_code"]) for c in report["components"]] == [
        ("CM", "cm", ["cm01"], "COMPLETED", 0), ("ESB", "esb", ["esb01", "esb02"], "COMPLETED", 0),
        ("DAM", "dam", ["dam01"], "COMPLETED", 0)]
    assert report["components"][2]["role"] == "delayed"


def test_report_counts_bytes_per_gateway_and_direction_with_the_pairs_it_served():
    report = workflow_report(RAW)
    assert [g["gateway"] for g in report["gateways"]] == ["gw01", "gw02"]
    assert report["gateways"][0]["forwarded"]["ib->extoll"] == {"bytes": 4 * MIB, "packets": 64}
    assert report["gateways"][0]["bytes"] == 6 * MIB and report["gateways"][1]["bytes"] == 3 * MIB
    assert report["gateways"][0]["relayed"] == 10
    assert report["gateways"][1]["pairs"] == ["cm01<->esb02"]


def test_report_places_every_rank_and_sums_what_moved():
    coupling = workflow_report(RAW)["coupling"]
    assert [(p["rank"], p["host"], p["module"]) for p in coupling["placement"]] == [
        (0, "cm01", "cm"), (1, "cm01", "cm"), (2, "esb01", "esb"), (3, "esb02", "esb")]
    assert coupling["sent"] == 4 * MIB and coupling["received"] == 4 * MIB and coupling["nam_written"] == 4 * MIB
    assert coupling["gce"] == {"path": "gce", "on_gce": True, "equal_to_mpi": True, "communicator": 3, "ranks": 2}
    assert coupling["dam"]["ok"] is True and coupling["dam"]["read"] == 4 * MIB


def test_report_says_fallback_when_one_rank_did_not_use_the_gce_and_a_wrong_reduction():
    ranks = [dict(r) for r in STEP["ranks"]]
    ranks[3]["gce"] = {"path": "software: the GCE is not available: x", "equal_to_mpi": False}
    gce = workflow_report(dict(RAW, step={"ranks": ranks}))["coupling"]["gce"]
    assert gce["on_gce"] is False and gce["equal_to_mpi"] is False
    assert gce["path"] == "mixed: gce, software: the GCE is not available: x"


def test_report_holds_nam_fabric_and_the_last_reading_of_each_series():
    report = workflow_report(RAW)
    assert report["nam"]["bytes"] == 1 << 30 and report["nam"]["allocations"][0]["device"] == "nam01"
    assert report["fabric"] == {"status": "up", "routes_version": 5, "algorithm": "DimensionOrder", "max_hops": 3,
                                "path": ["esb01", "esb02"], "deadlock_free": None}
    # the empty series (esb02) has no reading; the others give their last point
    assert [(r["node"], r["sensor"], r["value"]) for r in report["monitoring"]] == [
        ("cm01", "load/load1", 1.25), ("esb01", "load/load1", 0.75)]


def test_report_is_plain_json():
    assert json.loads(json.dumps(workflow_report(RAW))) == workflow_report(RAW)


def test_lines_give_one_line_per_component_and_one_per_subsystem():
    lines = workflow_report_lines(workflow_report(RAW))
    assert len(lines) == 1 + 3 + 7
    assert lines[0].startswith("job 41 (demo-workflow-1) on dev3: COMPLETED")
    assert "esb[01-02]" in lines[2] and "exit 0" in lines[2]
    assert "(job 43, +1 min)" in lines[3]
    assert lines[4] == "ranks: 0 cm01 (cm); 1 cm01 (cm); 2 esb01 (esb); 3 esb02 (esb)"
    assert lines[5] == "coupling: 4.0 MiB sent by the CM ranks, 4.0 MiB received by the ESB ranks"
    assert lines[6] == ("gateways: gw01 [cm01<->esb01] extoll->ib 2.0 MiB, ib->extoll 4.0 MiB; "
                        "gw02 [cm01<->esb02] extoll->ib 1.0 MiB, ib->extoll 2.0 MiB")
    assert lines[7] == "GCE: allreduce on the GCE (communicator 3, 2 ranks), equal to MPI's own Allreduce"
    assert lines[8] == ("NAM: 1.0 GiB on nam01 (allocation 7 at offset 0); ESB ranks wrote 4.0 MiB, "
                        "DAM part on dam01 read 4.0 MiB: checksums OK, histogram OK")
    assert lines[9] == "fabric: EXTOLL up, DimensionOrder routing (tables v5, max 3 hops), esb01 -> esb02"
    assert lines[10] == "monitoring: load/load1: cm01 1.25, esb01 0.75"


def test_lines_name_the_fallback_and_a_failed_read():
    ranks = [dict(r, gce={"path": "software: too big", "equal_to_mpi": True}) if r["role"] == "reduce" else r
             for r in STEP["ranks"]]
    lines = workflow_report_lines(workflow_report(dict(RAW, step={"ranks": ranks},
                                                       dam={"host": "dam01", "error": "no header"})))
    assert "GCE: allreduce software fallback (software: too big), equal to MPI's own Allreduce" in lines
    assert lines[8].endswith("DAM part read nothing: no header")


def test_sections_without_answers_say_so_instead_of_failing():
    lines = workflow_report_lines(workflow_report({"job": {"job_id": 9, "state": "FAILED", "components": []}}))
    assert "gateways: none" in lines and "ranks: none reported" in lines
    assert "NAM: no allocation; ESB ranks wrote 0 B, DAM part read nothing" in lines and "GCE: not used" in lines
    assert lines[-1] == "monitoring: no readings"


@pytest.mark.parametrize("bad", [None, [], {"labels": ["CM"]}, {"job": "41"}])
def test_input_without_the_job_result_is_refused_naming_it(bad):
    with pytest.raises(AnsibleFilterError, match="'job'"):
        workflow_report(bad)


def test_lines_refuse_what_is_not_a_report():
    with pytest.raises(AnsibleFilterError, match="workflow_report's result"):
        workflow_report_lines({"job": {}})


# workflow_report_failures: the demo's requirements, each shown failing on a broken input ---------------------------

def _broken(**changes):
    """RAW with parts replaced (a deep copy): ``step``, ``dam``, ``gateways`` or ``job``."""
    raw = json.loads(json.dumps(RAW))
    raw.update(json.loads(json.dumps(changes)))
    return workflow_report(raw)


def _reducers(**extra):
    return {"size": 4, "cells": 524288, "ranks": [
        dict(r, **extra) if r["role"] == "reduce" else r for r in STEP["ranks"]]}


def test_the_sound_workflow_fails_no_requirement():
    assert workflow_report_failures(workflow_report(RAW)) == []


@pytest.mark.parametrize("broken, says", [
    # MPI delivered fewer bytes than were sent (its status count, not the slice size)
    ({"step": _reducers(received=MIB)}, "received 2097152 bytes (MPI's count) of 4194304 sent"),
    # the software fallback instead of the GCE
    ({"step": _reducers(gce=dict(GCE_OK, path="software: no GCE licence"))},
     "did not run on the GCE: software: no GCE licence"),
    ({"step": _reducers(gce=dict(GCE_OK, equal_to_mpi=False))}, "differs from MPI's own"),
    # a gateway given a pair that carried nothing
    ({"gateways": {"gw01": _forwarded(4 * MIB), "gw02": {"forwarded": {}, "directions": {}}}},
     "gateway gw02 was given cm01<->esb02 and carried 0 bytes"),
    ({"routes": []}, "no gateway was given a node pair"),
    # NAM written less than received, and the DAM part's read short or wrong
    ({"step": _reducers(nam={"written": 1})}, "wrote 2 bytes into the NAM of 4194304 received"),
    ({"dam": dict(DAM, read=MIB)}, "the DAM part read 1048576 bytes of 4194304 written"),
    ({"dam": dict(DAM, ok=False, checksum_ok=False)}, "checksums False"),
    ({"job": dict(RAW["job"], components=[dict(RAW["job"]["components"][0], state="FAILED", exit_code=1)])},
     "CM part: FAILED, exit code 1"),
])
def test_each_requirement_fails_on_its_broken_input(broken, says):
    failures = workflow_report_failures(_broken(**broken))
    assert any(says in f for f in failures), failures


def test_failures_refuse_what_is_not_a_report():
    with pytest.raises(AnsibleFilterError, match="workflow_report's result"):
        workflow_report_failures({"components": []})


def test_a_failed_part_says_how_its_output_ends():
    job = dict(RAW["job"], components=[dict(RAW["job"]["components"][0], state="FAILED", exit_code=1)])
    output = "RESULT {}\nTraceback (most recent call last):\nmsa_nam.NamError: 401 token revoked\n"
    report = _broken(job=job, outputs={str(job["components"][0]["job_id"]): output})
    assert report["components"][0]["output_tail"] == ["Traceback (most recent call last):",
                                                      "msa_nam.NamError: 401 token revoked"]
    failed = [f for f in workflow_report_failures(report) if f.startswith("CM part")]
    assert failed == ["CM part: FAILED, exit code 1; its output ends: Traceback (most recent call last): | "
                      "msa_nam.NamError: 401 token revoked"]
    # a part that completed keeps its output out of the failures
    assert not any(f.startswith("ESB part") for f in workflow_report_failures(report))
