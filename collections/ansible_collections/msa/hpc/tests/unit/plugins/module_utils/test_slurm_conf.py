# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

"""Tests of the slurm.conf model: node/partition/licence/gres lines, validation, Slurm formats."""

import pytest

from ansible_collections.msa.hpc.plugins.module_utils._slurm_conf import (
    NAM_LICENSE_UNIT, SlurmConfError, conf_server, controllers, format_time, nam_units, node_records, parse_gres,
    parse_size, parse_time, problems, render)


def _node(name, partition, address=None, **hw):
    record = {"name": name, "partition": partition, "sockets": 2, "cores_per_socket": 12, "threads_per_core": 1,
              "real_memory": 192000}
    if address:
        record["address"] = address
    record.update(hw)
    return record


def _system():
    return {
        "nodes": [_node("cm%02d" % i, "cm", "10.0.0.%d" % i) for i in (1, 2, 3, 4, 7)]
        + [_node("esb%02d" % i, "esb", "10.0.1.%d" % i, cores_per_socket=8, real_memory=48000, gres="gpu:1",
                 features=["extoll", "v100"]) for i in (1, 2)],
        "partitions": {"cm": {"default": True, "default_time": "30", "max_time": "1-00:00:00"},
                       "esb": {"max_time": "12:00:00", "options": {"OverSubscribe": "NO"}}},
        "licenses": {"gateway": 2, "nam": "2TiB", "gce": 1},
    }


def test_nodes_with_the_same_hardware_share_one_compressed_line_with_addresses_in_order():
    conf = render(_system())
    assert conf["node_lines"][0] == ("NodeName=cm[01-04,07] NodeAddr=10.0.0.1,10.0.0.2,10.0.0.3,10.0.0.4,10.0.0.7"
                                     " Sockets=2 CoresPerSocket=12 ThreadsPerCore=1 RealMemory=192000 State=UNKNOWN")
    assert conf["node_lines"][1] == ("NodeName=esb[01-02] NodeAddr=10.0.1.1,10.0.1.2 Sockets=2 CoresPerSocket=8"
                                     " ThreadsPerCore=1 RealMemory=48000 Gres=gpu:1 Feature=extoll,v100 State=UNKNOWN")


def test_node_addresses_follow_the_hostlist_order_even_when_nodes_come_unsorted():
    data = _system()
    data["nodes"] = [_node("cm10", "cm", "10.0.0.10"), _node("cm9", "cm", "10.0.0.9")]
    data["partitions"] = {"cm": {}}
    assert render(data)["node_lines"][0].startswith("NodeName=cm[9-10] NodeAddr=10.0.0.9,10.0.0.10 ")


def test_different_hardware_gives_separate_lines():
    data = _system()
    data["nodes"][1]["real_memory"] = 96000
    lines = render(data)["node_lines"]
    assert lines[0].startswith("NodeName=cm[01,03-04,07] ")
    assert lines[1].startswith("NodeName=cm02 ") and "RealMemory=96000" in lines[1]


def test_partition_lines_carry_nodes_default_and_times():
    conf = render(_system())
    assert conf["partition_lines"] == [
        "PartitionName=cm Nodes=cm[01-04,07] Default=YES DefaultTime=00:30:00 MaxTime=1-00:00:00 State=UP",
        "PartitionName=esb Nodes=esb[01-02] MaxTime=12:00:00 OverSubscribe=NO State=UP",
    ]


def test_a_node_may_belong_to_two_partitions_and_a_module_name_resolves_to_its_partition():
    data = _system()
    data["partitions"]["booster"] = {"module": "esb"}
    del data["partitions"]["esb"]
    data["nodes"][0]["partitions"] = ["cm", "booster"]
    for node in data["nodes"]:
        if node["partition"] == "esb":
            node["module"] = node.pop("partition")
    conf = render(data)
    assert "PartitionName=booster Nodes=cm01,esb[01-02] MaxTime=INFINITE State=UP" in conf["partition_lines"]


def test_licenses_count_nam_capacity_in_gib_rounded_down():
    conf = render(_system())
    assert conf["licenses_line"] == "Licenses=gateway:2,gce:1,nam:2048"
    data = _system()
    data["licenses"] = {"nam": (3 << 30) + 5}
    assert render(data)["licenses"] == {"nam": 3}


def test_gres_conf_lines_default_gpu_files_and_take_explicit_files():
    data = _system()
    conf = render(data)
    assert conf["gres_lines"] == ["NodeName=esb[01-02] Name=gpu File=/dev/nvidia0"]
    assert conf["gres_types"] == ["gpu"]
    data["nodes"][5]["gres"] = "gpu:a100:2,nic:1"
    data["nodes"][5]["gres_files"] = {"gpu": ["/dev/nvidia0", "/dev/nvidia1"]}
    data["nodes"][6]["gres"] = "gpu:a100:2,nic:1"
    data["nodes"][6]["gres_files"] = {"gpu": ["/dev/nvidia0", "/dev/nvidia1"]}
    assert render(data)["gres_lines"] == ["NodeName=esb[01-02] Name=gpu Type=a100 File=/dev/nvidia0,/dev/nvidia1",
                                          "NodeName=esb[01-02] Name=nic Count=1"]


def test_site_overrides_add_keys_to_nodes_and_partitions():
    data = _system()
    data["overrides"] = {"nodes": {"cm07": {"Weight": 10}}, "partitions": {"cm": {"MaxNodes": 4, "State": "DOWN"}}}
    conf = render(data)
    assert any(line.startswith("NodeName=cm07 ") and "Weight=10" in line for line in conf["node_lines"])
    assert conf["partition_lines"][0].endswith("MaxNodes=4 State=DOWN")


@pytest.mark.parametrize("mutate, expected", [
    (lambda d: d["nodes"].append(dict(d["nodes"][0])), "nodes.cm01: defined twice"),
    (lambda d: d["nodes"][1].update(address="10.0.0.1"), "nodes.cm02.address: '10.0.0.1' is also the address of cm01"),
    (lambda d: d["nodes"][0].update(partition="dam"), "nodes.cm01.partition: 'dam' is neither a partition"),
    (lambda d: d["nodes"][0].update(real_memory="lots"), "nodes.cm01.real_memory: 'lots' is not an integer"),
    (lambda d: d["nodes"][0].update(real_memory=0), "nodes.cm01.real_memory: 0 is below 1"),
    (lambda d: d["nodes"][0].pop("real_memory"), "nodes.cm01.real_memory: missing"),
    (lambda d: d["nodes"][0].update(sockets=-2), "nodes.cm01.sockets: -2 is below 1"),
    (lambda d: d["nodes"][0].update(gres="gpu:x:y:z"), "nodes.cm01.gres: 'gpu:x:y:z' is not a gres"),
    (lambda d: d["nodes"][0].update(gres_files={"gpu": "/dev/nvidia0"}), "nodes.cm01.gres_files.gpu: the node has no gres"),
    (lambda d: d["partitions"]["cm"].update(max_time="1:2:3:4"), "partitions.cm.max_time: '1:2:3:4' is not a Slurm time"),
    (lambda d: d["partitions"]["cm"].update(default_time="2-00"), "partitions.cm.default_time: '2-00' is longer than max_time"),
    (lambda d: d["partitions"]["esb"].update(default=True), "more than one partition has default: true (cm, esb)"),
    (lambda d: d["partitions"].update(dam={}), "partitions.dam: no node belongs to it"),
    (lambda d: d["licenses"].update(nam="lots"), "licenses.nam: 'lots' is not a size"),
    (lambda d: d["licenses"].update(nam="100MiB"), "licenses.nam: '100MiB' is less than one licence unit"),
    (lambda d: d["licenses"].update(gateway=-1), "licenses.gateway: -1 is below 0"),
    (lambda d: d.update(overrides={"nodes": {"cm99": {"Weight": 1}}}), "overrides.nodes.cm99: no such node"),
    (lambda d: d.update(overrides={"nodes": {"cm01": {"weight": 1}}}), "'weight' is not a slurm.conf key"),
    (lambda d: d.update(overrides={"partitions": {"x": {"MaxNodes": 1}}}), "overrides.partitions.x: no such partition"),
])
def test_validation_names_the_field_and_value(mutate, expected):
    data = _system()
    mutate(data)
    found = problems(data)
    assert any(expected in p for p in found), found
    with pytest.raises(SlurmConfError):
        render(data)


def test_a_consistent_description_has_no_problems():
    assert problems(_system()) == []


@pytest.mark.parametrize("text, minutes", [
    ("90", 90), (45, 45), ("10:30", 11), ("10:00", 10), ("01:30:00", 90), ("1:00:01", 61),
    ("2-0", 2880), ("1-12", 2160), ("1-12:30", 2190), ("1-12:30:30", 2191), ("INFINITE", None), ("unlimited", None),
])
def test_parse_time_accepts_every_sbatch_format(text, minutes):
    assert parse_time(text) == minutes


@pytest.mark.parametrize("text", ["", "1:2:3:4", "abc", "1-", "-5", "1-24", "10:60", "1:60:00", "1.5", "1-1:1:1:1", True])
def test_parse_time_rejects_malformed_times(text):
    with pytest.raises(ValueError):
        parse_time(text)


def test_format_time_writes_slurm_spelling():
    assert format_time(30) == "00:30:00"
    assert format_time(1440 + 90) == "1-01:30:00"
    assert format_time(None) == "INFINITE"


@pytest.mark.parametrize("text, size", [
    (1024, 1024), ("100GiB", 100 << 30), ("100 GB", 100 << 30), ("16G", 16 << 30), ("1.5TiB", 3 << 39),
    ("512", 512), ("2k", 2048), ("1MB", 1 << 20), ("1KB", 1024), ("1KiB", 1024), ("10B", 10),
])
def test_parse_size_units(text, size):
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["lots", "-1", "1i", "", "GiB", True, -5])
def test_parse_size_rejects_nonsense(text):
    with pytest.raises(ValueError):
        parse_size(text)


def test_nam_units_round_requests_up_and_capacity_down():
    assert nam_units(NAM_LICENSE_UNIT + 1) == 2
    assert nam_units(NAM_LICENSE_UNIT + 1, round_up=False) == 1


def test_parse_gres_forms():
    assert parse_gres("gpu:2") == [("gpu", None, 2)]
    assert parse_gres("gpu") == [("gpu", None, 1)]
    assert parse_gres(["gpu:v100:4", "nic:1"]) == [("gpu", "v100", 4), ("nic", None, 1)]
    assert parse_gres({"gpu": 2}) == [("gpu", None, 2)]


def test_node_records_from_inventory_hostvars():
    hostvars = {
        "esb01": {"msa_module": "esb", "msa_addresses": {"mgmt": "10.0.1.1"}, "msa_features": ["extoll"],
                  "msa_hardware": {"sockets": 1, "cores_per_socket": 8, "memory_mb": 4000, "gpus": 2}},
        "cm01": {"msa_module": "cm", "msa_addresses": {"mgmt": "10.0.0.1"}},
    }
    records = node_records(["esb01", "cm01"], hostvars, {"esb": {"partition": "booster"}}, "mgmt")
    conf = render({"nodes": records, "partitions": {"booster": {}, "cm": {}}})
    assert conf["node_lines"][0] == ("NodeName=esb01 NodeAddr=10.0.1.1 Sockets=1 CoresPerSocket=8 ThreadsPerCore=1"
                                     " RealMemory=4000 Gres=gpu:2 Feature=extoll State=UNKNOWN")
    assert conf["gres_lines"] == ["NodeName=esb01 Name=gpu File=/dev/nvidia[0-1]"]
    assert conf["partition_lines"][0].startswith("PartitionName=booster Nodes=esb01 ")


# --- controllers (SlurmctldHost lines) and slurmd's --conf-server -------------------------------------------------

def test_one_controller_without_backup_is_the_primary_alone():
    assert controllers("mgmt01") == ["mgmt01"]
    assert controllers("mgmt01", "", ["mgmt01"]) == ["mgmt01"]
    assert controllers("mgmt01", None, ["mgmt01", "mgmt02"]) == ["mgmt01"]


def test_backup_controller_comes_second():
    assert controllers("mgmt01", "mgmt02", ["mgmt01", "mgmt02"]) == ["mgmt01", "mgmt02"]
    # a site may name the hosts the other way round
    assert controllers("mgmt02", "mgmt01", ["mgmt01", "mgmt02"]) == ["mgmt02", "mgmt01"]


def test_backup_that_is_the_primary_is_refused_by_name():
    with pytest.raises(SlurmConfError) as exc:
        controllers("mgmt01", "mgmt01", ["mgmt01", "mgmt02"])
    assert "slurm_backup_controller_host: 'mgmt01' is the primary controller too" in str(exc.value)


def test_backup_outside_the_controller_group_is_refused():
    with pytest.raises(SlurmConfError) as exc:
        controllers("mgmt01", "cm01", ["mgmt01", "mgmt02"])
    assert "slurm_backup_controller_host: 'cm01' is not in the slurm_controller group (mgmt01, mgmt02)" in str(exc.value)
    with pytest.raises(SlurmConfError, match="slurm_controller_host: 'login01' is not in"):
        controllers("login01", "", ["mgmt01"])


@pytest.mark.parametrize("backup", ["mgmt 02", "-x", 3, ["mgmt02"]])
def test_backup_that_is_not_a_host_name_is_refused(backup):
    with pytest.raises(SlurmConfError, match="slurm_backup_controller_host: .* is not a host name"):
        controllers("mgmt01", backup)


def test_conf_server_lists_every_controller_primary_first():
    assert conf_server(["10.52.0.11"], 6817) == "10.52.0.11:6817"
    assert conf_server(["10.52.0.11", "10.52.0.12"], "6817") == "10.52.0.11:6817,10.52.0.12:6817"


@pytest.mark.parametrize("addresses, port, message", [
    ([], 6817, "no controller address"), (["10.0.0.1"], 0, "is not a TCP port"), (["10.0.0.1"], 70000, "TCP port")])
def test_conf_server_refuses_what_slurmd_could_not_use(addresses, port, message):
    with pytest.raises(SlurmConfError, match=message):
        conf_server(addresses, port)
