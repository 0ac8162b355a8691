# SPDX-License-Identifier: GPL-3.0-or-later
"""testinfra: every simulated node has its identity and fabric addresses, and fabrics stay apart."""
from __future__ import annotations


def test_hostname_is_the_inventory_name(node):
    assert node.host.check_output("hostname") == node.name


def test_every_fabric_address_is_on_its_interface(node):
    for fabric, address in node.vars["msa_addresses"].items():
        if node.vars["msa_fabrics"][fabric]["kind"] == "extoll":
            # EXTOLL has no podman network: the EMP slave puts the node's address on its interface extoll0 (a
            # dummy, or a veth end where the kernel has no dummy driver), else on lo (the links are ext<port> veths)
            holders = [name for name in ("extoll0", "lo") if node.host.interface(name).exists
                       and address in node.host.interface(name).addresses]
            assert holders, "%s: EXTOLL address %s is on neither extoll0 nor lo" % (node.name, address)
            continue
        iface = node.host.interface(fabric + "0")
        assert iface.exists, "%s: no interface %s0" % (node.name, fabric)
        assert address in iface.addresses


def test_hosts_file_names_every_node_by_its_management_address(node, hostvars):
    entries = [line.split() for line in node.host.file("/etc/hosts").content_string.splitlines()]
    mgmt = node.vars["msa_management_fabric"]
    for name, hv in hostvars.items():
        assert [hv["msa_addresses"][mgmt], name] in [e[:2] for e in entries], name


def test_systemd_is_running_with_sshd(node):
    state = node.host.run("systemctl is-system-running").stdout.strip()
    assert state == "running", "%s: systemd is %s" % (node.name, state)
    assert node.host.service("ssh").is_running
