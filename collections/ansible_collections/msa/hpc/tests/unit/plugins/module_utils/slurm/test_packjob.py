# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

"""Tests of the pack-job logic: validation, sbatch scripts and argv, the delay switch, module lists, parsing."""

import os
import re

import pytest

from ansible_collections.msa.hpc.plugins.module_utils import _jobopts as J
from ansible_collections.msa.hpc.plugins.module_utils.slurm.cli import CliTransport
from ansible_collections.msa.hpc.plugins.module_utils.slurm.job import (
    GATEWAY_OPTIONS, LEADER_PLACEHOLDER, NOT_CHOSEN, PackJobError, parse_comment, validate)
from ansible_collections.msa.hpc.plugins.module_utils.slurm.modulelist import (
    choose, expected_slowdown, parse_test_only, partition_list, same_shape)
from ansible_collections.msa.hpc.plugins.module_utils.slurm.records import (
    TransportError, parse_sacct_json, parse_sbatch_id, parse_scontrol_show_job, parse_squeue_json)
from ansible_collections.msa.hpc.plugins.module_utils.slurm.render import estimate_plan, fill_leader, licenses, plan
from ansible_collections.msa.hpc.plugins.module_utils.slurm.results import cancel_targets, find_ids, results

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(__file__)), "fixtures", "slurm")
SYSTEM = {"partitions": {"cm": {"nodes": 4, "max_time": "1-00:00:00", "cpus_per_node": 24},
                         "booster": {"nodes": 8, "module": "esb", "gres": {"gpu": 1}}},
          "gateways": 2, "nam": "1TiB", "gce": True}


def _fixture(name):
    with open(os.path.join(FIXTURES, name)) as handle:
        return handle.read()


def _job(**extra):
    job = {"name": "coupled", "components": [
        {"partition": "cm", "nodes": 1, "ntasks": 2, "time": "30", "command": "./hello_cluster"},
        {"module": "esb", "nodes": 2, "ntasks": 2, "gres": "gpu:1", "command": "./hello_booster"}]}
    job.update(extra)
    return job


def _problems(job, system=None):
    system = SYSTEM if system is None else system
    with pytest.raises(PackJobError) as info:
        validate(job, system)
    return info.value.problems


# --- scripts and argv ---

def test_hetjob_script_has_one_sbatch_block_per_component_separated_by_hetjob():
    (sub,) = plan(validate(_job(), SYSTEM))
    assert sub["argv"] == ["sbatch", "--parsable"]
    lines = sub["script"].splitlines()
    assert lines[0] == "#!/bin/bash"
    sbatch = [line for line in lines if line.startswith("#SBATCH")]
    assert sbatch == ["#SBATCH --job-name=coupled", "#SBATCH --partition=cm", "#SBATCH --nodes=1",
                      "#SBATCH --ntasks=2", "#SBATCH --time=30", "#SBATCH hetjob", "#SBATCH --job-name=coupled",
                      "#SBATCH --partition=booster", "#SBATCH --nodes=2", "#SBATCH --ntasks=2", "#SBATCH --gres=gpu:1"]
    assert lines[-1] == "srun --het-group=0 ./hello_cluster : --het-group=1 ./hello_booster"


def test_sbatch_directives_all_come_before_the_first_command():
    (sub,) = plan(validate(_job(gateways=1, environment={"X": "1"}), SYSTEM))
    lines = sub["script"].splitlines()
    first_command = next(i for i, line in enumerate(lines) if line and not line.startswith("#"))
    assert all(not line.startswith("#SBATCH") for line in lines[first_command:])


def test_separate_launch_runs_one_step_per_component_and_returns_the_first_failure():
    (sub,) = plan(validate(_job(launch="separate"), SYSTEM))
    assert "srun --het-group=0 ./hello_cluster &" in sub["script"]
    assert "srun --het-group=1 ./hello_booster &" in sub["script"]
    assert sub["script"].rstrip().endswith('exit "$msa_rc"')


def test_a_single_component_is_a_plain_job_with_srun():
    (sub,) = plan(validate({"name": "one", "components": [{"partition": "cm", "command": ["./app", "a b"]}]}, SYSTEM))
    assert "hetjob" not in sub["script"]
    assert sub["script"].splitlines()[-1] == "srun ./app 'a b'"


def test_the_first_components_script_drives_the_job():
    job = _job()
    job["components"][0] = {"partition": "cm", "script": "#!/bin/bash\nsrun --het-group=0 a : --het-group=1 b\n"}
    del job["components"][1]["command"]
    (sub,) = plan(validate(job, SYSTEM))
    assert sub["script"].count("#!/bin/bash") == 1
    assert sub["script"].rstrip().endswith("srun --het-group=0 a : --het-group=1 b")


def test_account_qos_constraint_cpus_and_job_options_reach_the_script():
    job = _job(account="proj", qos="high", chdir="/home/alice/run", output="out-%j.txt")
    job["components"][0].update(cpus_per_task=4, constraint="skylake&ib")
    script = plan(validate(job, SYSTEM))[0]["script"]
    for line in ("#SBATCH --cpus-per-task=4", "#SBATCH --constraint=skylake&ib", "#SBATCH --account=proj",
                 "#SBATCH --qos=high", "#SBATCH --chdir=/home/alice/run", "#SBATCH --output=out-%j.txt"):
        assert line in script
    assert script.count("--account=proj") == 2 and script.count("--chdir=") == 1


def test_environment_is_exported_quoted():
    script = plan(validate(_job(environment={"GREETING": "hello world", "Q": "it's"}), SYSTEM))[0]["script"]
    assert "export GREETING='hello world'" in script
    assert "export Q='it'\"'\"'s'" in script


def test_gateways_become_a_licence_a_comment_and_environment_for_the_prolog():
    job = _job(gateways=2, gw_file="/home/alice/route", gw_plugin="lru", gw_cleanup=True)
    spec = validate(job, SYSTEM)
    script = plan(spec)[0]["script"]
    assert licenses(spec) == "gateway:2"
    first_block = script.split("#SBATCH hetjob")[0]
    assert "#SBATCH --licenses=gateway:2" in first_block
    comment_line = next(line for line in first_block.splitlines() if line.startswith("#SBATCH --comment="))
    fields = parse_comment(comment_line[len("#SBATCH --comment="):])
    assert fields == {"gw_num": "2", "gw_file": "/home/alice/route", "gw_plugin": "lru", "gw_cleanup": "1"}
    for option, (_key, variable, _spank) in GATEWAY_OPTIONS.items():
        assert "export %s=" % variable in script, option
    assert "--licenses" not in script.split("#SBATCH hetjob")[1]


def test_nam_asks_licences_in_gib_rounded_up_and_carries_the_exact_size():
    spec = validate(_job(nam="100GB"), SYSTEM)  # GB is a power of 1024, as Slurm reads it: 100 GiB
    assert licenses(spec) == "nam:100"
    script = plan(spec)[0]["script"]
    assert "nam_bytes=107374182400" in script and "export MSA_NAM_BYTES=107374182400" in script
    spec = validate(_job(nam="1537M"), SYSTEM)
    assert licenses(spec) == "nam:2" and "nam_bytes=%d" % (1537 << 20) in plan(spec)[0]["script"]


def test_gce_asks_one_licence():
    spec = validate(_job(gce=True, gateways=1, nam="1GiB"), SYSTEM)
    assert licenses(spec) == "gateway:1,nam:1,gce:1"


def test_container_image_is_carried_through():
    job = _job()
    job["components"][1]["container_image"] = "localhost/app:1"
    spec = validate(job, SYSTEM)
    assert spec["components"][1]["container_image"] == "localhost/app:1"
    assert "# container_image[1]: localhost/app:1" in plan(spec)[0]["script"]


def test_a_delayed_component_is_its_own_job_depending_on_the_first_job_start():
    job = _job()
    job["components"].append({"partition": "cm", "nodes": 1, "delay": 55, "command": "./late"})
    subs = plan(validate(job, SYSTEM))
    assert [s["role"] for s in subs] == ["main", "delayed"]
    assert subs[0]["script"].count("#SBATCH --partition=") == 2
    delayed = fill_leader(subs[1], 4321)
    assert delayed["argv"] == ["sbatch", "--parsable", "--dependency=after:4321+55"]
    assert "#SBATCH --comment=msa:delay=55;delay_after=4321;component=2" in delayed["script"]
    # the controller's delay hook reads it as it reads what job_submit.lua writes for sbatch --delay: reserved alike
    assert J.decode_delay("msa:delay=55;delay_after=4321;component=2") == {"delay": 55, "delay_after": "4321"}
    assert "squeue --noheader --jobs=4321" in delayed["script"]
    assert LEADER_PLACEHOLDER not in delayed["script"] and delayed["script"].rstrip().endswith("srun ./late")


def test_delay_accepts_a_slurm_time():
    job = _job()
    job["components"][1]["delay"] = "1:30:00"
    assert plan(validate(job, SYSTEM))[1]["argv"][-1].endswith("+90")


def test_module_list_of_one_shape_is_one_job_with_a_partition_list():
    # the job record sbatch --module-list=booster,cm gets from job_submit.lua: nothing held, nothing to arbitrate
    job = {"name": "anywhere", "gateways": 1, "module_list": [
        {"partition": "booster", "nodes": 2, "time": 5, "command": "./app"},
        {"partition": "cm", "nodes": 2, "time": 5, "command": "./app"},
        {"partition": "booster", "nodes": 2, "time": 5, "command": "./app"}]}
    spec = validate(job, SYSTEM)
    assert same_shape(spec["module_list"]) and partition_list(spec["module_list"]) == "booster,cm"
    (sub,) = plan(spec)
    assert sub["role"] == "main" and sub["components"] == [0, 1, 2] and sub["argv"] == ["sbatch", "--parsable"]
    assert "#SBATCH --partition=booster,cm\n" in sub["script"] and "#SBATCH --licenses=gateway:1" in sub["script"]
    assert "hold" not in sub["script"] and "scancel" not in sub["script"]
    assert sub["script"].rstrip().endswith("srun ./app")


def test_module_list_of_different_shapes_submits_only_the_chosen_one():
    job = {"name": "anywhere", "module_list": [
        {"partition": "booster", "nodes": 4, "ntasks": 8, "time": 5, "command": "./app"},
        {"partition": "cm", "nodes": 2, "ntasks": 8, "time": 7, "command": "./app"}]}
    spec = validate(job, SYSTEM)
    assert not same_shape(spec["module_list"])
    estimates = estimate_plan(spec)
    assert [e["argv"] for e in estimates] == [["sbatch", "--test-only"]] * 2
    assert "#SBATCH --partition=cm\n" in estimates[1]["script"] and "#SBATCH --nodes=2" in estimates[1]["script"]
    (sub,) = plan(spec, chosen=1)
    assert sub["components"] == [1] and sub["script"] == estimates[1]["script"]
    with pytest.raises(ValueError, match="chosen"):
        plan(spec)


TEST_ONLY = "sbatch: Job 4711 to start at 2026-11-26T11:30:00 using 8 processors on nodes cm[01-02] in partition cm\n"


@pytest.mark.parametrize("text, fields", [
    (TEST_ONLY, {"job_id": 4711, "start": "2026-11-26T11:30:00", "cpus": 8, "nodes": "cm[01-02]", "partition": "cm"}),
    ("sbatch: Job 12 to start at 2026-01-02T03:04:05 using 1 processors on nodes esb01 in partition esb",
     {"job_id": 12, "start": "2026-01-02T03:04:05", "cpus": 1, "nodes": "esb01", "partition": "esb"}),
])
def test_parse_test_only_reads_slurms_estimate(text, fields):
    got = parse_test_only(text, to_epoch=lambda t: 1000)
    assert got == dict(fields, start_epoch=1000)


@pytest.mark.parametrize("text, says", [
    # what sbatch 22.05 printed on dev2 for -p cm -N 9 (the partition has 2 nodes), exit 1
    ("allocation failure: Requested node configuration is not available\n",
     "allocation failure: Requested node configuration is not available"),
    ("sbatch: error: Batch job submission failed: Requested node configuration is not available\n",
     "Requested node configuration is not available"),
    ("srun: error: Unable to allocate resources: Requested time limit is invalid (missing or exceeds some limit)",
     "Unable to allocate resources: Requested time limit is invalid"),
    ("sbatch: error: --module-list=cm,gpu: no module gpu\nsbatch: error: Batch job submission failed: Unspecified",
     "--module-list=cm,gpu: no module gpu"),
    ("", "printed nothing"),
    ("something else entirely", "something else entirely"),
])
def test_parse_test_only_reports_why_slurm_cannot_run_it(text, says):
    with pytest.raises(TransportError, match=re.escape(says)):
        parse_test_only(text)


def _alts(*shapes):
    return [{"index": i, "partition": p, "nodes": n, "time_minutes": t} for i, (p, n, t) in enumerate(shapes)]


def _est(start_epoch, partition="x"):
    return {"start_epoch": start_epoch, "start": "T%d" % start_epoch, "partition": partition}


def test_choose_takes_the_lowest_expected_slowdown_not_the_earliest_start():
    # booster starts at once for 60 min (slowdown 1); cm in 10 min for 10 min (slowdown 2)
    alts = _alts(("cm", 1, 10), ("booster", 1, 60))
    chosen, ranking = choose(alts, {0: _est(1600, "cm"), 1: _est(1000, "booster")}, now=1000)
    assert chosen == 1 and [r["index"] for r in ranking] == [1, 0]
    assert ranking[0]["slowdown"] == 1.0 and ranking[1]["slowdown"] == 2.0 and ranking[1]["wait"] == 600


def test_choose_ties_to_the_shorter_request_then_to_the_list_order():
    alts = _alts(("esb", 4, 10), ("cm", 2, 10), ("dam", 2, 10))
    chosen, ranking = choose(alts, {i: _est(1000) for i in range(3)}, now=1000)
    assert chosen == 1 and [r["index"] for r in ranking] == [1, 2, 0]


def test_choose_skips_alternatives_slurm_cannot_run_and_fails_when_none_can():
    alts = _alts(("esb", 9, 10), ("cm", 1, 10))
    chosen, ranking = choose(alts, {0: "sbatch --test-only: Requested node configuration is not available",
                                    1: _est(1300)}, now=1000)
    assert chosen == 1 and ranking[-1]["index"] == 0 and "node configuration" in ranking[-1]["error"]
    with pytest.raises(TransportError, match=r"module_list\[0\] \(esb\): .*node configuration.*module_list\[1\]"):
        choose(alts, {0: "sbatch --test-only: Requested node configuration is not available", 1: "down"}, now=0)


def test_choose_needs_a_finite_requested_time():
    alts = _alts(("esb", 1, None), ("cm", 1, 10))
    chosen, ranking = choose(alts, {0: _est(0), 1: _est(5000)}, now=0)
    assert chosen == 1 and "give module_list[0].time" in ranking[-1]["error"]


def test_expected_slowdown_counts_a_start_in_the_past_as_now():
    assert expected_slowdown(-30, 2) == 1.0 and expected_slowdown(120, 2) == 2.0


# --- validation ---

@pytest.mark.parametrize("mutate, expected", [
    (lambda j: j["components"][0].update(partition="dam"), "components[0].partition: 'dam' is not a partition of this system"),
    (lambda j: j["components"][1].update(module="dam"), "components[1].module: 'dam' is not a module of this system"),
    (lambda j: j["components"][0].update(nodes=0), "components[0].nodes: 0 is below 1"),
    (lambda j: j["components"][0].update(nodes=5), "components[0].nodes: 5 asked but partition 'cm' has only 4 nodes"),
    (lambda j: j["components"][1].update(nodes="two"), "components[1].nodes: 'two' is not a whole number"),
    (lambda j: j["components"][0].update(time="1:2:3:4"), "components[0].time: '1:2:3:4' is not a Slurm time"),
    (lambda j: j["components"][0].update(time="10:75"), "components[0].time: '10:75': seconds must be below 60"),
    (lambda j: j["components"][0].update(time="2-00:00:00"), "components[0].time: '2-00:00:00' is longer than the MaxTime"),
    (lambda j: j["components"][0].update(ntasks=0), "components[0].ntasks: 0 is below 1"),
    (lambda j: j["components"][1].update(ntasks=1), "components[1].ntasks: 1 tasks cannot spread over 2 nodes"),
    (lambda j: j["components"][0].update(cpus_per_task=13), "components[0].cpus_per_task: 26 CPUs asked"),
    (lambda j: j["components"][1].update(gres="gpu:2"), "components[1].gres: 'gpu:2' asks 2 gpu per node"),
    (lambda j: j["components"][1].update(gres="gpu::"), "components[1].gres: 'gpu::' is not a gres"),
    (lambda j: j["components"][0].update(constraint="a b"), "components[0].constraint: 'a b' is empty or holds"),
    (lambda j: j["components"][0].update(delay=5), "components[0].delay: 5 is not allowed here"),
    (lambda j: j["components"][1].update(delay="soon"), "components[1].delay: 'soon' is not a Slurm time"),
    (lambda j: j["components"][1].pop("command"), "components[1].command: missing"),
    (lambda j: j["components"][1].update(script="echo"), "components[1].script: give command or script, not both"),
    (lambda j: j["components"][0].update(command=""), "components[0].command: '' must be one non-empty line"),
    (lambda j: j["components"][0].update(colour="red"), "components[0].colour: unknown field"),
    (lambda j: j["components"][0].pop("partition"), "components[0].partition: missing"),
    (lambda j: j["components"][0].update(module="cm"), "components[0].module: give partition or module, not both"),
    (lambda j: j.update(name="has space"), "name: 'has space' is not a job name"),
    (lambda j: j.update(gateways=3), "gateways: 3 asked but the system has only 2"),
    (lambda j: j.update(gateways=-1), "gateways: -1 is below 0"),
    (lambda j: j.update(gw_file="/tmp/route"), "gw_file: '/tmp/route' is set but gateways is 0"),
    (lambda j: j.update(gateways=1, gw_file="/tmp/a;b"), "gw_file: '/tmp/a;b' is not a usable file name"),
    (lambda j: j.update(gateways=1, gw_plugin="a b"), "gw_plugin: 'a b' is not a bare name"),
    (lambda j: j.update(nam="2TiB"), "nam: '2TiB' asked but the NAM capacity is '1TiB' (1024 GiB)"),
    (lambda j: j.update(nam="plenty"), "nam: 'plenty' is not a size"),
    (lambda j: j.update(environment={"1BAD": "x"}), "environment.1BAD: '1BAD' is not a variable name"),
    (lambda j: j.update(launch="parallel"), "launch: 'parallel' is not one of joint, separate"),
    (lambda j: j.update(output="a b.txt"), "output: 'a b.txt' holds a space"),
    (lambda j: j.update(module_list=[{"partition": "cm", "command": "x"}]), "module_list: give components or module_list"),
    (lambda j: j.pop("components"), "components: missing"),
    (lambda j: j.update(colour="red"), "colour: unknown field"),
])
def test_validation_names_component_field_and_value(mutate, expected):
    job = _job()
    mutate(job)
    problems = _problems(job)
    assert any(expected in p for p in problems), problems


@pytest.mark.parametrize("key, value, expected", [
    ("gateways", 1, "gateways: 1 asked but the system has no gateway nodes"),
    ("nam", "1GiB", "nam: '1GiB' asked but the system has no NAM"),
    ("gce", True, "gce: true asked but the system has no GCE"),
])
def test_global_resources_asked_where_the_system_has_none_are_refused(key, value, expected):
    system = dict(SYSTEM, gateways=0, nam=0, gce=False)
    assert expected in _problems(_job(**{key: value}), system)


def test_a_script_on_a_later_component_is_refused_when_the_first_has_one():
    job = _job()
    job["components"][0] = {"partition": "cm", "script": "srun a"}
    problems = _problems(job)
    assert any(p.startswith("components[1].command: the first component's script drives the job") for p in problems)


def test_scripts_with_sbatch_lines_are_refused():
    job = _job()
    job["components"][0] = {"partition": "cm", "script": "#!/bin/bash\n#SBATCH -N 4\nsrun a"}
    del job["components"][1]["command"]
    assert any("components[0].script: line 2 holds an #SBATCH directive" in p for p in _problems(job))


def test_module_list_alternatives_cannot_be_delayed_and_need_a_command():
    job = {"name": "x", "module_list": [{"partition": "cm", "delay": 3, "command": "a"}, {"partition": "cm"}]}
    problems = _problems(job)
    assert any(p.startswith("module_list[0].delay: 3 is not allowed here") for p in problems)
    assert "module_list[1].command: missing (give command or script)" in problems


def test_without_system_partitions_any_partition_name_is_accepted():
    spec = validate({"name": "x", "components": [{"partition": "whatever", "command": "a"}]})
    assert spec["components"][0]["partition"] == "whatever"


def test_every_problem_is_reported_at_once():
    job = _job(gateways=9)
    job["components"][0].update(nodes=0, time="bad")
    assert len(_problems(job)) >= 3


# --- parsing ---

def test_parse_squeue_json_of_a_hetjob():
    records = {r["job_id"]: r for r in parse_squeue_json(_fixture("squeue_22.05_hetjob.json"))}
    assert records[1235] == {"job_id": 1235, "name": "coupled", "user": "alice", "state": "RUNNING",
                             "het_job_id": 1234, "het_job_offset": 1, "nodes": "esb[01-02]", "exit_code": 0,
                             "signal": 0, "partition": "esb", "comment": "msa:gw_num=2;gw_cleanup=1"}
    assert records[1236]["het_job_id"] is None and records[1236]["het_job_offset"] is None
    assert records[1236]["nodes"] == ""
    assert (records[1100]["state"], records[1100]["exit_code"]) == ("COMPLETED", 1)   # raw wait status 256


def test_parse_sacct_json_of_a_hetjob():
    records = {r["job_id"]: r for r in parse_sacct_json(_fixture("sacct_22.05_hetjob.json"))}
    assert (records[1235]["state"], records[1235]["exit_code"], records[1235]["het_job_offset"]) == ("FAILED", 1, 1)
    assert records[1236]["nodes"] == "" and records[1236]["signal"] == 9
    assert records[1234]["comment"] == "msa:gw_num=2;gw_cleanup=1"


def test_parse_scontrol_show_job_detail_output():
    records = parse_scontrol_show_job(_fixture("scontrol_show_job_22.05_hetjob.txt"))
    assert [(r["job_id"], r["het_job_id"], r["het_job_offset"]) for r in records] == [(1234, 1234, 0), (1235, 1234, 1)]
    assert records[0]["user"] == "alice" and records[0]["nodes"] == "cm01"
    assert records[1]["nodes"] == "esb[01-02]" and (records[1]["state"], records[1]["exit_code"]) == ("FAILED", 1)
    assert records[0]["comment"] == "msa:gw_num=2;gw_cleanup=1"


def test_newer_wrapped_numbers_and_state_lists_are_read():
    text = ('{"jobs": [{"job_id": 7, "name": "n", "user_name": "u", "job_state": ["RUNNING"], "nodes": "cm01",'
            ' "het_job_id": {"set": true, "infinite": false, "number": 0},'
            ' "het_job_offset": {"set": false, "infinite": false, "number": 0},'
            ' "exit_code": {"status": ["SUCCESS"], "return_code": {"set": true, "infinite": false, "number": 0}}}]}')
    (record,) = parse_squeue_json(text)
    assert (record["state"], record["het_job_id"], record["exit_code"]) == ("RUNNING", None, 0)


def test_json_errors_from_slurm_are_reported():
    with pytest.raises(TransportError, match="Invalid user"):
        parse_squeue_json('{"errors": [{"error": "Invalid user", "error_number": 1}], "jobs": []}')
    with pytest.raises(TransportError, match="no JSON"):
        parse_squeue_json("squeue: error: unrecognized option '--json'")


def test_parse_sbatch_id_forms():
    assert parse_sbatch_id("1234\n") == 1234
    assert parse_sbatch_id("1234;msa\n") == 1234
    assert parse_sbatch_id("Submitted batch job 99\n") == 99
    with pytest.raises(TransportError):
        parse_sbatch_id("sbatch: error: Batch job submission failed")


# --- job state ---

def _delayed_spec():
    job = _job()
    job["components"].append({"partition": "booster", "nodes": 1, "delay": 55, "command": "./late"})
    return validate(job, SYSTEM)


def test_find_ids_groups_a_live_hetjob_and_its_delayed_part_for_this_user_only():
    records = parse_squeue_json(_fixture("squeue_22.05_hetjob.json"))
    ids = find_ids(_delayed_spec(), records, "alice")
    assert ids == {"leader": 1234, "delayed": {2: 1236}, "alternatives": []}
    assert find_ids(_delayed_spec(), records, "carol") is None


def test_find_ids_ignores_finished_jobs_of_the_same_name():
    records = [r for r in parse_squeue_json(_fixture("squeue_22.05_hetjob.json")) if r["job_id"] == 1100]
    assert find_ids(validate({"name": "old", "components": [{"partition": "cm", "command": "a"}]}), records, "alice") is None


def test_results_per_component_with_states_nodes_and_exit_codes():
    records = parse_sacct_json(_fixture("sacct_22.05_hetjob.json"))
    res = results(_delayed_spec(), {"leader": 1234, "delayed": {2: 1236}, "alternatives": []}, records)
    comps = res["components"]
    assert [(c["index"], c["job_id"], c["role"], c["state"]) for c in comps] == [
        (0, 1234, "main", "COMPLETED"), (1, 1235, "main", "FAILED"), (2, 1236, "delayed", "CANCELLED")]
    assert comps[1]["node_list"] == ["esb01", "esb02"] and comps[1]["exit_code"] == 1
    assert res["finished"] and res["failed"] == [1, 2] and res["state"] == "FAILED"


def test_results_of_a_running_job_are_not_finished():
    records = parse_squeue_json(_fixture("squeue_22.05_hetjob.json"))
    res = results(_delayed_spec(), {"leader": 1234, "delayed": {2: 1236}, "alternatives": []}, records)
    assert not res["finished"] and res["state"] == "RUNNING"


def _alt(job_id, state, nodes, partition, exit_code=0):
    return {"job_id": job_id, "name": "anywhere", "user": "alice", "state": state, "het_job_id": None,
            "het_job_offset": None, "nodes": nodes, "exit_code": exit_code, "signal": 0, "partition": partition,
            "comment": ""}


ALT_SPEC = {"name": "anywhere", "module_list": [{"partition": "booster", "command": "a"}, {"partition": "cm", "command": "a"},
                                                {"partition": "cm", "command": "b"}]}
ONE_JOB = {"leader": 12, "delayed": {}, "alternatives": []}


def test_module_list_pending_with_a_partition_list_has_no_winner_yet():
    res = results(validate(ALT_SPEC, SYSTEM), ONE_JOB, [_alt(12, "PENDING", "", "booster,cm")])
    assert res["winner"] is None and res["job_id"] == 12 and res["state"] == "PENDING" and not res["finished"]
    assert [c["job_id"] for c in res["components"]] == [12, 12, 12]


def test_module_list_winner_is_the_alternative_of_the_partition_it_runs_in():
    res = results(validate(ALT_SPEC, SYSTEM), ONE_JOB, [_alt(12, "COMPLETED", "cm01", "cm")])
    assert res["winner"] == 1 and res["job_id"] == 12
    assert [c["chosen"] for c in res["components"]] == [False, True, False]
    assert [c["state"] for c in res["components"]] == [NOT_CHOSEN, "COMPLETED", NOT_CHOSEN]
    assert res["finished"] and not res["failed"] and res["state"] == "COMPLETED"


def test_module_list_failure_is_the_chosen_alternatives():
    res = results(validate(ALT_SPEC, SYSTEM), ONE_JOB, [_alt(12, "FAILED", "esb01", "booster", exit_code=2)])
    assert res["failed"] == [0] and res["state"] == "FAILED" and res["finished"]


def test_module_list_cancelled_before_it_started_is_finished_and_failed():
    res = results(validate(ALT_SPEC, SYSTEM), ONE_JOB, [_alt(12, "CANCELLED", "", "booster,cm")])
    assert res["finished"] and res["state"] == "CANCELLED" and res["winner"] is None


def test_module_list_job_is_found_as_the_newest_live_job_of_the_name():
    spec = validate(ALT_SPEC, SYSTEM)
    records = [_alt(5, "COMPLETED", "cm01", "cm"), _alt(11, "PENDING", "", "booster,cm")]
    assert find_ids(spec, records, "alice") == ONE_JOB | {"leader": 11}
    assert find_ids(spec, records[:1], "alice") is None


def test_cancel_targets_use_hetjob_leaders_and_skip_finished_and_foreign_jobs():
    records = parse_squeue_json(_fixture("squeue_22.05_hetjob.json"))
    assert cancel_targets(_delayed_spec(), records, "alice") == [1234, 1236]


# --- transport ---

class FakeRun:
    def __init__(self, answers):
        self.answers, self.calls = list(answers), []

    def __call__(self, argv, data=None):
        self.calls.append((argv, data))
        return self.answers.pop(0)


def test_cli_transport_sends_the_script_on_stdin_and_reads_the_id():
    run = FakeRun([(0, "4321\n", "")])
    assert CliTransport(run).submit({"argv": ["sbatch", "--parsable"], "script": "#!/bin/bash\n"}) == 4321
    assert run.calls == [(["sbatch", "--parsable"], "#!/bin/bash\n")]


def test_cli_transport_reports_a_failing_command_with_its_message():
    run = FakeRun([(1, "", "sbatch: error: invalid partition specified: dam")])
    with pytest.raises(TransportError, match="invalid partition specified: dam"):
        CliTransport(run).submit({"argv": ["sbatch", "--parsable"], "script": "x"})


def test_cli_transport_queries_and_cancels():
    run = FakeRun([(0, _fixture("squeue_22.05_hetjob.json"), ""), (0, "", ""),
                   (0, _fixture("sacct_22.05_hetjob.json"), "")])
    transport = CliTransport(run)
    assert len(transport.jobs("alice")) == 5
    transport.cancel([1234, 1236])
    assert len(transport.history([1234])) == 3
    assert [c[0] for c in run.calls] == [["squeue", "--json", "--all", "--states=all", "--user=alice"],
                                         ["scancel", "1234", "1236"], ["sacct", "--json", "--jobs=1234"]]


def test_cli_transport_estimates_with_test_only_and_reports_refusals():
    run = FakeRun([(0, "", TEST_ONLY), (1, "", "sbatch: error: Batch job submission failed: Invalid partition")])
    transport = CliTransport(run)
    assert transport.estimate({"argv": ["sbatch", "--test-only"], "script": "#!/bin/bash\n"})["partition"] == "cm"
    with pytest.raises(TransportError, match="Invalid partition"):
        transport.estimate({"argv": ["sbatch", "--test-only"], "script": "#!/bin/bash\n"})
    assert run.calls[0] == (["sbatch", "--test-only"], "#!/bin/bash\n")
