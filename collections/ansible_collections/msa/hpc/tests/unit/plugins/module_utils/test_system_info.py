# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

"""system_info: facts from Slurm's JSON (CLI or slurmrestd) validate against the written schema and add up."""

import json
import pathlib

import pytest

from ansible_collections.msa.hpc.plugins.module_utils import _system_info as S

ROOT = pathlib.Path(__file__).resolve().parents[4]
FIXTURES = pathlib.Path(__file__).parent / "fixtures" / "slurm"
SCHEMA_FILE = ROOT / "docs" / "system_info.schema.json"


def _node(name, partitions, cpus=4, memory=1024, state="idle", flags=(), gres="", alloc_cpus=0):
    return {"name": name, "hostname": name, "address": name, "partitions": list(partitions), "cpus": cpus,
            "alloc_cpus": alloc_cpus, "real_memory": memory, "alloc_memory": 0, "state": state,
            "state_flags": list(flags), "gres": gres, "active_features": "booster,gpu" if gres else "cluster"}


NODES = {"nodes": [_node("cm01", ["cm"]), _node("cm02", ["cm"], state="allocated", alloc_cpus=4),
                   _node("esb01", ["esb"], 2, gres="gpu:1"), _node("esb02", ["esb"], 2, state="idle", flags=["DRAIN"],
                                                                   gres="gpu:1(S:0)")]}
PARTITIONS = {"partitions": [
    {"name": "cm", "nodes": "cm[01-02]", "flags": ["default"], "max_time_limit": -1, "state": "UP"},
    {"name": "esb", "nodes": "esb[01-02]", "flags": [], "max_time_limit": 60, "state": "UP"}]}
LICENSES = "LicenseName=gateway Total=2 Used=1 Free=1 Reserved=0 Remote=no\n" \
           "LicenseName=gce Total=1 Used=1 Free=0 Reserved=0 Remote=no\n" \
           "LicenseName=nam Total=7 Used=2 Free=5 Reserved=0 Remote=no\n"


SCONTROL_PARTITIONS = "PartitionName=cm Default=YES MaxTime=UNLIMITED Nodes=cm[01-02] State=UP TotalNodes=2\n" \
                      "PartitionName=esb Default=NO MaxTime=01:00:00 Nodes=esb[01-02] State=UP TotalNodes=2\n"


def _info(**kw):
    return S.build(NODES, PARTITIONS, S.parse_licenses(LICENSES), "cli", "dev", **kw)


def test_the_schema_file_is_the_schema_the_module_checks_against():
    assert json.loads(SCHEMA_FILE.read_text()) == S.SCHEMA


def test_facts_validate_against_the_schema_with_the_tiny_validator_and_with_jsonschema():
    info = _info(fabric_status={"status": "up", "up": True}, fabric_nodes=[{"state": "up"}, {"state": "gone"}],
                 fabric_routing="DimensionOrder")
    assert S.validate(info) == []
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.validate(info, S.SCHEMA)


def test_partitions_count_their_nodes_cpus_memory_gpus_and_states():
    info = _info()
    cm, esb = info["partitions"]
    assert (cm["node_count"], cm["cpus"], cm["cpus_allocated"], cm["memory_mb"], cm["gpus"]) == (2, 8, 4, 2048, 0)
    assert cm["states"] == {"idle": 1, "allocated": 1} and cm["default"] and cm["max_time_minutes"] is None
    assert (esb["node_count"], esb["gpus"], esb["max_time_minutes"], esb["default"]) == (2, 2, 60, False)
    assert info["totals"]["node_count"] == 4 and info["totals"]["gpus"] == 2
    assert [n["flags"] for n in info["nodes"] if n["name"] == "esb02"] == [["DRAIN"]]


def test_licences_become_free_gateways_nam_capacity_and_gce_availability():
    res = _info()["resources"]
    assert res["gateways"] == {"total": 2, "used": 1, "free": 1}
    assert res["nam"] == {"total": 7, "used": 2, "free": 5, "unit": "GiB"}
    assert res["gce"] == {"total": 1, "used": 1, "free": 0, "available": False}


def test_a_system_without_licences_reports_zero_resources_not_a_failure():
    info = S.build(NODES, PARTITIONS, {}, "rest")
    assert info["resources"]["gateways"] == {"total": 0, "used": 0, "free": 0} and S.validate(info) == []
    assert info["fabric"] is None


def test_partition_modules_group_partitions_under_their_module():
    info = _info(partition_modules={"cm": "cluster", "esb": "booster"})
    assert [(m["name"], m["partitions"], m["node_count"]) for m in info["modules"]] == [
        ("booster", ["esb"], 2), ("cluster", ["cm"], 2)]


def test_licence_use_over_rest_is_summed_over_running_jobs():
    jobs = {"jobs": [{"job_state": "RUNNING", "licenses": "gateway:2,nam:3"},
                     {"job_state": "PENDING", "licenses": "gateway:1"},
                     {"job_state": "RUNNING", "licenses": "gce"}]}
    lic = S.licenses_from_totals({"gateway": 2, "nam": 7, "gce": 1}, S.licenses_in_use(jobs))
    assert lic == {"gateway": {"total": 2, "used": 2, "free": 0}, "gce": {"total": 1, "used": 1, "free": 0},
                   "nam": {"total": 7, "used": 3, "free": 4}}


@pytest.mark.parametrize("gres,count", [("gpu:1", 1), ("gpu:a100:2(S:0-1),nic:1", 2), ("", 0), ("(null)", 0),
                                        ("gpu:1,gpu:tesla:2", 3), ("nic:4", 0)])
def test_gpu_count_from_gres(gres, count):
    assert S.gres_count(gres) == count


def test_the_validator_names_the_path_of_each_problem():
    info = _info()
    info["partitions"][1]["cpus"] = -1
    info["nodes"][0]["state"] = None
    info["extra"] = 1
    problems = S.validate(info)
    assert "$.partitions[1].cpus: -1 is below 0" in problems
    assert any(p.startswith("$.nodes[0].state: None is not of type string") for p in problems)
    assert "$: 'extra' is not allowed" in problems


def test_answers_without_nodes_fail_clearly():
    with pytest.raises(S.SystemInfoError, match="no node list"):
        S.build({"errors": []}, PARTITIONS, {}, "cli")


def test_cli_and_rest_give_the_same_facts_for_the_same_answers():
    def run(argv):
        table = {("sinfo", "--json"): json.dumps(NODES),
                 ("scontrol", "-o", "show", "partitions"): SCONTROL_PARTITIONS,
                 ("scontrol", "-o", "show", "licenses"): LICENSES,
                 ("scontrol", "show", "config"): "ClusterName             = dev\n"}
        return 0, table[tuple(argv)], ""

    def call(path):
        return {"/slurm/v0.0.38/nodes": dict(NODES, meta={"Slurm": {"cluster": "dev"}}),
                "/slurm/v0.0.38/partitions": PARTITIONS,
                "/slurm/v0.0.38/licenses": {"licenses": [
                    {"LicenseName": n, "Total": v["total"], "Used": v["used"], "Free": v["free"]}
                    for n, v in S.parse_licenses(LICENSES).items()]}}.get(path)

    over_cli, over_rest = S.from_cli(run), S.from_rest(call)
    assert dict(over_cli, source="rest", cluster=None) == dict(over_rest, cluster=None)


def test_the_answers_of_slurm_22_05_on_a_live_system_read_the_same_over_rest_and_the_commands():
    nodes = json.loads((FIXTURES / "rest_v0.0.38_nodes_dev2.json").read_text())
    over_rest = S.build(nodes, json.loads((FIXTURES / "rest_v0.0.38_partitions_dev2.json").read_text()),
                        S.read_licenses(json.loads((FIXTURES / "rest_v0.0.38_licenses_dev2.json").read_text())), "rest")
    over_cli = S.build(nodes, S.parse_scontrol_partitions((FIXTURES / "scontrol_show_partitions_22.05_dev2.txt")
                                                          .read_text()),
                       S.parse_licenses((FIXTURES / "scontrol_show_licenses_22.05_dev2.txt").read_text()), "cli")
    assert S.validate(over_rest) == [] and dict(over_cli, source="rest") == over_rest
    parts = {p["name"]: p for p in over_rest["partitions"]}
    assert (parts["cm"]["node_count"], parts["cm"]["cpus"], parts["cm"]["default"]) == (2, 8, True)
    assert parts["esb"]["gpus"] == parts["esb"]["node_count"] == 4 and parts["cm"]["max_time_minutes"] is None
    assert over_rest["resources"]["gateways"] == {"total": 2, "used": 0, "free": 2}
    assert over_rest["resources"]["gce"]["available"] is True
