# SPDX-License-Identifier: GPL-3.0-or-later
"""The collection's production content knows nothing of the simulation harness (issue 33).

The stand-ins (sim/msa_sim) are installed by the bundle's harness (playbooks/sim_up.yml, roles/sim_*) as their
vendors' packages would be, so no role, plugin or playbook of the collection may name them in code: every branch is
read, skipped tasks included. Comments and documentation that explain the harness are fine, so they are stripped
first: Python comments, docstrings and the DOCUMENTATION/EXAMPLES/RETURN strings of modules (tokenizer), YAML and
shell `#` comments outside strings, Jinja `{# #}` comments, `#` comment lines of rendered files, and the
descriptions of meta/argument_specs.yml."""
from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path

import pytest
import yaml

BUNDLE = Path(__file__).resolve().parents[1]
COLLECTION = BUNDLE / "collections" / "ansible_collections" / "msa" / "hpc"
PRODUCTION = [COLLECTION / d for d in ("roles", "plugins", "playbooks")]
HARNESS_ROLES = sorted(p.name for p in (BUNDLE / "roles").iterdir() if p.name.startswith("sim_"))
FORBIDDEN = re.compile(r"\bmsa[_-]sim\b|/opt/msa-sim|==\s*['\"]sim['\"]|\b(?:%s)\b" % "|".join(HARNESS_ROLES))
DOC_NAMES = {"DOCUMENTATION", "EXAMPLES", "RETURN"}
# Unit names the production roles start by default, and the role variable naming each.
UNITS = {"extoll_manager": "extoll_manager_service", "extoll_node": "extoll_node_service",
         "nam_manager": "nam_manager_service", "gateway": "gateway_agent_service",
         "dcdb_pusher": "dcdb_pusher_service", "dcdb_collectagent": "dcdb_collectagent_service"}


def python_code(text):
    """The code of a Python file: no comments, docstrings or module documentation strings."""
    out, prev, doc_assign = [], tokenize.NEWLINE, 0
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        kind, value = tok.type, tok.string
        if kind == tokenize.NAME and value in DOC_NAMES:
            doc_assign = 1
        elif doc_assign == 1 and kind == tokenize.OP and value == "=":
            doc_assign = 2
        elif kind == tokenize.STRING and (doc_assign == 2 or prev in (tokenize.NEWLINE, tokenize.INDENT,
                                                                      tokenize.DEDENT, tokenize.NL)):
            doc_assign, prev = 0, kind
            continue
        else:
            doc_assign = 0 if kind not in (tokenize.NL, tokenize.COMMENT) else doc_assign
        if kind == tokenize.COMMENT:
            continue
        if kind not in (tokenize.NL, tokenize.COMMENT):
            prev = kind
        out.append(value)
    return " ".join(out)


def strip_hash_comment(line):
    """A line without its `#` comment (one outside quotes, at the start or after a blank); `#!` lines stay."""
    if line.lstrip().startswith("#!"):
        return line
    quote = None
    for i, ch in enumerate(line):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1] in " \t"):
            return line[:i]
    return line


def text_code(text):
    """YAML, Jinja, shell and rendered configuration files: the text without its comments."""
    text = re.sub(r"\{#.*?#\}", "", text, flags=re.S)
    return "\n".join(strip_hash_comment(line) for line in text.splitlines())


def drop_descriptions(node):
    if isinstance(node, dict):
        return {k: drop_descriptions(v) for k, v in node.items() if k not in ("description", "short_description")}
    if isinstance(node, list):
        return [drop_descriptions(v) for v in node]
    return node


def code_of(path):
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".py":
        return python_code(text)
    if path.name == "argument_specs.yml":
        return yaml.safe_dump(drop_descriptions(yaml.safe_load(text)))
    return text_code(text)


def production_files():
    return sorted(p for root in PRODUCTION for p in root.rglob("*")
                  if p.is_file() and p.suffix != ".md" and "__pycache__" not in p.parts)


def offences(path, code):
    return ["%s: %s" % (path, m.group(0)) for m in FORBIDDEN.finditer(code)]


def test_the_scan_reads_every_kind_of_production_file():
    files = production_files()
    suffixes = {p.suffix for p in files}
    assert {".yml", ".j2", ".py"} <= suffixes, suffixes
    assert len(files) > 100, len(files)
    assert {"sim_services", "sim_nam", "sim_bmc"} <= set(HARNESS_ROLES), HARNESS_ROLES


def test_no_production_file_names_the_harness_in_code():
    found = [o for p in production_files() for o in offences(p.relative_to(COLLECTION), code_of(p))]
    assert not found, "the collection's code names the harness:\n" + "\n".join(found)


# A branch as the roles had them before issue 33, and the same words in comments and documentation.
SIM_BRANCH = """---
- name: Install the psgw-agent unit of the stand-in
  ansible.builtin.copy:
    src: "{{ gateway_sim_dir }}/msa_sim/psgwd/units/psgw-agent.service"  # from the harness
    dest: /etc/systemd/system/psgw-agent.service
    remote_src: true
  when: gateway_implementation == 'sim'
"""
SIM_DOCS = '''# SPDX-License-Identifier: GPL-3.0-or-later
"""Talks to the stand-in (msa_sim.psgwd) as to the vendor's agent."""
DOCUMENTATION = r"""
description: The pool the C(msa_sim.psgwd.slurm) prolog uses (installed by sim_services under /opt/msa-sim).
"""


def f():
    """The same one msa-sim uses."""
    return "/etc/msa-gw"  # not /opt/msa-sim
'''


@pytest.mark.parametrize("text, name, count", [
    (SIM_BRANCH, "tasks.yml", 2),
    ("{# msa_sim's own settings #}\n# rendered comment: msa-sim\nexec python3 -m msa_sim.emp.ctrl \"$@\"\n",
     "emp-ctrl.j2", 1),
    ('key: "# not a comment msa_sim"\nother: 1  # sim_services installs it\n', "vars.yml", 1),
    ("#!/bin/sh\n# msa_sim\nexec /opt/msa-sim/bin/x # msa-sim\n", "x.sh", 1),
    (SIM_DOCS, "mod.py", 0),
    (SIM_DOCS.replace('"/etc/msa-gw"', '"/opt/msa-sim/x"'), "mod.py", 1),
])
def test_the_scan_finds_a_branch_and_ignores_comments_and_docs(tmp_path, text, name, count):
    path = tmp_path / name
    path.write_text(text)
    assert len(offences(path, code_of(path))) == count, code_of(path)


def test_production_roles_have_no_implementation_switch_and_deep_est_sets_none():
    names = sorted({n for p in COLLECTION.glob("roles/*/defaults/main.yml")
                    for n in (yaml.safe_load(p.read_text()) or {}) if n.endswith("_implementation")})
    assert not names, names
    layer = yaml.safe_load((BUNDLE / "inventories" / "systems" / "deep_est" / "group_vars" / "all.yml").read_text())
    assert not [n for n in layer if n.endswith("_implementation")], sorted(layer)


def test_the_harness_installs_the_units_the_roles_start_by_name():
    harness = yaml.safe_load((BUNDLE / "roles" / "sim_services" / "defaults" / "main.yml").read_text())
    units = {Path(u).name for u in harness["sim_services_units"]}
    for u in harness["sim_services_units"]:
        assert (BUNDLE / "sim" / "msa_sim" / u).is_file(), u
    for role, var in UNITS.items():
        default = yaml.safe_load((COLLECTION / "roles" / role / "defaults" / "main.yml").read_text())[var]
        assert default + ".service" in units, (role, default, sorted(units))
