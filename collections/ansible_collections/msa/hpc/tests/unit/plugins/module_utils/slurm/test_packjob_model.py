# SPDX-License-Identifier: GPL-3.0-or-later
"""The job model: validation names component, field and value of every problem (slurm/model.py)."""
from __future__ import annotations

import pytest

from ansible_collections.msa.hpc.plugins.module_utils.slurm.model import validate
from ansible_collections.msa.hpc.tests.unit.plugins.module_utils.slurm.packjob_cases import SYSTEM, coupled_job, problems_of


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
    job = coupled_job()
    mutate(job)
    problems = problems_of(job)
    assert any(expected in p for p in problems), problems


@pytest.mark.parametrize("key, value, expected", [
    ("gateways", 1, "gateways: 1 asked but the system has no gateway nodes"),
    ("nam", "1GiB", "nam: '1GiB' asked but the system has no NAM"),
    ("gce", True, "gce: true asked but the system has no GCE"),
])
def test_global_resources_asked_where_the_system_has_none_are_refused(key, value, expected):
    system = dict(SYSTEM, gateways=0, nam=0, gce=False)
    assert expected in problems_of(coupled_job(**{key: value}), system)


def test_a_script_on_a_later_component_is_refused_when_the_first_has_one():
    job = coupled_job()
    job["components"][0] = {"partition": "cm", "script": "srun a"}
    problems = problems_of(job)
    assert any(p.startswith("components[1].command: the first component's script drives the job") for p in problems)


def test_scripts_with_sbatch_lines_are_refused():
    job = coupled_job()
    job["components"][0] = {"partition": "cm", "script": "#!/bin/bash\n#SBATCH -N 4\nsrun a"}
    del job["components"][1]["command"]
    assert any("components[0].script: line 2 holds an #SBATCH directive" in p for p in problems_of(job))


def test_module_list_alternatives_cannot_be_delayed_and_need_a_command():
    job = {"name": "x", "module_list": [{"partition": "cm", "delay": 3, "command": "a"}, {"partition": "cm"}]}
    problems = problems_of(job)
    assert any(p.startswith("module_list[0].delay: 3 is not allowed here") for p in problems)
    assert "module_list[1].command: missing (give command or script)" in problems


def test_without_system_partitions_any_partition_name_is_accepted():
    spec = validate({"name": "x", "components": [{"partition": "whatever", "command": "a"}]})
    assert spec["components"][0]["partition"] == "whatever"


def test_every_problem_is_reported_at_once():
    job = coupled_job(gateways=9)
    job["components"][0].update(nodes=0, time="bad")
    assert len(problems_of(job)) >= 3
