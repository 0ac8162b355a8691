# SPDX-License-Identifier: GPL-3.0-or-later
"""testinfra: the EXTOLL fabric as deployed: EMP master and slaves, the cabled torus, routes and the started network."""
from __future__ import annotations

import json
import re

import pytest
from conftest import GROUPS, HOSTVARS, Node

from ansible_collections.msa.hpc.plugins.filter.extoll import build

EXTOLL_HOSTS = sorted(h for h, hv in HOSTVARS.items() if "msa_extoll_guid" in hv)
MANAGERS = sorted(GROUPS.get("msa_management", []))


def _fabric():
    fabrics = next(iter(HOSTVARS.values()))["msa_fabrics"]
    return next(name for name, fab in fabrics.items() if fab["kind"] == "extoll"), fabrics


def pytest_generate_tests(metafunc):
    if "extoll_host" in metafunc.fixturenames:
        metafunc.parametrize("extoll_host", EXTOLL_HOSTS, indirect=True)
    if "manager" in metafunc.fixturenames:
        metafunc.parametrize("manager", MANAGERS[:1], indirect=True)


@pytest.fixture
def extoll_host(request):
    return Node(request.param)


@pytest.fixture
def manager(request):
    return Node(request.param)


@pytest.fixture(scope="module")
def topology():
    """The fabric's topology as the inventory defines it, and host → node id."""
    name, fabrics = _fabric()
    return build(EXTOLL_HOSTS, HOSTVARS, fabrics[name]["topology"], name) + (name, fabrics[name]["cidr"])


def test_emp_slave_runs_with_the_nodes_guid_and_a_private_token(extoll_host):
    slave = extoll_host.host.service("emp-slave")
    assert slave.is_running and slave.is_enabled
    conf = dict(line.split(" = ", 1) for line in extoll_host.host.file("/etc/extoll/slave.conf").content_string.splitlines()
                if " = " in line and not line.startswith("#"))
    assert conf["guid"] == extoll_host.vars["msa_extoll_guid"]
    token = extoll_host.host.file("/etc/extoll/slave.token")  # the node's own, not the master's (issue 34)
    assert token.mode == 0o600 and token.user == "root"
    assert conf["token_file"] == "/etc/extoll/slave.token"
    assert not extoll_host.host.file("/etc/extoll/emp.token").exists


def test_every_link_of_the_topology_is_an_up_veth_port(extoll_host, topology):
    topo, ids, _, _ = topology
    expected = {"ext%d" % port for port in topo.adjacency()[ids[extoll_host.name]]}
    links = json.loads(extoll_host.host.check_output("ip -j -d link show"))
    # the torus ports ext<port>; not extoll0 (and its veth peer extoll0p), which holds the node's EXTOLL address
    ports = {name: link for link in links
             for name in [link["ifname"].split("@")[0]] if re.fullmatch(r"ext[0-9]+", name)}
    assert set(ports) == expected
    for name, link in ports.items():
        assert link["linkinfo"]["info_kind"] == "veth" and "UP" in link["flags"], (extoll_host.name, name)


def test_extoll_traffic_goes_through_the_installed_table_while_the_network_is_up(extoll_host, topology):
    _, ids, fabric, cidr = topology
    rules = extoll_host.host.check_output("ip rule show")
    assert "to %s lookup 44" % cidr in rules
    assert "prohibit %s" % cidr in extoll_host.host.check_output("ip route show")
    routes = {r["dst"] for r in json.loads(extoll_host.host.check_output("ip -j route show table 44"))}
    others = {HOSTVARS[h]["msa_addresses"][fabric] for h in ids if h != extoll_host.name}
    assert routes == others


def test_emp_master_reports_the_fabric_up_as_defined(manager, topology):
    topo, _, _, _ = topology
    master = manager.host.service("emp-master")
    assert master.is_running and master.is_enabled
    assert manager.host.file("/etc/extoll/emp.token").mode == 0o600
    endpoint = "https://%s:9000" % manager.vars["msa_addresses"][manager.vars["msa_management_fabric"]]
    ca = "--ca-file /etc/msa-hpc/tls/ca.pem"
    ctrl = "python3 -m msa_sim.emp.ctrl --endpoint %s --token-file /etc/extoll/emp.token %s " % (endpoint, ca)
    info = json.loads(manager.host.check_output(ctrl + "network info"))
    assert info["network"]["status"] == "up"
    assert info["topology"]["nodes"] == len(topo.nodes) and info["discovered"]["links"] == len(topo.links)
    assert info["routing"]["algorithm"] == topo.routing and info["routing"]["summary"]["deadlock_free"]
    # without the token the master answers nothing
    assert manager.host.run("python3 -m msa_sim.emp.ctrl --endpoint %s %s network status" % (endpoint, ca)).rc != 0
