# SPDX-License-Identifier: GPL-3.0-or-later
"""The overlay_publish module: changed only when an overlay changed, check mode writes nothing, a bad request fails
naming the node and field, and the nodes' contents (secrets) never appear in its answer."""
from __future__ import annotations

import base64
import json

import pytest
from ansible.module_utils.testing import patch_module_args

from ansible_collections.msa.hpc.plugins.modules import overlay_publish

NODES = {"cm01": [{"dest": "/etc/munge/munge.key", "_content": "k", "mode": "0400", "restart": ["munge.service"]},
                  {"dest": "/etc/msa-hpc/node.json", "content": '{"name": "cm01"}'}]}
CONTENTS = {"k": base64.b64encode(b"munge-secret").decode()}


def run(capsys, **args):
    with patch_module_args(args):
        with pytest.raises(SystemExit):
            overlay_publish.main()
    return json.loads(capsys.readouterr().out)


def test_publish_changes_once_then_reports_no_change(tmp_path, capsys):
    first = run(capsys, store=str(tmp_path), nodes=NODES, _contents=CONTENTS)
    assert first["changed"] and first["nodes"]["cm01"]["changed"]
    assert "munge-secret" not in json.dumps(first) and CONTENTS["k"] not in json.dumps(first)
    assert first["nodes"]["cm01"]["files"] == ["/etc/msa-hpc/node.json", "/etc/munge/munge.key"]
    again = run(capsys, store=str(tmp_path), nodes=NODES, _contents=CONTENTS)
    assert not again["changed"] and again["nodes"]["cm01"]["hash"] == first["nodes"]["cm01"]["hash"]


def test_check_mode_reports_the_change_and_writes_nothing(tmp_path, capsys):
    result = run(capsys, store=str(tmp_path / "store"), nodes=NODES, _contents=CONTENTS,
                 _ansible_check_mode=True)
    assert result["changed"] and not (tmp_path / "store").exists()


@pytest.mark.parametrize("nodes, says", [
    ({"cm01": [{"dest": "/usr/bin/x", "content": "x"}]}, "nodes.cm01[0].dest: '/usr/bin/x' is outside"),
    ({"cm01": [{"dest": "/etc/x", "content": "x", "mode": "bad"}]}, "mode: 'bad' is not an octal mode"),
    ({"../x": []}, "node: '../x' is not a node name"),
])
def test_a_bad_request_fails_naming_node_and_field(tmp_path, capsys, nodes, says):
    result = run(capsys, store=str(tmp_path), nodes=nodes)
    assert result["failed"] and says in result["msg"] and not list(tmp_path.iterdir())


def test_a_store_mode_that_is_not_octal_fails_naming_the_option(tmp_path, capsys):
    result = run(capsys, store=str(tmp_path), nodes=NODES, _contents=CONTENTS, dir_mode="rwx")
    assert result["failed"] and result["msg"] == "dir_mode: 'rwx' is not an octal mode" and not list(tmp_path.iterdir())
