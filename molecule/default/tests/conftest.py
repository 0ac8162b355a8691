# SPDX-License-Identifier: GPL-3.0-or-later
"""testinfra fixtures: one `node` per inventory host, reached over SSH with the harness key."""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import testinfra

BUNDLE = Path(__file__).resolve().parents[3]


def _plain(value):
    """ansible-inventory marks some values unsafe as {"__ansible_unsafe": v}: unwrap them."""
    if isinstance(value, dict):
        if set(value) == {"__ansible_unsafe"}:
            return value["__ansible_unsafe"]
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _inventory():
    env = dict(os.environ, ANSIBLE_CONFIG=str(BUNDLE / "ansible.cfg"))
    out = subprocess.run([str(Path(os.sys.executable).parent / "ansible-inventory"), "--list"],
                         check=True, capture_output=True, text=True, env=env, cwd=BUNDLE).stdout
    data = _plain(json.loads(out))
    groups = {name: body.get("hosts", []) for name, body in data.items() if name != "_meta"}
    return data["_meta"]["hostvars"], groups


HOSTVARS, GROUPS = _inventory()


class Node:
    def __init__(self, name):
        self.name = name
        self.vars = HOSTVARS[name]
        key = BUNDLE / ".cache" / "ssh" / "id_ed25519"
        self.host = testinfra.get_host(
            "ssh://root@%s" % self.vars["ansible_host"], ssh_identity_file=str(key),
            ssh_extra_args="-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR"
                           " -o ControlMaster=auto -o ControlPersist=60 -o ControlPath=/tmp/msa-ti-%C")


def pytest_generate_tests(metafunc):
    if "node" in metafunc.fixturenames:
        metafunc.parametrize("node", sorted(HOSTVARS), indirect=True)


@pytest.fixture
def node(request):
    return Node(request.param)


@pytest.fixture
def hostvars():
    return HOSTVARS
