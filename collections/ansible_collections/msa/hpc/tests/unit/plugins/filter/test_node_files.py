# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

"""msa.hpc.node_files: a role's declared per-node files become overlay files, absent ones are left out, a file two
roles declare alike is kept once, and a malformed or conflicting declaration is refused naming the entry."""

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.msa.hpc.plugins.filter.node_files import node_files

KEY = {"dest": "/etc/munge/munge.key", "content": "k", "owner": "munge", "group": "munge", "mode": "0400",
       "restart": ["munge.service"]}


def test_declared_files_are_added_in_name_order_with_defaults_and_absent_ones_left_out():
    files = node_files(None, {"b": {"dest": "/etc/b", "src": "/pki/b.pem", "mode": "644"},
                              "a": KEY, "c": {"dest": "/etc/c", "content": "x", "mode": "0644", "present": False}})
    assert files == [KEY, {"dest": "/etc/b", "src": "/pki/b.pem", "mode": "0644", "owner": "root", "group": "root",
                           "restart": []}]


def test_a_file_two_roles_declare_alike_is_kept_once_and_a_different_one_refused():
    ca = {"ca": {"dest": "/etc/msa-hpc/tls/ca.pem", "src": "/pki/ca.pem", "mode": "0644"}}
    once = node_files([], ca)
    assert node_files(once, ca) == once and len(once) == 1
    # a second role's CA restarts its own unit too; the input list is left as it was
    both = node_files(once, {"ca": dict(ca["ca"], restart=["emp-slave.service"])})
    assert both == [dict(once[0], restart=["emp-slave.service"])] and once[0]["restart"] == []
    with pytest.raises(AnsibleFilterError, match="/etc/msa-hpc/tls/ca.pem is declared twice"):
        node_files(once, {"ca": dict(ca["ca"], src="/pki/other.pem")})


@pytest.mark.parametrize("entry, message", [
    ({"dest": "etc/x", "content": "", "mode": "0644"}, "dest must be an absolute path"),
    ({"dest": "/etc/../root/x", "content": "", "mode": "0644"}, "dest must be an absolute path"),
    ({"dest": "/etc/x", "mode": "0644"}, "give content or src, exactly one"),
    ({"dest": "/etc/x", "content": "a", "src": "/b", "mode": "0644"}, "give content or src, exactly one"),
    ({"dest": "/etc/x", "src": "", "mode": "0644"}, "src must name a file on the control host"),
    ({"dest": "/etc/x", "content": "a", "mode": 420}, "mode must be a quoted octal string"),
    ({"dest": "/etc/x", "content": "a", "mode": "4755"}, "mode must be a quoted octal string"),
    ({"dest": "/etc/x", "content": "a", "mode": "0644", "restart": "munge.service"}, "restart must be a list"),
    ({"dest": "/etc/x", "content": "a", "mode": "0644", "present": "False"}, "present must be a boolean"),
    ({"dest": "/etc/x", "content": "a", "mode": "0644", "template": "x.j2"}, "unknown field template"),
])
def test_a_malformed_declaration_is_refused_naming_the_entry_and_field(entry, message):
    with pytest.raises(AnsibleFilterError, match=message) as refused:
        node_files([], {"thefile": entry})
    assert "'thefile'" in str(refused.value)


def test_the_input_and_declaration_must_be_lists_and_mappings():
    with pytest.raises(AnsibleFilterError, match="input must be a list"):
        node_files({}, {})
    with pytest.raises(AnsibleFilterError, match="mapping of names to files"):
        node_files([], "munge.key")
    assert node_files([], [KEY]) == [KEY]
