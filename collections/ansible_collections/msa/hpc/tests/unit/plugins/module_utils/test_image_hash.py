# SPDX-License-Identifier: GPL-3.0-or-later
"""The content hash of a node image (module_utils/_image_hash.py): stable, and changed by every input that matters."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from ansible_collections.msa.hpc.plugins.module_utils import _image_hash as H

ROLES = Path(__file__).resolve().parents[4] / "roles"


def make_role(root, name="demo", task="- name: Install x\n  ansible.builtin.package:\n    name: \"{{ demo_packages }}\"\n"):
    role = root / name
    (role / "tasks").mkdir(parents=True)
    (role / "defaults").mkdir()
    (role / "tasks" / "install.yml").write_text(task)
    (role / "defaults" / "main.yml").write_text("demo_packages: [a, b]\n")
    return role


def test_tree_digest_is_the_same_whatever_order_the_files_were_written_in(tmp_path):
    first, second = tmp_path / "one", tmp_path / "two"
    for root, order in ((first, ["a", "b/c", "b/d"]), (second, ["b/d", "a", "b/c"])):
        for rel in order:
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text("content of %s\n" % rel)
    assert H.tree_digest(first) == H.tree_digest(second)


def test_tree_digest_changes_with_a_file_content_name_new_file_or_executable_bit(tmp_path):
    role = make_role(tmp_path)
    digests = {H.tree_digest(role)}
    (role / "tasks" / "install.yml").write_text((role / "tasks" / "install.yml").read_text() + "\n")
    digests.add(H.tree_digest(role))
    (role / "tasks" / "install.yml").rename(role / "tasks" / "other.yml")
    digests.add(H.tree_digest(role))
    (role / "files").mkdir()
    (role / "files" / "tool.sh").write_text("#!/bin/sh\n")
    digests.add(H.tree_digest(role))
    os.chmod(role / "files" / "tool.sh", 0o755)
    digests.add(H.tree_digest(role))
    assert len(digests) == 5


def test_tree_digest_ignores_python_caches_only(tmp_path):
    role = make_role(tmp_path)
    before = H.tree_digest(role)
    (role / "files" / "__pycache__").mkdir(parents=True)
    (role / "files" / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"\0")
    (role / "files" / "y.pyc").write_bytes(b"\0")
    assert H.tree_digest(role) == before
    (role / "files" / "y.py").write_text("")  # an empty file counts
    assert H.tree_digest(role) != before


def test_tree_digest_refuses_a_missing_directory(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope is not a directory"):
        H.tree_digest(tmp_path / "nope")


def test_image_hash_is_stable_under_key_order_and_changes_with_any_component_or_value():
    base = H.image_hash({"role.a": "1" * 64, "role.b": "2" * 64}, {"x": {"k": 1, "j": [1, 2]}, "y": "v"})
    same = H.image_hash({"role.b": "2" * 64, "role.a": "1" * 64}, {"y": "v", "x": {"j": [1, 2], "k": 1}})
    assert base == same
    others = [H.image_hash({"role.a": "1" * 64, "role.b": "3" * 64}, {"x": {"k": 1, "j": [1, 2]}, "y": "v"}),
              H.image_hash({"role.a": "1" * 64, "role.b": "2" * 64}, {"x": {"k": 1, "j": [2, 1]}, "y": "v"}),
              H.image_hash({"role.a": "1" * 64, "role.b": "2" * 64}, {"x": {"k": 1, "j": [1, 2]}, "y": "w"}),
              H.image_hash({"role.a": "1" * 64, "role.b": "2" * 64}, {"x": {"k": 1, "j": [1, 2]}, "y": "v", "z": 0}),
              H.image_hash({"role.a": "1" * 64}, {"x": {"k": 1, "j": [1, 2]}, "y": "v"})]
    assert len({h["hash"] for h in others + [base]}) == 6
    assert base["components"]["vars"] != others[1]["components"]["vars"]
    assert base["components"]["role.b"] == others[1]["components"]["role.b"]


def test_image_hash_refuses_a_component_named_vars():
    with pytest.raises(ValueError, match="'vars'"):
        H.image_hash({"vars": "0" * 64}, {})


def test_referenced_names_reads_expressions_and_statements_not_literals_or_attributes():
    value = {"a": "{{ foo | default(bar) }} {% if baz.qux %}'{{ 'lit' }}'{% endif %}", "b": ["{{ x['y'] }}", 3]}
    names = H.referenced_names(value)
    assert {"foo", "default", "bar", "baz", "x"} <= set(names)
    assert "qux" not in names and "lit" not in names and "y" not in names
    assert H.referenced_names("plain text {no jinja}") == []


def test_variable_closure_follows_values_and_defaults_and_skips_secrets_and_magic():
    raw = {"demo_packages": "{{ site_packages + extra }}", "site_packages": ["a"], "extra": "{{ groups['x'] }}",
           "unused": 1, "demo_password": "s3cret", "ansible_host": "h", "via_default": "v",
           "msa_addresses": {"mgmt": "10.0.0.1"}}
    defaults = {"demo_dir": "{{ via_default }}/d", "demo_packages": []}
    chosen = H.variable_closure(raw, defaults, ["demo_packages", "demo_dir", "demo_password", "ansible_host", "groups"])
    assert chosen == {"demo_packages": raw["demo_packages"], "site_packages": ["a"], "extra": raw["extra"],
                      "via_default": "v"}


def test_is_candidate_keeps_paths_of_secrets_and_drops_their_values():
    assert H.is_candidate("extoll_node_token_file") and H.is_candidate("slurm_jwt_key")
    assert not H.is_candidate("extoll_node_token") and not H.is_candidate("udocker_store_password")
    assert not H.is_candidate("gateway_tokens") and not H.is_candidate("hostvars")


def test_image_files_follow_includes_tasks_from_and_templates(tmp_path):
    make_role(tmp_path, "demo", "- ansible.builtin.include_tasks: more.yml\n"
                                "- ansible.builtin.include_role:\n    name: msa.hpc.helper\n    tasks_from: code\n"
                                "- ansible.builtin.template:\n    src: \"{{ role_path }}/../other/templates/x.conf.j2\"\n")
    (tmp_path / "demo" / "tasks" / "more.yml").write_text("- ansible.builtin.template:\n    src: local.j2\n")
    (tmp_path / "demo" / "tasks" / "configure.yml").write_text("- ansible.builtin.debug: {}\n")
    (tmp_path / "demo" / "templates").mkdir()
    (tmp_path / "demo" / "templates" / "local.j2").write_text("{{ demo_packages }}")
    (tmp_path / "helper" / "tasks").mkdir(parents=True)
    (tmp_path / "helper" / "tasks" / "code.yml").write_text("- ansible.builtin.debug: {}\n")
    (tmp_path / "other" / "templates").mkdir(parents=True)
    (tmp_path / "other" / "templates" / "x.conf.j2").write_text("")
    files, roles = H.image_files(tmp_path, [("demo", "install.yml")])
    assert files == ["demo/tasks/install.yml", "demo/tasks/more.yml", "demo/templates/local.j2",
                     "helper/tasks/code.yml", "other/templates/x.conf.j2"]
    assert roles == ["demo", "helper", "other"]
    with pytest.raises(FileNotFoundError, match="demo/tasks/nope.yml"):
        H.image_files(tmp_path, [("demo", "nope.yml")])


def test_changed_components_names_what_differs_from_the_old_labels():
    new = {"role.a": "abcdef0123456789", "role.b": "1111110000000000", "vars": "ffff000000000000"}
    old = {"msa.hpc.image.role.a": "abcdef012345", "msa.hpc.image.role.b": "222222000000"}
    assert H.changed_components(old, new, "msa.hpc.image.") == ["role.b", "vars"]


def test_the_compute_image_files_of_the_collection_hold_no_configure_task():
    """The collection's own image entry files: what they include stays image-safe (no configure/main task file)."""
    roles = ("common", "munge", "slurm", "slurmd", "mpi", "extoll_node", "dcdb_pusher", "slurm_healthcheck",
             "slurm_reboot", "udocker")
    entries = [(r, "install.yml") for r in roles]
    entries += [("nam_manager", "client_library_install.yml"), ("gateway", "node_routes_install.yml")]
    files, roles = H.image_files(ROLES, entries)
    assert "hook_runtime/tasks/code.yml" in files and "hook_runtime" in roles
    tasks = [f for f in files if "/tasks/" in f]
    assert all(f.endswith("install.yml") or f == "hook_runtime/tasks/code.yml" for f in tasks), tasks


def test_file_digest_changes_with_the_content_only(tmp_path):
    one, two = tmp_path / "a.yml", tmp_path / "b.yml"
    one.write_text("- hosts: all\n")
    two.write_text("- hosts: all\n")
    assert H.file_digest(one) == H.file_digest(two)
    two.write_text("- hosts: all \n")
    assert H.file_digest(one) != H.file_digest(two)
