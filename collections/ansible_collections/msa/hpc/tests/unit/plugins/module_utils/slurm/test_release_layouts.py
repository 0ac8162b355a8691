# SPDX-License-Identifier: GPL-3.0-or-later
"""Every reader of Slurm's JSON, fed the answers of 22.05 (data_parser v0.0.38), of 24.11.5 (v0.0.42, captured
from Debian 13's packages: squeue/scontrol/sinfo --json and slurmrestd) and of 26.05.5 (v0.0.45, forky's packages on
Debian 13: squeue/scontrol/sinfo/sacct --json), reads the same facts; a layout it does not know is refused naming
the field."""
from __future__ import annotations

import copy
import io
import json
import pathlib
import subprocess

import pytest

from ansible_collections.msa.hpc.plugins.module_utils import _system_info as SI
from ansible_collections.msa.hpc.plugins.module_utils._rest import RestError
from ansible_collections.msa.hpc.plugins.module_utils.node import delay_hooks as D
from ansible_collections.msa.hpc.plugins.module_utils.node import healthcheck as H
from ansible_collections.msa.hpc.plugins.module_utils.node import nam_hooks as NH
from ansible_collections.msa.hpc.plugins.module_utils.slurm import jobs as S
from ansible_collections.msa.hpc.plugins.module_utils.slurm import nodes as N
from ansible_collections.msa.hpc.plugins.module_utils.slurm.model import validate
from ansible_collections.msa.hpc.plugins.module_utils.slurm.records import (
    TransportError, parse_sacct_json, parse_squeue_json)
from ansible_collections.msa.hpc.plugins.module_utils.slurm.render import plan
from ansible_collections.msa.hpc.plugins.module_utils.slurm.rest import RestTransport, SlurmRestError, job_properties

FIXTURES = pathlib.Path(__file__).parent.parent / "fixtures" / "slurm"


def text(name):
    return (FIXTURES / name).read_text()


def fixture(name):
    return json.loads(text(name))


def proc(argv, out):
    return subprocess.CompletedProcess(argv, 0, out, "")


# --- jobs: squeue --json, scontrol show job --json, slurmrestd's /jobs -------------------------------------------

# squeue --states=all on the 24.11.5 test system: 1 cancelled while running, hetjob 2+3 cancelled pending, 4
# completed, 5 failed with exit 3, hetjob 6+7 pending (alice, uid 2001)
STATES_24_11 = {1: "CANCELLED", 2: "CANCELLED", 3: "CANCELLED", 4: "COMPLETED", 5: "FAILED", 6: "PENDING",
                7: "PENDING"}
# the same jobs on the 26.05.5 test system (hetjob 6+7 held), and 8 running, 9 an srun that completed
STATES_26_05 = {**STATES_24_11, 8: "RUNNING", 9: "COMPLETED"}


@pytest.mark.parametrize("name,states", [("squeue_24.11_all_states.json", STATES_24_11),
                                         ("scontrol_show_job_24.11.json", STATES_24_11),
                                         ("squeue_26.05_all_states.json", STATES_26_05),
                                         ("scontrol_show_job_26.05.json", STATES_26_05)])
def test_24_11_and_26_05_job_records_read_as_22_05_did(name, states):
    jobs = S.load_jobs(text(name), name)
    assert {j["job_id"]: j["job_state"] for j in jobs} == states
    records = {int(r["job_id"]): r for r in map(S.record, jobs)}
    assert [records[i]["het_job_id"] for i in (1, 2, 3, 6, 7)] == [None, "2", "2", "6", "6"]
    assert [records[i]["het_job_offset"] for i in (2, 3, 6, 7)] == [0, 1, 0, 1]
    assert records[1]["licenses"] == {"gateway": 2} and records[1]["nodes"] == ["n1"]
    assert (records[4]["uid"], records[4]["user"], records[4]["workdir"]) == (2001, "alice", "/home/alice")
    assert (records[4]["cpus"], records[4]["time_limit"], records[5]["time_limit"]) == (2, 60, 1)
    assert [r["job_id"] for r in S.parse_jobs(text(name), 7)] == ["6", "7"]   # the whole hetjob, leader first


def test_22_05_job_records_still_read():
    jobs = S.load_jobs(text("squeue_22.05_hetjob.json"))
    assert jobs and all(isinstance(j["job_state"], str) and isinstance(j["job_id"], int) for j in jobs)
    leader = jobs[0]["het_job_id"]
    assert [r["het_job_offset"] for r in S.parse_jobs(text("squeue_22.05_hetjob.json"), leader)] == \
        list(range(len([j for j in jobs if j["het_job_id"] == leader])))


def test_slurm_packjob_records_of_both_releases():
    rec = {r["job_id"]: r for r in parse_squeue_json(text("squeue_24.11_all_states.json"))}
    assert (rec[5]["state"], rec[5]["exit_code"], rec[5]["signal"]) == ("FAILED", 3, 0)
    assert (rec[1]["state"], rec[1]["signal"]) == ("CANCELLED", 15)
    assert (rec[7]["het_job_id"], rec[7]["het_job_offset"], rec[7]["partition"]) == (6, 1, "esb")
    assert (rec[4]["het_job_id"], rec[4]["het_job_offset"]) == (None, None)
    over_rest = {r["job_id"]: r["state"] for r in parse_squeue_json(fixture("rest_v0.0.42_jobs_24.11.json"))}
    assert over_rest == {1: "CANCELLED", 2: "PENDING", 3: "PENDING", 4: "PENDING", 5: "PENDING"}
    old = parse_squeue_json(text("squeue_22.05_hetjob.json"))
    assert old and all(r["state"] in ("RUNNING", "PENDING", "COMPLETED", "CANCELLED", "COMPLETING") for r in old)


def test_slurm_packjob_records_of_26_05_and_its_accounting():
    rec = {r["job_id"]: r for r in parse_squeue_json(text("squeue_26.05_all_states.json"))}
    assert (rec[5]["state"], rec[5]["exit_code"], rec[5]["signal"]) == ("FAILED", 3, 0)
    assert (rec[7]["het_job_id"], rec[7]["het_job_offset"], rec[7]["partition"]) == (6, 1, "esb")
    assert (rec[8]["state"], rec[8]["het_job_id"]) == ("RUNNING", None)
    # sacct on two nodes: hetjob 13+14 ran and completed, 15+16 runs across cm and esb, 8 was cancelled running
    acct = {r["job_id"]: r for r in parse_sacct_json(text("sacct_26.05.json"))}
    assert [(acct[i]["state"], acct[i]["het_job_id"], acct[i]["het_job_offset"]) for i in (13, 14, 15, 16)] == \
        [("COMPLETED", 13, 0), ("COMPLETED", 13, 1), ("RUNNING", 15, 0), ("RUNNING", 15, 1)]
    assert (acct[8]["state"], acct[8]["signal"], acct[5]["exit_code"]) == ("CANCELLED", 15, 3)
    # a hetjob cancelled before it ever ran has no het record in the database (het.job_id 0, offset unset)
    assert (acct[2]["state"], acct[2]["het_job_id"], acct[3]["het_job_offset"]) == ("CANCELLED", None, None)
    assert NH.live_jobs(run=lambda argv, **kw: proc(argv, text("squeue_26.05_hetjob_running.json"))) == \
        ["6", "7", "15", "16"]
    assert [r["job_id"] for r in S.parse_jobs(text("squeue_26.05_hetjob_running.json"), 16)] == ["15", "16"]


@pytest.mark.parametrize("name", ["squeue_26.05_all_states.json", "scontrol_show_job_26.05.json", "sacct_26.05.json",
                                  "sinfo_26.05.json", "scontrol_show_node_26.05.json"])
def test_26_05_prints_data_parser_v0_0_45_by_default(name):
    meta = fixture(name)["meta"]
    assert (meta["plugin"]["data_parser"], meta["slurm"]["release"]) == ("data_parser/v0.0.45", "26.05.5")


def test_a_state_flag_names_the_job_as_22_05_did():
    assert S.state_name(["RUNNING", "COMPLETING"]) == "COMPLETING"
    assert S.state_name(["PENDING", "REQUEUED"]) == "REQUEUED"
    assert S.state_name(["PENDING"]) == "PENDING" and S.state_name("RUNNING") == "RUNNING"


def test_unset_and_infinite_numbers_read_as_22_05_printed_them():
    job = S.canonical({"job_id": 9, "time_limit": {"set": True, "infinite": True, "number": 0},
                       "cpus": {"set": False, "infinite": False, "number": 0}})
    assert (job["time_limit"], job["cpus"]) == (0xFFFFFFFF, None)
    assert S.number(job["time_limit"], minimum=1) is None   # unlimited: no limit the hooks act on


@pytest.mark.parametrize("field,value,message", [
    ("job_state", {"current": "RUNNING"}, "field job_state: {'current': 'RUNNING'} is not a job state"),
    ("job_state", ["RUNNING", 3], "field job_state"),
    ("het_job_id", {"value": 6}, "field het_job_id: {'value': 6} is neither a number nor a number object"),
    ("time_limit", {"set": True, "number": "60"}, "field time_limit: '60' is not a number"),
    ("nodes", ["n1"], "field nodes: ['n1'] is not text"),
])
def test_a_job_layout_the_readers_do_not_know_is_refused_naming_the_field(field, value, message):
    data = fixture("squeue_24.11_all_states.json")
    data["jobs"][3][field] = value
    with pytest.raises(S.JobRecordError) as exc:
        S.load_jobs(json.dumps(data))
    assert str(exc.value).startswith("job 4 (squeue --json): ") and message in str(exc.value)


def test_the_nam_hook_finds_the_live_jobs_of_24_11():
    out = text("squeue_24.11_all_states.json")
    assert NH.live_jobs(run=lambda argv, **kw: proc(argv, out)) == ["6", "7"]


def test_the_delay_hook_reserves_for_a_24_11_leader():
    data = fixture("squeue_24.11_all_states.json")
    by_id = {j["job_id"]: j for j in data["jobs"]}
    leader, part = copy.deepcopy(by_id[4]), copy.deepcopy(by_id[5])
    now = 1_800_000_000
    leader.update(job_state=["RUNNING"], comment="", start_time={"set": True, "infinite": False, "number": now})
    part.update(job_id=5, job_state=["PENDING"], comment="msa:delay=0;delay_after=4", partition="esb",
                dependency="after:4(unfulfilled)", time_limit={"set": True, "infinite": True, "number": 0})
    calls = []

    def run(argv, **kwargs):
        calls.append(argv)
        return proc(argv, json.dumps({"jobs": [leader, part]}) if argv[0] == "squeue" else "")

    out = io.StringIO()
    opts = D.parser().parse_args(["prolog", "--sacct-tries", "1"])
    assert D.prolog({"SLURM_JOB_ID": "4"}, opts, out, run, clock=lambda: now) == 0
    create = [c for c in calls if c[1:3] == ["create", "reservation"]]
    assert create and create[0][3:5] == ["ReservationName=msa_delay_5", "StartTime=now"], (create, out.getvalue())
    assert D.delayed_record(S.canonical(part))["time_limit"] == D.MAX_MINUTES   # unlimited: the longest delay
    assert "job 5: 1 node(s) of esb reserved as msa_delay_5" in out.getvalue()


# --- nodes: sinfo --json, scontrol show nodes --json, slurmrestd's /nodes -------------------------------------------

def test_sinfo_of_24_11_groups_nodes_and_each_node_reads_alone():
    (n1,) = N.load_nodes(text("sinfo_24.11.json"))
    assert (n1["name"], n1["partitions"], n1["reason"]) == ("n1", ["cm", "esb"], "")
    assert N.state(n1) == ("mixed", ["PLANNED"])
    (alone,) = N.load_nodes(text("scontrol_show_node_24.11.json"), "scontrol show nodes --json")
    assert N.state(alone) == ("idle", ["PLANNED"]) and alone["cpus"] == 2   # captured after job 1 ended


def test_sinfo_of_26_05_and_its_node_record_read_alike():
    (n1,) = N.load_nodes(text("sinfo_26.05.json"))
    assert (n1["name"], n1["partitions"], n1["reason"], N.state(n1)) == ("n1", ["cm", "esb"], "", ("mixed", []))
    (alone,) = N.load_nodes(text("scontrol_show_node_26.05.json"), "scontrol show nodes --json")
    assert N.state(alone) == ("mixed", []) and alone["cpus"] == 2   # the FUTURE nodes c[2-8] are not listed
    assert H.node_state("n1", lambda argv: proc(argv, text("sinfo_26.05.json"))) == ("MIXED", "")


def test_the_health_check_reads_the_node_state_of_both_releases():
    old = json.dumps({"nodes": [{"name": "cm01", "state": "idle", "state_flags": ["DRAIN"], "reason": "msa: x"}]})
    assert H.node_state("cm01", lambda argv: proc(argv, old)) == ("IDLE+DRAIN", "msa: x")
    new = fixture("sinfo_24.11.json")
    new["sinfo"][0]["node"]["state"] = new["sinfo"][1]["node"]["state"] = ["IDLE", "DRAIN"]
    new["sinfo"][0]["reason"]["description"] = new["sinfo"][1]["reason"]["description"] = "msa: x"
    assert H.node_state("n1", lambda argv: proc(argv, json.dumps(new))) == ("IDLE+DRAIN", "msa: x")


@pytest.mark.parametrize("path,value,message", [
    (("node", "state"), "IDLE", "sinfo[0]: field node.state: 'IDLE' is not a list of state words"),
    (("nodes", "nodes"), "n1", "sinfo[0]: field nodes.nodes: 'n1' is not a list of node names"),
    (("reason", "description"), 3, "sinfo[0]: field reason.description: 3 is not text"),
])
def test_a_sinfo_layout_the_readers_do_not_know_is_refused_naming_the_field(path, value, message):
    data = fixture("sinfo_24.11.json")
    data["sinfo"][0][path[0]][path[1]] = value
    with pytest.raises(N.NodeRecordError, match=message.replace("[", r"\[").replace("]", r"\]")):
        N.load_nodes(json.dumps(data))


def test_a_node_state_of_another_kind_is_refused_naming_the_field():
    with pytest.raises(N.NodeRecordError, match="node n1: field state: {'current': 'IDLE'} is not a node state"):
        N.state({"name": "n1", "state": {"current": "IDLE"}})


def commands_of(release, cluster):
    """system_info's command runner, answering with the captures of ``release``."""
    table = {("sinfo", "--json"): text("sinfo_%s.json" % release),
             ("scontrol", "show", "nodes", "--json"): text("scontrol_show_node_%s.json" % release),
             ("scontrol", "-o", "show", "partitions"): text("scontrol_show_partitions_%s.txt" % release),
             ("scontrol", "-o", "show", "licenses"): text("scontrol_show_licenses_%s.txt" % release),
             ("scontrol", "show", "config"): "ClusterName             = %s\n" % cluster}
    return lambda argv: (0, table[tuple(argv)], "")


def test_system_info_reads_24_11_over_rest_and_the_commands_alike():
    answers = {"/slurm/v0.0.42/%s" % k: fixture("rest_v0.0.42_%s_24.11.json" % k)
               for k in ("nodes", "partitions", "licenses")}
    over_rest = SI.from_rest(answers.get, api_version="v0.0.42")
    over_cli = SI.from_cli(commands_of("24.11", "h35"))
    assert SI.validate(over_rest) == [] and SI.validate(over_cli) == []
    assert over_rest["cluster"] == over_cli["cluster"] == "h35"
    (node,) = over_rest["nodes"]
    assert (node["name"], node["cpus"], node["memory_mb"], node["partitions"]) == ("n1", 2, 1000, ["cm", "esb"])
    parts = {p["name"]: p for p in over_rest["partitions"]}
    # v0.0.42 has no partition flags: the default partition is known over the commands only
    assert (parts["cm"]["default"], parts["cm"]["max_time_minutes"], parts["esb"]["default"]) == (None, 60, None)
    assert [p["default"] for p in over_cli["partitions"]] == [True, False]
    assert over_rest["resources"]["gateways"] == {"total": 4, "used": 0, "free": 4}
    assert [dict(p, default=None) for p in over_cli["partitions"]] == over_rest["partitions"]
    for key in ("resources", "totals", "modules"):
        assert over_cli[key] == over_rest[key], key
    assert [dict(n, cpus_allocated=0, memory_allocated_mb=0) for n in over_cli["nodes"]] == \
        [dict(n, cpus_allocated=0, memory_allocated_mb=0) for n in over_rest["nodes"]]


def test_system_info_reads_the_commands_of_26_05():
    info = SI.from_cli(commands_of("26.05", "h26"))
    assert SI.validate(info) == [] and info["cluster"] == "h26"
    (node,) = info["nodes"]
    assert (node["name"], node["cpus"], node["memory_mb"], node["cpus_allocated"]) == ("n1", 2, 1000, 1)
    # 26.05 prints Topology=<name> and Exclusive= in each partition line; the partitions still list n1 only
    assert [(p["name"], p["default"], p["max_time_minutes"], p["nodes"]) for p in info["partitions"]] == \
        [("cm", True, 60, ["n1"]), ("esb", False, None, ["n1"])]
    assert info["resources"]["gateways"] == {"total": 4, "used": 0, "free": 4}


# --- slurmrestd: the API version of the release ---------------------------------------------------------------------

class FakeClient:
    """slurmrestd at one API version (``served``), answering ``ping`` with the fixture's meta and ``release``."""

    def __init__(self, served, release):
        self.served, self.release, self.calls = served, release, []

    def request(self, method, path, body=None, headers=None, expect=(200,), lookup=None):
        self.calls.append((method, path, body))
        if not path.startswith("/slurm/%s/" % self.served):
            raise RestError("HTTP 404", status=404, body={"errors": []})
        if path.endswith("/ping"):
            ping = fixture("rest_v0.0.42_ping_24.11.json")
            ping["meta"]["slurm"]["release"] = self.release
            return 200, ping, {}
        if path.endswith("/jobs"):
            return 200, fixture("rest_v0.0.42_jobs_24.11.json"), {}
        return 200, {"job_id": 31, "errors": [], "warnings": []}, {}


def transport(client):
    return RestTransport("https://mgmt01:6820", "alice", "tok", client=client)


def test_the_rest_client_speaks_v0_0_42_to_24_11_and_writes_its_job_descriptions():
    client = FakeClient("v0.0.42", "24.11.5")
    rest = transport(client)
    (sub,) = plan(validate({"name": "coupled", "components": [
        {"partition": "cm", "nodes": 1, "time": "1-00:10:30", "command": "hostname"},
        {"partition": "esb", "nodes": 2, "gres": "gpu:1", "command": "hostname"}]}))
    assert rest.submit(sub) == 31 and rest.api == "v0.0.42"
    assert [c[:2] for c in client.calls][0] == ("GET", "/slurm/v0.0.42/ping")
    method, path, body = client.calls[-1]
    assert (method, path) == ("POST", "/slurm/v0.0.42/job/submit")
    first, second = body["jobs"]
    # slurmrestd 24.11.5 refuses "00:10:00" ("Expected integer") and a dictionary environment, ignores "gres"
    assert first["time_limit"] == 24 * 60 + 11 and first["environment"] == ["PATH=/usr/local/bin:/usr/bin:/bin"]
    assert second["tres_per_node"] == "gres/gpu:1" and "gres" not in second
    assert {r["job_id"] for r in rest.jobs("alice")} == {1, 2, 3, 4, 5}


def test_an_unlimited_time_is_an_infinite_number_in_v0_0_42():
    props = job_properties([("partition", "cm"), ("time", "UNLIMITED")], api="v0.0.42")
    assert props["time_limit"] == {"set": True, "infinite": True, "number": 0}
    with pytest.raises(TransportError, match="--time=ten"):
        job_properties([("time", "ten")], api="v0.0.42")


def test_a_22_05_slurmrestd_is_spoken_to_in_v0_0_38():
    client = FakeClient("v0.0.38", "22.05.8")
    rest = transport(client)
    rest.cancel([12])
    assert [c[:2] for c in client.calls] == [("GET", "/slurm/v0.0.42/ping"), ("GET", "/slurm/v0.0.38/ping"),
                                             ("DELETE", "/slurm/v0.0.38/job/12")]


@pytest.mark.parametrize("served,release,message", [
    ("v0.0.42", "27.05.1", "Slurm 27.05 is not a release this collection supports"),
    ("v0.0.38", "21.08.8", "Slurm 21.08 is not a release this collection supports"),
    ("v0.0.41", "24.05.4", "serves none of the API versions this collection speaks (v0.0.42, v0.0.38"),
])
def test_a_slurmrestd_of_an_unsupported_release_is_refused_naming_it(served, release, message):
    rest = transport(FakeClient(served, release))
    with pytest.raises(SlurmRestError, match=message.replace("(", r"\(")) as exc:
        rest.ping()
    assert exc.value.kind == "protocol"
