# SPDX-License-Identifier: GPL-3.0-or-later
"""One reader per Slurm record: squeue/sacct ``--json`` jobs, ``scontrol show`` text, licences and reservations are
parsed in one place each, and every former parser site calls it (a second parser fails here)."""
from __future__ import annotations

import ast
import pathlib

import pytest

PLUGINS = pathlib.Path(__file__).resolve().parents[5] / "plugins"
JOBS_READER = "module_utils/slurm/jobs.py"          # load_jobs, scontrol_records
RECORDS_READER = "module_utils/slurm/reservations.py"  # parse_licenses, parse_reservations
NODES_READER = "module_utils/slurm/nodes.py"  # load_nodes, state
SCONTROL_FIELDS = ("LicenseName", "ReservationName", "Licenses=", "JobId=", "Total=")


def _trees():
    for path in sorted(PLUGINS.rglob("*.py")):
        yield path.relative_to(PLUGINS).as_posix(), ast.parse(path.read_text(), str(path))


TREES = dict(_trees())


def _is_str(node, text=None):
    return isinstance(node, ast.Constant) and isinstance(node.value, str) and (text is None or node.value == text)


def _reads_key(tree, key):
    """Where ``x.get(key)`` or ``x[key]`` (read, not written) occurs."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" \
                and node.args and _is_str(node.args[0], key):
            yield node.lineno
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and _is_str(node.slice, key):
            yield node.lineno


def _calls(tree):
    """Dotted names of every call: ``S.load_jobs``, ``json.loads``, ``parse_licenses``."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
                out.add("%s.%s" % (func.value.id, func.attr))
            elif isinstance(func, ast.Name):
                out.add(func.id)
    return out


def _site(name):
    """The module_utils file of ``name`` (``_delay_hooks`` or, once the on-node programs moved, ``node/delay_hooks``)."""
    stem = name.rsplit("/", 1)[-1].lstrip("_")
    found = [key for key in TREES if key.startswith("module_utils/") and key.rsplit("/", 1)[-1].lstrip("_") == stem + ".py"]
    assert len(found) == 1, (name, found)
    return found[0]


def _defines(tree):
    return {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}


def test_the_job_list_of_squeue_and_sacct_json_is_read_in_one_file():
    readers = {name for name, tree in TREES.items() if list(_reads_key(tree, "jobs"))}
    assert readers == {JOBS_READER}


@pytest.mark.parametrize("function,home", [("load_jobs", JOBS_READER), ("scontrol_records", JOBS_READER),
                                           ("parse_licenses", None), ("parse_reservations", RECORDS_READER),
                                           ("load_nodes", NODES_READER), ("state", NODES_READER)])
def test_each_reader_is_defined_once(function, home):
    homes = sorted(name for name, tree in TREES.items() if function in _defines(tree))
    # parse_licenses: the licence records (scontrol show licenses) and a job's licence string (name:count,…)
    expected = [JOBS_READER, RECORDS_READER] if function == "parse_licenses" else [home]
    assert homes == expected


def test_no_regular_expression_outside_the_readers_picks_scontrol_fields():
    found = []
    for name, tree in TREES.items():
        if name in (JOBS_READER, RECORDS_READER):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name) \
                    and node.func.value.id == "re" and node.args and _is_str(node.args[0]) \
                    and any(field in node.args[0].value for field in SCONTROL_FIELDS):
                found.append("%s:%d" % (name, node.lineno))
    assert found == []


@pytest.mark.parametrize("site,calls,decodes", [
    ("slurm/records", {"S.load_jobs", "S.scontrol_records"}, False),
    ("delay_hooks", {"S.load_jobs", "V.parse_reservations"}, False),
    # system_info: jobs, licences and nodes through the readers
    ("_system_info", {"S.load_jobs", "S.parse_licenses", "parse_licenses", "N.load_nodes", "N.state"}, False),
    ("reservations", {"S.scontrol_records", "S.parse_licenses"}, False),
    # the health check reads its own node's state from sinfo --json through the node reader
    ("healthcheck", {"N.load_nodes", "N.state", "N.find"}, False),
])
def test_every_former_parser_site_calls_the_shared_reader(site, calls, decodes):
    made = _calls(TREES[_site(site)])
    assert calls <= made, calls - made
    assert ("json.loads" in made) == decodes
