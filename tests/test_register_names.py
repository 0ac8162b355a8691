# SPDX-License-Identifier: GPL-3.0-or-later
"""No role registers a result (or sets a fact) under the name of one of its own variables.

A registered variable or fact outranks a task's and a block's ``vars:`` and the role's defaults and vars, for the
rest of the play. A ``register:`` that reuses such a name silently changes what every later task of the role reads:
glusterfs_server registered its bricks' stat results as ``glusterfs_server_bricks``, the brick list volume.yml gives
as a task variable, and volume creation failed on a fresh system (not on a converged one, which skipped it)."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

ROLES = Path(__file__).resolve().parents[1] / "collections" / "ansible_collections" / "msa" / "hpc" / "roles"
SET_FACT = ("ansible.builtin.set_fact", "set_fact")


def walk(items, where):
    """(task or block, file) for every task and block of a task list, blocks opened."""
    for item in items or []:
        if not isinstance(item, dict):
            continue
        yield item, where
        for key in ("block", "rescue", "always"):
            yield from walk(item.get(key), where)


def role_names(role):
    """({variable name: where defined}, {registered or set name: where set}) of one role."""
    defined, written = {}, {}
    for sub in ("defaults", "vars"):
        path = role / sub / "main.yml"
        if path.is_file():
            for name in yaml.safe_load(path.read_text()) or {}:
                defined.setdefault(name, "%s/main.yml" % sub)
    for path in sorted((role / "tasks").glob("*.yml")) + sorted((role / "handlers").glob("*.yml")):
        rel = "%s/%s" % (path.parent.name, path.name)
        for task, where in walk(yaml.safe_load(path.read_text()), rel):
            for name in (task.get("vars") or {}):
                defined.setdefault(name, "%s (%s vars)" % (where, task.get("name", "?")))
            if task.get("register"):
                written.setdefault(task["register"], "%s (%s)" % (where, task.get("name", "?")))
            for module in SET_FACT:
                if isinstance(task.get(module), dict):
                    for name in task[module]:
                        if name != "cacheable":
                            written.setdefault(name, "%s (%s)" % (where, task.get("name", "?")))
    return defined, written


def test_the_check_sees_the_roles():
    roles = [r for r in ROLES.iterdir() if (r / "tasks").is_dir()]
    assert len(roles) > 20
    assert any(role_names(r)[1] for r in roles)


@pytest.mark.parametrize("role", sorted(r.name for r in ROLES.iterdir() if (r / "tasks").is_dir()))
def test_no_register_or_fact_reuses_a_variable_of_the_role(role):
    defined, written = role_names(ROLES / role)
    clashes = ["%s: set in %s, a variable of %s" % (name, written[name], defined[name])
               for name in sorted(set(defined) & set(written))]
    assert not clashes, "\n".join(clashes)
