# SPDX-License-Identifier: GPL-3.0-or-later
"""The collection's metadata: requirements.txt, the execution environment definition and meta/runtime.yml."""
from __future__ import annotations

import ast
import re
import sys

import yaml

from tests.collection_helpers import COLLECTION, module_files


# Execution environment and collection metadata ---------------------------------------------------------------------

IMPORT_TO_DISTRIBUTION = {"yaml": "pyyaml", "numpy": "numpy", "networkx": "networkx", "netaddr": "netaddr",
                          "jsonschema": "jsonschema", "requests": "requests", "paho": "paho-mqtt",
                          "redfish": "redfish", "psycopg2": "psycopg2", "pymysql": "pymysql",
                          "bcrypt": "bcrypt"}


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
