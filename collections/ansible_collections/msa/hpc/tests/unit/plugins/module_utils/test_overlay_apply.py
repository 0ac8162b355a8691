# SPDX-License-Identifier: GPL-3.0-or-later
"""node/overlay_apply: the node checks the whole overlay before it writes, writes atomically with modes and owners,
restarts only the units of files that changed, records the applied hash, and a second apply changes nothing."""
from __future__ import annotations

import base64
import grp
import hashlib
import json
import os
import pwd
import subprocess

import pytest

from ansible_collections.msa.hpc.plugins.module_utils import _overlay as O
from ansible_collections.msa.hpc.plugins.module_utils.node import overlay_apply as A

USER = pwd.getpwuid(os.getuid()).pw_name
GROUP = grp.getgrgid(os.getgid()).gr_name


@pytest.fixture
def node(tmp_path):
    """Two allowed roots and the client's state directory, all in tmp_path; ``restarts`` records the restarts."""
    roots = (str(tmp_path / "etc"), str(tmp_path / "lib"))
    os.mkdir(roots[0])
    restarts = []

    def restart(units, reload):
        restarts.append(list(units))

    return {"roots": roots, "etc": tmp_path / "etc", "state": str(tmp_path / "lib/state"), "restarts": restarts,
            "restart": restart, "token": str(tmp_path / "etc/overlay.token")}


def raw(node_name, files):
    """The server's answer for ``files`` [(path, bytes, mode, restart)]."""
    entries = [O.check_entry({"path": p, "size": len(d), "sha256": hashlib.sha256(d).hexdigest(), "mode": m,
                              "owner": USER, "group": GROUP, "restart": r}, roots=("/",)) for p, d, m, r in files]
    document = O.manifest(node_name, entries)
    contents = {p: base64.b64encode(d).decode() for p, d, _m, _r in files}
    document["files"] = [dict(e, content=contents[e["path"]]) for e in document["files"]]
    return json.dumps(document).encode()


def files(node, munge=b"key-1", conf=b"conf-1"):
    return [(str(node["etc"] / "munge/munge.key"), munge, "0400", ["munge.service"]),
            (str(node["etc"] / "slurm/slurm.conf"), conf, "0644", ["slurmd.service"]),
            (str(node["etc"] / "msa-hpc/node.json"), b"{}", "0644", [])]


def apply(node, answer, check_mode=False):
    document = A.parse_overlay(answer, "cm01", roots=node["roots"])
    return A.apply(document, node["token"], node["state"], restart=node["restart"], check_mode=check_mode,
                   roots=node["roots"])


def test_first_apply_writes_files_with_modes_restarts_their_units_and_records_the_hash(node):
    result = apply(node, raw("cm01", files(node)))
    assert result["changed"] and len(result["written"]) == 3
    key = node["etc"] / "munge/munge.key"
    assert key.read_bytes() == b"key-1" and oct(key.stat().st_mode & 0o777) == "0o400"
    assert node["restarts"] == [["munge.service", "slurmd.service"]]
    with open(os.path.join(node["state"], "overlay.hash"), encoding="utf-8") as handle:
        assert handle.read().strip() == result["hash"]
    assert not os.path.exists(os.path.join(node["state"], "overlay.restart"))


def test_a_second_apply_changes_nothing_and_restarts_nothing(node):
    apply(node, raw("cm01", files(node)))
    stamps = {p: os.stat(p).st_mtime_ns for p, _d, _m, _r in files(node)}
    node["restarts"].clear()
    again = apply(node, raw("cm01", files(node)))
    assert not again["changed"] and again["written"] == [] and again["restarted"] == []
    assert node["restarts"] == [] and stamps == {p: os.stat(p).st_mtime_ns for p in stamps}


def test_only_the_units_of_changed_files_restart(node):
    apply(node, raw("cm01", files(node)))
    node["restarts"].clear()
    result = apply(node, raw("cm01", files(node, conf=b"conf-2")))
    assert result["written"] == [str(node["etc"] / "slurm/slurm.conf")]
    assert node["restarts"] == [["slurmd.service"]]
    (node["etc"] / "munge/munge.key").chmod(0o644)  # drift on the node is put right, and its unit restarted
    node["restarts"].clear()
    result = apply(node, raw("cm01", files(node, conf=b"conf-2")))
    assert result["written"] == [str(node["etc"] / "munge/munge.key")] and node["restarts"] == [["munge.service"]]


def test_check_mode_says_what_would_change_and_changes_nothing(node):
    result = apply(node, raw("cm01", files(node)), check_mode=True)
    assert result["changed"] and len(result["written"]) == 3 and result["restarted"]
    assert list(node["etc"].iterdir()) == [] and node["restarts"] == [] and not os.path.exists(node["state"])


def test_a_symlinked_directory_on_the_way_is_refused_and_nothing_changes(node, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (node["etc"] / "munge").symlink_to(outside)
    with pytest.raises(O.OverlayError, match=r"munge is a symlink, not a directory"):
        apply(node, raw("cm01", files(node)))
    assert list(outside.iterdir()) == [] and not (node["etc"] / "slurm").exists() and node["restarts"] == []


def test_a_symlink_at_the_target_is_refused(node, tmp_path):
    (node["etc"] / "msa-hpc").mkdir()
    (node["etc"] / "msa-hpc/node.json").symlink_to(tmp_path / "victim")
    with pytest.raises(O.OverlayError, match="exists and is not a regular file"):
        apply(node, raw("cm01", files(node)))
    assert not (tmp_path / "victim").exists() and not (node["etc"] / "munge").exists()


def test_content_that_does_not_match_its_sha256_is_refused_naming_the_file(node):
    answer = json.loads(raw("cm01", files(node)))
    next(e for e in answer["files"] if e["path"].endswith("munge.key"))["content"] = base64.b64encode(b"evil").decode()
    with pytest.raises(O.OverlayError, match=r"munge.key: content \(4 bytes, sha256 .*\) does not match"):
        apply(node, json.dumps(answer).encode())
    assert list(node["etc"].iterdir()) == []


@pytest.mark.parametrize("path", ["/root/.ssh/authorized_keys", "{etc}/../x", "{etc}"])
def test_a_path_outside_the_allowed_roots_is_refused_before_anything_is_written(node, path):
    bad = files(node) + [(path.format(etc=node["etc"]), b"x", "0644", [])]
    with pytest.raises(O.OverlayError, match="outside the directories|not a normalised path"):
        apply(node, raw("cm01", bad))
    assert list(node["etc"].iterdir()) == []


def test_an_overlay_for_another_node_is_refused(node):
    with pytest.raises(O.OverlayError, match="it names node 'cm02'"):
        apply(node, raw("cm02", files(node)))


def test_an_unknown_owner_or_the_clients_own_files_are_refused_before_anything_is_written(node):
    answer = json.loads(raw("cm01", files(node)))
    next(e for e in answer["files"] if e["path"].endswith("node.json"))["owner"] = "no-such-user-x"
    answer["hash"] = O.overlay_hash([O.check_entry(e, roots=("/",)) for e in answer["files"]])
    with pytest.raises(O.OverlayError, match="node.json: owner: no user 'no-such-user-x'"):
        apply(node, json.dumps(answer).encode())
    assert list(node["etc"].iterdir()) == []
    with pytest.raises(O.OverlayError, match="overlay.token is the overlay client's own file"):
        apply(node, raw("cm01", files(node) + [(node["token"], b"mine", "0600", [])]))
    settings = str(node["etc"] / "overlay.json")
    with pytest.raises(O.OverlayError, match="overlay.json is the overlay client's own file"):
        A.apply(A.parse_overlay(raw("cm01", files(node) + [(settings, b"{}", "0644", [])]), "cm01",
                                roots=node["roots"]), node["token"], node["state"], restart=node["restart"],
                roots=node["roots"], protected=(settings,))


def test_a_failure_while_staging_replaces_nothing_and_leaves_no_temporary_file(node, monkeypatch):
    real, calls = A.F.stage_file, []

    def failing(path, data, mode, uid, gid):
        calls.append(path)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        return real(path, data, mode, uid, gid)

    monkeypatch.setattr(A.F, "stage_file", failing)
    with pytest.raises(O.OverlayError, match="nothing was replaced.*No space left"):
        apply(node, raw("cm01", files(node)))
    assert [p for p in node["etc"].rglob("*") if p.is_file()] == [] and node["restarts"] == []


def test_units_whose_restart_failed_are_restarted_at_the_next_run(node):
    def broken(units, reload):
        raise O.OverlayError("systemctl try-restart -- %s failed (1): unit failed" % " ".join(units))

    with pytest.raises(O.OverlayError, match="unit failed"):
        A.apply(A.parse_overlay(raw("cm01", files(node)), "cm01", roots=node["roots"]), node["token"],
                node["state"], restart=broken, roots=node["roots"])
    assert not os.path.exists(os.path.join(node["state"], "overlay.hash"))
    result = apply(node, raw("cm01", files(node)))
    assert result["written"] == [] and node["restarts"] == [["munge.service", "slurmd.service"]]
    assert result["changed"] and os.path.exists(os.path.join(node["state"], "overlay.hash"))
    node["restarts"].clear()
    assert not apply(node, raw("cm01", files(node)))["changed"] and node["restarts"] == []


@pytest.mark.parametrize("settings, says", [
    ({"url": "https://mgmt:8473/x"}, "is not https://<host>:<port>"),
    ({"url": "https://mgmt:8473", "token_file": "relative"}, "token_file 'relative' is not an absolute path"),
    ({"url": "https://mgmt:8473", "retries": -1}, "retries -1 is not a number"),
    ({"url": "https://mgmt:8473", "validate_certs": False}, "unknown setting validate_certs"),
    ({"url": "https://mgmt:8473", "node": "../cm02"}, "node: '../cm02' is not a node name"),
])
def test_the_settings_are_checked_naming_the_setting(tmp_path, settings, says):
    path = tmp_path / "overlay.json"
    path.write_text(json.dumps(settings))
    with pytest.raises(O.OverlayError, match=says):
        A.load_config(str(path))


class FakeSystemd:
    """subprocess.run for systemctl: ``states`` gives each unit's LoadState, ``fail`` the commands that fail."""

    def __init__(self, states, fail=()):
        self.states, self.fail, self.calls = states, fail, []

    def __call__(self, argv, **_kwargs):
        self.calls.append(argv)
        code = 1 if argv[1] in self.fail else 0
        out = "\n\n".join(self.states[u] for u in argv[argv.index("--") + 1:]) + "\n" if argv[1] == "show" else ""
        return subprocess.CompletedProcess(argv, code, out, "Job failed" if code else "")


def test_systemctl_reloads_when_asked_and_restarts_only_the_units_systemd_knows():
    fake = FakeSystemd({"munge.service": "loaded", "gone.service": "not-found", "slurmd.service": "loaded"})
    unknown = A.systemctl(["munge.service", "gone.service", "slurmd.service"], True, no_block=True, run=fake)
    assert unknown == ["gone.service"]
    assert fake.calls[0] == ["systemctl", "daemon-reload"]
    assert fake.calls[-1] == ["systemctl", "try-restart", "--no-block", "--", "munge.service", "slurmd.service"]
    fake = FakeSystemd({"gone.service": "not-found"})
    assert A.systemctl(["gone.service"], False, run=fake) == ["gone.service"] and len(fake.calls) == 1


def test_a_failed_restart_names_the_command():
    fake = FakeSystemd({"munge.service": "loaded"}, fail=("try-restart",))
    with pytest.raises(O.OverlayError, match=r"systemctl try-restart -- munge.service failed \(1\): Job failed"):
        A.systemctl(["munge.service"], False, run=fake)


def test_a_unit_not_installed_does_not_block_the_apply(node):
    node["restart"] = lambda units, reload: [u for u in units if u == "munge.service"]
    result = apply(node, raw("cm01", files(node)))
    assert result["restarted"] == ["slurmd.service"] and result["not_installed"] == ["munge.service"]
    assert os.path.exists(os.path.join(node["state"], "overlay.hash"))


def test_systemctl_starts_the_units_systemd_knows_when_asked():
    fake = FakeSystemd({"munge.service": "loaded", "gone.service": "not-found"})
    assert A.systemctl(["munge.service", "gone.service"], False, no_block=True, run=fake, action="start") == [
        "gone.service"]
    assert fake.calls[-1] == ["systemctl", "start", "--no-block", "--", "munge.service"]


@pytest.fixture
def booted(node, monkeypatch):
    """main() against ``node``'s roots, with the overlay of files(node) as the server's answer; ``calls`` records
    each systemctl call as (action, units)."""
    calls = []
    answer = raw("cm01", files(node))
    config = {"node": "cm01", "token_file": node["token"], "state_dir": node["state"]}
    parse, apply_ = A.parse_overlay, A.apply
    monkeypatch.setattr(A, "load_config", lambda path, name=None: config)
    monkeypatch.setattr(A, "read_token", lambda path: "t")
    monkeypatch.setattr(A, "fetch", lambda conf, token, sleep=None: answer)
    monkeypatch.setattr(A, "parse_overlay", lambda text, name: parse(text, name, roots=node["roots"]))
    monkeypatch.setattr(A, "apply", lambda *args, **kwargs: apply_(*args, roots=node["roots"], **kwargs))

    def restart(units, reload, action="try-restart"):
        calls.append((action, list(units)))

    return calls, restart


def test_at_boot_every_unit_of_the_overlay_is_started_after_its_files_are_in(booted, capsys):
    calls, restart = booted
    assert A.main(["--no-block", "--start"], restart=restart) == 0
    assert calls == [("try-restart", ["munge.service", "slurmd.service"]),
                     ("start", ["munge.service", "slurmd.service"])]
    assert json.loads(capsys.readouterr().out)["started"] == ["munge.service", "slurmd.service"]
    calls.clear()  # the next boot: nothing changed, yet the services are started (the image enables none)
    assert A.main(["--start"], restart=restart) == 0
    assert calls == [("start", ["munge.service", "slurmd.service"])]


def test_without_start_or_in_check_mode_no_unit_is_started(booted):
    calls, restart = booted
    assert A.main(["--start", "--check"], restart=restart) == 0 and calls == []
    assert A.main([], restart=restart) == 0
    assert [action for action, _units in calls] == ["try-restart"]
