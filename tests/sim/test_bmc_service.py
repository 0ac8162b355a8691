# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

"""The Redfish BMC stand-in: config, auth, sessions, power, boot override, faults (in-process and on 127.0.0.1)."""

import base64
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

from msa_sim.bmc import auth, config, testing
from msa_sim.bmc.backend import FileBackend, PodmanBackend
from msa_sim.bmc.service import Bmc
from msa_sim.bmc.store import Store

SIM = os.path.join(os.path.dirname(__file__), "..", "..", "sim")
USERS = {"admin": ("Adm1n-pw", "Administrator"), "ops": ("0ps-pw", "Operator"), "viewer": ("v1ew-pw", "ReadOnly")}
SYS = "/redfish/v1/Systems/1"
RESET = SYS + "/Actions/ComputerSystem.Reset"
SESSIONS = "/redfish/v1/SessionService/Sessions"


def basic(user):
    raw = ("%s:%s" % (user, USERS[user][0])).encode()
    return {"Authorization": "Basic " + base64.b64encode(raw).decode()}


class Clock:
    def __init__(self):
        self.now = 1000000.0

    def __call__(self):
        return self.now


@pytest.fixture()
def bmc(tmp_path):
    """One BMC without HTTP, file backend, a clock the test moves."""
    conf = testing.make_config(str(tmp_path), [{"name": "n1", "nics": [{"mac": "02:00:00:00:00:01"}],
                                                "max_sessions": 3}], USERS)
    store = Store(conf["database"])
    clock = Clock()
    yield Bmc(conf["bmcs"][0], FileBackend(conf["backend"]["state_file"]), store, clock=clock)
    store.close()


def call(bmc, method, path, body=None, user="admin", headers=None):
    hdrs = dict(basic(user) if user else {}, **(headers or {}))
    resp = bmc.handle(method, path, hdrs, json.dumps(body).encode() if body is not None else b"")
    return resp.status, resp.body, resp.headers


@pytest.fixture()
def served(tmp_path):
    """Two BMCs in one service on 127.0.0.1 (ephemeral ports), file backend with a slow graceful shutdown."""
    service = testing.start(str(tmp_path), [{"name": "n1"}, {"name": "n2", "reset_types": ["On", "ForceOff"]}],
                            USERS, graceful_delay=0.3)
    yield service
    service.stop()


def http(url, method="GET", body=None, headers=None):
    req = urllib.request.Request(url, method=method, data=json.dumps(body).encode() if body is not None else None,
                                 headers=dict({"Content-Type": "application/json"}, **(headers or {})))
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            raw = resp.read()
            return resp.status, json.loads(raw) if raw else None, dict(resp.headers)
    except urllib.error.HTTPError as exc:
        raw = exc.read()
        return exc.code, json.loads(raw) if raw else None, dict(exc.headers)


# ---------------------------------------------------------------- configuration and passwords

def test_config_errors_name_the_field_and_the_value(tmp_path):
    good = {"username": "a", "password_hash": auth.hash_password("x", iterations=1000)}
    cases = [
        ({"bmcs": [{"name": "n1", "port": "http", "users": [good]}]}, r"bmcs\[0\] \(n1\)\.port: 'http'"),
        ({"bmcs": [{"name": "n1", "users": [good], "nics": [{"mac": "02:00"}]}]}, r"nics\[0\]\.mac: '02:00'"),
        ({"bmcs": [{"name": "n1", "users": [dict(good, password_hash="plain")]}]}, r"users\[0\]\.password_hash"),
        ({"bmcs": [{"name": "n1", "users": [good], "reset_types": ["Reboot"]}]}, r"reset_types: 'Reboot'"),
        ({"bmcs": [{"name": "n1", "users": [good], "adress": "1.2.3.4"}]}, r"unknown key 'adress'"),
        ({"backend": {"type": "libvirt"}, "bmcs": [{"name": "n1", "users": [good]}]}, r"backend.type: 'libvirt'"),
        ({"bmcs": [{"name": "n1", "users": [good]}, {"name": "n1", "users": [good], "port": 1}]},
         r"name: 'n1' is used twice"),
    ]
    for data, pattern in cases:
        with pytest.raises(config.ConfigError, match=pattern):
            config.validate(data, "bmcs.yaml")


def test_yaml_config_with_shared_defaults_gives_each_bmc_its_own_address_and_container():
    pytest.importorskip("yaml")
    text = """
backend: {type: podman}
defaults:
  port: 443
  users: [{username: admin, password_hash: "%s"}]
  cpus: {count: 4}
bmcs:
  - {name: cm01, address: 10.99.0.101, container: msa-cm01}
  - {name: cm02, address: 10.99.0.102}
""" % auth.hash_password("pw", iterations=1000)
    conf = config.parse(text, "bmcs.yaml")
    assert [(b["address"], b["port"], b["container"]) for b in conf["bmcs"]] == \
        [("10.99.0.101", 443, "msa-cm01"), ("10.99.0.102", 443, "cm02")]
    assert conf["bmcs"][0]["cpus"]["count"] == 4 and conf["bmcs"][0]["cpus"]["cores"] == 8
    assert conf["bmcs"][0]["serial"] != conf["bmcs"][1]["serial"]
    with pytest.raises(config.ConfigError, match=r"reset_types: True is not one of .* quote them"):
        config.parse(text.replace("10.99.0.102}", "10.99.0.102, reset_types: [On]}"), "bmcs.yaml")


def test_django_and_passlib_pbkdf2_hashes_verify_and_wrong_passwords_do_not():
    django = auth.hash_password("s3cret", iterations=1000, salt="abc")
    assert auth.verify_password("s3cret", django) and not auth.verify_password("s3cret!", django)
    # passlib's pbkdf2_sha256.hash("password", rounds=1000, salt=b"salt....") encoding, computed by hand
    import hashlib
    digest = hashlib.pbkdf2_hmac("sha256", b"password", b"salt....", 1000)
    ab64 = lambda b: base64.b64encode(b).decode().rstrip("=").replace("+", ".")  # noqa: E731
    passlib = "$pbkdf2-sha256$1000$%s$%s" % (ab64(b"salt...."), ab64(digest))
    assert auth.verify_password("password", passlib) and not auth.verify_password("Password", passlib)


# ---------------------------------------------------------------- resources and auth (no network)

def test_service_root_is_open_and_links_the_sessions_but_systems_need_credentials(bmc):
    status, root, _ = call(bmc, "GET", "/redfish/v1/", user=None)
    assert status == 200 and root["Links"]["Sessions"]["@odata.id"] == SESSIONS
    assert root["@odata.type"].startswith("#ServiceRoot.") and root["@odata.id"] == "/redfish/v1/"
    status, body, headers = call(bmc, "GET", SYS, user=None)
    assert status == 401 and body["error"]["@Message.ExtendedInfo"][0]["MessageId"].endswith("NoValidSession")
    assert "Basic" in headers["WWW-Authenticate"]
    status, body, _ = call(bmc, "GET", SYS, headers={"Authorization": "Basic " +
                                                     base64.b64encode(b"admin:wrong").decode()}, user=None)
    assert status == 401 and "not correct" in body["error"]["message"]


def test_system_follows_the_computer_system_schema(bmc):
    status, system, headers = call(bmc, "GET", SYS)
    assert status == 200 and headers["ETag"].startswith('W/"') and headers["OData-Version"] == "4.0"
    assert system["@odata.type"].startswith("#ComputerSystem.") and system["PowerState"] == "Off"
    assert system["Actions"]["#ComputerSystem.Reset"]["ResetType@Redfish.AllowableValues"][:6] == \
        ["On", "ForceOff", "GracefulShutdown", "GracefulRestart", "ForceRestart", "PowerCycle"]
    assert "Pxe" in system["Boot"]["BootSourceOverrideTarget@Redfish.AllowableValues"]
    assert system["ProcessorSummary"]["Count"] == 2 and system["MemorySummary"]["TotalSystemMemoryGiB"] == 64
    for link in ("Processors", "Memory", "EthernetInterfaces"):
        status, coll, _ = call(bmc, "GET", system[link]["@odata.id"])
        assert status == 200 and coll["Members@odata.count"] == len(coll["Members"]) > 0
        status, member, _ = call(bmc, "GET", coll["Members"][0]["@odata.id"])
        assert status == 200 and member["@odata.id"] == coll["Members"][0]["@odata.id"]
    _, chassis, _ = call(bmc, "GET", system["Links"]["Chassis"][0]["@odata.id"])
    _, power, _ = call(bmc, "GET", chassis["Power"]["@odata.id"])
    assert power["PowerControl"][0]["PowerConsumedWatts"] == 8.0  # standby while off
    _, manager, _ = call(bmc, "GET", system["Links"]["ManagedBy"][0]["@odata.id"])
    assert manager["ManagerType"] == "BMC"


def test_read_only_accounts_can_read_but_not_reset(bmc):
    assert call(bmc, "GET", SYS, user="viewer")[0] == 200
    status, body, _ = call(bmc, "POST", RESET, {"ResetType": "On"}, user="viewer")
    assert status == 403 and "InsufficientPrivilege" in body["error"]["code"]
    assert call(bmc, "POST", RESET, {"ResetType": "On"}, user="ops")[0] == 204


def test_sessions_give_a_token_that_works_until_logout_or_timeout(bmc):
    status, session, headers = call(bmc, "POST", SESSIONS, {"UserName": "ops", "Password": "0ps-pw"}, user=None)
    assert status == 201 and headers["Location"] == session["@odata.id"] and session["Password"] is None
    token = {"X-Auth-Token": headers["X-Auth-Token"]}
    assert call(bmc, "GET", SYS, user=None, headers=token)[0] == 200
    assert call(bmc, "DELETE", headers["Location"], user=None, headers=token)[0] == 204
    assert call(bmc, "GET", SYS, user=None, headers=token)[0] == 401
    # a second session expires after SessionTimeout seconds without use
    _, _, headers = call(bmc, "POST", SESSIONS, {"UserName": "ops", "Password": "0ps-pw"}, user=None)
    token = {"X-Auth-Token": headers["X-Auth-Token"]}
    bmc.clock.now += 1000
    assert call(bmc, "GET", SYS, user=None, headers=token)[0] == 200  # use refreshes it
    bmc.clock.now += bmc.conf["session_timeout"] + 1
    status, body, _ = call(bmc, "GET", SYS, user=None, headers=token)
    assert status == 401 and "expired" in body["error"]["message"]
    assert call(bmc, "GET", SESSIONS)[1]["Members"] == []


def test_wrong_session_credentials_and_the_session_limit_are_refused(bmc):
    status, body, _ = call(bmc, "POST", SESSIONS, {"UserName": "ops", "Password": "nope"}, user=None)
    assert status == 401 and "0ps-pw" not in json.dumps(body)
    for _ in range(3):
        assert call(bmc, "POST", SESSIONS, {"UserName": "ops", "Password": "0ps-pw"}, user=None)[0] == 201
    status, body, _ = call(bmc, "POST", SESSIONS, {"UserName": "ops", "Password": "0ps-pw"}, user=None)
    assert status == 503 and "SessionLimitExceeded" in body["error"]["code"]


def test_one_time_boot_override_is_used_by_the_next_power_on_and_continuous_stays(bmc):
    status, system, _ = call(bmc, "PATCH", SYS, {"Boot": {"BootSourceOverrideEnabled": "Once",
                                                          "BootSourceOverrideTarget": "Pxe"}})
    assert status == 200 and system["Boot"]["BootSourceOverrideEnabled"] == "Once"
    call(bmc, "POST", RESET, {"ResetType": "On"})
    system = call(bmc, "GET", SYS)[1]
    assert system["Boot"]["BootSourceOverrideEnabled"] == "Disabled"
    assert system["Oem"]["MsaBmc"]["LastBootSourceOverrideTarget"] == "Pxe"
    call(bmc, "PATCH", SYS, {"Boot": {"BootSourceOverrideEnabled": "Continuous", "BootSourceOverrideTarget": "Hdd"}})
    for reset_type in ("ForceRestart", "PowerCycle"):
        call(bmc, "POST", RESET, {"ResetType": reset_type})
        boot = call(bmc, "GET", SYS)[1]["Boot"]
        assert (boot["BootSourceOverrideEnabled"], boot["BootSourceOverrideTarget"]) == ("Continuous", "Hdd")


def test_a_power_on_from_outside_the_bmc_also_uses_the_one_time_override(bmc):
    assert call(bmc, "GET", SYS)[1]["PowerState"] == "Off"
    call(bmc, "PATCH", SYS, {"Boot": {"BootSourceOverrideEnabled": "Once", "BootSourceOverrideTarget": "Cd"}})
    bmc.backend.power_on("n1")  # e.g. `podman start` by hand
    system = call(bmc, "GET", SYS)[1]
    assert system["PowerState"] == "On" and system["Boot"]["BootSourceOverrideEnabled"] == "Disabled"


def test_concurrent_requests_count_an_outside_power_on_as_one_boot(bmc):
    import threading
    call(bmc, "GET", SYS)  # the BMC has seen the node off
    bmc.backend.power_on("n1")
    threads = [threading.Thread(target=call, args=(bmc, "GET", SYS)) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert call(bmc, "GET", SYS)[1]["Oem"]["MsaBmc"]["Boots"] == 1


def test_bad_boot_patches_and_reset_types_get_redfish_errors(bmc):
    status, body, _ = call(bmc, "PATCH", SYS, {"Boot": {"BootSourceOverrideTarget": "Floppy"}})
    assert status == 400 and "PropertyValueNotInList" in body["error"]["code"] and "Floppy" in body["error"]["message"]
    status, body, _ = call(bmc, "PATCH", SYS, {"PowerState": "On"})
    assert status == 400 and "PropertyNotWritable" in body["error"]["code"]
    status, body, _ = call(bmc, "POST", RESET, {"ResetType": "Explode"})
    assert status == 400 and "Explode" in body["error"]["message"]
    assert call(bmc, "POST", RESET, {})[0] == 400
    malformed = bmc.handle("PATCH", SYS, basic("admin"), b"{nope")
    assert malformed.status == 400 and "MalformedJSON" in malformed.body["error"]["code"]
    status, _, headers = call(bmc, "DELETE", SYS)
    assert status == 405 and "PATCH" in headers["Allow"]
    status, _, _ = call(bmc, "PATCH", SYS, {"Boot": {"BootSourceOverrideTarget": "Hdd"}},
                        headers={"If-Match": 'W/"stale"'})
    assert status == 412


def test_fault_switch_needs_an_administrator_and_answers_503_for_the_next_requests(bmc):
    assert call(bmc, "POST", "/msa-bmc/faults", {"status": 503, "count": 2}, user="ops")[0] == 403
    assert call(bmc, "POST", "/msa-bmc/faults", {"status": 503, "count": 2})[0] == 201
    statuses = [call(bmc, "GET", SYS)[0] for _ in range(3)]
    assert statuses == [503, 503, 200]
    status, body, _ = call(bmc, "POST", "/msa-bmc/faults", {"status": 200})
    assert status == 400 and "fault.status: 200" in body["error"]["message"]


def test_podman_backend_runs_the_documented_podman_commands():
    calls = []

    def run(cmd, **_):
        calls.append(cmd[1:])
        return subprocess.CompletedProcess(cmd, 0, stdout="true\n" if cmd[1] == "inspect" else "", stderr="")

    backend = PodmanBackend("podman", graceful_timeout=30, run=run)
    assert backend.is_on("msa-cm01")
    backend.power_on("msa-cm01")
    backend.force_off("msa-cm01")
    backend.graceful_shutdown("msa-cm01")
    assert calls == [["inspect", "-f", "{{.State.Running}}", "msa-cm01"], ["start", "msa-cm01"],
                     ["stop", "-t", "0", "msa-cm01"], ["stop", "-t", "30", "msa-cm01"]]


# ---------------------------------------------------------------- over HTTP on 127.0.0.1

def test_one_process_serves_independent_bmcs_on_their_own_ports(served):
    n1, n2 = served.url("n1"), served.url("n2")
    assert n1 != n2
    assert http(n1 + RESET, "POST", {"ResetType": "On"}, basic("ops"))[0] == 204
    assert http(n1 + SYS, headers=basic("ops"))[1]["PowerState"] == "On"
    assert http(n2 + SYS, headers=basic("ops"))[1]["PowerState"] == "Off"
    status, body, _ = http(n2 + RESET, "POST", {"ResetType": "PowerCycle"}, basic("ops"))
    assert status == 400 and "On, ForceOff" in body["error"]["message"]


def test_graceful_shutdown_reports_powering_off_until_the_node_is_down(served):
    url = served.url("n1")
    http(url + RESET, "POST", {"ResetType": "On"}, basic("ops"))
    assert http(url + RESET, "POST", {"ResetType": "GracefulShutdown"}, basic("ops"))[0] == 204
    assert http(url + SYS, headers=basic("ops"))[1]["PowerState"] == "PoweringOff"
    status, body, _ = http(url + RESET, "POST", {"ResetType": "On"}, basic("ops"))
    assert status == 409 and "PoweringOff" in body["error"]["message"]
    served.bmcs["n1"].wait_idle(10)
    assert http(url + SYS, headers=basic("ops"))[1]["PowerState"] == "Off"


def _free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_cli_validates_the_config_and_serves_until_sigterm(tmp_path):
    conf = testing.make_config(str(tmp_path), [{"name": "n1", "port": _free_port()}], USERS)
    path = str(tmp_path / "bmcs.json")
    # as the harness runs it (roles/sim_bmc): the stand-ins and the collection's module_utils (its TLS server)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.abspath(SIM), os.path.join(os.path.dirname(
        os.path.abspath(SIM)), "collections")]))
    out = subprocess.run([sys.executable, "-m", "msa_sim.bmc", "check-config", "-c", path], env=env,
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0 and "n1" in out.stdout
    hashed = subprocess.run([sys.executable, "-m", "msa_sim.bmc", "hash-password", "--iterations", "1000"],
                            input="pw\n", env=env, capture_output=True, text=True, timeout=30).stdout.strip()
    assert auth.verify_password("pw", hashed)
    proc = subprocess.Popen([sys.executable, "-m", "msa_sim.bmc", "serve", "-c", path], env=env,
                            stderr=subprocess.PIPE, text=True)
    try:
        url = "http://127.0.0.1:%d/redfish/v1/" % conf["bmcs"][0]["port"]
        for _ in range(100):
            try:
                status = http(url)[0]
                break
            except OSError:
                time.sleep(0.1)
        assert status == 200
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
    assert "GET /redfish/v1 200" in proc.stderr.read()
