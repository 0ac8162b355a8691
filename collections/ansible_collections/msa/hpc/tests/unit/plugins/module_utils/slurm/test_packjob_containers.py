# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

"""Tests of container_image in pack jobs: a component's command runs through msa-container inside the image."""

import shlex

import pytest

from ansible_collections.msa.hpc.plugins.module_utils.slurm.model import (
    CONTAINER_WRAPPER, PackJobError, container_command, validate)
from ansible_collections.msa.hpc.plugins.module_utils.slurm.render import estimate_plan, plan

SYSTEM = {"partitions": {"cm": {"nodes": 2}, "esb": {"nodes": 4}, "dam": {"nodes": 2}}}


def _hetjob(**esb):
    return {"name": "mixed", "components": [
        {"partition": "cm", "nodes": 1, "command": "hostname"},
        dict({"partition": "esb", "nodes": 1, "command": "cat /etc/msa-demo-release"}, **esb)]}


def _problems(job):
    with pytest.raises(PackJobError) as info:
        validate(job, SYSTEM)
    return info.value.problems


def test_hetjob_runs_the_cm_part_on_the_host_and_the_esb_part_in_the_container():
    (sub,) = plan(validate(_hetjob(container_image="msa-demo:bookworm"), SYSTEM))
    last = sub["script"].splitlines()[-1]
    assert last == ("srun --het-group=0 hostname : --het-group=1 msa-container msa-demo:bookworm -- "
                    "cat /etc/msa-demo-release")


def test_separate_launch_wraps_only_the_containerised_component():
    (sub,) = plan(validate(dict(_hetjob(container_image="msa-demo:bookworm"), launch="separate"), SYSTEM))
    steps = [line for line in sub["script"].splitlines() if line.startswith("srun")]
    assert steps == ["srun --het-group=0 hostname &",
                     "srun --het-group=1 msa-container msa-demo:bookworm -- cat /etc/msa-demo-release &"]


def test_a_single_containerised_component_is_one_wrapped_srun():
    job = {"name": "one", "components": [{"partition": "esb", "container_image": "msa-demo:bookworm",
                                          "command": ["sh", "-c", "exit 3"]}]}
    (sub,) = plan(validate(job, SYSTEM))
    assert sub["script"].splitlines()[-1] == "srun msa-container msa-demo:bookworm -- sh -c 'exit 3'"


def test_delayed_and_module_list_components_run_in_their_image():
    job = _hetjob()
    job["components"].append({"partition": "dam", "delay": 1, "command": "./analyse",
                              "container_image": "tools/ana:2"})
    subs = plan(validate(job, SYSTEM))
    assert subs[1]["script"].splitlines()[-1] == "srun msa-container tools/ana:2 -- ./analyse"
    spec = validate({"name": "alt", "module_list": [
        {"partition": "esb", "command": "./app", "container_image": "app:1"},
        {"partition": "cm", "command": "./app"}]}, SYSTEM)
    alternatives = estimate_plan(spec)   # an image makes another shape: each is estimated, one submitted
    assert alternatives[0]["script"].splitlines()[-1] == "srun msa-container app:1 -- ./app"
    assert alternatives[1]["script"].splitlines()[-1] == "srun ./app"
    assert plan(spec, chosen=0)[0]["script"] == alternatives[0]["script"]


def test_srun_options_written_with_equals_stay_before_the_wrapper():
    assert container_command("app:1", "--mpi=pmi2 --cpu-bind=cores ./app -x") == \
        "--mpi=pmi2 --cpu-bind=cores %s app:1 -- ./app -x" % CONTAINER_WRAPPER


def test_the_wrapper_line_parses_back_to_image_and_program_arguments():
    line = container_command("app:1", "python3 -c 'print(1)'")
    assert shlex.split(line) == [CONTAINER_WRAPPER, "app:1", "--", "python3", "-c", "print(1)"]


@pytest.mark.parametrize("image, fragment", [
    ("Bad:Name", "container_image: 'Bad:Name' is not an image name"),
    ("app:1;rm", "container_image: 'app:1;rm' is not an image name"),
    ("../etc:x", "container_image: '../etc:x' is not an image name"),
    ("a b", "container_image: 'a b' is not an image name"),
])
def test_bad_image_names_are_refused_naming_component_and_value(image, fragment):
    problems = _problems(_hetjob(container_image=image))
    assert any(p.startswith("components[1].") and fragment in p for p in problems), problems


def test_an_srun_option_that_cannot_be_told_from_the_program_is_refused():
    problems = _problems(_hetjob(container_image="msa-demo:bookworm", command="-n 2 ./app"))
    assert any(p.startswith("components[1].command: with container_image '-n 2 ./app'") for p in problems), problems


def test_a_script_with_container_image_is_refused_with_the_wrapper_to_use():
    job = {"name": "s", "components": [{"partition": "esb", "script": "echo hi\n", "container_image": "app:1"}]}
    problems = _problems(job)
    assert problems == ["components[0].container_image: 'app:1' applies to a command; in a script run "
                        "msa-container app:1 -- PROGRAM yourself"]


def test_components_without_an_image_are_unchanged():
    (plain,) = plan(validate(_hetjob(), SYSTEM))
    assert CONTAINER_WRAPPER not in plain["script"]
