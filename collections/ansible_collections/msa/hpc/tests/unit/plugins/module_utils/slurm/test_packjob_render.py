# SPDX-License-Identifier: GPL-3.0-or-later
"""slurm_packjob's batch scripts and sbatch argv from the job model (slurm/render.py)."""
from __future__ import annotations

import pytest

from ansible_collections.msa.hpc.plugins.module_utils import _jobopts as J
from ansible_collections.msa.hpc.plugins.module_utils.slurm.model import (
    GATEWAY_OPTIONS, LEADER_PLACEHOLDER, parse_comment, validate)
from ansible_collections.msa.hpc.plugins.module_utils.slurm.modulelist import partition_list, same_shape
from ansible_collections.msa.hpc.plugins.module_utils.slurm.render import estimate_plan, fill_leader, licenses, plan
from ansible_collections.msa.hpc.tests.unit.plugins.module_utils.slurm.packjob_cases import SYSTEM, coupled_job


def test_hetjob_script_has_one_sbatch_block_per_component_separated_by_hetjob():
    (sub,) = plan(validate(coupled_job(), SYSTEM))
    assert sub["argv"] == ["sbatch", "--parsable"]
    lines = sub["script"].splitlines()
    assert lines[0] == "#!/bin/bash"
    sbatch = [line for line in lines if line.startswith("#SBATCH")]
    assert sbatch == ["#SBATCH --job-name=coupled", "#SBATCH --partition=cm", "#SBATCH --nodes=1",
                      "#SBATCH --ntasks=2", "#SBATCH --time=30", "#SBATCH hetjob", "#SBATCH --job-name=coupled",
                      "#SBATCH --partition=booster", "#SBATCH --nodes=2", "#SBATCH --ntasks=2", "#SBATCH --gres=gpu:1"]
    assert lines[-1] == "srun --het-group=0 ./hello_cluster : --het-group=1 ./hello_booster"


def test_sbatch_directives_all_come_before_the_first_command():
    (sub,) = plan(validate(coupled_job(gateways=1, environment={"X": "1"}), SYSTEM))
    lines = sub["script"].splitlines()
    first_command = next(i for i, line in enumerate(lines) if line and not line.startswith("#"))
    assert all(not line.startswith("#SBATCH") for line in lines[first_command:])


def test_separate_launch_runs_one_step_per_component_and_returns_the_first_failure():
    (sub,) = plan(validate(coupled_job(launch="separate"), SYSTEM))
    assert "srun --het-group=0 ./hello_cluster &" in sub["script"]
    assert "srun --het-group=1 ./hello_booster &" in sub["script"]
    assert sub["script"].rstrip().endswith('exit "$msa_rc"')


def test_a_single_component_is_a_plain_job_with_srun():
    (sub,) = plan(validate({"name": "one", "components": [{"partition": "cm", "command": ["./app", "a b"]}]}, SYSTEM))
    assert "hetjob" not in sub["script"]
    assert sub["script"].splitlines()[-1] == "srun ./app 'a b'"


def test_the_first_components_script_drives_the_job():
    job = coupled_job()
    job["components"][0] = {"partition": "cm", "script": "#!/bin/bash\nsrun --het-group=0 a : --het-group=1 b\n"}
    del job["components"][1]["command"]
    (sub,) = plan(validate(job, SYSTEM))
    assert sub["script"].count("#!/bin/bash") == 1
    assert sub["script"].rstrip().endswith("srun --het-group=0 a : --het-group=1 b")


def test_account_qos_constraint_cpus_and_job_options_reach_the_script():
    job = coupled_job(account="proj", qos="high", chdir="/home/alice/run", output="out-%j.txt")
    job["components"][0].update(cpus_per_task=4, constraint="skylake&ib")
    script = plan(validate(job, SYSTEM))[0]["script"]
    for line in ("#SBATCH --cpus-per-task=4", "#SBATCH --constraint=skylake&ib", "#SBATCH --account=proj",
                 "#SBATCH --qos=high", "#SBATCH --chdir=/home/alice/run", "#SBATCH --output=out-%j.txt"):
        assert line in script
    assert script.count("--account=proj") == 2 and script.count("--chdir=") == 1


def test_environment_is_exported_quoted():
    script = plan(validate(coupled_job(environment={"GREETING": "hello world", "Q": "it's"}), SYSTEM))[0]["script"]
    assert "export GREETING='hello world'" in script
    assert "export Q='it'\"'\"'s'" in script


def test_gateways_become_a_licence_a_comment_and_environment_for_the_prolog():
    job = coupled_job(gateways=2, gw_file="/home/alice/route", gw_plugin="lru", gw_cleanup=True)
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
    spec = validate(coupled_job(nam="100GB"), SYSTEM)  # GB is a power of 1024, as Slurm reads it: 100 GiB
    assert licenses(spec) == "nam:100"
    script = plan(spec)[0]["script"]
    assert "nam_bytes=107374182400" in script and "export MSA_NAM_BYTES=107374182400" in script
    spec = validate(coupled_job(nam="1537M"), SYSTEM)
    assert licenses(spec) == "nam:2" and "nam_bytes=%d" % (1537 << 20) in plan(spec)[0]["script"]


def test_gce_asks_one_licence():
    spec = validate(coupled_job(gce=True, gateways=1, nam="1GiB"), SYSTEM)
    assert licenses(spec) == "gateway:1,nam:1,gce:1"


def test_container_image_is_carried_through():
    job = coupled_job()
    job["components"][1]["container_image"] = "localhost/app:1"
    spec = validate(job, SYSTEM)
    assert spec["components"][1]["container_image"] == "localhost/app:1"
    assert "# container_image[1]: localhost/app:1" in plan(spec)[0]["script"]


def test_a_delayed_component_is_its_own_job_depending_on_the_first_job_start():
    job = coupled_job()
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
    job = coupled_job()
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
