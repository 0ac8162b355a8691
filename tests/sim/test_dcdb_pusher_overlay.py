# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

"""The DCDB Pusher's files for an image-booted node (filter msa.hpc.dcdb_pusher_files, role dcdb_pusher's
tasks/overlay.yml): the same bytes the msa.hpc.dcdb_plugin module writes over SSH, plugin after plugin, and a
configuration the stand-in Pusher loads with its plugins."""

import os

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.msa.hpc.plugins.filter.dcdb_pusher_files import dcdb_pusher_files
from ansible_collections.msa.hpc.plugins.module_utils import _dcdb as D
from msa_sim.dcdb.plugins import load_plugin
from msa_sim.dcdb.pusher import PusherConfig

GLOBAL = {"mqttBroker": "10.42.0.11:8883", "mqttCAFile": "/etc/msa-hpc/tls/ca.pem", "mqttprefix": "/mini/cm/cm01",
          "username": "cm01", "passwordFile": "/etc/dcdb/pusher.secret", "qosLevel": 1, "maxQueuedReadings": 5000}
PLUGINS = [
    {"plugin": "procfs", "groups": [{"name": "load", "interval": 1000, "type": "loadavg",
                                     "sensors": [{"name": "load1", "type": "load1"}]}]},
    {"plugin": "slurm", "state": "present", "groups": [{"name": "slurm", "interval": 1000, "method": "spool",
                                                        "spoolDir": "/var/lib/slurm/slurmd"}]},
    {"plugin": "sysfs", "groups": [{"name": "net", "interval": 1000, "sensors": [
        {"name": "lo.rx_bytes", "path": "/sys/class/net/lo/statistics/rx_bytes", "mqttsuffix": "/lo/rx_bytes"}]}]},
]


def _module_writes(config_dir, settings):
    """What the module's runs (tasks/configure.yml, one per plugin) leave in an empty directory."""
    pusher_conf = os.path.join(config_dir, "dcdbpusher.conf")

    def read(path):
        return open(path, encoding="utf-8").read() if os.path.exists(path) else None

    for index, entry in enumerate(PLUGINS):
        changes, _ = D.plan_plugin(entry["plugin"], entry.get("state", "present"), entry["groups"], None, config_dir,
                                   pusher_conf, read, settings if index == 0 else None)
        for path, (_, after) in changes.items():
            with open(path, "w", encoding="utf-8") as handle:
                handle.write(after)
    return {name: read(os.path.join(config_dir, name)) for name in sorted(os.listdir(config_dir))}


def test_the_overlay_files_are_the_bytes_the_module_writes_and_the_pusher_loads_them(tmp_path):
    secret = tmp_path / "secret"
    secret.write_text("pw\n")
    settings = dict(GLOBAL, passwordFile=str(secret))
    files = dcdb_pusher_files(PLUGINS, str(tmp_path / "etc"), settings, restart=["dcdbpusher.service"])
    (tmp_path / "etc").mkdir()
    assert {name: f["content"] for name, f in files.items()} == _module_writes(str(tmp_path / "etc"), settings)
    assert sorted(files) == ["dcdbpusher.conf", "procfs.conf", "slurm.conf", "sysfs.conf"]
    assert all(f["restart"] == ["dcdbpusher.service"] and f["mode"] == "0644" for f in files.values())
    config = PusherConfig(str(tmp_path / "etc" / "dcdbpusher.conf"))
    assert [name for name, _ in config.plugins] == ["procfs", "slurm", "sysfs"]
    assert config.prefix == "/mini/cm/cm01" and config.max_queued == 5000
    net, = load_plugin("sysfs", str(tmp_path / "etc" / "sysfs.conf"))
    assert [topic for topic, _, _ in net.read(1)] == ["/net/lo/rx_bytes"]


def test_an_absent_plugin_leaves_no_file_and_no_entry():
    files = dcdb_pusher_files(PLUGINS[:1] + [dict(PLUGINS[1], state="absent")], "/etc/dcdb", GLOBAL)
    assert sorted(files) == ["dcdbpusher.conf", "procfs.conf"] and "slurm" not in files["dcdbpusher.conf"]["content"]


@pytest.mark.parametrize("plugins, message", [
    ([{"plugin": "nosuch", "groups": []}], "plugins\\[0\\].plugin: 'nosuch'"),
    ([{"plugin": "procfs", "state": "gone", "groups": []}], "plugins\\[0\\].state: 'gone'"),
    ([{"plugin": "procfs", "groups": [{"name": "bad name", "sensors": []}]}], "plugin procfs"),
    ("procfs", "plugins must be a list"),
])
def test_a_bad_declaration_is_refused_naming_the_plugin_and_field(plugins, message):
    with pytest.raises(AnsibleFilterError, match=message):
        dcdb_pusher_files(plugins, "/etc/dcdb", GLOBAL)
