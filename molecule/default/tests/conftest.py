# SPDX-License-Identifier: GPL-3.0-or-later
"""testinfra fixtures: one `node` per inventory host, reached over SSH with the harness key."""
from __future__ import annotations

import pytest
import testinfra

from tests.helpers import BUNDLE, ansible_inventory


def _inventory():
    data = ansible_inventory("--list")
    groups = {name: body.get("hosts", []) for name, body in data.items() if name != "_meta"}
    return data["_meta"]["hostvars"], groups


HOSTVARS, GROUPS = _inventory()


class Node:
    def __init__(self, name):
        self.name = name
        self.vars = HOSTVARS[name]
        key = BUNDLE / ".cache" / "ssh" / "id_ed25519"
        # the host keys the harness recorded from the containers (role sim_system), checked as Ansible checks them
        known_hosts = BUNDLE / ".cache" / self.vars["msa_system"] / "known_hosts"
        self.host = testinfra.get_host(
            "ssh://root@%s" % self.vars["ansible_host"], ssh_identity_file=str(key),
            ssh_extra_args="-o StrictHostKeyChecking=yes -o UserKnownHostsFile=%s -o LogLevel=ERROR"
                           " -o ControlMaster=auto -o ControlPersist=60 -o ControlPath=/tmp/msa-ti-%%C" % known_hosts)


def pytest_generate_tests(metafunc):
    if "node" in metafunc.fixturenames:
        metafunc.parametrize("node", sorted(HOSTVARS), indirect=True)


@pytest.fixture
def node(request):
    return Node(request.param)


@pytest.fixture
def hostvars():
    return HOSTVARS
