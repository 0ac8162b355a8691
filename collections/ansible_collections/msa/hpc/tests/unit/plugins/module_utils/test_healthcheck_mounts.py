# SPDX-License-Identifier: GPL-3.0-or-later
"""The health check's mount test: bounded (a statfs in a child that must answer in time), mountinfo for what is
mounted at all, and the node drained with a reason naming the mount, resumed when it is back."""
from __future__ import annotations

import io
import json
import subprocess
import time

import pytest

from ansible_collections.msa.hpc.plugins.module_utils.node import healthcheck as H

# /proc/self/mountinfo of a client whose /home is mounted over its automount, whose /scratch has only the
# automount (the mount is gone) and whose "/data set" has a blank in its name (octal escape)
MOUNTINFO = """\
21 1 0:20 / / rw,relatime - overlay overlay rw,lowerdir=/l
45 21 0:44 / /home rw,relatime shared:20 - autofs systemd-1 rw,fd=30,pgrp=1,timeout=0
52 45 0:49 / /home rw,relatime shared:25 - fuse.glusterfs 10.45.0.121:/home rw,user_id=0,group_id=0
46 21 0:45 / /scratch rw,relatime shared:21 - autofs systemd-1 rw,fd=41,pgrp=1,timeout=0
60 21 0:50 / /data\\040set rw - fuse.glusterfs 10.45.0.121:/data rw
"""


def test_mountinfo_gives_the_file_system_on_top_of_each_mount_point():
    mounts = H.mounted_filesystems(MOUNTINFO)
    assert mounts == {"/": "overlay", "/home": "fuse.glusterfs", "/scratch": "autofs", "/data set": "fuse.glusterfs"}


def fake_runs(results):
    """bounded_runs that answers each path's statfs from ``results`` (path -> (rc, stderr) or None: no answer)."""
    def runs(argvs, timeout):
        assert all(argv[:4] == ["/usr/bin/stat", "--file-system", "--format=%T", "--"] for argv in argvs)
        return [results[argv[-1]] for argv in argvs]
    return runs


def test_a_healthy_mount_has_no_problem():
    runs = fake_runs({"/home": (0, ""), "/": (0, "")})
    assert H.mount_problems(["/", "/home"], 5, runs=runs, mountinfo=lambda: MOUNTINFO) == []


def test_a_mount_that_is_gone_or_only_an_automount_is_not_mounted():
    runs = fake_runs({"/scratch": (0, ""), "/apps": (0, "")})
    assert H.mount_problems(["/scratch", "/apps"], 5, runs=runs, mountinfo=lambda: MOUNTINFO) == [
        "/scratch: not mounted", "/apps: not mounted"]


def test_a_mount_whose_server_is_gone_says_what_statfs_answered():
    runs = fake_runs({"/home": (1, "/usr/bin/stat: cannot read file system information for '/home': "
                                   "Transport endpoint is not connected\n"),
                      "/data set": None})
    assert H.mount_problems(["/home", "/data set"], 2.5, runs=runs, mountinfo=lambda: MOUNTINFO) == [
        "/home: Transport endpoint is not connected", "/data set: no answer within 2.5 s"]


def test_a_child_that_hangs_is_given_up_after_the_timeout_and_the_others_still_answer():
    start = time.monotonic()
    results = H.bounded_runs([["sleep", "60"], ["sh", "-c", "echo gone >&2; exit 3"], ["true"]], 0.5)
    elapsed = time.monotonic() - start
    assert results == [None, (3, "gone\n"), (0, "")]
    assert elapsed < 30   # bounded: without the timeout the sleeping child would hold it for 60 s


def test_a_hanging_statfs_drains_instead_of_hanging_the_check():
    def hanging(argvs, timeout):   # a dead network mount: statfs never returns; a sleeping child stands in
        return H.bounded_runs([["sleep", "60"] for dummy in argvs], timeout)

    def probe(paths):
        return H.mount_problems(paths, 0.3, runs=hanging, mountinfo=lambda: MOUNTINFO)
    with pytest.raises(H.CheckFailed, match=r"^mount /home: no answer within 0.3 s$"):
        H.check_mounts(["/home"], probe=probe)


def test_the_real_root_file_system_is_mounted_and_answers():
    assert H.mount_problems(["/"], 20) == []


def _main(tmp_path, node_json, problems):
    path = tmp_path / "hc.json"
    path.write_text(json.dumps({"node": "cm01", "mounts": ["/", "/home"], "mount_timeout": 5}))
    issued = []

    def run(argv, stdin=None, timeout=20):
        issued.append(argv)
        if argv[:2] == ["sinfo", "--json"]:
            return subprocess.CompletedProcess(argv, 0, node_json, "")
        return subprocess.CompletedProcess(argv, 0, "CRED", "")
    assert H.main([str(path)], make_client=None, run=run, probe=lambda paths: problems, err=io.StringIO()) == 0
    return [a for a in issued if a[:2] == ["scontrol", "update"]]


def sinfo(flags=(), reason=""):
    return json.dumps({"meta": {}, "errors": [], "nodes": [
        {"name": "cm01", "state": "idle", "state_flags": list(flags), "reason": reason}]})


def test_a_node_whose_mount_is_gone_is_drained_naming_it_and_resumed_when_it_is_back(tmp_path):
    updates = _main(tmp_path, sinfo(), ["/home: not mounted"])
    assert updates == [["scontrol", "update", "nodename=cm01", "state=drain",
                        "reason=msa-health: mounts: mount /home: not mounted"]]
    drained = sinfo(["DRAIN"], "msa-health: mounts: mount /home: not mounted")
    assert _main(tmp_path, drained, ["/home: not mounted"]) == []   # the same failure: nothing to change
    assert _main(tmp_path, drained, []) == [["scontrol", "update", "nodename=cm01", "state=resume"]]
    assert _main(tmp_path, sinfo(["DRAIN"], "disk swap"), []) == []  # an operator's drain stays


@pytest.mark.parametrize("timeout", [0, -1, 61, "10", True])
def test_a_mount_timeout_that_is_not_a_bounded_number_is_refused(timeout):
    with pytest.raises(ValueError, match="mount_timeout: .* is not a number of seconds"):
        H.validate_config({"node": "cm01", "mounts": ["/home"], "mount_timeout": timeout})
