# SPDX-License-Identifier: GPL-3.0-or-later
"""Shared by the bundle's tests and the molecule testinfra suite: read the layered inventory as plain data."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

BUNDLE = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def plain(value):
    """ansible-inventory marks some values unsafe as {"__ansible_unsafe": v}: unwrap them."""
    if isinstance(value, dict):
        if set(value) == {"__ansible_unsafe"}:
            return value["__ansible_unsafe"]
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def ansible_inventory(*args):
    """``ansible-inventory <args>`` with the bundle's ansible.cfg, as plain data."""
    env = dict(os.environ, ANSIBLE_CONFIG=str(BUNDLE / "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    out = subprocess.run([str(BIN / "ansible-inventory")] + [str(a) for a in args], check=True,
                         capture_output=True, text=True, env=env, cwd=BUNDLE).stdout
    return plain(json.loads(out))


def render(expression, system, site="inventories/sites/example"):
    """Evaluate a Jinja expression on localhost with the common, `system` and `site` layers (paths from the bundle)."""
    env = dict(os.environ, ANSIBLE_CONFIG=str(BUNDLE / "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_LOAD_CALLBACK_PLUGINS="1", ANSIBLE_STDOUT_CALLBACK="ansible.posix.json")
    run = subprocess.run([str(BIN / "ansible"), "localhost", "-m", "ansible.builtin.debug", "-a",
                          json.dumps({"msg": "{{ %s }}" % expression}), "-i", "common.yml",
                          "-i", "inventories/systems/" + system, "-i", str(site)],
                         capture_output=True, text=True, env=env, cwd=BUNDLE, check=True)
    report = json.JSONDecoder().raw_decode(run.stdout[run.stdout.index("{"):])[0]   # warnings may follow it
    return report["plays"][0]["tasks"][0]["hosts"]["localhost"]["msg"]
