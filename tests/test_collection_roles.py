# SPDX-License-Identifier: GPL-3.0-or-later
"""The collection's roles: meta/argument_specs.yml and defaults/main.yml agree, and ansible-doc lists every role."""
from __future__ import annotations

import json

import pytest
import yaml

from tests.collection_helpers import BUNDLE, COLLECTION, BIN, run, role_dirs


# Roles: meta/argument_specs.yml and defaults/main.yml agree --------------------------------------------------------

# Switches of the whole collection that a role reads too (collection docs/images.md), declared by every role that does.
COLLECTION_SWITCHES = {"msa_deploy_mode"}


def allowed_prefixes(role):
    """A role's variables start with its name; a role named <family>_<part> may also use <family>_ (slurm_common → slurm_; slurmctld uses slurmctld_)."""
    prefixes = {role + "_"}
    if "_" in role:
        prefixes.add(role.split("_", 1)[0] + "_")
    return prefixes


def is_literal(value):
    if isinstance(value, str):
        return "{{" not in value and "{%" not in value
    if isinstance(value, dict):
        return all(is_literal(v) for v in value.values())
    if isinstance(value, list):
        return all(is_literal(v) for v in value)
    return True


def load_yaml(path):
    return yaml.safe_load(path.read_text()) if path.exists() else None


# Keys ansible-core's role argument validation knows (ArgumentSpecValidator); anything else is a typo or a YAML
# accident such as an unquoted comma in a flow mapping ({description: a (b, c)} makes keys "c)" and so on).
OPTION_KEYS = {"type", "elements", "default", "choices", "required", "description", "options", "aliases", "no_log",
               "apply_defaults", "version_added", "deprecated_aliases", "removed_in_version", "removed_at_date",
               "removed_from_collection", "fallback", "required_if", "required_one_of", "mutually_exclusive",
               "required_together", "required_by"}


def unknown_option_keys(options, where=""):
    problems = []
    for name, spec in (options or {}).items():
        for key in sorted(set(spec or {}) - OPTION_KEYS):
            problems.append("option %s%s has an unknown key %r" % (where, name, key))
        problems += unknown_option_keys((spec or {}).get("options"), "%s%s." % (where, name))
    return problems


def role_problems(role):
    """Disagreements between a role's meta/argument_specs.yml and defaults/main.yml, one sentence each."""
    specs_file = role / "meta" / "argument_specs.yml"
    if not specs_file.exists():
        return ["no meta/argument_specs.yml"]
    specs = (load_yaml(specs_file) or {}).get("argument_specs") or {}
    if "main" not in specs:
        return ["meta/argument_specs.yml has no main entry point"]
    declared = {}
    for entry in specs.values():
        declared.update((entry or {}).get("options") or {})
    defaults = load_yaml(role / "defaults" / "main.yml") or {}
    problems = unknown_option_keys(declared)
    for name in defaults:
        if name not in declared:
            problems.append("defaults/main.yml sets %s, which meta/argument_specs.yml does not declare" % name)
    prefixes = allowed_prefixes(role.name)
    for name, spec in declared.items():
        spec = spec or {}
        if not any(name.startswith(p) for p in prefixes) and name not in COLLECTION_SWITCHES:
            problems.append("option %s does not start with %s" % (name, " or ".join(sorted(prefixes))))
        if "default" not in spec:
            continue
        if spec.get("required"):
            problems.append("option %s is both required and has a default" % name)
        # ansible-core does not set variables from argument_specs defaults: defaults/main.yml must hold them.
        if name not in defaults:
            problems.append("option %s declares default %r but defaults/main.yml does not set it" % (name, spec["default"]))
        elif is_literal(spec["default"]) and defaults[name] != spec["default"]:
            problems.append("option %s: argument_specs default %r != defaults/main.yml %r"
                            % (name, spec["default"], defaults[name]))
    return problems


@pytest.mark.parametrize("role", role_dirs(), ids=lambda p: "%s/%s" % (p.parent.parent.name, p.name))
def test_role_argument_specs_and_defaults_agree(role):
    problems = role_problems(role)
    assert not problems, "%s:\n  " % role.relative_to(BUNDLE) + "\n  ".join(problems)


def test_role_check_reports_each_kind_of_disagreement(tmp_path):
    role = tmp_path / "dcdb_pusher"
    (role / "meta").mkdir(parents=True)
    (role / "defaults").mkdir()
    (role / "defaults" / "main.yml").write_text(
        "dcdb_pusher_port: 8000\ndcdb_interval: 10\nundeclared_thing: 1\ndcdb_pusher_url: '{{ x }}'\n")
    (role / "meta" / "argument_specs.yml").write_text(yaml.safe_dump({"argument_specs": {"main": {"options": {
        "dcdb_pusher_port": {"type": "int", "default": 8080},
        "dcdb_interval": {"type": "int", "default": 10},
        "dcdb_pusher_url": {"type": "str", "default": "{{ y }}"},
        "dcdb_pusher_topic": {"type": "str", "default": "/msa"},
        "pusher_misnamed": {"type": "str"},
        "dcdb_pusher_sensors": yaml.safe_load("{type: dict, description: Sensors (name, unit)}"),
    }}}}))
    problems = "\n".join(role_problems(role))
    assert "defaults/main.yml sets undeclared_thing" in problems
    assert "option dcdb_pusher_port: argument_specs default 8080 != defaults/main.yml 8000" in problems
    assert "option dcdb_pusher_topic declares default '/msa' but defaults/main.yml does not set it" in problems
    assert "option pusher_misnamed does not start with dcdb_ or dcdb_pusher_" in problems
    assert "option dcdb_pusher_sensors has an unknown key 'unit)'" in problems
    # a family prefix is allowed, and a templated default is not compared
    assert "dcdb_interval" not in problems and "dcdb_pusher_url" not in problems


def test_ansible_doc_lists_every_collection_role():
    listed = json.loads(run([BIN / "ansible-doc", "-t", "role", "-l", "msa.hpc", "--json"]).stdout)
    expected = sorted(p.name for p in role_dirs() if p.parent == COLLECTION / "roles")
    assert sorted(name.split(".", 2)[2] for name in listed) == expected
