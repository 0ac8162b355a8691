# SPDX-License-Identifier: GPL-3.0-or-later
"""A node's own BMC account (role SystemResetOperator, made through AccountService): it resets its system and
changes nothing else; on another node's BMC it is unknown."""
from __future__ import annotations

import base64
import json

import pytest

from msa_sim.bmc import testing
from msa_sim.bmc.backend import FileBackend
from msa_sim.bmc.service import Bmc
from msa_sim.bmc.store import Store

ADMIN = ("admin", "Adm1n-pw")
NODE = ("reboot-n1", "n0de-secret-1")
SYS = "/redfish/v1/Systems/1"
RESET = SYS + "/Actions/ComputerSystem.Reset"
ACCOUNTS = "/redfish/v1/AccountService/Accounts"


def auth(user):
    return {"Authorization": "Basic " + base64.b64encode(("%s:%s" % user).encode()).decode()}


def call(bmc, method, path, body=None, user=ADMIN):
    resp = bmc.handle(method, path, auth(user), json.dumps(body).encode() if body is not None else b"")
    return resp.status, resp.body


@pytest.fixture()
def pair(tmp_path):
    """Two BMCs of one service (n1, n2) sharing the administrator, n1 given its node account through Redfish."""
    conf = testing.make_config(str(tmp_path), [{"name": "n1"}, {"name": "n2"}],
                               {ADMIN[0]: (ADMIN[1], "Administrator")})
    store = Store(conf["database"])
    backend = FileBackend(conf["backend"]["state_file"])
    bmcs = [Bmc(b, backend, store) for b in conf["bmcs"]]
    for bmc in bmcs:
        bmc.password_iterations = testing.FAST_ITERATIONS
    status, body = call(bmcs[0], "POST", ACCOUNTS, {"UserName": NODE[0], "Password": NODE[1],
                                                    "RoleId": "SystemResetOperator"})
    assert status == 201 and body["RoleId"] == "SystemResetOperator", body
    yield bmcs
    store.close()


def state(bmcs):
    """What an attack must not change: power, boot override and accounts of every BMC."""
    return [(b.power_state(), call(b, "GET", SYS)[1]["Boot"]["BootSourceOverrideEnabled"],
             sorted(m["@odata.id"] for m in call(b, "GET", ACCOUNTS)[1]["Members"])) for b in bmcs]


def test_the_node_account_resets_its_own_system(pair):
    n1 = pair[0]
    assert call(n1, "GET", SYS, user=NODE)[0] == 200  # Login: reads stay allowed
    assert call(n1, "POST", RESET, {"ResetType": "On"}, user=NODE)[0] == 204
    assert n1.power_state() == "On"
    assert call(n1, "POST", RESET, {"ResetType": "ForceOff"}, user=NODE)[0] == 204
    assert n1.power_state() == "Off"


@pytest.mark.parametrize("method,path,body", [
    ("PATCH", SYS, {"Boot": {"BootSourceOverrideTarget": "Pxe", "BootSourceOverrideEnabled": "Once"}}),
    ("POST", ACCOUNTS, {"UserName": "evil", "Password": "evil-pass-1", "RoleId": "Administrator"}),
    ("PATCH", ACCOUNTS + "/1", {"Password": "taken-over-1"}),
    ("PATCH", ACCOUNTS + "/2", {"RoleId": "Administrator"}),
    ("PATCH", ACCOUNTS + "/2", {"Password": "changed-own-1"}),
    ("DELETE", ACCOUNTS + "/1", None),
    ("POST", "/redfish/v1/Chassis/1/Actions/Chassis.Reset", {"ResetType": "ForceOff"}),
    ("POST", "/redfish/v1/Managers/BMC/Actions/Manager.Reset", {"ResetType": "GracefulRestart"}),
    ("POST", "/redfish/v1/UpdateService/Actions/UpdateService.SimpleUpdate", {"ImageURI": "http://x/fw.bin"}),
    ("POST", "/msa-bmc/faults", {"path": "/redfish", "status": 503, "count": 1}),
])
def test_the_node_account_changes_nothing_but_the_power_of_its_system(pair, method, path, body):
    before = state(pair)
    status, answer = call(pair[0], method, path, body, user=NODE)
    assert status == 403 and answer["error"]["code"].endswith("InsufficientPrivilege"), (method, path, answer)
    assert state(pair) == before


def test_the_node_account_is_unknown_to_another_nodes_bmc(pair):
    n2 = pair[1]
    before = state(pair)
    status, answer = call(n2, "POST", RESET, {"ResetType": "On"}, user=NODE)
    assert status == 401 and "not correct" in answer["error"]["message"]
    assert call(n2, "POST", ACCOUNTS, {"UserName": NODE[0], "Password": NODE[1],
                                       "RoleId": "Administrator"}, user=NODE)[0] == 401
    assert state(pair) == before and n2.power_state() == "Off"


def test_role_and_privilege_map_state_the_rule_the_service_enforces(pair):
    n1 = pair[0]
    status, role = call(n1, "GET", "/redfish/v1/AccountService/Roles/SystemResetOperator")
    assert status == 200 and role["AssignedPrivileges"] == ["Login", "OperateSystems"]
    _, pmap = call(n1, "GET", "/redfish/v1/AccountService/PrivilegeMap")
    assert "OperateSystems" in pmap["PrivilegesUsed"]
    # the Operator (ConfigureComponents) still resets too: the two privileges are alternatives
    call(n1, "POST", ACCOUNTS, {"UserName": "ops", "Password": "0ps-pass-1", "RoleId": "Operator"})
    assert call(n1, "POST", RESET, {"ResetType": "On"}, user=("ops", "0ps-pass-1"))[0] == 204
    # a ReadOnly account holds neither
    call(n1, "POST", ACCOUNTS, {"UserName": "ro", "Password": "r0-pass-12", "RoleId": "ReadOnly"})
    assert call(n1, "POST", RESET, {"ResetType": "ForceOff"}, user=("ro", "r0-pass-12"))[0] == 403
