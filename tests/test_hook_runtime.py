# SPDX-License-Identifier: GPL-3.0-or-later
"""The controller's hooks are the collection's code: entry points rendered from msa.hpc.hook_runtime run with
``python3 -I`` from one directory holding only what hook_runtime installs (module_utils/node whole and the closure of
the entry modules' imports), and no hook, unit or command of the roles refers to the stand-ins."""
from __future__ import annotations

import ast
import subprocess
import sys

import jinja2
import pytest
import yaml

from ansible_collections.msa.hpc.plugins.filter.module_utils_closure import module_utils_closure
from ansible_collections.msa.hpc.plugins.module_utils import _file_tree
from tests.helpers import BUNDLE

ROLES = BUNDLE / "collections/ansible_collections/msa/hpc/roles"
MODULE_UTILS = BUNDLE / "collections/ansible_collections/msa/hpc/plugins/module_utils"
PREFIX = "ansible_collections.msa.hpc.plugins.module_utils"


def _node_program(role, tasks_file="install.yml"):
    """The ``vars`` of the role's include of hook_runtime's code (its entry points; in its image task file)."""
    tasks = yaml.safe_load((ROLES / role / "tasks" / tasks_file).read_text())
    return next(t for t in tasks if t.get("ansible.builtin.include_role", {}).get("tasks_from") == "code")["vars"]


def programs():
    """Each include of hook_runtime's code (the controller's hooks, the nodes' programs): its entry points."""
    return {"controller hooks":
            yaml.safe_load((ROLES / "hook_runtime/defaults/main.yml").read_text())["hook_runtime_entry_points"],
            "node health check": _node_program("slurm_healthcheck")["hook_runtime_entry_points"],
            "node reboot program": _node_program("slurm_reboot")["hook_runtime_entry_points"],
            "node gateway routes": _node_program("gateway", "node_routes_install.yml")["hook_runtime_entry_points"],
            "node overlay server": _node_program("node_overlay", "server.yml")["hook_runtime_entry_points"],
            "node overlay client": _node_program("node_overlay", "node_install.yml")["hook_runtime_entry_points"]}


def entry_points():
    """Every entry point by name, with the entry points installed with it (one include of hook_runtime's code)."""
    return {item["name"]: (item, items) for items in programs().values() for item in items}


def installed_code(items):
    """What hook_runtime's code.yml installs for these entry points (the same filter call)."""
    return module_utils_closure([item["module"] for item in items], packages=["node"])


def install(python_dir, items):
    """The code as code.yml lays it out, with the module it calls (msa.hpc.file_tree's logic): empty package files
    above module_utils, the files it derives below."""
    code_dir = python_dir / "ansible_collections/msa/hpc/plugins/module_utils"
    packages = [python_dir / parent / "__init__.py" for parent in
                [code_dir.relative_to(python_dir)] + list(code_dir.relative_to(python_dir).parents)[:-1]]
    files = {name: (MODULE_UTILS / name).read_bytes() for name in installed_code(items)}
    _file_tree.install(str(code_dir), files, empty=[str(p) for p in packages])


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
    ("msa-overlay-apply", ["--config", "/nonexistent/o.json"], 1, "msa-overlay-apply: /nonexistent/o.json: "),
    ("msa-overlay-server", ["--help"], 0, "served to that node only"),
])
def test_entry_points_run_isolated_with_only_the_installed_code(tmp_path, name, argv, status, says):
    item, installed_with = entry_points()[name]
    install(tmp_path / "python", installed_with)
    script = tmp_path / name
    script.write_text(render(item, tmp_path / "python"))
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


def _imports(path):
    """Dotted module_utils modules a file imports (an independent reading, to check the filter against)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(PREFIX):
            inner = node.module[len(PREFIX) + 1:]
            for alias in node.names:
                dotted = (inner + "." if inner else "") + alias.name
                as_module = MODULE_UTILS / (dotted.replace(".", "/") + ".py")
                found.add(dotted if as_module.exists() else inner)
    return found


@pytest.mark.parametrize("group", sorted(programs()))
def test_the_installed_code_holds_everything_the_entry_points_import(group):
    items = programs()[group]
    installed = set(installed_code(items))
    needed, todo = set(), [item["module"] for item in items]
    while todo:
        name = todo.pop()
        if name in needed:
            continue
        needed.add(name)
        todo += sorted(_imports(MODULE_UTILS / (name.replace(".", "/") + ".py")))
    needed_files = {name.replace(".", "/") + ".py" for name in needed}
    assert needed_files <= installed, sorted(needed_files - installed)
    # module_utils/node whole, with its package file, and nothing that is no file of module_utils
    assert {"node/" + p.name for p in (MODULE_UTILS / "node").glob("*.py")} <= installed
    assert all((MODULE_UTILS / name).is_file() for name in installed)
    assert all(item["module"].startswith("node.") for item in items), "entry modules live in module_utils/node"
