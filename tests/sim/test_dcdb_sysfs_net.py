# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

"""The dcdb_pusher role's one sysfs plugin file (net group of interface byte counters, thermal zones, extra groups),
rendered by msa.hpc.dcdb_plugin's own code and read by the stand-in Pusher: topics net/<interface>/<counter> carry
the interface name, and the groups coexist in one file."""

import os

import pytest
import yaml

from ansible_collections.msa.hpc.plugins.module_utils import _dcdb as D
from msa_sim.dcdb.plugins import load_plugin

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ROLE = os.path.join(ROOT, "collections", "ansible_collections", "msa", "hpc", "roles", "dcdb_pusher")
LO = "/sys/class/net/lo/statistics/%s"


def _counter(name):
    with open(LO % name, encoding="ascii") as handle:
        return int(handle.read())


def _net_group(interfaces, counters):
    """The net group as the role's task builds it (tasks/configure.yml: dcdb_pusher_net_sensors)."""
    return {"name": "net", "interval": 1000,
            "sensors": [{"name": "%s.%s" % (i, c), "path": "/sys/class/net/%s/statistics/%s" % (i, c),
                         "mqttsuffix": "/%s/%s" % (i, c)} for i in interfaces for c in counters]}


def test_net_thermal_and_extra_groups_in_one_file_publish_per_interface_topics(tmp_path):
    with open(os.path.join(ROLE, "defaults", "main.yml"), encoding="utf-8") as handle:
        defaults = yaml.safe_load(handle)
    extra = [{"name": "cgroup", "interval": 1000,
              "sensors": [{"name": "cpu_ns", "path": "/sys/fs/cgroup/cpuacct/cpuacct.usage"}]}]
    groups = [_net_group(["lo"], defaults["dcdb_pusher_net_counters"])] + defaults["dcdb_pusher_sysfs_groups"] + extra
    conf = tmp_path / "sysfs.conf"
    conf.write_text(D.render_plugin("sysfs", D.normalize_plugin("sysfs", groups)))
    net, thermal, cgroup = load_plugin("sysfs", str(conf))
    assert (net.name, thermal.name, cgroup.name) == ("net", "thermal", "cgroup")
    low = {c: _counter(c) for c in ("rx_bytes", "tx_bytes")}
    readings = net.read(42)
    high = {c: _counter(c) for c in ("rx_bytes", "tx_bytes")}
    assert [(topic, ts) for topic, ts, _ in readings] == [("/net/lo/rx_bytes", 42), ("/net/lo/tx_bytes", 42)]
    for (topic, _, value), counter in zip(readings, ("rx_bytes", "tx_bytes")):
        assert low[counter] <= value <= high[counter], (topic, value, low, high)
    assert [s.name for s in net.sensors] == ["lo.rx_bytes", "lo.tx_bytes"]


def test_a_group_name_twice_in_the_file_is_refused_naming_it():
    """An extra group named like the role's own (net) is an error, not a silently replaced group."""
    with pytest.raises(D.DcdbConfigError, match="'net' appears twice in plugin sysfs"):
        D.normalize_plugin("sysfs", [_net_group(["eth0"], ["rx_bytes"]), _net_group(["eth1"], ["tx_bytes"])])
