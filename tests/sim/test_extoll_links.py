# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

"""The harness CLI that cables EXTOLL nodes: veth pairs between network namespaces, made once, repaired when cut."""

import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

from ansible_collections.msa.hpc.plugins.module_utils.extoll import topology as T

REPO = pathlib.Path(__file__).resolve().parents[2]
ENV = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO / "sim"), str(REPO / "collections")]))

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("ip") or not shutil.which("unshare")
                                or not shutil.which("nsenter"),
                                reason="needs root, iproute2 and util-linux to make network namespaces")


@pytest.fixture
def ring(tmp_path):
    """Three processes in their own network namespaces and the .td of a 3-node torus ring between them."""
    procs = [subprocess.Popen(["unshare", "--net", "sleep", "120"]) for _ in range(3)]
    topo = T.generate("torus", [3])
    td = tmp_path / "ring.td"
    td.write_text(T.to_td(topo))
    pids = {node.guid: proc.pid for node, proc in zip((topo.nodes[i] for i in sorted(topo.nodes)), procs)}
    try:
        yield td, pids
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


def links_cli(td, pids, action="ensure", extra=()):
    args = [sys.executable, "-m", "msa_sim.harness.extoll_links", action, "--td", str(td)]
    for guid, pid in pids.items():
        args += ["--map", "0x%x=pid:%d" % (guid, pid)]
    proc = subprocess.run(args + list(extra), capture_output=True, text=True, env=ENV)
    return proc.returncode, json.loads(proc.stdout.splitlines()[0])


def ext_links(pid):
    out = subprocess.run(["nsenter", "--target", str(pid), "--net", "ip", "-j", "link", "show"],
                         capture_output=True, text=True, check=True).stdout
    return {link["ifname"].split("@")[0]: "UP" in link["flags"] for link in json.loads(out)
            if link["ifname"].startswith("ext")}


def test_ensure_cables_every_link_once_and_reports_no_change_the_second_time(ring):
    td, pids = ring
    rc, first = links_cli(td, pids)
    assert rc == 0 and first["changed"]
    assert sorted(first["created"]) == ["1 1 <-> 0 2", "2 1 <-> 0 3", "3 1 <-> 0 1"]
    for pid in pids.values():
        assert ext_links(pid) == {"ext0": True, "ext1": True}
    rc, second = links_cli(td, pids)
    assert rc == 0 and second["created"] == [] and second["present"] == 3 and not second["changed"]


def test_a_cut_or_lowered_link_is_repaired_and_only_that_one(ring):
    td, pids = ring
    links_cli(td, pids)
    first, second, third = pids.values()
    subprocess.run(["nsenter", "--target", str(first), "--net", "ip", "link", "del", "ext1"], check=True)
    subprocess.run(["nsenter", "--target", str(third), "--net", "ip", "link", "set", "ext0", "down"], check=True)
    rc, report = links_cli(td, pids)
    assert rc == 0 and report["changed"]
    assert report["created"] == ["1 1 <-> 0 2"] and report["present"] == 2
    assert report["raised"] == ["pid:%d:ext0" % third]
    assert ext_links(first) == {"ext0": True, "ext1": True} and ext_links(second)["ext0"]


def test_links_to_a_stopped_node_are_skipped_and_named(ring):
    td, pids = ring
    guids = list(pids)
    stopped = dict(pids)
    stopped[guids[1]] = 0
    rc, report = links_cli(td, stopped)
    assert rc == 0
    assert report["created"] == ["3 1 <-> 0 1"]
    assert sorted(s["link"] for s in report["skipped"]) == ["1 1 <-> 0 2", "2 1 <-> 0 3"]
    assert all("is not running" in s["reason"] for s in report["skipped"])


def test_remove_deletes_the_links_and_a_missing_guid_is_an_error(ring):
    td, pids = ring
    links_cli(td, pids)
    rc, report = links_cli(td, pids, action="remove")
    assert rc == 0 and len(report["removed"]) == 3
    assert all(ext_links(pid) == {} for pid in pids.values())
    partial = dict(list(pids.items())[:2])
    rc, report = links_cli(td, partial)
    assert rc == 1 and report["failed"] and "--map has no node for GUID" in report["msg"]
