# SPDX-License-Identifier: GPL-3.0-or-later
"""The overlay_publish action: every file's content (given or read from src) leaves ``nodes`` for the module's
no_log ``_contents``, under a reference naming the node and file; both given, or an unreadable src, fail naming it."""
from __future__ import annotations

import base64

import pytest
from ansible.errors import AnsibleActionFail

from ansible_collections.msa.hpc.plugins.action.overlay_publish import split_contents


def read(where, src):
    if src == "missing":
        raise AnsibleActionFail("%s: cannot read src %r on the control host" % (where, src))
    return b"file " + src.encode()


def test_contents_leave_the_arguments_for_references():
    nodes = {"cm01": [{"dest": "/etc/munge/munge.key", "src": "munge.key", "mode": "0400"},
                      {"dest": "/etc/msa-hpc/node.json", "content": "{}"}],
             "cm02": [{"dest": "/etc/a"}]}
    sent, contents = split_contents(nodes, read)
    assert sent == {"cm01": [{"dest": "/etc/munge/munge.key", "mode": "0400", "_content": "nodes.cm01[0]"},
                             {"dest": "/etc/msa-hpc/node.json", "_content": "nodes.cm01[1]"}],
                    "cm02": [{"dest": "/etc/a"}]}
    decoded = {k: base64.b64decode(v) for k, v in contents.items()}
    assert decoded == {"nodes.cm01[0]": b"file munge.key", "nodes.cm01[1]": b"{}"}
    assert "src" in nodes["cm01"][0]  # the task's own arguments are left as they were


@pytest.mark.parametrize("nodes, says", [
    ({"cm01": [{"dest": "/etc/a", "src": "a", "content": "b"}]}, r"nodes.cm01\[0\] \(/etc/a\): give content or src"),
    ({"cm01": [{"dest": "/etc/a", "src": "missing"}]}, r"nodes.cm01\[0\]: cannot read src 'missing'"),
    ({"cm01": "x"}, "nodes.cm01: a list of files is required"),
    (["cm01"], "nodes: a mapping"),
])
def test_bad_arguments_fail_naming_the_node_and_file(nodes, says):
    with pytest.raises(AnsibleActionFail, match=says):
        split_contents(nodes, read)
