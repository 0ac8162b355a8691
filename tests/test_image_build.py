# SPDX-License-Identifier: GPL-3.0-or-later
"""Node images (issue 38, image layer): playbooks/image.yml parses, the compute set's roles in image mode write no
secret and start no service (their image task files, read as Ansible would run them), the secret-writing tasks are
all behind the image guard, and the image hash follows the variables that go into the image and no other."""
from __future__ import annotations

import json
import os
import re
import subprocess

import pytest
import yaml

from ansible_collections.msa.hpc.plugins.module_utils import _image_hash as H
from tests.helpers import BIN, BUNDLE

ROLES = BUNDLE / "collections/ansible_collections/msa/hpc/roles"
INVENTORY = ["-i", "common.yml", "-i", "inventories/systems/mini", "-i", "inventories/sites/example"]
GUARD = "msa_deploy_mode | default('ssh') == 'ssh'"          # configure: over SSH only
INSTALL_GUARD = "msa_deploy_mode | default('ssh') != 'overlay'"  # install: in an image and over SSH
NOT_IMAGE = "msa_deploy_mode | default('ssh') != 'image'"        # every mode but the image build
# A destination that is a secret or names one: the roles' secret files and the variables that hold their paths.
SECRET_DEST = re.compile(r"token|password|secret|credentials|munge_key|tls_key|tls_cert|server\.key|\.key\b|"
                         r"\.account\b|bmc\.json|id_(rsa|ecdsa|ed25519)", re.IGNORECASE)
# Per-node values: a task of the image may not read them (they are the node's own layer).
PER_NODE = re.compile(r"\b(inventory_hostname|msa_addresses|msa_module|msa_hardware|msa_extoll_guid|hostvars)\b")
SERVICE_MODULES = {"ansible.builtin.systemd_service", "ansible.builtin.systemd", "ansible.builtin.service"}


def env():
    return dict(os.environ, ANSIBLE_CONFIG=str(BUNDLE / "ansible.cfg"), ANSIBLE_NOCOLOR="1")


def compute_set():
    return yaml.safe_load((BUNDLE / "group_vars/all.yml").read_text())["msa_image_sets"]["compute"]


def entries(roles):
    out = []
    for entry in roles:
        entry = entry if isinstance(entry, dict) else {"role": entry}
        name, tasks_from = entry["role"].rsplit(".", 1)[-1], entry.get("tasks_from", "main")
        out.append((name, "install.yml" if tasks_from == "main" else tasks_from + "_install.yml",
                    tasks_from + ".yml", "configure.yml" if tasks_from == "main" else tasks_from + "_configure.yml"))
    return out


def tasks(path):
    """Every task of a task file, blocks opened."""
    def walk(items):
        for task in items or []:
            if "block" in task:
                yield from walk(task["block"])
                yield from walk(task.get("rescue"))
                yield from walk(task.get("always"))
            else:
                yield task
    return list(walk(yaml.safe_load(path.read_text())))


def module_of(task):
    return next(k for k in task if "." in k or k in ("include_role", "import_role", "include_tasks", "import_tasks"))


def image_task_files():
    files, _ = H.image_files(str(ROLES), [(role, install) for role, install, _, _ in entries(compute_set()["roles"])])
    return [f for f in files if "/tasks/" in f]


def test_image_playbook_passes_syntax_check():
    run = subprocess.run([str(BIN / "ansible-playbook"), *INVENTORY, "--syntax-check", "playbooks/image.yml"],
                         capture_output=True, text=True, env=env(), cwd=BUNDLE)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "playbook: playbooks/image.yml" in run.stdout


@pytest.mark.parametrize("rel", image_task_files())
def test_image_task_files_write_no_secret_and_start_no_service(rel):
    for task in tasks(ROLES / rel):
        name, module = task.get("name", "?"), module_of(task)
        args = task[module] if isinstance(task[module], dict) else {}
        assert not task.get("no_log"), "%s: %r handles a secret (no_log) in image mode" % (rel, name)
        assert "notify" not in task, "%s: %r notifies a handler (restarts a service) in image mode" % (rel, name)
        assert module not in SERVICE_MODULES, "%s: %r manages a service in image mode" % (rel, name)
        for key in ("dest", "path", "content"):
            value = json.dumps(args.get(key, ""))
            assert not SECRET_DEST.search(value), "%s: %r writes %s=%s in image mode" % (rel, name, key, value)
        text = json.dumps({k: v for k, v in task.items() if k != "name"})
        assert not PER_NODE.search(text), "%s: %r reads a per-node value in image mode" % (rel, name)


def test_image_templates_read_no_per_node_value():
    files, _ = H.image_files(str(ROLES), [(role, install) for role, install, _, _ in entries(compute_set()["roles"])])
    templates = [f for f in files if "/templates/" in f]
    assert templates, "the image task files install no template: the check below would check nothing"
    for rel in templates:
        assert not PER_NODE.search((ROLES / rel).read_text()), "%s reads a per-node value" % rel


def test_the_secret_writes_of_the_compute_roles_are_all_behind_the_image_guard():
    """The no_log tasks (every key, token, password the roles write) of each role entry are in its configure file,
    and the entry imports that file only when not in image mode: the check above cannot pass by having no role."""
    secret_tasks = []
    for role, install, entry, configure in entries(compute_set()["roles"]):
        main = yaml.safe_load((ROLES / role / "tasks" / entry).read_text())
        imports = [t.get("ansible.builtin.import_tasks") for t in main]
        assert imports[0] == install and imports[-1] == configure, (role, entry, imports)
        assert main[0]["when"] == INSTALL_GUARD and main[-1]["when"] == GUARD, (role, entry)
        # Between them only imports every mode but the image build runs (the munge key's run-once tasks, which a
        # host-dependent condition would skip for all hosts when the play's first host is image-booted).
        for between in main[1:-1]:
            assert between.get("ansible.builtin.import_tasks") and between["when"] == NOT_IMAGE, (role, between)
        for task_file in imports[1:]:
            secret_tasks += ["%s/%s: %s" % (role, task_file, t["name"])
                             for t in tasks(ROLES / role / "tasks" / task_file) if t.get("no_log")]
    # munge key, EMP slave token, MQTT password, BMC password, store account, gateway read token at least
    assert len(secret_tasks) >= 6, secret_tasks
    assert any("munge key" in t for t in secret_tasks) and any("token" in t for t in secret_tasks), secret_tasks


def hash_run(*extra):
    """The compute image's hash and hashed variable names, computed as playbooks/image.yml does (no container)."""
    run = subprocess.run([str(BIN / "ansible-playbook"), *INVENTORY, "tests/fixtures/image_hash.yml", *extra],
                         capture_output=True, text=True, cwd=BUNDLE,
                         env=dict(env(), ANSIBLE_STDOUT_CALLBACK="ansible.posix.json", ANSIBLE_LOAD_CALLBACK_PLUGINS="1"))
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    report = json.JSONDecoder().raw_decode(run.stdout[run.stdout.index("{"):])[0]
    result = report["plays"][-1]["tasks"][-1]["hosts"]["msa-image-build-compute"]
    return result["hash"], result["variables"]


def test_image_hash_follows_the_image_variables_not_per_node_or_service_ones():
    base, names = hash_run()
    assert {"msa_timezone", "msa_deploy_mode", "msa_image_base_id", "_set"} <= set(names)
    assert not {"slurmd_options", "msa_addresses", "extoll_node_token"} & set(names)
    assert hash_run()[0] == base                                          # stable
    assert hash_run("-e", "msa_timezone=Europe/Paris")[0] != base          # goes into /etc/localtime
    assert hash_run("-e", "msa_image_base_id=0b5e1d")[0] != base           # a rebuilt base image
    assert hash_run("-e", "mpi_packages=[openmpi-bin]")[0] != base         # a package list of the image
    assert hash_run("-e", "slurmd_options=-v")[0] == base                  # the node's own /etc/default/slurmd
