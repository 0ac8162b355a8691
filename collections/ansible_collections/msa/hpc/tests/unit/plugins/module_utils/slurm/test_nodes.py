# SPDX-License-Identifier: GPL-3.0-or-later
"""The node reader: sinfo/scontrol --json and slurmrestd's answer, one state form across releases."""
from __future__ import annotations

import json

import pytest

from ansible_collections.msa.hpc.plugins.module_utils.slurm import nodes as N


def test_load_nodes_reads_text_and_decoded_answers_alike():
    answer = {"nodes": [{"name": "cm01", "state": "idle"}, "junk", {"name": "cm02", "state": "allocated"}]}
    assert N.load_nodes(json.dumps(answer)) == N.load_nodes(answer) == [answer["nodes"][0], answer["nodes"][2]]


@pytest.mark.parametrize("text, message", [
    ("sinfo: error: Unable to contact slurm controller", "sinfo --json printed no JSON"),
    (json.dumps({"errors": [{"error": "x"}]}), r"no node list \(keys: errors\)"),
    (json.dumps([1, 2]), r"no node list \(keys: list\)"),
])
def test_an_answer_without_a_node_list_is_refused_naming_the_command(text, message):
    with pytest.raises(N.NodeRecordError, match=message):
        N.load_nodes(text)


@pytest.mark.parametrize("record, expected", [
    ({"state": "idle", "state_flags": ["DRAIN"]}, ("idle", ["DRAIN"])),          # 22.05
    ({"state": ["IDLE", "DRAIN"]}, ("idle", ["DRAIN"])),                        # 23.02 and later
    ({"state": "MIXED+DRAIN+RESERVED"}, ("mixed", ["DRAIN", "RESERVED"])),      # scontrol's text form
    ({"state": ["DOWN", "NOT_RESPONDING"], "state_flags": ["not_responding"]}, ("down", ["NOT_RESPONDING"])),
    ({}, ("unknown", [])),
])
def test_state_is_the_base_state_and_its_flags_whatever_the_layout(record, expected):
    assert N.state(record) == expected


def test_find_picks_the_named_node_or_none():
    nodes = [{"name": "cm01"}, {"name": "cm02"}]
    assert N.find(nodes, "cm02") == {"name": "cm02"} and N.find(nodes, "cm03") is None


_FIXTURES = __import__("pathlib").Path(__file__).parent.parent / "fixtures" / "slurm"


@pytest.mark.parametrize("fixture, boot_time", [
    ("scontrol_show_node_24.11.json", 1795838736), ("scontrol_show_node_26.05.json", 1795838737),
    ("rest_v0.0.38_nodes_dev2.json", 1795422302), ("sinfo_24.11.json", None)])
def test_records_give_one_form_for_every_release(fixture, boot_time):
    (first, *_rest) = N.records((_FIXTURES / fixture).read_text())
    assert set(first) == {"name", "state", "flags", "reason", "boot_time", "gres", "partitions"}
    assert first["state"] == first["state"].lower() and all(f == f.upper() for f in first["flags"])
    assert first["boot_time"] == boot_time and isinstance(first["reason"], str)


def test_records_read_22_05_flags_and_24_11_state_lists_alike():
    old = {"nodes": [{"name": "esb01", "state": "idle", "state_flags": ["DRAIN"], "reason": "msa-health: x",
                      "boot_time": 100}]}
    new = {"nodes": [{"name": "esb01", "state": ["IDLE", "DRAIN"], "reason": "msa-health: x",
                      "boot_time": {"set": True, "infinite": False, "number": 100}}]}
    assert N.records(json.dumps(old)) == N.records(json.dumps(new)) == [
        {"name": "esb01", "state": "idle", "flags": ["DRAIN"], "reason": "msa-health: x", "boot_time": 100,
         "gres": "", "partitions": []}]
    unset = {"nodes": [{"name": "x", "state": ["DOWN"], "boot_time": {"set": False, "number": 0}}]}
    assert N.records(json.dumps(unset))[0]["boot_time"] is None
