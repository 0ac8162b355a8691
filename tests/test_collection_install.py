# SPDX-License-Identifier: GPL-3.0-or-later
"""The built collection tarball installs offline into an empty path and works there (modules, filters, inventory
plugin, role argument validation)."""
from __future__ import annotations

import json
import os
import re
import shutil
import sys

import pytest
import yaml

from tests.collection_helpers import BUNDLE, COLLECTION, BIN, run


# The built tarball installs offline into an empty path and works there ---------------------------------------------

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
