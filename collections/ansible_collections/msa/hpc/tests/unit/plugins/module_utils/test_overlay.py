# SPDX-License-Identifier: GPL-3.0-or-later
"""module_utils/_overlay: the overlay's manifest is refused when a path leaves the allowed roots, a value is not what
its field takes, a bound is passed or the hash is not that of its entries; errors name the field and the value."""
from __future__ import annotations

import hashlib

import pytest

from ansible_collections.msa.hpc.plugins.module_utils import _overlay as O


def entry(path="/etc/msa-hpc/node.json", data=b"x", **fields):
    return dict({"path": path, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}, **fields)


@pytest.mark.parametrize("name", ["cm01", "esb-12", "node_1", "cm01.cluster.example"])
def test_node_names_are_accepted(name):
    assert O.check_node(name) == name


@pytest.mark.parametrize("name", ["", "..", ".", "cm01/../esb01", "-rf", "a b", "x" * 64, "cm01.", "%2e%2e",
                                  "cm01\n", None, 7])
def test_malformed_node_names_are_refused_naming_the_value(name):
    with pytest.raises(O.OverlayError, match="node: .* is not a node name"):
        O.check_node(name)


@pytest.mark.parametrize("path, says", [
    ("/etc/../root/.ssh/authorized_keys", "not a normalised path"),
    ("/var/lib/msa-hpc/../../../root/x", "not a normalised path"),
    ("etc/passwd", "not an absolute path"),
    ("/etc//shadow", "not a normalised path"),
    ("/etc/./x", "not a normalised path"),
    ("/etc/x/", "not a normalised path"),
    ("/etc", "outside the directories"),
    ("/etcetera/x", "outside the directories"),
    ("/var/lib/msa-hpcX/x", "outside the directories"),
    ("/root/.ssh/authorized_keys", "outside the directories"),
    ("/usr/bin/sudo", "outside the directories"),
    ("/etc/x\ny", "printable"),
    ("/etc/" + "a" * 1100, "1 to 1024 characters"),
])
def test_paths_outside_the_allow_list_or_not_normalised_are_refused(path, says):
    with pytest.raises(O.OverlayError, match=says) as failure:
        O.check_path(path)
    assert repr(path)[:40] in str(failure.value)


def test_paths_inside_the_roots_are_accepted():
    assert O.check_path("/etc/slurm/slurm.conf") == "/etc/slurm/slurm.conf"
    assert O.check_path("/var/lib/msa-hpc/overlay/x") == "/var/lib/msa-hpc/overlay/x"


@pytest.mark.parametrize("field, value, says", [
    ("mode", "4755", "set-id or sticky"),
    ("mode", "rw-r--r--", "not an octal mode"),
    ("mode", "08", "not an octal mode"),
    ("owner", "root;rm", "not a user or group name"),
    ("group", "-x", "not a user or group name"),
    ("restart", ["slurmd"], "not a systemd unit name"),
    ("restart", ["--now.service"], "not a systemd unit name"),
    ("restart", "slurmd.service", "not a list"),
    ("size", O.MAX_FILE_BYTES + 1, "not a number of bytes"),
    ("size", -1, "not a number of bytes"),
    ("sha256", "A" * 64, "not a SHA-256"),
    ("color", "red", "unknown field color"),
])
def test_entry_fields_are_checked_naming_field_and_value(field, value, says):
    with pytest.raises(O.OverlayError, match=says) as failure:
        O.check_entry(dict(entry(), **{field: value}), where="files[3]")
    assert "files[3]" in str(failure.value)


def test_a_mount_and_an_automount_are_units_an_overlay_may_restart():
    got = O.check_entry(dict(entry(), restart=["scratch.automount", "home.mount", "munge.service"]), where="files[0]")
    assert sorted(got["restart"]) == ["home.mount", "munge.service", "scratch.automount"]
    with pytest.raises(O.OverlayError, match="not a systemd unit name"):
        O.check_entry(dict(entry(), restart=["scratch.swap"]), where="files[0]")


def test_entry_defaults_and_normal_form():
    checked = O.check_entry(entry(restart=["b.service", "a.service", "a.service"], mode=0o600))
    assert checked["mode"] == "0600" and checked["owner"] == checked["group"] == "root"
    assert checked["restart"] == ["a.service", "b.service"]


def test_the_manifest_hash_covers_every_field_and_the_content():
    base = [O.check_entry(entry())]
    variants = [dict(base[0], mode="0600"), dict(base[0], owner="daemon"), dict(base[0], restart=["x.service"]),
                dict(base[0], sha256=hashlib.sha256(b"y").hexdigest()), dict(base[0], path="/etc/other")]
    hashes = {O.overlay_hash(base)} | {O.overlay_hash([v]) for v in variants}
    assert len(hashes) == 1 + len(variants)


def test_a_manifest_is_checked_whole():
    document = O.manifest("cm01", [O.check_entry(entry("/etc/b")), O.check_entry(entry("/etc/a"))])
    assert [e["path"] for e in O.check_manifest(document, "cm01")["files"]] == ["/etc/a", "/etc/b"]
    with pytest.raises(O.OverlayError, match="it names node 'cm01'"):
        O.check_manifest(document, "cm02")
    with pytest.raises(O.OverlayError, match="hash 'f+' is not that of its entries"):
        O.check_manifest(dict(document, hash="f" * 64), "cm01")
    with pytest.raises(O.OverlayError, match="format 2"):
        O.check_manifest(dict(document, format=2), "cm01")


@pytest.mark.parametrize("paths, says", [
    (["/etc/a", "/etc/a"], "/etc/a is listed twice"),
    (["/etc/a", "/etc/a/b"], "/etc/a is a file, and /etc/a/b would be inside it"),
    (["/etc/a/b/c", "/etc/a"], "/etc/a is a file, and /etc/a/b/c would be inside it"),
])
def test_a_manifest_with_one_path_twice_or_inside_a_file_is_refused(paths, says):
    entries = [O.check_entry(entry(p)) for p in paths]
    with pytest.raises(O.OverlayError, match=says):
        O.check_manifest(O.manifest("cm01", entries), "cm01")


def test_an_oversized_overlay_is_refused():
    count = O.MAX_OVERLAY_BYTES // O.MAX_FILE_BYTES + 1
    entries = [O.check_entry(dict(entry("/etc/f%d" % i), size=O.MAX_FILE_BYTES)) for i in range(count)]
    with pytest.raises(O.OverlayError, match="bytes in all, more than %d" % O.MAX_OVERLAY_BYTES):
        O.check_manifest(O.manifest("cm01", entries), "cm01")
    many = [O.check_entry(entry("/etc/f%d" % i)) for i in range(O.MAX_FILES + 1)]
    with pytest.raises(O.OverlayError, match="at most %d entries" % O.MAX_FILES):
        O.check_manifest(O.manifest("cm01", many), "cm01")
