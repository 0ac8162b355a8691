# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

"""The demo's report filters: raw answers of Slurm, psgw agents, NAM/GCE manager, EMP and DCDB → report → lines."""

import json

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.msa.hpc.plugins.filter.workflow_report import workflow_report, workflow_report_lines

MIB = 1 << 20


def _agent(gateway, nbytes):
    return {"job": "41", "gateway": gateway, "running": True,
            "stats": {"gateway": gateway, "refused": 0, "errors": 0,
                      "directions": {"ib->extoll": {"bytes": nbytes, "fragments": 64, "messages": 1},
                                     "extoll->ib": {"bytes": nbytes // 2, "fragments": 32, "messages": 1}}}}


RAW = {
    "system": "dev3", "name": "demo-workflow-1", "labels": ["CM", "ESB", "DAM"],
    "job": {"job_id": 41, "state": "COMPLETED", "components": [
        {"index": 0, "role": "main", "job_id": 41, "partition": "cm", "node_list": ["cm01"], "state": "COMPLETED",
         "exit_code": 0},
        {"index": 1, "role": "main", "job_id": 42, "partition": "esb", "node_list": ["esb01", "esb02"],
         "state": "COMPLETED", "exit_code": 0},
        {"index": 2, "role": "delayed", "job_id": 43, "partition": "dam", "node_list": ["dam01"], "delay": 1,
         "state": "COMPLETED", "exit_code": 0}]},
    "exchange": ["received 4194304 bytes in 64 fragments sha256 ab from cm01 via gw01: OK",
                 "received 4194304 bytes in 64 fragments sha256 cd from cm01 via gw02: MISMATCH"],
    "gateways": [_agent("gw02", 4 * MIB), _agent("gw01", 4 * MIB)],
    "nam": {"job": "41", "allocations": [{"id": 7, "name": "slurm-41", "device": "nam01", "offset": 0,
                                          "size": 1 << 30, "volatile": True, "job": "41"}]},
    "gce": {"id": 3, "comm_id": 1, "communicator": {"device": "gce01", "size": 2}, "fallback": None},
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


def test_report_counts_bytes_per_gateway_and_direction_and_the_verified_messages():
    report = workflow_report(RAW)
    assert [g["gateway"] for g in report["gateways"]] == ["gw01", "gw02"]
    assert report["gateways"][0]["directions"]["ib->extoll"]["bytes"] == 4 * MIB
    assert report["gateways"][0]["bytes"] == 6 * MIB
    assert report["exchange"]["messages"] == 2 and report["exchange"]["verified"] == 1


def test_report_holds_nam_gce_fabric_and_the_last_reading_of_each_series():
    report = workflow_report(RAW)
    assert report["nam"]["bytes"] == 1 << 30 and report["nam"]["allocations"][0]["device"] == "nam01"
    assert report["gce"]["id"] == 3 and report["gce"]["device"] == "gce01"
    assert report["fabric"] == {"status": "up", "routes_version": 5, "algorithm": "DimensionOrder", "max_hops": 3,
                                "path": ["esb01", "esb02"], "deadlock_free": None}
    # the empty series (esb02) has no reading; the others give their last point
    assert [(r["node"], r["sensor"], r["value"]) for r in report["monitoring"]] == [
        ("cm01", "load/load1", 1.25), ("esb01", "load/load1", 0.75)]


def test_report_is_plain_json():
    assert json.loads(json.dumps(workflow_report(RAW))) == workflow_report(RAW)


def test_lines_give_one_line_per_component_and_one_per_subsystem():
    lines = workflow_report_lines(workflow_report(RAW))
    assert len(lines) == 1 + 3 + 5
    assert lines[0].startswith("job 41 (demo-workflow-1) on dev3: COMPLETED")
    assert "esb[01-02]" in lines[2] and "exit 0" in lines[2]
    assert "(job 43, +1 min)" in lines[3]
    assert "gw01 extoll->ib 2.0 MiB, ib->extoll 4.0 MiB" in lines[4] and "(1/2 messages verified)" in lines[4]
    assert lines[5] == "NAM: 1.0 GiB on nam01 (allocation 7 at offset 0)"
    assert lines[6] == "GCE: communicator 3 on gce01 (comm id 1, 2 ranks)"
    assert lines[7] == "fabric: EXTOLL up, DimensionOrder routing (tables v5, max 3 hops), esb01 -> esb02"
    assert lines[8] == "monitoring: load/load1: cm01 1.25, esb01 0.75"


def test_sections_without_answers_say_so_instead_of_failing():
    lines = workflow_report_lines(workflow_report({"job": {"job_id": 9, "state": "FAILED", "components": []}}))
    assert "gateways: none (0/0 messages verified)" in lines
    assert "NAM: no allocation" in lines and "GCE: not used" in lines
    assert lines[-1] == "monitoring: no readings"


@pytest.mark.parametrize("bad", [None, [], {"labels": ["CM"]}, {"job": "41"}])
def test_input_without_the_job_result_is_refused_naming_it(bad):
    with pytest.raises(AnsibleFilterError, match="'job'"):
        workflow_report(bad)


def test_lines_refuse_what_is_not_a_report():
    with pytest.raises(AnsibleFilterError, match="workflow_report's result"):
        workflow_report_lines({"job": {}})
