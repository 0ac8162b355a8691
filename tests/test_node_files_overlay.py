# SPDX-License-Identifier: GPL-3.0-or-later
"""The overlay path of a role's declared node files, end to end without a network: the declaration rendered as the
SSH path renders it, added with msa.hpc.node_files, split by overlay_publish's action, published into a store,
served, and applied by the node's msa-overlay-apply, writes each file with the declared bytes and mode, and restarts
the declared units; a second apply changes nothing."""
from __future__ import annotations

import grp
import json
import os
import pwd
from pathlib import Path

from ansible_collections.msa.hpc.plugins.action.overlay_publish import split_contents
from ansible_collections.msa.hpc.plugins.filter.node_files import node_files
from ansible_collections.msa.hpc.plugins.module_utils import _overlay as O
from ansible_collections.msa.hpc.plugins.module_utils import _overlay_store as S
from ansible_collections.msa.hpc.plugins.module_utils.node import overlay_apply as A
from tests.test_site_deploy_modes import declared

USER = pwd.getpwuid(os.getuid()).pw_name
GROUP = grp.getgrgid(os.getgid()).gr_name


def served_into(tmp_path, document):
    """The served document with every path moved from / into tmp_path (the manifest's hash made again)."""
    entries = [O.check_entry(dict({k: v for k, v in entry.items() if k != "content"},
                                  path=str(tmp_path) + entry["path"]), roots=(str(tmp_path / "etc"),))
               for entry in document["files"]]
    moved = O.manifest("cm01", entries)
    contents = {str(tmp_path) + e["path"]: e["content"] for e in document["files"]}
    moved["files"] = [dict(e, content=contents[e["path"]]) for e in moved["files"]]
    return json.dumps(moved).encode()


def test_declared_files_reach_the_node_through_its_overlay_as_declared(tmp_path):
    ca = tmp_path / "ca.pem"
    ca.write_bytes(b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
    files = node_files([], declared("slurmd", slurmd_conf_server="10.0.0.1:6817", slurmd_options="-b"))
    files = node_files(files, declared("munge", munge_key_path="/etc/munge/munge.key",
                                       munge_key={"content": "a2V5LW9mLXRoZS1zeXN0ZW0="}))
    files = node_files(files, {"ca": declared("common", "ca", common_tls_ca=str(ca),
                                              common_tls_ca_path="/etc/msa-hpc/tls/ca.pem")})
    wanted = {f["dest"]: (f["content"].encode() if "content" in f else ca.read_bytes(), int(f["mode"], 8))
              for f in files}
    assert wanted["/etc/munge/munge.key"] == (b"key-of-the-system", 0o400)
    # the node here has no munge account: this test's user stands for every owner
    sent, contents = split_contents({"cm01": [dict(f, owner=USER, group=GROUP) for f in files]},
                                    lambda where, src: Path(src).read_bytes())
    store = tmp_path / "store"
    S.publish(str(store), S.decode_request(sent, contents))
    raw = served_into(tmp_path, S.read_overlay(str(store), "cm01"))

    restarts = []
    roots = (str(tmp_path / "etc"), str(tmp_path / "var/lib/msa-hpc"))
    (tmp_path / "etc").mkdir()

    def run():
        return A.apply(A.parse_overlay(raw, "cm01", roots=roots), str(tmp_path / "etc/msa-hpc/overlay.token"),
                       str(tmp_path / "var/lib/msa-hpc"), restart=lambda units, reload: restarts.append(units),
                       roots=roots)

    first = run()
    for dest, (data, mode) in wanted.items():
        written = tmp_path / dest.lstrip("/")
        assert written.read_bytes() == data and (written.stat().st_mode & 0o7777) == mode, dest
    assert sorted(first["restarted"]) == ["munge.service", "slurmd.service"]
    assert run()["changed"] is False and restarts == [first["restarted"]]
