# SPDX-License-Identifier: GPL-3.0-or-later
"""docs/architecture.md's picture of what runs where is the one scripts/layout_map.py draws from the tree."""
from __future__ import annotations

import importlib.util

import pytest
import yaml

from tests.helpers import BUNDLE

SCRIPT = BUNDLE / "scripts" / "layout_map.py"
spec = importlib.util.spec_from_file_location("layout_map", SCRIPT)
layout_map = importlib.util.module_from_spec(spec)
spec.loader.exec_module(layout_map)


def test_the_layout_block_of_the_architecture_document_is_drawn_from_the_tree():
    text = (BUNDLE / layout_map.DOC).read_text()
    assert text.count(layout_map.BEGIN) == 1 and text.count(layout_map.END) == 1
    assert layout_map.document_with(text, layout_map.block(BUNDLE)) == text, (
        "the layout block of docs/architecture.md is out of date: run python scripts/layout_map.py")


def touch(path, text=""):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


@pytest.fixture
def tree(tmp_path):
    """A small tree with every kind of folder the rules know, and one they do not."""
    utils = tmp_path / layout_map.COLLECTION_PATH / "plugins" / "module_utils"
    for name in ("node/gw_hooks.py", "node/healthcheck.py", "extoll/routing.py", "slurm/records.py",
                 "redfishy/client.py", "_rest.py"):
        touch(utils / name)
    for package in ("node", "extoll", "slurm", "redfishy"):
        touch(utils / package / "__init__.py")
    plugins = utils.parent
    touch(plugins / "modules" / "gw_pool.py")
    touch(plugins / "filter" / "hostlist.py")
    roles = plugins.parent / "roles"
    touch(roles / "gateway" / "tasks" / "main.yml")
    touch(roles / "gateway" / "templates" / "hook.sh.j2")
    touch(roles / "gateway" / "templates" / "pool.yml.j2")
    touch(roles / "slurmctld" / "tasks" / "main.yml")
    touch(roles / "slurmctld" / "files" / "job_submit.lua")
    touch(tmp_path / "roles" / "sim_bmc" / "tasks" / "main.yml")
    touch(tmp_path / "sim" / "msa_sim" / "emp" / "__init__.py")
    touch(tmp_path / "sim" / "msa_sim" / "serve.py")
    touch(tmp_path / "common.yml", yaml.safe_dump({"all": {"children": {
        "msa_management": {"children": {"msa_management_primary": {}}}, "msa_compute": {},
        "slurm": {"children": {"slurm_controller": {"children": {"msa_management": {}}},
                               "slurm_compute": {"children": {"msa_compute": {}}}}}}}}))
    touch(tmp_path / "playbooks" / "site.yml", yaml.safe_dump([
        {"name": "Validate", "ansible.builtin.import_playbook": "validate.yml"},
        {"name": "Base", "hosts": "all", "roles": [{"role": "msa.hpc.common"}]},
        {"name": "Slurm", "hosts": "slurm", "tasks": [
            {"name": "Controller", "ansible.builtin.include_role": {"name": "msa.hpc.slurmctld"},
             "when": "inventory_hostname in groups['slurm_controller']"}]},
        {"name": "Hooks", "hosts": "slurm_controller", "tasks": [
            {"name": "Hooks",
             "ansible.builtin.include_role": {"name": "msa.hpc.gateway", "tasks_from": "slurm_hooks"}}]},
        {"name": "Agents", "hosts": "slurm_compute", "roles": ["msa.hpc.gateway"]}]))
    touch(tmp_path / layout_map.DOC, "# doc\n\n%s\nold\n%s\nafter\n" % (layout_map.BEGIN, layout_map.END))
    return tmp_path


def section_of(picture, title_start):
    body = picture.split("\n\n")
    return next(part for part in body if part.startswith(title_start))


def test_folders_are_placed_by_their_names_and_unknown_ones_are_libraries(tree):
    picture = layout_map.picture(tree)
    controller = section_of(picture, "CONTROLLER")
    assert "EXTOLL library" in controller and "module_utils/extoll/: routing" in controller
    assert "Slurm library" in controller and "module_utils/slurm/: records" in controller
    assert "module_utils/: _rest; redfishy/ (client)" in controller
    assert "filter: hostlist" in controller and "plugins/modules/: gw_pool" in controller
    assert "gw_hooks" not in controller
    programs = section_of(picture, "SLURM HOOKS")
    assert "module_utils/node/ (installed whole): gw_hooks, healthcheck" in programs
    assert "role gateway" in programs and "hook.sh.j2" in programs and "pool.yml.j2" not in programs
    assert "job_submit.lua" in programs
    harness = section_of(picture, "HARNESS")
    assert "roles/: sim_bmc" in harness and "sim/msa_sim/: emp; shared: serve" in harness


def test_roles_are_placed_where_site_yml_runs_them(tree):
    picture = layout_map.picture(tree)
    assert "all" in section_of(picture, "EVERY HOST") and "common" in section_of(picture, "EVERY HOST")
    management = section_of(picture, "MANAGEMENT SERVICES")
    # the include's `inventory_hostname in groups[...]` narrows the slurm play to the controller
    assert "slurm_controller" in management and "slurmctld, gateway:slurm_hooks" in management
    nodes = section_of(picture, "NODES' SERVICES")
    assert "slurm_compute" in nodes and "gateway" in nodes and "slurmctld" not in nodes


def test_check_reports_a_stale_block_and_writing_fixes_it(tree):
    assert layout_map.main(["--check", "--root", str(tree)]) == 1
    assert "old" in (tree / layout_map.DOC).read_text()
    assert layout_map.main(["--root", str(tree)]) == 0
    text = (tree / layout_map.DOC).read_text()
    assert "old" not in text and text.startswith("# doc\n\n") and text.endswith("\nafter\n")
    assert layout_map.main(["--check", "--root", str(tree)]) == 0
    (tree / layout_map.DOC).write_text("# no markers\n")
    with pytest.raises(ValueError):
        layout_map.main(["--check", "--root", str(tree)])
