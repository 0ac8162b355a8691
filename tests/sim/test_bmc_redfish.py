# SPDX-License-Identifier: GPL-3.0-or-later
"""DSP0266 behaviour of the BMC stand-in without HTTP: privileges per role, accounts, password change, headers,
405/501/412, $metadata covering every type served, SimpleUpdate through the TaskService, persistence."""
from __future__ import annotations

import base64
import json
import threading
import time
import xml.etree.ElementTree as ET

import pytest

from msa_sim.bmc import testing
from msa_sim.bmc.backend import FileBackend
from msa_sim.bmc.service import Bmc
from msa_sim.bmc.store import Store
from msa_sim.bmc.update import make_image, parse_image, ImageError

USERS = {"admin": ("Adm1n-pass", "Administrator"), "ops": ("0ps-passw", "Operator"),
         "viewer": ("v1ew-pass", "ReadOnly")}
ACCOUNTS = "/redfish/v1/AccountService/Accounts"


def make(tmp_path, **bmc):
    conf = testing.make_config(str(tmp_path), [dict({"name": "n1", "update_seconds": 0.0}, **bmc)], USERS)
    store = Store(conf["database"])
    return Bmc(conf["bmcs"][0], FileBackend(conf["backend"]["state_file"]), store), store


@pytest.fixture()
def bmc(tmp_path):
    bmc, store = make(tmp_path)
    bmc.passwords = dict((u, p) for u, (p, _) in USERS.items())
    yield bmc
    store.close()


def call(bmc, method, path, body=None, user="admin", headers=None, password=None):
    hdrs = dict(headers or {})
    if user:
        raw = ("%s:%s" % (user, password or bmc.passwords[user])).encode()
        hdrs["Authorization"] = "Basic " + base64.b64encode(raw).decode()
    resp = bmc.handle(method, path, hdrs, json.dumps(body).encode() if body is not None else b"")
    return resp.status, resp.body, resp.headers


def test_privileges_follow_the_predefined_roles(bmc):
    reset = "/redfish/v1/Systems/1/Actions/ComputerSystem.Reset"
    assert call(bmc, "POST", reset, {"ResetType": "On"}, user="viewer")[0] == 403
    assert call(bmc, "POST", reset, {"ResetType": "On"}, user="ops")[0] == 204          # ConfigureComponents
    new = {"UserName": "carol", "Password": "C4rol-pass", "RoleId": "ReadOnly"}
    assert call(bmc, "POST", ACCOUNTS, new, user="ops")[0] == 403                       # ConfigureUsers
    assert call(bmc, "PATCH", "/redfish/v1/SessionService", {"SessionTimeout": 60}, user="ops")[0] == 403
    assert call(bmc, "GET", "/redfish/v1/Systems/1", user="viewer")[0] == 200           # Login
    roles = {r: call(bmc, "GET", "/redfish/v1/AccountService/Roles/" + r)[1]["AssignedPrivileges"]
             for r in ("Administrator", "Operator", "ReadOnly")}
    assert roles["Operator"] == ["Login", "ConfigureComponents", "ConfigureSelf"]
    status, _, headers = call(bmc, "PATCH", "/redfish/v1/AccountService/Roles/ReadOnly",
                              {"AssignedPrivileges": ["Login", "ConfigureUsers"]})
    assert status == 405 and headers["Allow"] == "GET, HEAD"
    mapping = {m["Entity"]: m["OperationMap"] for m in
               call(bmc, "GET", "/redfish/v1/AccountService/PrivilegeMap")[1]["Mappings"]}
    assert mapping["ManagerAccount"]["DELETE"] == [{"Privilege": ["ConfigureUsers"]}]
    # MsaBootOverride (OEM) opens only the one-time image boot of a PATCH (test_bmc_reimage.py)
    assert mapping["ComputerSystem"]["PATCH"] == [{"Privilege": ["ConfigureComponents"]},
                                                  {"Privilege": ["MsaBootOverride"]}]


def test_accounts_are_added_changed_removed_and_persist(tmp_path):
    bmc, store = make(tmp_path)
    bmc.passwords = {u: p for u, (p, _) in USERS.items()}
    status, acct, headers = call(bmc, "POST", ACCOUNTS, {"UserName": "carol", "Password": "C4rol-pass",
                                                         "RoleId": "Operator"})
    assert status == 201 and headers["Location"] == acct["@odata.id"] and acct["Password"] is None
    assert call(bmc, "POST", ACCOUNTS, {"UserName": "carol", "Password": "C4rol-pass", "RoleId": "Operator"})[0] == 409
    assert call(bmc, "POST", ACCOUNTS, {"UserName": "dave", "Password": "short", "RoleId": "Operator"})[0] == 400
    assert call(bmc, "POST", ACCOUNTS, {"UserName": "dave", "Password": "D4ve-pass", "RoleId": "Root"})[0] == 400
    bmc.passwords["carol"] = "C4rol-pass"
    # ConfigureSelf: carol changes her own password, but not her role
    assert call(bmc, "PATCH", acct["@odata.id"], {"Password": "C4rol-new1"}, user="carol")[0] == 200
    bmc.passwords["carol"] = "C4rol-new1"
    assert call(bmc, "PATCH", acct["@odata.id"], {"RoleId": "Administrator"}, user="carol")[0] == 403
    assert call(bmc, "GET", "/redfish/v1/Systems/1", user="carol")[0] == 200
    assert call(bmc, "PATCH", acct["@odata.id"], {"Enabled": False})[0] == 200
    assert call(bmc, "GET", "/redfish/v1/Systems/1", user="carol")[0] == 401
    store.close()
    bmc, store = make(tmp_path)  # a restart keeps accounts added through the AccountService
    bmc.passwords = {u: p for u, (p, _) in USERS.items()}
    assert call(bmc, "GET", acct["@odata.id"])[1]["Enabled"] is False
    assert call(bmc, "DELETE", acct["@odata.id"])[0] == 204
    assert call(bmc, "GET", acct["@odata.id"])[0] == 404
    store.close()


def test_password_change_required_allows_only_the_change(bmc):
    _, acct, _ = call(bmc, "POST", ACCOUNTS, {"UserName": "erin", "Password": "Er1n-pass", "RoleId": "Operator",
                                              "PasswordChangeRequired": True})
    bmc.passwords["erin"] = "Er1n-pass"
    status, body, _ = call(bmc, "POST", "/redfish/v1/SessionService/Sessions",
                           {"UserName": "erin", "Password": "Er1n-pass"}, user=None)
    assert status == 201 and body["@Message.ExtendedInfo"][0]["MessageId"].endswith("PasswordChangeRequired")
    status, body, _ = call(bmc, "GET", "/redfish/v1/Systems/1", user="erin")
    assert status == 403 and body["error"]["code"].endswith("PasswordChangeRequired")
    assert call(bmc, "GET", acct["@odata.id"], user="erin")[0] == 200
    assert call(bmc, "PATCH", acct["@odata.id"], {"Password": "Er1n-new1"}, user="erin")[0] == 200
    bmc.passwords["erin"] = "Er1n-new1"
    assert call(bmc, "GET", "/redfish/v1/Systems/1", user="erin")[0] == 200


def test_dsp0266_headers_and_status_codes(bmc):
    status, body, headers = call(bmc, "GET", "/redfish/v1/Systems/1")
    assert headers["OData-Version"] == "4.0" and headers["ETag"] == body["@odata.etag"]
    assert headers["Link"] == "<http://redfish.dmtf.org/schemas/v1/ComputerSystem.v1_20_0.json>; rel=describedby"
    assert headers["Allow"] == "GET, HEAD, PATCH"
    assert call(bmc, "DELETE", "/redfish/v1/Systems/1")[2]["Allow"] == "GET, HEAD, PATCH"
    assert call(bmc, "DELETE", "/redfish/v1/Systems/1")[0] == 405
    assert call(bmc, "PUT", "/redfish/v1/Systems/1", {})[0] == 405
    status, body, _ = call(bmc, "TRACE", "/redfish/v1/Systems/1")
    assert status == 501 and body["error"]["@Message.ExtendedInfo"]
    assert call(bmc, "GET", "/redfish/v1/Systems?$expand=.")[0] == 501
    assert call(bmc, "GET", "/redfish/v1/Systems?unrelated=1")[0] == 200
    assert call(bmc, "GET", "/redfish/v1/", headers={"OData-Version": "4.1"})[0] == 412
    stale = {"If-Match": 'W/"0000"'}
    assert call(bmc, "PATCH", "/redfish/v1/Systems/1", {"AssetTag": "x"}, headers=stale)[0] == 412
    assert call(bmc, "PATCH", "/redfish/v1/Systems/1", {"AssetTag": "x"},
                headers={"If-Match": headers["ETag"]})[0] == 200
    assert call(bmc, "GET", "/redfish/v1/Nowhere")[1]["error"]["code"] == "Base.1.16.ResourceMissingAtURI"
    assert call(bmc, "GET", "/redfish/v1/Systems/1", user=None)[2]["WWW-Authenticate"].startswith("Basic")



def test_parallel_writes_with_one_etag_change_the_resource_once(bmc, monkeypatch):
    # The If-Match check and the write are one step: of several PATCHes sent at once with the same ETag, exactly
    # one is applied and the others are told the resource changed (412), as the protocol validator expects.
    # A pause after each check (a loaded machine) lets every writer pass its check before any writes, unless the
    # two are one step.
    checked = bmc._check_if_match

    def slow_check(*args):
        checked(*args)
        time.sleep(0.05)

    monkeypatch.setattr(bmc, "_check_if_match", slow_check)
    etag = call(bmc, "GET", "/redfish/v1/Systems/1")[2]["ETag"]
    start = threading.Barrier(6)
    statuses = []

    def patch(tag):
        start.wait()
        statuses.append(call(bmc, "PATCH", "/redfish/v1/Systems/1", {"AssetTag": tag}, headers={"If-Match": etag})[0])

    threads = [threading.Thread(target=patch, args=("tag-%d" % i,)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(statuses) == [200] + [412] * 5, statuses

def _walk(bmc, path, seen):
    if path in seen or not path.startswith("/redfish/v1"):
        return
    seen.add(path)
    status, body, _ = call(bmc, "GET", path)
    if status != 200:
        return
    stack = [body]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            for key, value in item.items():
                if key == "@odata.id" and isinstance(value, str) and "#" not in value:
                    _walk(bmc, value, seen)
                else:
                    stack.append(value)
        elif isinstance(item, list):
            stack.extend(item)


def test_metadata_names_every_type_served(bmc):
    call(bmc, "POST", ACCOUNTS, {"UserName": "frank", "Password": "Fr4nk-pass", "RoleId": "ReadOnly"})
    seen = set()
    _walk(bmc, "/redfish/v1/", seen)
    assert len(seen) > 50
    types = set()
    for path in seen:
        body = call(bmc, "GET", path)[1]
        if isinstance(body, dict) and "@odata.type" in body:
            types.add(body["@odata.type"].lstrip("#").rsplit(".", 1)[0])
    resp = bmc.handle("GET", "/redfish/v1/$metadata", {}, b"")
    assert resp.status == 200 and resp.content_type == "application/xml"
    root = ET.fromstring(resp.data)
    included = {e.get("Namespace") for e in root.iter("{http://docs.oasis-open.org/odata/ns/edmx}Include")}
    assert types <= included, sorted(types - included)
    odata = call(bmc, "GET", "/redfish/v1/odata", user=None)[1]
    assert {v["url"] for v in odata["value"]} <= seen


def test_simple_update_is_a_task_and_the_version_persists(tmp_path, monkeypatch):
    bmc, store = make(tmp_path)
    bmc.passwords = {u: p for u, (p, _) in USERS.items()}
    image = make_image("BIOS", "2.0.1")
    monkeypatch.setattr(bmc, "_fetch", lambda uri, creds: image)
    status, task, headers = call(bmc, "POST", "/redfish/v1/UpdateService/Actions/UpdateService.SimpleUpdate",
                                 {"ImageURI": "https://127.0.0.1:1/bios.fw"}, user="ops")
    assert status == 202 and headers["Location"].startswith("/redfish/v1/TaskService/TaskMonitors/")
    deadline = time.monotonic() + 10
    while call(bmc, "GET", headers["Location"])[0] == 202 and time.monotonic() < deadline:
        time.sleep(0.05)
    status, done, _ = call(bmc, "GET", headers["Location"])
    assert status == 200 and done["TaskState"] == "Completed", done
    assert call(bmc, "GET", "/redfish/v1/UpdateService/FirmwareInventory/BIOS")[1]["Version"] == "2.0.1"
    assert call(bmc, "GET", "/redfish/v1/Systems/1")[1]["BiosVersion"] == "2.0.1"
    assert call(bmc, "POST", "/redfish/v1/UpdateService/Actions/UpdateService.SimpleUpdate",
                {"ImageURI": "ftp://x/y.fw"})[0] == 400
    store.close()
    bmc, store = make(tmp_path)
    bmc.passwords = {u: p for u, (p, _) in USERS.items()}
    assert call(bmc, "GET", "/redfish/v1/UpdateService/FirmwareInventory/BIOS")[1]["Version"] == "2.0.1"
    assert call(bmc, "GET", "/redfish/v1/TaskService/Tasks/" + task["Id"])[1]["TaskState"] == "Completed"
    store.close()


def test_corrupt_or_foreign_images_are_refused():
    good = json.loads(make_image("BMC", "3.0"))
    assert parse_image(make_image("BMC", "3.0"), ["BMC", "BIOS"])[:2] == ("BMC", "3.0")
    for broken, word in ((dict(good, SHA256="0" * 64), "SHA256"), (dict(good, Component="GPU"), "Component"),
                         (dict(good, Image="other/1"), "Image"), (dict(good, Version="a b;c|"), "Version")):
        with pytest.raises(ImageError, match=word):
            parse_image(json.dumps(broken).encode(), ["BMC", "BIOS"])


def test_login_and_open_resources_ignore_a_stale_token(bmc):
    stale = {"X-Auth-Token": "0" * 64}
    assert call(bmc, "GET", "/redfish/v1/", user=None, headers=stale)[0] == 200
    status, _, headers = call(bmc, "POST", "/redfish/v1/SessionService/Sessions",
                              {"UserName": "ops", "Password": USERS["ops"][0]}, user=None, headers=stale)
    assert status == 201 and headers["X-Auth-Token"]
    assert call(bmc, "GET", "/redfish/v1/Systems/1", user=None, headers=stale)[0] == 401


def test_firmware_from_outside_outbound_networks_is_refused(bmc):
    status, _, headers = call(bmc, "POST", "/redfish/v1/UpdateService/Actions/UpdateService.SimpleUpdate",
                              {"ImageURI": "https://10.255.0.1/bmc.fw"})
    assert status == 202
    deadline = time.monotonic() + 10
    while call(bmc, "GET", headers["Location"])[0] == 202 and time.monotonic() < deadline:
        time.sleep(0.05)
    done = call(bmc, "GET", headers["Location"])[1]
    assert done["TaskState"] == "Exception" and "outside outbound_networks" in done["Messages"][0]["Message"]
