# SPDX-License-Identifier: GPL-3.0-or-later
"""The reimage plan (issue 38): stale nodes by image hash, waves that never empty a partition, the scontrol command
line, and refusals naming the field and the value."""
from __future__ import annotations

import pytest

from ansible_collections.msa.hpc.plugins.module_utils import _reimage_plan as P

NEW = "a" * 12 + "b" * 52
OLD = "c" * 64
IMAGE = "localhost/msa-compute:" + NEW[:12]
PATTERN = r"localhost/msa-[a-z0-9-]+:[0-9a-f]{12}"


def slurm(partitions):
    """sinfo --json node records from partition -> nodes."""
    nodes = {}
    for partition, members in partitions.items():
        for node in members:
            nodes.setdefault(node, []).append(partition)
    return [{"name": n, "partitions": p} for n, p in nodes.items()]


def test_nodes_are_current_stale_or_unknown_by_the_hash_they_booted():
    running = {"cm10": {"hash": OLD}, "cm2": {"hash": NEW}, "cm1": {"hash": OLD}, "esb1": {}}
    result = P.plan(running, IMAGE, NEW, PATTERN, wave_size=8)
    assert (result["current"], result["stale"], result["unknown"]) == (["cm2"], ["cm1", "cm10"], ["esb1"])
    assert P.plan(running, IMAGE, NEW, PATTERN, wave_size=8, adopt=True)["stale"] == ["cm1", "cm10", "esb1"]


def test_nothing_to_do_gives_no_wave():
    result = P.plan({"cm1": {"hash": NEW}}, IMAGE, NEW, PATTERN)
    assert result["waves"] == [] and result["commands"] == [] and result["summary"] == "1 of 1 nodes run " + IMAGE


def test_waves_are_bounded_by_the_wave_size_in_name_order():
    running = {"cm%d" % i: {"hash": OLD} for i in range(1, 6)}
    assert P.plan(running, IMAGE, NEW, PATTERN, wave_size=2)["waves"] == [["cm1", "cm2"], ["cm3", "cm4"], ["cm5"]]


def test_no_wave_holds_every_node_of_a_partition_unless_asked():
    running = {n: {"hash": OLD} for n in ("cm1", "cm2", "cm3", "dam1", "dam2")}
    nodes = slurm({"cm": ["cm1", "cm2", "cm3"], "dam": ["dam1", "dam2"], "all": ["cm1", "cm2", "cm3", "dam1", "dam2"]})
    result = P.plan(running, IMAGE, NEW, PATTERN, wave_size=10, slurm_nodes=nodes)
    assert result["waves"] == [["cm1", "cm2", "dam1"], ["cm3", "dam2"]]
    for wave in result["waves"]:
        assert not {"cm1", "cm2", "cm3"} <= set(wave) and not {"dam1", "dam2"} <= set(wave)
    whole = P.plan(running, IMAGE, NEW, PATTERN, wave_size=10, slurm_nodes=nodes, whole_partition=True)
    assert whole["waves"] == [["cm1", "cm2", "cm3", "dam1", "dam2"]]


def test_a_partition_that_is_up_to_date_in_part_may_reboot_its_stale_rest_at_once():
    running = {"cm1": {"hash": NEW}, "cm2": {"hash": OLD}, "cm3": {"hash": OLD}}
    nodes = slurm({"cm": ["cm1", "cm2", "cm3"]})
    assert P.plan(running, IMAGE, NEW, PATTERN, wave_size=3, slurm_nodes=nodes)["waves"] == [["cm2", "cm3"]]


def test_a_one_node_partition_is_reimaged_alone():
    running = {"gpu1": {"hash": OLD}, "cm1": {"hash": OLD}}
    nodes = slurm({"gpu": ["gpu1"], "cm": ["cm1", "cm2"]})
    assert P.plan(running, IMAGE, NEW, PATTERN, wave_size=4, slurm_nodes=nodes)["waves"] == [["cm1", "gpu1"]]


def test_the_command_drains_first_resumes_after_and_names_the_image_in_the_reason():
    result = P.plan({"cm1": {"hash": OLD}, "cm2": {"hash": OLD}}, IMAGE, NEW, PATTERN, wave_size=2)
    assert result["commands"] == [["scontrol", "reboot", "ASAP", "nextstate=resume", "reason=msa-reimage " + IMAGE,
                                   "cm1,cm2"]]
    assert "cm[1-2] to reimage in 1 wave (cm[1-2])" in result["summary"]


@pytest.mark.parametrize("kwargs,message", [
    ({"image": "docker.io/evil:" + NEW[:12]}, "image: 'docker.io/evil:aaaaaaaaaaaa' does not match image_pattern"),
    ({"image": "localhost/msa-compute:latest"}, "image: 'localhost/msa-compute:latest' does not match"),
    ({"image": "localhost/msa-compute:" + "d" * 12}, "is not tagged with the first 12 characters of image_hash"),
    ({"image_hash": "xyz"}, "image_hash: 'xyz' is not a sha256"),
    ({"wave_size": 0}, "wave_size: 0 is not a whole number of at least 1"),
    ({"wave_size": True}, "wave_size: True"),
    ({"running": {"cm1;reboot": {"hash": OLD}}}, r"nodes: 'cm1;reboot' is not a node name"),
    ({"running": {"cm1,cm2": {"hash": OLD}}}, r"nodes: 'cm1,cm2' is not a node name"),
    ({"running": {"cm1": "yes"}}, "nodes: cm1: 'yes' is not the node's image description"),
    ({"running": ["cm1"]}, r"nodes: \['cm1'\] is not a mapping"),
    ({"slurm_nodes": [{"name": "cm2", "partitions": ["cm"]}]}, "nodes: cm1 are not Slurm nodes"),
])
def test_bad_input_is_refused_naming_the_field_and_the_value(kwargs, message):
    args = {"running": {"cm1": {"hash": OLD}}, "image": IMAGE, "image_hash": NEW, "image_pattern": PATTERN,
            "wave_size": 1}
    args.update(kwargs)
    with pytest.raises(P.PlanError, match=message):
        P.plan(**args)
