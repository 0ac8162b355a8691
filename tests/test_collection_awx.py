# SPDX-License-Identifier: GPL-3.0-or-later
"""playbooks/awx_setup.yml run against stand-in awx.awx modules that record their arguments: only documented options,
the three inventory layers in order, the surveys operators need."""
from __future__ import annotations

import json
import os
import re
import sys

import pytest

from tests.collection_helpers import BUNDLE, COLLECTION, BIN, ENV, run, undocumented_keys


# AWX setup: run playbooks/awx_setup.yml against stand-in awx.awx modules that record their arguments ---------------

AWX_STUB = """#!/usr/bin/python
# WANT_JSON
# Stand-in for awx.awx.%(name)s (tests/test_collection_awx.py): records the arguments, changes nothing.
import json
import os
import sys

with open(sys.argv[1]) as fh:
    args = json.load(fh)
with open(os.environ["MSA_AWX_RECORD"], "a") as fh:
    fh.write(json.dumps({"module": "%(name)s", "args": {k: v for k, v in args.items() if not k.startswith("_ansible")}}) + "\\n")
print(json.dumps({"changed": False}))
"""

AWX_MODULES = ("execution_environment", "project", "credential_type", "credential", "inventory", "inventory_source",
               "job_template", "workflow_job_template", "inventory_source_update")
SURVEY_TYPES = {"text": str, "textarea": str, "password": str, "multiplechoice": str, "multiselect": str,
                "integer": int, "float": (float, int)}


def survey_problems(spec):
    """The checks AWX's survey_spec endpoint makes (awx/api/views/__init__.py, AWX 24), one sentence each."""
    problems, seen = [], set()
    for index, item in enumerate(spec.get("spec") or ()):
        where = "question %d (%s)" % (index, item.get("variable"))
        for field, kind in (("type", str), ("question_name", str), ("variable", str), ("required", bool)):
            if not isinstance(item.get(field), kind):
                problems.append("%s: %s must be a %s" % (where, field, kind.__name__))
        if item.get("variable") in seen:
            problems.append("%s: variable used twice" % where)
        seen.add(item.get("variable"))
        if str(item.get("variable", "")).startswith(("awx_", "tower_")):
            problems.append("%s: awx_ and tower_ variables are reserved for AWX" % where)
        qtype = item.get("type")
        if qtype not in SURVEY_TYPES:
            problems.append("%s: unknown type %r" % (where, qtype))
            continue
        if item.get("default", "") != "" and not isinstance(item["default"], SURVEY_TYPES[qtype]):
            problems.append("%s: default %r is not a %s" % (where, item["default"], qtype))
        for key in ("min", "max"):
            if key in item and not isinstance(item[key], int):
                problems.append("%s: %s must be an integer" % (where, key))
        if qtype in ("multiplechoice", "multiselect"):
            choices = item.get("choices")
            choices = choices.splitlines() if isinstance(choices, str) else choices
            if not choices:
                problems.append("%s: no choices" % where)
            elif "default" in item and any(d not in choices for d in str(item["default"]).splitlines()):
                problems.append("%s: default %r is not among the choices %r" % (where, item["default"], choices))
    return problems


@pytest.fixture(scope="module")
def awx_calls(tmp_path_factory):
    base = tmp_path_factory.mktemp("awx")
    modules = base / "collections" / "ansible_collections" / "awx" / "awx" / "plugins" / "modules"
    modules.mkdir(parents=True)
    (modules.parent.parent / "meta").mkdir()
    (modules.parent.parent / "meta" / "runtime.yml").write_text("requires_ansible: '>=2.16'\n")
    for name in AWX_MODULES:
        (modules / (name + ".py")).write_text(AWX_STUB % {"name": name})
    record = base / "calls.jsonl"
    # the stand-in awx.awx first; the bundle's own collection stays reachable (ansible.cfg's output plugin is in it)
    env = dict(ENV, ANSIBLE_COLLECTIONS_PATH=os.pathsep.join([str(base / "collections"), str(BUNDLE / "collections")]),
               MSA_AWX_RECORD=str(record),
               ANSIBLE_PYTHON_INTERPRETER=sys.executable)
    # the stubs are WANT_JSON scripts: mitogen (ansible.cfg's strategy) runs them by the host's interpreter variable
    run([BIN / "ansible-playbook", COLLECTION / "playbooks" / "awx_setup.yml", "-i", "localhost,",
         "-e", "ansible_python_interpreter=%s" % sys.executable,
         "-e", "awx_project_url=https://git.example.org/hpc/msa.git", "-e", "awx_ee_image=registry.example/msa-hpc-ee:1",
         "-e", "awx_machine_credential=nodes-ssh", "-e", "awx_bmc_username=admin", "-e", "awx_bmc_password=pw"],
        env=env, cwd=base)
    calls = [json.loads(line) for line in record.read_text().splitlines()]
    docs = json.loads(run([BIN / "ansible-doc", "--json"] + ["awx.awx." + m for m in AWX_MODULES]).stdout)
    return calls, {fqcn.split(".", 2)[2]: doc["doc"]["options"] for fqcn, doc in docs.items()}


def test_awx_setup_passes_only_options_the_awx_modules_document(awx_calls):
    calls, options = awx_calls
    assert {c["module"] for c in calls} == set(AWX_MODULES)
    problems = []
    for call in calls:
        for option in undocumented_keys(call["args"], options[call["module"]], ""):
            problems.append("awx.awx.%s: %s" % (call["module"], option))
    assert not problems, "\n".join(problems)


def test_awx_inventory_sources_are_the_three_layers_in_precedence_order(awx_calls):
    calls, _ = awx_calls
    sources = [c["args"] for c in calls if c["module"] == "inventory_source"]
    assert [s["source_path"] for s in sources] == ["common.yml", "inventories/systems/mini", "inventories/sites/example"]
    assert all(s["source"] == "scm" and s["overwrite_vars"] is False and s["update_on_launch"] is False for s in sources)
    syncs = [c["args"]["name"] for c in calls if c["module"] == "inventory_source_update"]
    assert syncs == [s["name"] for s in sources]
    workflow = next(c["args"] for c in calls if c["module"] == "workflow_job_template")
    chain, node = [], workflow["workflow_nodes"][0]
    by_id = {n["identifier"]: n for n in workflow["workflow_nodes"]}
    while node:
        chain.append(node["unified_job_template"]["name"])
        successors = (node.get("related") or {}).get("success_nodes") or []
        node = by_id[successors[0]["identifier"]] if successors else None
    assert chain == [s["name"] for s in sources] + ["MSA deploy"]


def test_awx_job_templates_have_the_surveys_operators_need(awx_calls):
    calls, _ = awx_calls
    templates = {c["args"]["name"]: c["args"] for c in calls if c["module"] == "job_template"}
    variables = {name: [q["variable"] for q in (t["survey_spec"] or {}).get("spec", [])] for name, t in templates.items()}
    assert variables == {"MSA deploy": [],
                         "MSA rolling reboot of a module": ["rolling_reboot_module", "rolling_reboot_batch"],
                         "MSA submit workflow job": ["submit_job_partitions", "submit_job_nodes", "submit_job_command"],
                         "MSA fabric re-route": ["fabric_routing"]}
    assert templates["MSA deploy"]["playbook"] == "playbooks/site.yml"
    assert templates["MSA deploy"]["ask_limit_on_launch"] and templates["MSA deploy"]["ask_tags_on_launch"]
    reboot = templates["MSA rolling reboot of a module"]["survey_spec"]["spec"][0]
    assert reboot["choices"] == ["mgmt", "cm", "esb", "dam", "gw", "ipgw", "nam", "gce", "sssm"]
    partitions = templates["MSA submit workflow job"]["survey_spec"]["spec"][0]
    assert partitions["choices"] == ["cm", "esb", "dam"]
    routing = templates["MSA fabric re-route"]["survey_spec"]["spec"][0]
    assert routing["choices"] == ["DimensionOrder", "ShortestPath", "UpDown"]
    problems = [p for t in templates.values() if t["survey_enabled"] for p in survey_problems(t["survey_spec"])]
    assert not problems, problems
    assert all(t["credentials"] == ["nodes-ssh", "MSA example BMC and managers"] for t in templates.values())


def test_awx_credential_type_injects_the_msa_variables_untemplated(awx_calls):
    calls, _ = awx_calls
    ctype = next(c["args"] for c in calls if c["module"] == "credential_type")
    fields = {f["id"] for f in ctype["inputs"]["fields"]}
    assert set(ctype["inputs"]["required"]) <= fields
    assert {f["id"] for f in ctype["inputs"]["fields"] if f.get("secret")} == {"bmc_password", "manager_password",
                                                                                "manager_token"}
    extra_vars = ctype["injectors"]["extra_vars"]
    assert extra_vars["msa_bmc_password"] == "{{ bmc_password }}"
    assert set(extra_vars) == {"msa_bmc_username", "msa_bmc_password", "msa_manager_username",
                               "msa_manager_password", "msa_manager_token"}
    for value in list(extra_vars.values()) + list(ctype["injectors"]["env"].values()):
        assert re.fullmatch(r"\{\{ (\w+) \}\}", value) and value[3:-3] in fields, value


def test_survey_check_reports_what_awx_refuses():
    spec = {"spec": [{"type": "multiplechoice", "question_name": "q", "variable": "awx_x", "required": True,
                      "choices": ["a", "b"], "default": "c"},
                     {"type": "integer", "question_name": "n", "variable": "n", "required": "yes", "default": "1"}]}
    problems = "\n".join(survey_problems(spec))
    assert "reserved for AWX" in problems and "not among the choices" in problems
    assert "required must be a bool" in problems and "default '1' is not a integer" in problems
