# SPDX-License-Identifier: GPL-3.0-or-later
"""No role registers a result (or sets a fact) under the name of one of its own variables.

A registered variable or fact outranks a task's and a block's ``vars:`` and the role's defaults and vars, for the
rest of the play. A ``register:`` that reuses such a name silently changes what every later task of the role reads:
glusterfs_server registered its bricks' stat results as ``glusterfs_server_bricks``, the brick list volume.yml gives
as a task variable, and volume creation failed on a fresh system (not on a converged one, which skipped it)."""
from __future__ import annotations

import pytest
import yaml

from tests.collection_helpers import iter_tasks, role_dirs

SET_FACT = ("ansible.builtin.set_fact", "set_fact")


def role_names(role):
    """({variable name: where defined}, {registered or set name: where set}) of one role."""
    defined, written = {}, {}
    for sub in ("defaults", "vars"):
        path = role / sub / "main.yml"
        if path.is_file():
            for name in yaml.safe_load(path.read_text()) or {}:
                defined.setdefault(name, "%s/main.yml" % sub)
    for path in sorted((role / "tasks").glob("*.yml")) + sorted((role / "handlers").glob("*.yml")):
        where = "%s/%s" % (path.parent.name, path.name)
        for task in iter_tasks(yaml.safe_load(path.read_text())):
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
    roles = role_dirs()
    assert len(roles) > 20
    assert any(role_names(r)[1] for r in roles)


@pytest.mark.parametrize("role", role_dirs(), ids=lambda p: "%s/%s" % (p.parent.parent.name, p.name))
def test_no_register_or_fact_reuses_a_variable_of_the_role(role):
    defined, written = role_names(role)
    clashes = ["%s: set in %s, a variable of %s" % (name, written[name], defined[name])
               for name in sorted(set(defined) & set(written))]
    assert not clashes, "\n".join(clashes)
