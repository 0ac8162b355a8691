# SPDX-License-Identifier: GPL-3.0-or-later
"""SSH host key checking: on in the shipped configuration, against the harness's known_hosts or the site's."""
from __future__ import annotations

import os
import re
import subprocess

import pytest
import yaml

from tests.helpers import BIN, BUNDLE, render

# What turns host key checking off (or trusts a first connection), in ssh options, ansible.cfg, YAML or env.
CHECKING_OFF = re.compile(
    r"StrictHostKeyChecking[= ]+(no|off|accept-new)\b|UserKnownHostsFile[= ]+/dev/null"
    r"|host_key_checking\s*[=:]\s*(false|no|off|0)\b|ANSIBLE_HOST_KEY_CHECKING",
    re.IGNORECASE)


def shipped_files():
    """Every file git tracks in the bundle, this test excepted (it names what it looks for)."""
    names = subprocess.run(["git", "ls-files", "-z"], cwd=BUNDLE, check=True, capture_output=True,
                           text=True).stdout.split("\0")
    this = os.path.relpath(__file__, BUNDLE)
    return [BUNDLE / n for n in names if n and n != this and (BUNDLE / n).is_file() and not (BUNDLE / n).is_symlink()]


def test_no_shipped_file_turns_host_key_checking_off():
    offenders = []
    for path in shipped_files():
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        for number, line in enumerate(text.splitlines(), 1):
            if CHECKING_OFF.search(line):
                offenders.append("%s:%d: %s" % (path.relative_to(BUNDLE), number, line.strip()))
    assert offenders == []


def test_ansible_checks_host_keys_and_refuses_unknown_ones():
    env = dict(os.environ, ANSIBLE_CONFIG=str(BUNDLE / "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    env.pop("ANSIBLE_HOST_KEY_CHECKING", None)
    env.pop("ANSIBLE_SSH_ARGS", None)
    dump = subprocess.run([str(BIN / "ansible-config"), "dump", "-t", "all", "--format", "yaml"], cwd=BUNDLE,
                          env=env, check=True, capture_output=True, text=True).stdout
    config = yaml.safe_load(dump)
    host_key_checking = next(e["value"] for e in config if e.get("name") == "HOST_KEY_CHECKING")
    plugins = next(e["CONNECTION_PLUGINS"] for e in config if "CONNECTION_PLUGINS" in e)
    ssh = {o["name"]: o.get("value") for o in next(p["ssh"] for p in plugins if "ssh" in p)}
    assert host_key_checking is True
    assert ssh["host_key_checking"] is True
    assert "-o StrictHostKeyChecking=yes" in ssh["ssh_args"]


@pytest.mark.parametrize("system", ["mini", "dev4", "scale64"])
def test_a_simulated_system_connects_with_the_known_hosts_its_harness_records(system):
    args = render("hostvars[groups['msa_compute'][0]].ansible_ssh_common_args", system)
    recorded = render("hostvars[groups['msa_compute'][0]].msa_ssh_known_hosts", system)
    assert recorded == str(BUNDLE / ".cache" / system / "known_hosts")
    assert args == "-o UserKnownHostsFile=" + recorded


def test_a_real_system_uses_openssh_known_hosts_unless_its_site_names_a_file(tmp_path):
    assert render("hostvars[groups['msa_compute'][0]].ansible_ssh_common_args", "deep_est") == ""
    (tmp_path / "group_vars").mkdir()
    (tmp_path / "hosts.yml").write_text("all: {}\n")
    (tmp_path / "group_vars" / "all.yml").write_text('msa_ssh_known_hosts: "/srv/site keys/known_hosts"\n')
    args = render("hostvars[groups['msa_compute'][0]].ansible_ssh_common_args", "deep_est", site=tmp_path)
    # quoted, so ansible's shlex split of ssh_common_args keeps the path whole
    assert args == "-o UserKnownHostsFile='/srv/site keys/known_hosts'"
