# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

"""The collection as the Ansible ecosystem sees it: ansible-doc, EXAMPLES, role specs, offline build and install."""

import ast
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

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


@pytest.fixture(scope="session")
def module_docs():
    """``ansible-doc --json`` of every module file, keyed by short name (one call for all)."""
    names = module_files()
    if not names:
        raise AssertionError("no module under %s" % (COLLECTION / "plugins" / "modules"))
    out = run([BIN / "ansible-doc", "--json"] + ["msa.hpc." + n for n in names]).stdout
    return {fqcn.split(".", 2)[2]: doc for fqcn, doc in json.loads(out).items()}


# 1. ansible-doc lists every module ------------------------------------------------------------------------------

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


# 2. EXAMPLES parse and use only documented options --------------------------------------------------------------

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


# 3. Roles: meta/argument_specs.yml and defaults/main.yml agree -------------------------------------------------

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
        if not any(name.startswith(p) for p in prefixes):
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


# 4. and 5. The built tarball installs offline into an empty path and works there -------------------------------

def isolated_env(collections_path, home):
    """Environment with no trace of the repository: only the installed collection is on the collections path."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_") and k != "PYTHONPATH"}
    cfg = home / "ansible.cfg"
    cfg.write_text("[defaults]\nretry_files_enabled = False\n")
    env.update(ANSIBLE_CONFIG=str(cfg), ANSIBLE_COLLECTIONS_PATH=str(collections_path),
               ANSIBLE_NOCOLOR="1", ANSIBLE_LOCAL_TEMP=str(home / "tmp"), ANSIBLE_HOME=str(home / "ansible-home"),
               ANSIBLE_INVENTORY_ENABLED="msa.hpc.system,ansible.builtin.yaml,ansible.builtin.host_list",
               ANSIBLE_PYTHON_INTERPRETER=sys.executable, ANSIBLE_DEPRECATION_WARNINGS="False")
    return env


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """Build the collection, install the tarball offline into an empty path; yield (path, env, workdir)."""
    base = tmp_path_factory.mktemp("collection")
    dist, target, work = base / "dist", base / "installed", base / "work"
    for d in (dist, work):
        d.mkdir()
    galaxy = yaml.safe_load((COLLECTION / "galaxy.yml").read_text())
    env = isolated_env(target, work)
    run([BIN / "ansible-galaxy", "collection", "build", COLLECTION, "--output-path", dist], env=env, cwd=work)
    tarball = dist / ("msa-hpc-%s.tar.gz" % galaxy["version"])
    assert tarball.exists(), "ansible-galaxy built %s, not %s" % (sorted(os.listdir(dist)), tarball.name)
    run([BIN / "ansible-galaxy", "collection", "install", "--offline", tarball, "-p", target], env=env, cwd=work)
    yield target, env, work


def test_built_collection_installs_offline_and_is_the_only_copy_in_use(installed):
    target, env, work = installed
    installed_dir = target / "ansible_collections" / "msa" / "hpc"
    manifest = json.loads((installed_dir / "MANIFEST.json").read_text())
    assert manifest["collection_info"]["name"] == "hpc"
    # Nothing the build must leave out
    shipped = {str(p.relative_to(installed_dir)) for p in installed_dir.rglob("*")}
    assert not [p for p in shipped if p.endswith((".pyc", ".tar.gz")) or "tests/output" in p], shipped
    doc = json.loads(run([BIN / "ansible-doc", "--json", "msa.hpc.gw_pool"], env=env, cwd=work).stdout)
    assert doc["msa.hpc.gw_pool"]["doc"]["filename"].startswith(str(target))


SYSTEM = """\
plugin: msa.hpc.system
system: pkgtest
fabrics:
  mgmt: {kind: ethernet, cidr: 10.42.0.0/24}
  ib: {kind: infiniband, cidr: 10.43.0.0/24}
  extoll: {kind: extoll, cidr: 10.44.0.0/24}
modules:
  mgmt: {role: management, count: 1, offset: 10, fabrics: [mgmt]}
  cm: {role: compute, count: 3, offset: 20, fabrics: [mgmt, ib],
       hardware: {sockets: 1, cores_per_socket: 2, threads_per_core: 1, memory_mb: 1024}}
  esb: {role: compute, count: 2, offset: 40, fabrics: [mgmt, extoll]}
  gw: {role: mpi_gateway, count: 2, offset: 80, fabrics: [mgmt, ib, extoll]}
"""

PLAYBOOK = """\
- name: Use the installed msa.hpc from a directory outside the repository
  hosts: localhost
  connection: local
  gather_facts: false
  vars:
    db: "{{ playbook_dir }}/pool.db"
  tasks:
    - name: Check the system description with the collection's filter
      ansible.builtin.assert:
        that:
          - groups['cm'] == ['cm01', 'cm02', 'cm03']
          - hostvars['gw02'].msa_addresses.extoll == '10.44.0.82'
          - problems == []
        fail_msg: "{{ problems }}"
      vars:
        problems: "{{ groups['all'] | difference(['localhost'])
                      | msa.hpc.system_problems(hostvars, msa_fabrics, msa_modules, msa_management_fabric, groups) }}"

    - name: Give job 7 one gateway from a pool in a local database
      msa.hpc.gw_pool:
        db: "{{ db }}"
        pool: {port: 40158, gateways: [{name: gw01, addresses: "{{ hostvars['gw01'].msa_addresses }}"},
                                       {name: gw02, addresses: "{{ hostvars['gw02'].msa_addresses }}"}]}
        state: allocated
        job_id: "7"
        count: 1
      register: first

    - name: Ask again for the same job
      msa.hpc.gw_pool:
        db: "{{ db }}"
        state: allocated
        job_id: "7"
        count: 1
      register: second

    - name: The module changed the pool once, then nothing
      ansible.builtin.assert:
        that:
          - first is changed
          - second is not changed
          - first.counts.free == 1
          - second.gateways | map(attribute='name') | list == first.gateways | map(attribute='name') | list
"""


def test_playbook_runs_modules_filters_and_inventory_plugin_from_the_installed_copy(installed):
    target, env, work = installed
    play_dir = work / "play"
    play_dir.mkdir()
    (play_dir / "pkgtest.msa.yml").write_text(SYSTEM)
    (play_dir / "site.yml").write_text(PLAYBOOK)
    proc = run([BIN / "ansible-playbook", "-i", "pkgtest.msa.yml", "-i", "localhost,", "site.yml"],
               env=env, cwd=play_dir)
    assert "failed=0" in proc.stdout and "changed=1" in proc.stdout, proc.stdout
    assert (play_dir / "pool.db").exists()


def test_wrong_role_variable_type_stops_the_play_before_any_task_naming_the_variable(installed):
    target, env, work = installed
    play_dir = work / "typecheck"
    play_dir.mkdir()
    shutil.copy(BUNDLE / "common.yml", play_dir / "common.yml")
    (play_dir / "pkgtest.msa.yml").write_text(SYSTEM)
    (play_dir / "slurm.yml").write_text(
        "- name: Slurm configuration with a wrong licence table\n"
        "  hosts: cm01\n  gather_facts: false\n  roles:\n    - msa.hpc.slurm\n")
    proc = run([BIN / "ansible-playbook", "-i", "common.yml", "-i", "pkgtest.msa.yml", "--check",
                "-e", '{"slurm_licenses": "notadict"}', "slurm.yml"], env=env, cwd=play_dir, check=False)
    assert proc.returncode != 0, proc.stdout
    assert "Validating arguments against arg spec 'main'" in proc.stdout
    assert "argument 'slurm_licenses' is of type str and we were unable to convert to dict" in proc.stdout, proc.stdout
    # The validation task is the only task that ran: nothing was touched on the node.
    assert re.search(r"cm01\s*: ok=0\s+changed=0\s+unreachable=0\s+failed=1", proc.stdout), proc.stdout


# Execution environment and collection metadata -----------------------------------------------------------------

IMPORT_TO_DISTRIBUTION = {"yaml": "pyyaml", "numpy": "numpy", "networkx": "networkx", "netaddr": "netaddr",
                          "jsonschema": "jsonschema", "requests": "requests", "paho": "paho-mqtt",
                          "redfish": "redfish", "psycopg2": "psycopg2", "pymysql": "pymysql"}


def third_party_imports():
    found = {}
    stdlib = set(sys.stdlib_module_names)
    for path in (COLLECTION / "plugins").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top not in stdlib and top not in ("ansible", "ansible_collections", "__future__"):
                    found.setdefault(top, set()).add(str(path.relative_to(COLLECTION)))
    return found


def test_requirements_txt_names_every_third_party_package_the_plugins_import():
    listed = set()
    for line in (COLLECTION / "requirements.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            listed.add(re.split(r"[<>=!~\[; ]", line)[0].lower())
    problems = []
    for top, files in sorted(third_party_imports().items()):
        distribution = IMPORT_TO_DISTRIBUTION.get(top)
        if distribution is None:
            problems.append("%s (imported by %s): add it to IMPORT_TO_DISTRIBUTION" % (top, ", ".join(sorted(files))))
        elif distribution not in listed:
            problems.append("%s (imported by %s) is not in requirements.txt" % (distribution, ", ".join(sorted(files))))
    assert not problems, "\n".join(problems)


EE_SECTIONS = {"version", "images", "dependencies", "options", "additional_build_files", "additional_build_steps",
               "build_arg_defaults"}
EE_DEPENDENCIES = {"python", "galaxy", "system", "python_interpreter", "ansible_core", "ansible_runner"}


def test_execution_environment_definition_follows_builder_v3_and_installs_this_version():
    ee = yaml.safe_load((COLLECTION / "execution-environment.yml").read_text())
    assert ee["version"] == 3
    assert set(ee) <= EE_SECTIONS, set(ee) - EE_SECTIONS
    assert set(ee["dependencies"]) <= EE_DEPENDENCIES, set(ee["dependencies"]) - EE_DEPENDENCIES
    assert ee["images"]["base_image"]["name"]
    version = yaml.safe_load((COLLECTION / "galaxy.yml").read_text())["version"]
    files = [c for c in ee["dependencies"]["galaxy"]["collections"] if c.get("type") == "file"]
    assert [c["name"] for c in files] == ["collections/msa-hpc-%s.tar.gz" % version]
    build_files = {(f["src"], f["dest"]) for f in ee["additional_build_files"]}
    assert ("ee-build/msa-hpc-%s.tar.gz" % version, "collections") in build_files  # scripts/ee.sh puts it there
    pins = dict(line.split("==") for line in (COLLECTION.parents[3] / "requirements.txt").read_text().splitlines()
                if "==" in line and not line.startswith("#"))
    assert ee["dependencies"]["ansible_core"]["package_pip"] == "ansible-core==" + pins["ansible-core"]
    assert ee["dependencies"]["ansible_runner"]["package_pip"] == "ansible-runner==" + pins["ansible-runner"]
    bindep = [line for line in (COLLECTION / "bindep.txt").read_text().splitlines()
              if line.strip() and not line.startswith("#")]
    assert all(re.match(r"^[a-z0-9.+-]+( \[[a-z0-9: !]+\])?$", line) for line in bindep), bindep


def test_runtime_action_groups_name_real_or_announced_modules():
    runtime = yaml.safe_load((COLLECTION / "meta" / "runtime.yml").read_text())
    assert runtime["requires_ansible"].startswith(">=")
    announced = {"extoll_fabric", "nam_segment", "gce_comm", "gw_pool", "slurm_packjob", "dcdb_plugin",
                 "redfish_node", "system_info"}
    for group, members in runtime["action_groups"].items():
        for member in members:
            assert isinstance(member, str) and (member in announced or member in module_files()), (group, member)


# AWX setup: run playbooks/awx_setup.yml against stand-in awx.awx modules that record their arguments ----------

AWX_STUB = """#!/usr/bin/python
# WANT_JSON
# Stand-in for awx.awx.%(name)s (tests/test_collection.py): records the arguments, changes nothing.
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
    run([BIN / "ansible-playbook", COLLECTION / "playbooks" / "awx_setup.yml", "-i", "localhost,",
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


def test_docs_script_writes_a_page_per_module_plugin_and_role(tmp_path):
    proc = run([sys.executable, COLLECTION / "docs" / "generate.py", "--ansible-doc", BIN / "ansible-doc",
                "--output", tmp_path], check=False)
    failures = re.findall(r"^could not document (\S+ \(\w+\))", proc.stderr, re.M)
    assert not failures, proc.stderr
    assert proc.returncode == (1 if failures else 0), proc.stderr
    pages = {str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*.md")}
    expected = {"module/%s.md" % m for m in module_files()}
    expected |= {"role/%s.md" % p.name for p in role_dirs() if p.parent == COLLECTION / "roles"}
    expected |= {"inventory/system.md", "vars/system.md", "filter/system_problems.md", "filter/layer_warnings.md",
                 "README.md"}
    assert expected <= pages, sorted(expected - pages)
    extoll = (tmp_path / "module" / "extoll_fabric.md").read_text()
    assert "## Examples" in extoll and "| `routing` | str |" in extoll and "C(" not in extoll


# The README's content list is generated from ansible-doc and cannot drift ----------------------------------------

def readme_check(path):
    return run([sys.executable, COLLECTION / "docs" / "generate.py", "--ansible-doc", BIN / "ansible-doc",
                "--check-readme", path], check=False)


def test_collection_readme_lists_every_module_role_and_plugin_as_ansible_doc_does():
    proc = readme_check(COLLECTION / "README.md")
    assert proc.returncode == 0, "README.md is stale (scripts/docs.sh --readme):\n%s%s" % (proc.stdout, proc.stderr)
    text = (COLLECTION / "README.md").read_text()
    block = text[text.index("<!-- BEGIN content"):text.index("<!-- END content -->")]
    named = set(re.findall(r"^\| `([a-z0-9_]+)` \|", block, re.M))
    plugins = {p.stem for kind in ("modules", "filter", "inventory", "strategy")
               for p in (COLLECTION / "plugins" / kind).glob("*.py") if not p.name.startswith("_")}
    # a filter file may hold several filters: its own name need not be one of them, but every filter's is listed
    filters = {n.split(".", 2)[2] for n in json.loads(
        run([BIN / "ansible-doc", "-t", "filter", "-l", "msa.hpc", "--json"]).stdout)}
    roles = {p.name for p in role_dirs() if p.parent == COLLECTION / "roles"}
    wanted = (plugins - {p.stem for p in (COLLECTION / "plugins" / "filter").glob("*.py")}) | filters | roles
    assert wanted <= named, sorted(wanted - named)


def test_readme_check_fails_on_a_stale_list_and_names_what_changed(tmp_path):
    stale = tmp_path / "README.md"
    text = (COLLECTION / "README.md").read_text()
    stale.write_text(re.sub(r"^\| `gw_pool` \|.*\n", "", text, flags=re.M))
    assert stale.read_text() != text
    proc = readme_check(stale)
    assert proc.returncode == 1 and "+| `gw_pool` |" in proc.stdout and "is stale" in proc.stderr, proc
    (tmp_path / "bare.md").write_text("# no generated block\n")
    proc = readme_check(tmp_path / "bare.md")
    assert proc.returncode == 2 and "has no <!-- BEGIN content" in proc.stderr, proc
