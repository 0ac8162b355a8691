# SPDX-License-Identifier: GPL-3.0-or-later
"""The controller's hooks are the collection's code: entry points rendered from msa.hpc.hook_runtime run with
``python3 -I`` from one directory, and no hook, unit or command of the roles refers to the stand-ins."""
from __future__ import annotations

import subprocess
import sys

import jinja2
import pytest
import yaml

from tests.helpers import BUNDLE

ROLES = BUNDLE / "collections/ansible_collections/msa/hpc/roles"


def entry_points():
    """The controller's entry points (hook_runtime's defaults) and the node health check's (slurm_healthcheck)."""
    items = yaml.safe_load((ROLES / "hook_runtime/defaults/main.yml").read_text())["hook_runtime_entry_points"]
    for role in ("slurm_healthcheck", "slurm_reboot"):
        items = items + _node_program(role)["hook_runtime_entry_points"]
    return {item["name"]: item for item in items}


def render(item, python_dir):
    env = jinja2.Environment(undefined=jinja2.StrictUndefined)
    env.filters["comment"] = lambda text: "\n".join("# " + line for line in str(text).splitlines())
    env.filters["to_json"] = lambda v: '"%s"' % v
    template = env.from_string((ROLES / "hook_runtime/templates/entry.py.j2").read_text())
    return template.render(item=item, hook_runtime_python_dir=str(python_dir), ansible_managed="Ansible managed")


@pytest.mark.parametrize("name, argv, status, says", [
    ("msa-gw-hook", ["--help"], 0, "PrologSlurmctld/EpilogSlurmctld of the MPI gateways"),
    ("msa-nam-hook", ["--help"], 0, "bounded by the licences Slurm granted the job"),
    ("msa-hpc-userfile", ["chmod", "1", "/x"], 2, "usage: msa-hpc-userfile check|write|append|remove"),
    ("msa-gw-hook", ["prolog"], 1, "SLURM_JOB_ID is not set"),
    ("msa-hpc-healthcheck", ["--validate", "/nonexistent/hc.json"], 1, "msa-hpc-healthcheck: /nonexistent/hc.json: "),
    ("msa-hpc-reboot", ["--validate", "/nonexistent/bmc.json"], 1, "msa-hpc-reboot: /nonexistent/bmc.json: "),
])
def test_entry_points_run_isolated_from_the_collection_directory(tmp_path, name, argv, status, says):
    script = tmp_path / name
    script.write_text(render(entry_points()[name], BUNDLE / "collections"))
    lines = script.read_text().splitlines()
    assert lines[0] == "#!/usr/bin/python3 -I"
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tmp_path / "nowhere"), "SLURM_JOB_ID": ""}
    proc = subprocess.run([sys.executable, "-I", str(script)] + argv, capture_output=True, text=True, env=env,
                          cwd=tmp_path, check=False, timeout=60)
    assert proc.returncode == status and says in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr


def test_no_hook_unit_or_command_of_the_roles_refers_to_the_stand_ins():
    for role in ("gateway", "nam_manager", "hook_runtime", "slurmctld"):
        defaults = yaml.safe_load((ROLES / role / "defaults/main.yml").read_text()) or {}
        for key in ("gateway_slurm_command", "gateway_user_helper", "nam_manager_client_command"):
            assert "msa_sim" not in str(defaults.get(key, "")), (role, key)
        for template in (ROLES / role / "templates").glob("*.j2"):
            if template.name.startswith(("hook", "health", "entry", "pelogue")):
                assert "msa_sim" not in template.read_text(), template
        for tasks in (ROLES / role / "tasks").glob("slurm_hooks.yml"):
            assert "msa_sim" not in tasks.read_text(), tasks


def _node_program(role, tasks_file="main.yml"):
    """The ``vars`` of the role's include of hook_runtime's code (its module_utils and entry points)."""
    tasks = yaml.safe_load((ROLES / role / "tasks" / tasks_file).read_text())
    return next(t for t in tasks if t.get("ansible.builtin.include_role", {}).get("tasks_from") == "code")["vars"]


def _hook_lists():
    return [(yaml.safe_load((ROLES / "hook_runtime/defaults/main.yml").read_text())["hook_runtime_module_utils"],
             ["_gw_hooks", "_nam_hooks", "_userfile"]),
            (_node_program("slurm_healthcheck")["hook_runtime_module_utils"], ["_healthcheck"]),
            (_node_program("slurm_reboot")["hook_runtime_module_utils"], ["_bmc_reboot"]),
            (_node_program("gateway", "node_routes.yml")["hook_runtime_module_utils"], ["_gw_node_routes"])]


@pytest.mark.parametrize("listed, entry_modules", _hook_lists(),
                         ids=["controller hooks", "node health check", "node reboot program", "node gateway routes"])
def test_the_installed_module_utils_are_all_the_entry_points_import(listed, entry_modules):
    import ast
    listed = set(listed)
    utils = BUNDLE / "collections/ansible_collections/msa/hpc/plugins/module_utils"
    needed, todo = set(), list(entry_modules)
    while todo:
        name = todo.pop()
        if name in needed:
            continue
        needed.add(name)
        for node in ast.walk(ast.parse((utils / (name + ".py")).read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("ansible_collections.msa.hpc"):
                mod = node.module.rsplit(".", 1)[-1]
                todo += [a.name for a in node.names] if mod == "module_utils" else [mod]
    assert needed <= listed, sorted(needed - listed)
    assert listed <= {p.stem for p in utils.glob("_*.py")}
