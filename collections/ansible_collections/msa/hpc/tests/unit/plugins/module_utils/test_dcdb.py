# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

"""DCDB plugin configuration: INFO round trips, validation messages, rendering, the plugin list and the module."""

import json

import pytest
from ansible.module_utils.testing import patch_module_args
from hypothesis import given, settings
from hypothesis import strategies as st

from ansible_collections.msa.hpc.plugins.module_utils import _dcdb as D
from ansible_collections.msa.hpc.plugins.modules import dcdb_plugin

PROCFS_GROUPS = [
    {"name": "cpu", "interval": 1000, "type": "stat", "sensors": [{"name": "util", "type": "utilization"}]},
    {"name": "mem", "interval": 5000, "type": "meminfo", "mqttpart": "/memory",
     "sensors": [{"name": "memfree", "type": "MemFree", "factor": 1024}]},
]
PUSHER_CONF = """; the pusher
global {
    mqttBroker mgmt01:1883
    mqttprefix /msa/cm/%h
}

plugins {
    plugin tester {
        path /usr/lib/dcdb
        config /etc/dcdb/tester.conf
    }
}
"""


# ---- INFO -----------------------------------------------------------------------------------------------------------
_text = st.text(st.characters(blacklist_categories=("Cs", "Cc", "Zl", "Zp"), blacklist_characters="\x85\x1c\x1d\x1e"),
                max_size=10)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(_text.filter(bool), _text, st.lists(st.tuples(_text.filter(bool), _text), max_size=3)),
                max_size=5))
def test_info_round_trip_keeps_keys_values_order_and_duplicates(entries):
    root = D.InfoNode()
    for key, value, children in entries:
        node = root.add(key, value)
        for ckey, cvalue in children:
            node.add(ckey, cvalue)
    assert D.parse_info(D.dump_info(root)) == root


def test_info_include_reads_a_file_relative_to_the_including_one(tmp_path):
    (tmp_path / "common.conf").write_text("threads 4\n")
    (tmp_path / "main.conf").write_text('global {\n#include "common.conf"\n verbosity 3\n}\n')
    root = D.load_info(str(tmp_path / "main.conf"))
    assert [c.key for c in root.get("global").children] == ["threads", "verbosity"]


# ---- validation -----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("plugin, groups, message", [
    ("nosuch", [], "plugin 'nosuch' is not a DCDB Pusher plugin"),
    ("procfs", [{"name": "cpu", "interval": 5, "type": "stat", "sensors": [{"name": "u", "type": "user"}]}],
     "group cpu.interval 5 is outside 10..3600000 ms"),
    ("procfs", [{"name": "cpu", "interval": "fast", "type": "stat"}], "group cpu.interval 'fast' is not a whole"),
    ("procfs", [{"name": "cpu", "type": "cpuinfo", "sensors": [{"name": "u", "type": "x"}]}],
     "group cpu.type 'cpuinfo' must be one of stat"),
    ("procfs", [{"name": "cpu", "type": "stat", "path": "/etc/passwd", "sensors": [{"name": "u", "type": "user"}]}],
     "group cpu.path '/etc/passwd' is not an absolute /proc or /sys path"),
    ("sysfs", [{"name": "t", "sensors": [{"name": "temp", "path": "/sys/class/../../etc/shadow"}]}],
     "group t sensor temp.path '/sys/class/../../etc/shadow' is not an absolute /proc or /sys path"),
    ("sysfs", [{"name": "t", "sensors": [{"name": "temp"}]}], "group t sensor temp.path is required"),
    ("sysfs", [{"name": "t", "sensors": [{"name": "temp", "path": "/sys/x", "factor": "a lot"}]}],
     "group t sensor temp.factor 'a lot' is not a number"),
    ("sysfs", [{"name": "t", "sensors": [{"name": "temp", "path": "/sys/x", "mqttsuffix": "/a/+"}]}],
     "contains an MQTT wildcard"),
    ("sysfs", [{"name": "t", "mqttpart": "/a//b", "sensors": [{"name": "x", "path": "/sys/x"}]}],
     "group t.mqttpart '/a//b' has an empty level"),
    ("sysfs", [{"name": "bad name", "sensors": []}], "groups[0].name 'bad name' is not a valid name"),
    ("sysfs", [{"name": "t", "sensors": [{"name": "a", "path": "/sys/a"}, {"name": "a", "path": "/sys/b"}]}],
     "name 'a' appears twice in group t"),
    ("sysfs", [{"name": "t", "sensors": []}], "group t.sensors is empty"),
    ("slurm", [{"name": "s", "method": "guess"}], "group s.method 'guess' must be one of squeue"),
    ("redfish", [{"name": "p", "endpoint": "bmc01"}], "group p.endpoint 'bmc01' is not an http(s):// URL"),
])
def test_invalid_plugin_settings_are_rejected_naming_field_and_value(plugin, groups, message):
    with pytest.raises(D.DcdbConfigError) as err:
        D.normalize_plugin(plugin, groups)
    assert message in str(err.value)


@pytest.mark.parametrize("topic", ["/msa/cm/%h", "/a", "/a.b/c-d/e_f:1"])
def test_valid_topics_pass(topic):
    assert D.validate_topic(topic) == topic


@pytest.mark.parametrize("topic", ["msa", "/a/", "/a/#", "/a/b c", ""])
def test_invalid_topics_fail(topic):
    with pytest.raises(D.DcdbConfigError):
        D.validate_topic(topic)


# ---- rendering --------------------------------------------------------------------------------------------------------
def test_rendered_plugin_file_parses_back_to_the_same_groups():
    groups = D.normalize_plugin("procfs", PROCFS_GROUPS)
    text = D.render_plugin("procfs", groups)
    assert text.startswith("; " + D.MANAGED_HEADER)
    assert "group cpu {\n    interval 1000\n    type stat\n    path /proc/stat\n" in text
    plugin_global, parsed = D.parse_plugin(text)
    assert parsed == [dict(g, sensors=[dict(s) for s in g["sensors"]]) for g in groups]


def test_parse_plugin_understands_dcdb_templates_and_synonyms():
    text = """
template_group def1 {
    interval 2000
    type meminfo
}
file meminfo {
    default def1
    metric MemFree {
        type MemFree
    }
}
"""
    plugin_global, groups = D.parse_plugin(text)
    assert groups == [{"name": "meminfo", "interval": 2000, "type": "meminfo",
                       "sensors": [{"name": "MemFree", "type": "MemFree"}]}]


def test_plugin_list_is_added_once_updated_and_removed():
    root = D.parse_info(PUSHER_CONF)
    assert D.set_pusher_plugin(root, "procfs", "/etc/dcdb/procfs.conf")
    assert not D.set_pusher_plugin(root, "procfs", "/etc/dcdb/procfs.conf")
    assert D.pusher_plugins(root) == [("tester", "/etc/dcdb/tester.conf"), ("procfs", "/etc/dcdb/procfs.conf")]
    assert D.set_pusher_plugin(root, "tester", "/etc/dcdb/t2.conf")
    assert D.set_pusher_plugin(root, "tester", "", present=False)
    assert not D.set_pusher_plugin(root, "tester", "", present=False)
    assert D.pusher_plugins(root) == [("procfs", "/etc/dcdb/procfs.conf")]
    assert root.get("global").value_of("mqttprefix") == "/msa/cm/%h"


# ---- the module ---------------------------------------------------------------------------------------------------
def run_module(capsys, **args):
    with patch_module_args(args):
        with pytest.raises(SystemExit):
            dcdb_plugin.main()
    return json.loads(capsys.readouterr().out)


def test_module_writes_plugin_and_list_then_reports_no_change(tmp_path, capsys):
    (tmp_path / "dcdbpusher.conf").write_text(PUSHER_CONF)
    args = dict(plugin="procfs", groups=PROCFS_GROUPS, config_dir=str(tmp_path), _ansible_diff=True)
    first = run_module(capsys, **args)
    assert first["changed"] and first["reload_needed"]
    assert first["files_changed"] == sorted([str(tmp_path / "procfs.conf"), str(tmp_path / "dcdbpusher.conf")])
    assert first["plugins"] == ["tester", "procfs"]
    assert "+group cpu {" in "".join("\n+".join([""] + d["after"].splitlines()) for d in first["diff"])
    plugin_global, groups = D.parse_plugin((tmp_path / "procfs.conf").read_text())
    assert [g["name"] for g in groups] == ["cpu", "mem"]
    assert D.pusher_plugins(D.load_info(str(tmp_path / "dcdbpusher.conf")))[-1] == \
        ("procfs", str(tmp_path / "procfs.conf"))
    second = run_module(capsys, **args)
    assert not second["changed"] and not second["reload_needed"] and second["files_changed"] == []


def test_module_changes_only_the_plugin_file_when_a_group_changes(tmp_path, capsys):
    (tmp_path / "dcdbpusher.conf").write_text(PUSHER_CONF)
    run_module(capsys, plugin="procfs", groups=PROCFS_GROUPS, config_dir=str(tmp_path))
    pusher_before = (tmp_path / "dcdbpusher.conf").read_text()
    groups = [dict(PROCFS_GROUPS[0], interval=250), PROCFS_GROUPS[1]]
    result = run_module(capsys, plugin="procfs", groups=groups, config_dir=str(tmp_path), _ansible_diff=True)
    assert result["changed"] and result["files_changed"] == [str(tmp_path / "procfs.conf")]
    (diff,) = result["diff"]
    assert "interval 1000" in diff["before"] and "interval 250" in diff["after"]
    assert (tmp_path / "dcdbpusher.conf").read_text() == pusher_before


def test_module_creates_the_pusher_file_and_keeps_its_global_section_current(tmp_path, capsys):
    settings = {"mqttBroker": "10.0.0.1:1883", "mqttprefix": "/msa/cm/n1", "maxQueuedReadings": 1000}
    args = dict(plugin="procfs", groups=PROCFS_GROUPS, config_dir=str(tmp_path), pusher_global=settings)
    assert run_module(capsys, **args)["changed"]
    root = D.load_info(str(tmp_path / "dcdbpusher.conf"))
    assert [c.key for c in root.children] == ["global", "plugins"]
    assert [(c.key, c.value) for c in root.get("global").children] == [
        ("mqttBroker", "10.0.0.1:1883"), ("mqttprefix", "/msa/cm/n1"), ("maxQueuedReadings", "1000")]
    assert not run_module(capsys, **args)["changed"]
    # a plugin added later by another call keeps the global section; a new broker reaches the file
    run_module(capsys, plugin="tester", groups=[{"name": "t", "numSensors": 1}], config_dir=str(tmp_path))
    moved_args = dict(args)
    moved_args["pusher_global"] = dict(settings, mqttBroker="10.0.0.2:1883")
    moved = run_module(capsys, **moved_args)
    assert moved["changed"] and moved["files_changed"] == [str(tmp_path / "dcdbpusher.conf")]
    root = D.load_info(str(tmp_path / "dcdbpusher.conf"))
    assert root.get("global").value_of("mqttBroker") == "10.0.0.2:1883"
    assert [entry[0] for entry in D.pusher_plugins(root)] == ["procfs", "tester"]


def test_pusher_global_rejects_a_nested_value_naming_it():
    with pytest.raises(D.DcdbConfigError, match="pusher_global.mqttBroker"):
        D.set_pusher_global(D.InfoNode(), {"mqttBroker": {"host": "x"}})


def test_module_check_mode_reports_the_change_and_writes_nothing(tmp_path, capsys):
    (tmp_path / "dcdbpusher.conf").write_text(PUSHER_CONF)
    result = run_module(capsys, plugin="procfs", groups=PROCFS_GROUPS, config_dir=str(tmp_path),
                        _ansible_check_mode=True, _ansible_diff=True)
    assert result["changed"] and result["reload_needed"] and len(result["diff"]) == 2
    assert not (tmp_path / "procfs.conf").exists()
    assert (tmp_path / "dcdbpusher.conf").read_text() == PUSHER_CONF


def test_module_absent_removes_the_file_and_the_list_entry(tmp_path, capsys):
    (tmp_path / "dcdbpusher.conf").write_text(PUSHER_CONF)
    (tmp_path / "tester.conf").write_text("group t {\n}\n")
    result = run_module(capsys, plugin="tester", state="absent", config_dir=str(tmp_path),
                        pusher_config=str(tmp_path / "dcdbpusher.conf"))
    assert result["changed"] and result["plugins"] == []
    assert not (tmp_path / "tester.conf").exists()
    again = run_module(capsys, plugin="tester", state="absent", config_dir=str(tmp_path),
                       pusher_config=str(tmp_path / "dcdbpusher.conf"))
    assert not again["changed"]


def test_module_fails_naming_the_bad_field_and_writes_nothing(tmp_path, capsys):
    (tmp_path / "dcdbpusher.conf").write_text(PUSHER_CONF)
    groups = [{"name": "t", "interval": 1000, "sensors": [{"name": "temp", "path": "/home/x"}]}]
    result = run_module(capsys, plugin="sysfs", groups=groups, config_dir=str(tmp_path))
    assert result["failed"] and "group t sensor temp.path '/home/x'" in result["msg"]
    assert not (tmp_path / "sysfs.conf").exists()


def test_module_reports_a_broken_pusher_config_with_its_line(tmp_path, capsys):
    (tmp_path / "dcdbpusher.conf").write_text("global {\n mqttBroker a b c\n}\n")
    result = run_module(capsys, plugin="tester", groups=[{"name": "t"}], config_dir=str(tmp_path))
    assert result["failed"] and result["line"] == 2 and "dcdbpusher.conf" in result["msg"]
