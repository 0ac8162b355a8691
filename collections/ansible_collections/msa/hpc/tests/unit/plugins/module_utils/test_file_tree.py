# SPDX-License-Identifier: GPL-3.0-or-later
"""module_utils/_file_tree: a tree installed in one pass, written only where it differs, check mode, bad paths."""
from __future__ import annotations

import os

import pytest

from ansible_collections.msa.hpc.plugins.module_utils._file_tree import TreeError, install


def test_first_install_writes_everything_then_nothing(tmp_path):
    dest = str(tmp_path / "code")
    files = {"a.py": b"A", "pkg/b.py": b"B"}
    first = install(dest, files, empty=[str(tmp_path / "__init__.py")])
    assert first["changed"] and first["written"] == [str(tmp_path / "__init__.py"), "a.py", "pkg/b.py"]
    assert first["made"] == [dest, dest + "/pkg"]
    assert (tmp_path / "code/pkg/b.py").read_bytes() == b"B"
    assert oct(os.stat(dest + "/a.py").st_mode & 0o7777) == "0o644"
    again = install(dest, files, empty=[str(tmp_path / "__init__.py")])
    assert not again["changed"] and again["written"] == again["made"] == again["removed"] == []


def test_changed_content_and_mode_are_rewritten_alone(tmp_path):
    dest = str(tmp_path)
    install(dest, {"a": b"1", "b": b"2"})
    (tmp_path / "a").write_bytes(b"tampered")
    os.chmod(tmp_path / "b", 0o666)
    result = install(dest, {"a": b"1", "b": b"2"})
    assert result["written"] == ["a", "b"]
    assert (tmp_path / "a").read_bytes() == b"1" and os.stat(tmp_path / "b").st_mode & 0o7777 == 0o644


def test_check_mode_reports_and_changes_nothing(tmp_path):
    old = tmp_path / "old.py"
    old.write_text("x")
    result = install(str(tmp_path / "new"), {"a": b"1"}, absent=[str(old)], check_mode=True)
    assert result["changed"] and result["written"] == ["a"] and result["removed"] == [str(old)]
    assert not (tmp_path / "new").exists() and old.exists()


def test_absent_files_go_and_missing_ones_change_nothing(tmp_path):
    old = tmp_path / "old.py"
    old.write_text("x")
    assert install(str(tmp_path), {}, absent=[str(old)])["removed"] == [str(old)]
    assert not old.exists()
    assert not install(str(tmp_path), {}, absent=[str(old)])["changed"]


@pytest.mark.parametrize("rel", ["../x", "/etc/passwd", "a/../../x", "", "a//b"])
def test_paths_outside_the_tree_are_refused_by_name(tmp_path, rel):
    with pytest.raises(TreeError, match="files: .* is not a plain relative path"):
        install(str(tmp_path / "d"), {rel: b"x"})
    assert not (tmp_path / "d").exists()


def test_a_directory_in_place_of_a_file_or_in_absent_is_refused(tmp_path):
    (tmp_path / "a").mkdir()
    with pytest.raises(TreeError, match="is not a regular file"):
        install(str(tmp_path), {"a": b"x"})
    with pytest.raises(TreeError, match="absent: .* is a directory"):
        install(str(tmp_path), {}, absent=[str(tmp_path / "a")])


def test_unknown_owner_and_relative_dest_are_named(tmp_path):
    with pytest.raises(TreeError, match="owner: no user 'no-such-user'"):
        install(str(tmp_path), {"a": b"x"}, owner="no-such-user")
    with pytest.raises(TreeError, match="dest: 'rel' is not an absolute path"):
        install("rel", {"a": b"x"})
