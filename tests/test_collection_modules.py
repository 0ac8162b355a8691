# SPDX-License-Identifier: GPL-3.0-or-later
"""The collection's modules as ansible-doc sees them: every module listed and documented, EXAMPLES that parse and use
only documented options."""
from __future__ import annotations

import json

import pytest
import yaml

from tests.collection_helpers import COLLECTION, BIN, run, module_files, iter_tasks, undocumented_keys


@pytest.fixture(scope="session")
def module_docs():
    """``ansible-doc --json`` of every module file, keyed by short name (one call for all)."""
    names = module_files()
    if not names:
        raise AssertionError("no module under %s" % (COLLECTION / "plugins" / "modules"))
    out = run([BIN / "ansible-doc", "--json"] + ["msa.hpc." + n for n in names]).stdout
    return {fqcn.split(".", 2)[2]: doc for fqcn, doc in json.loads(out).items()}


# ansible-doc lists every module ------------------------------------------------------------------------------------

def test_ansible_doc_lists_every_module_file():
    listed = json.loads(run([BIN / "ansible-doc", "-l", "msa.hpc", "--json"]).stdout)
    assert sorted(name.split(".", 2)[2] for name in listed) == module_files()


def test_every_module_renders_documentation_examples_and_return(module_docs):
    for name in module_files():
        doc = module_docs.get(name)
        assert doc, "ansible-doc rendered nothing for msa.hpc.%s" % name
        assert doc["doc"].get("short_description"), "msa.hpc.%s: no short_description" % name
        assert (doc.get("examples") or "").strip(), "msa.hpc.%s: no EXAMPLES" % name
        assert doc.get("return"), "msa.hpc.%s: no RETURN" % name
        attributes = doc["doc"].get("attributes") or {}
        for attribute in ("check_mode", "diff_mode", "platform"):
            assert attribute in attributes, "msa.hpc.%s: attributes.%s missing" % (name, attribute)


# EXAMPLES parse and use only documented options --------------------------------------------------------------------


@pytest.mark.parametrize("name", module_files())
def test_module_examples_parse_and_use_only_documented_options(name, module_docs):
    doc = module_docs[name]
    examples = yaml.safe_load(doc["examples"])
    assert isinstance(examples, list) and examples, "msa.hpc.%s: EXAMPLES is not a list of tasks" % name
    modules = set(module_docs) | set(module_files())
    calls, problems = 0, []
    for task in iter_tasks(examples):
        for key, args in task.items():
            short = key[len("msa.hpc."):] if key.startswith("msa.hpc.") else None
            if short is None and key in modules:
                problems.append("task %r calls %s without its FQCN msa.hpc.%s" % (task.get("name"), key, key))
                continue
            if short is None:
                continue
            calls += 1
            if short not in module_docs:
                problems.append("task %r calls msa.hpc.%s, which ansible-doc does not know" % (task.get("name"), short))
                continue
            if args is None:
                args = {}
            if not isinstance(args, dict):
                problems.append("task %r passes free-form arguments to %s" % (task.get("name"), key))
                continue
            for option in undocumented_keys(args, module_docs[short]["doc"].get("options"), ""):
                problems.append("task %r: %s has no documented option %s" % (task.get("name"), key, option))
    assert calls, "msa.hpc.%s: no EXAMPLES task calls an msa.hpc module" % name
    assert not problems, "msa.hpc.%s EXAMPLES:\n  " % name + "\n  ".join(problems)


def test_example_check_reports_undocumented_options_and_suboptions():
    options = {"state": {"type": "str"}, "endpoint": {"type": "str", "aliases": ["baseuri"]},
               "components": {"type": "list", "elements": "dict",
                              "suboptions": {"partition": {"type": "str"}, "nodes": {"type": "int"}}},
               "pool": {"type": "dict", "suboptions": {"port": {"type": "int"}}}}
    options["mode"] = {"type": "str", "choices": [True, False, "auto"]}     # YAML 1.1: [on, off, auto]
    assert undocumented_keys({"mode": "on"}, options, "") == ["mode='on' (documented choices: [True, False, 'auto'])"]
    assert undocumented_keys({"mode": "{{ m }}"}, options, "") == []
    args = {"state": "x", "baseuri": "http://m", "colour": "red",
            "components": [{"partition": "cm", "nodes": 2}, {"partition": "esb", "gpus": 1}],
            "pool": {"port": 1, "host": "h"}}
    assert sorted(undocumented_keys(args, options, "")) == ["colour", "components[1].gpus", "pool.host"]
    assert undocumented_keys({"pool": "{{ pool }}"}, options, "") == []
