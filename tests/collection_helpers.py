# SPDX-License-Identifier: GPL-3.0-or-later
"""Shared by the tests/test_collection_*.py files: the collection's paths, a command runner, its modules and roles,
and the check of task arguments against documented options (EXAMPLES, the AWX setup)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

BUNDLE = Path(__file__).resolve().parents[1]
COLLECTION = BUNDLE / "collections" / "ansible_collections" / "msa" / "hpc"
BIN = Path(sys.executable).parent
ENV = dict(os.environ, ANSIBLE_CONFIG=str(BUNDLE / "ansible.cfg"), ANSIBLE_NOCOLOR="1")
ROLE_ROOTS = (COLLECTION / "roles", BUNDLE / "roles")


def run(args, env=ENV, cwd=BUNDLE, check=True):
    """Run a command; on failure raise with its whole output so the reason is visible in the report."""
    proc = subprocess.run([str(a) for a in args], capture_output=True, text=True, env=env, cwd=cwd)
    if check and proc.returncode != 0:
        raise AssertionError("%s exited %d\n--- stdout\n%s\n--- stderr\n%s"
                             % (" ".join(str(a) for a in args), proc.returncode, proc.stdout, proc.stderr))
    return proc


def module_files():
    return sorted(p.stem for p in (COLLECTION / "plugins" / "modules").glob("*.py")
                  if not p.name.startswith("_"))


def role_dirs():
    return sorted((p for root in ROLE_ROOTS for p in root.iterdir() if (p / "tasks").is_dir()),
                  key=lambda p: (p.parent.name, p.name))


TASK_KEYWORDS = {"block", "rescue", "always"}


def iter_tasks(tasks):
    for task in tasks or ():
        if not isinstance(task, dict):
            continue
        yield task
        for keyword in TASK_KEYWORDS:
            if isinstance(task.get(keyword), list):
                yield from iter_tasks(task[keyword])


def _templated(value):
    return isinstance(value, str) and ("{{" in value or "{%" in value)


def _outside_choices(value, choices):
    values = value if isinstance(value, list) else [value]
    allowed = {str(c) for c in choices}
    return [v for v in values if not _templated(v) and str(v) not in allowed]


def undocumented_keys(value, options, where):
    """Keys of ``value`` that ``options`` (a DOCUMENTATION options mapping) does not declare, recursively,
    and values outside an option's documented ``choices``."""
    if not isinstance(value, dict):
        return []     # a templated value ("{{ ... }}") cannot be checked
    known = {}
    for name, spec in (options or {}).items():
        known[name] = spec
        for alias in spec.get("aliases") or ():
            known[alias] = spec
    problems = []
    for key, item in value.items():
        if key not in known:
            problems.append("%s%s" % (where, key))
            continue
        spec = known[key]
        if spec.get("choices") and not isinstance(item, dict):
            for bad in _outside_choices(item, spec["choices"]):
                problems.append("%s%s=%r (documented choices: %s)" % (where, key, bad, spec["choices"]))
        suboptions = spec.get("suboptions")
        if not suboptions:
            continue
        if spec.get("type") == "list":
            for index, element in enumerate(item if isinstance(item, list) else ()):
                problems += undocumented_keys(element, suboptions, "%s%s[%d]." % (where, key, index))
        else:
            problems += undocumented_keys(item, suboptions, "%s%s." % (where, key))
    return problems
