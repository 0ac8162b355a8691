# SPDX-License-Identifier: GPL-3.0-or-later
"""msa.hpc.slurm_reboot's bmc_account tasks run for real by ansible-playbook against two stand-in BMCs over TLS:
the node's own account is made through AccountService with the administrator's, set right again when its role or
password differs, left alone otherwise; its password works on its own BMC only and can only reset."""
from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
import urllib.error
import urllib.request
import io
import ssl

import pytest

from ansible_collections.msa.hpc.plugins.module_utils.node import bmc_reboot
from msa_sim.bmc import testing

HERE = os.path.dirname(os.path.abspath(__file__))
COLLECTIONS = os.path.abspath(os.path.join(HERE, "..", "..", "collections"))
BIN = os.path.dirname(sys.executable)
ADMIN = ("admin", "Adm1n-pass-Quartz")

PLAYBOOK = """
- name: Make the node account on the node's own BMC
  hosts: n1
  connection: local
  gather_facts: false
  tasks:
    - name: Run the role's account tasks
      ansible.builtin.include_role:
        name: msa.hpc.slurm_reboot
        tasks_from: bmc_account
"""


def _env(tmp):
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=COLLECTIONS, ANSIBLE_LOCAL_TEMP=os.path.join(tmp, "tmp"),
               ANSIBLE_REMOTE_TEMP=os.path.join(tmp, "tmp"), ANSIBLE_NOCOLOR="1", ANSIBLE_DEPRECATION_WARNINGS="0",
               ANSIBLE_RETRY_FILES_ENABLED="0", ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json")
    env.pop("ANSIBLE_CONFIG", None)
    return env


def call(url, method="GET", body=None, user=ADMIN, ca=None):
    req = urllib.request.Request(url, method=method, data=json.dumps(body).encode() if body is not None else None,
                                 headers={"Content-Type": "application/json", "Authorization": "Basic " +
                                          base64.b64encode(("%s:%s" % user).encode()).decode()})
    try:
        with urllib.request.urlopen(req, timeout=10, context=ssl.create_default_context(cafile=ca)) as resp:
            raw = resp.read()
            return resp.status, json.loads(raw) if raw else None
    except urllib.error.HTTPError as exc:
        return exc.code, None


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    if not shutil.which("openssl"):
        pytest.skip("openssl is needed to make the test BMCs' certificate")
    tmp = str(tmp_path_factory.mktemp("bmc_account"))
    ca, tls = testing.make_tls(tmp)
    service = testing.start(tmp, [{"name": "n1", "tls": tls}, {"name": "n2", "tls": tls}],
                            {ADMIN[0]: (ADMIN[1], "Administrator")})
    for bmc in service.bmcs.values():
        bmc.password_iterations = testing.FAST_ITERATIONS
    with open(os.path.join(tmp, "play.yml"), "w", encoding="utf-8") as handle:
        handle.write(PLAYBOOK)
    with open(os.path.join(tmp, "vars.json"), "w", encoding="utf-8") as handle:
        json.dump({"slurm_reboot_bmc_endpoint": service.url("n1"), "slurm_reboot_bmc_admin_username": ADMIN[0],
                   "slurm_reboot_bmc_admin_password": ADMIN[1], "slurm_reboot_bmc_admin_ca_path": ca,
                   "slurm_reboot_secrets_dir": os.path.join(tmp, "secrets"),
                   "ansible_python_interpreter": sys.executable}, handle)

    def play():
        proc = subprocess.run([os.path.join(BIN, "ansible-playbook"), "-i", "n1,", "play.yml", "-e", "@vars.json"],
                              cwd=tmp, env=_env(tmp), capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
        report = json.loads(proc.stdout)
        return report["stats"]["n1"]["changed"], proc.stdout

    try:
        yield {"play": play, "urls": {n: service.url(n) for n in service.bmcs}, "ca": ca, "tmp": tmp}
    finally:
        service.stop()


def node_account(world):
    _, accounts = call(world["urls"]["n1"] + "/redfish/v1/AccountService/Accounts", ca=world["ca"])
    bodies = [call(world["urls"]["n1"] + m["@odata.id"], ca=world["ca"])[1] for m in accounts["Members"]]
    return next((b for b in bodies if b["UserName"] == "msa-reboot"), None)


def test_the_account_is_made_then_left_alone_then_set_right_again(world):
    changed, out = world["play"]()
    account = node_account(world)
    assert changed == 1 and account["RoleId"] == "SystemResetOperator"
    with open(os.path.join(world["tmp"], "secrets", "bmc_node_n1"), encoding="utf-8") as handle:
        password = handle.read().split()[0]
    assert password not in out and ADMIN[1] not in out
    assert world["play"]()[0] == 0  # nothing to do
    # an administrator widened the role and changed the password: the role puts both back
    call(world["urls"]["n1"] + account["@odata.id"], "PATCH", {"RoleId": "Operator", "Password": "other-pass-1"},
         ca=world["ca"])
    assert world["play"]()[0] == 1
    assert node_account(world)["RoleId"] == "SystemResetOperator"
    node = ("msa-reboot", password)
    reset = "/redfish/v1/Systems/1/Actions/ComputerSystem.Reset"
    assert call(world["urls"]["n1"] + reset, "POST", {"ResetType": "On"}, node, world["ca"])[0] == 204
    assert call(world["urls"]["n2"] + reset, "POST", {"ResetType": "On"}, node, world["ca"])[0] == 401
    assert call(world["urls"]["n1"] + "/redfish/v1/Systems/1", "PATCH",
                {"Boot": {"BootSourceOverrideTarget": "Pxe"}}, node, world["ca"])[0] == 403
    # the RebootProgram with the settings the role writes (templates/bmc.json.j2: basic auth) restarts the node
    config = os.path.join(world["tmp"], "bmc.json")
    with open(config, "w", encoding="utf-8") as handle:
        json.dump({"endpoint": world["urls"]["n1"], "username": "msa-reboot", "auth": "basic", "reset": "power_cycle",
                   "password_file": os.path.join(world["tmp"], "secrets", "bmc_node_n1"), "ca_path": world["ca"]},
                  handle)
    err = io.StringIO()
    assert bmc_reboot.main([config], err=err) == 0, err.getvalue()
    assert "sent PowerCycle" in err.getvalue() and password not in err.getvalue()
