# SPDX-License-Identifier: GPL-3.0-or-later
"""module_utils/_overlay_store: the publisher writes each node's manifest and contents only when they differ, check
mode changes nothing, a bad request writes nothing, and the reader serves only what matches its digests."""
from __future__ import annotations

import base64
import json
import os

import pytest

from ansible_collections.msa.hpc.plugins.module_utils import _overlay as O
from ansible_collections.msa.hpc.plugins.module_utils import _overlay_store as S


def request(**nodes):
    return S.decode_request(nodes) if nodes else S.decode_request({
        "cm01": [{"dest": "/etc/msa-hpc/node.json", "content": '{"name": "cm01"}'},
                 {"dest": "/etc/munge/munge.key", "_content": "cm01/1", "mode": "0400", "owner": "root",
                  "restart": "munge.service"}],
        "cm02": [{"dest": "/etc/msa-hpc/node.json", "content": '{"name": "cm02"}'}]},
        {"cm01/1": base64.b64encode(b"\0key1").decode()})


def snapshot(root):
    return {str(p.relative_to(root)): (p.read_bytes(), p.stat().st_mtime_ns, oct(p.stat().st_mode))
            for p in sorted(root.rglob("*")) if p.is_file()}


def test_first_publish_writes_manifest_and_contents_then_nothing(tmp_path):
    first = S.publish(str(tmp_path), request())
    assert first["changed"] and first["nodes"]["cm01"]["changed"] and first["nodes"]["cm02"]["changed"]
    manifest = json.loads((tmp_path / "cm01/manifest.json").read_text())
    assert manifest["node"] == "cm01" and manifest["hash"] == first["nodes"]["cm01"]["hash"]
    key = next(e for e in manifest["files"] if e["path"] == "/etc/munge/munge.key")
    assert key["mode"] == "0400" and key["restart"] == ["munge.service"] and key["size"] == 5
    assert (tmp_path / "cm01/blobs" / key["sha256"]).read_bytes() == b"\0key1"
    assert oct(os.stat(tmp_path / "cm01/blobs" / key["sha256"]).st_mode & 0o777) == "0o640"
    before = snapshot(tmp_path)
    again = S.publish(str(tmp_path), request())
    assert not again["changed"] and not any(n["changed"] for n in again["nodes"].values())
    assert again["nodes"]["cm01"]["hash"] == first["nodes"]["cm01"]["hash"]
    assert snapshot(tmp_path) == before


def test_a_changed_file_changes_that_node_alone_and_its_old_content_goes(tmp_path):
    first = S.publish(str(tmp_path), request())
    old = next(e["sha256"] for e in json.loads((tmp_path / "cm01/manifest.json").read_text())["files"]
               if e["path"] == "/etc/msa-hpc/node.json")
    changed = request(cm01=[{"dest": "/etc/msa-hpc/node.json", "content": '{"name": "cm01", "v": 2}'}],
                      cm02=[{"dest": "/etc/msa-hpc/node.json", "content": '{"name": "cm02"}'}])
    second = S.publish(str(tmp_path), changed)
    assert second["nodes"]["cm01"]["changed"] and not second["nodes"]["cm02"]["changed"]
    assert second["nodes"]["cm01"]["hash"] != first["nodes"]["cm01"]["hash"]
    assert not (tmp_path / "cm01/blobs" / old).exists()
    assert len(list((tmp_path / "cm01/blobs").iterdir())) == 1


def test_check_mode_reports_the_change_and_writes_nothing(tmp_path):
    S.publish(str(tmp_path), request())
    before = snapshot(tmp_path)
    changed = request(cm01=[{"dest": "/etc/msa-hpc/node.json", "content": "new"}])
    result = S.publish(str(tmp_path), changed, prune=True, check_mode=True)
    assert result["changed"] and result["nodes"]["cm01"]["changed"] and result["pruned"] == ["cm02"]
    assert snapshot(tmp_path) == before
    empty = tmp_path / "fresh"
    assert S.publish(str(empty), request(), check_mode=True)["changed"] and not empty.exists()


def test_prune_removes_only_overlays_of_nodes_not_named(tmp_path):
    S.publish(str(tmp_path), request())
    (tmp_path / "lost+found").mkdir()
    result = S.publish(str(tmp_path), request(cm01=[{"dest": "/etc/a", "content": "a"}]), prune=True)
    assert result["pruned"] == ["cm02"] and not (tmp_path / "cm02").exists()
    assert (tmp_path / "cm01").is_dir() and (tmp_path / "lost+found").is_dir()


@pytest.mark.parametrize("nodes, says", [
    ({"../etc": []}, "node: '../etc' is not a node name"),
    ({"cm01": [{"dest": "/root/.ssh/authorized_keys", "content": "k"}]}, r"nodes.cm01\[0\].dest: .* outside"),
    ({"cm01": [{"dest": "/etc/../root/x", "content": "k"}]}, r"nodes.cm01\[0\].dest: .* not a normalised path"),
    ({"cm01": [{"dest": "/etc/a", "content": "k", "mode": "6755"}]}, "set-id"),
    ({"cm01": [{"dest": "/etc/a"}]}, "give exactly one of content and src"),
    ({"cm01": [{"dest": "/etc/a", "content": "k", "colour": 1}]}, "unknown field colour"),
    ({"cm01": [{"dest": "/etc/a", "_content": "cm01/0"}]}, "its content was not sent"),
    ({"cm01": [{"dest": "/etc/a", "content": "k"}, {"dest": "/etc/a", "content": "j"}]}, "listed twice"),
    ({"cm01": [{"dest": "/etc/a", "content": "k" * (O.MAX_FILE_BYTES + 1)}]}, "not a number of bytes up to"),
])
def test_a_bad_request_names_node_field_and_value_and_writes_nothing(tmp_path, nodes, says):
    nodes = dict(nodes, cm00=[{"dest": "/etc/a", "content": "fine"}])
    with pytest.raises(O.OverlayError, match=says):
        S.publish(str(tmp_path), S.decode_request(nodes))
    assert not list(tmp_path.iterdir())


def test_the_reader_gives_the_overlay_with_contents_and_checks_them(tmp_path):
    result = S.publish(str(tmp_path), request())
    document = S.read_overlay(str(tmp_path), "cm01")
    assert document["hash"] == result["nodes"]["cm01"]["hash"] == S.read_manifest(str(tmp_path), "cm01")["hash"]
    contents = {e["path"]: base64.b64decode(e["content"]) for e in document["files"]}
    assert contents == {"/etc/msa-hpc/node.json": b'{"name": "cm01"}', "/etc/munge/munge.key": b"\0key1"}
    assert S.read_overlay(str(tmp_path), "cm09") is None
    blob = next((tmp_path / "cm01/blobs").iterdir())
    blob.write_bytes(blob.read_bytes()[:-1] + b"!")
    with pytest.raises(S.StoreError, match="does not match its size and sha256") as failure:
        S.read_overlay(str(tmp_path), "cm01")
    assert not failure.value.busy
    blob.unlink()
    with pytest.raises(S.StoreError, match="being published") as failure:
        S.read_overlay(str(tmp_path), "cm01")
    assert failure.value.busy


def test_the_reader_refuses_a_manifest_edited_on_disk(tmp_path):
    S.publish(str(tmp_path), request())
    path = tmp_path / "cm01/manifest.json"
    manifest = json.loads(path.read_text())
    manifest["files"][0]["path"] = "/root/.bashrc"
    path.write_text(json.dumps(manifest))
    with pytest.raises(S.StoreError, match="outside the directories"):
        S.read_overlay(str(tmp_path), "cm01")
    manifest["files"][0]["path"] = "/etc/other"
    path.write_text(json.dumps(manifest))
    with pytest.raises(S.StoreError, match="is not that of its entries"):
        S.read_manifest(str(tmp_path), "cm01")
    path.write_bytes(b" " * (O.MAX_MANIFEST_BYTES + 1))
    with pytest.raises(S.StoreError, match="larger than"):
        S.read_manifest(str(tmp_path), "cm01")
