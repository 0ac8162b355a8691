# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

"""The Redfish client layer: power and boot plans, session login/logout, basic-auth fallback, check mode."""

import copy

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ansible_collections.msa.hpc.plugins.module_utils import _redfish as R
from ansible_collections.msa.hpc.plugins.module_utils._rest import RestError

ALL_RESETS = ["On", "ForceOff", "GracefulShutdown", "GracefulRestart", "ForceRestart", "PowerCycle", "Nmi",
              "PushPowerButton"]
SYS = "/redfish/v1/Systems/1"
RESET = SYS + "/Actions/ComputerSystem.Reset"


def system(power="Off", enabled="Disabled", target="None", resets=None):
    return {"@odata.id": SYS, "Id": "1", "PowerState": power, "LastResetTime": "t0",
            "Manufacturer": "ACME", "Model": "X1", "SerialNumber": "S1", "Status": {"State": "Enabled", "Health": "OK"},
            "ProcessorSummary": {"Count": 2, "Model": "Xeon", "CoreCount": 16, "LogicalProcessorCount": 32},
            "MemorySummary": {"TotalSystemMemoryGiB": 192},
            "Boot": {"BootSourceOverrideEnabled": enabled, "BootSourceOverrideTarget": target,
                     "BootSourceOverrideTarget@Redfish.AllowableValues": ["None", "Pxe", "Hdd", "Cd"]},
            "Actions": {"#ComputerSystem.Reset": {"target": RESET,
                                                  "ResetType@Redfish.AllowableValues": resets or ALL_RESETS}}}


class FakeRest:
    """Stands in for RestClient: canned resources, a reset/patch model, a log of requests."""

    def __init__(self, sys_body, sessions=True, fail=None):
        self.username = self.password = self.token = None
        self.token_header = "Authorization"
        self.system = sys_body
        self.calls = []
        self.fail = fail or {}
        self.root = {"Systems": {"@odata.id": "/redfish/v1/Systems"}}
        if sessions:
            self.root["Links"] = {"Sessions": {"@odata.id": "/redfish/v1/SessionService/Sessions"}}
        self.open_sessions = set()

    def request(self, method, path, body=None, headers=None, expect=None, lookup=None):
        self.calls.append((method, path, copy.deepcopy(body), self.token, self.username))
        if (method, path) in self.fail:
            raise self.fail[(method, path)]
        if method == "POST" and path.endswith("/Sessions"):
            self.open_sessions.add("s1")
            return 201, {"@odata.id": path + "/s1"}, {"x-auth-token": "tok", "location": path + "/s1"}
        if method == "DELETE":
            self.open_sessions.discard(path.rsplit("/", 1)[-1])
            return 204, None, {}
        if method == "PATCH":
            boot = self.system["Boot"]
            boot.update(body["Boot"])
            return 200, self.system, {}
        if method == "POST" and path == RESET:
            kind = body["ResetType"]
            self.system["PowerState"] = "Off" if kind in ("ForceOff", "GracefulShutdown") else "On"
            if kind != "ForceOff" and kind != "GracefulShutdown":
                self.system["LastResetTime"] = "t%d" % len(self.calls)
                if self.system["Boot"]["BootSourceOverrideEnabled"] == "Once":
                    self.system["Boot"]["BootSourceOverrideEnabled"] = "Disabled"
            return 204, None, {}
        resources = {"/redfish/v1/": self.root,
                     "/redfish/v1/Systems": {"Members": [{"@odata.id": SYS}]}, SYS: self.system}
        return 200, copy.deepcopy(resources[path]), {"ETag": 'W/"1"'}

    def get(self, path, **kw):
        return self.request("GET", path, **kw)[1]

    def delete(self, path, **kw):
        return self.request("DELETE", path, **kw)[1]


def params(**kw):
    base = {"endpoint": "https://bmc", "username": "ops", "password": "pw-XYZ", "auth": "session", "state": None,
            "boot": None, "gather_facts": False, "wait": True, "wait_timeout": 5, "system_id": None}
    base.update(kw)
    return base


def run(fake, check_mode=False, **kw):
    return R.run(params(**kw), check_mode=check_mode, sleep=lambda s: None, rest=fake, poll=0)


# ---------------------------------------------------------------- plans

def test_power_plan_sends_nothing_when_the_node_is_already_there():
    assert R.plan_power("on", "On", ALL_RESETS) == ([], "On")
    assert R.plan_power("off", "Off", ALL_RESETS) == ([], "Off")
    assert R.plan_power("graceful_shutdown", "Off", ALL_RESETS) == ([], "Off")
    assert R.plan_power("on", "Off", ALL_RESETS) == (["On"], "On")
    assert R.plan_power("force_restart", "On", ALL_RESETS) == (["ForceRestart"], "On")


def test_restarting_a_node_that_is_off_powers_it_on():
    for state in ("graceful_restart", "force_restart", "power_cycle"):
        assert R.plan_power(state, "Off", ALL_RESETS) == (["On"], "On")


def test_power_plan_falls_back_to_what_the_bmc_allows_or_names_what_it_allows():
    assert R.plan_power("power_cycle", "On", ["On", "ForceOff"]) == (["ForceOff", "On"], "On")
    assert R.plan_power("on", "Off", ["PushPowerButton"]) == (["PushPowerButton"], "On")
    with pytest.raises(R.RedfishError, match=r"state: graceful_restart needs ResetType GracefulRestart, "
                                             r"but the BMC allows only On, ForceOff"):
        R.plan_power("graceful_restart", "On", ["On", "ForceOff"])


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(R.POWER_STATES), st.sampled_from(["On", "Off"]),
       st.lists(st.sampled_from(ALL_RESETS), unique=True))
def test_power_plans_only_use_allowed_reset_types_and_end_in_the_requested_state(state, power, allowed):
    try:
        resets, target = R.plan_power(state, power, allowed)
    except R.RedfishError as exc:
        assert str(exc).startswith("state: %s" % state)
        return
    assert all(r in allowed for r in resets)
    assert target == ("Off" if state in ("off", "graceful_shutdown") else "On")
    if state in R.RESTARTS:
        assert resets  # a restart always acts
    elif power == target:
        assert resets == []


def test_boot_plan_is_empty_when_the_override_is_already_set():
    current = system(enabled="Once", target="Pxe")
    assert R.plan_boot({"target": "Pxe", "mode": "once"}, current) == {}
    assert R.plan_boot({"target": "pxe", "mode": "once"}, current) == {}  # case-insensitive match
    assert R.plan_boot({"target": "Pxe", "mode": "continuous"}, current) == \
        {"BootSourceOverrideEnabled": "Continuous", "BootSourceOverrideTarget": "Pxe"}
    assert R.plan_boot({"mode": "disabled"}, current) == {"BootSourceOverrideEnabled": "Disabled"}
    assert R.plan_boot({"mode": "disabled"}, system()) == {}


def test_boot_targets_the_bmc_does_not_offer_are_refused_with_the_allowed_list():
    with pytest.raises(R.RedfishError, match=r"boot.target: 'Floppy' is not offered by the BMC "
                                             r"\(allowed: None, Pxe, Hdd, Cd\)"):
        R.plan_boot({"target": "Floppy", "mode": "once"}, system())
    with pytest.raises(R.RedfishError, match="boot.target: a boot target is required when boot.mode is continuous"):
        R.plan_boot({"mode": "continuous"}, system())


# ---------------------------------------------------------------- sessions and runs

def test_a_run_logs_in_with_a_session_uses_its_token_and_logs_out():
    fake = FakeRest(system())
    result = run(fake, state="on")
    assert result["auth"] == "session" and result["changed"] and result["power_state"] == "On"
    login = fake.calls[1]
    assert login[0:2] == ("POST", "/redfish/v1/SessionService/Sessions") and login[2]["Password"] == "pw-XYZ"
    assert all(c[3] == "tok" and c[4] is None for c in fake.calls[2:])  # token, no basic credentials
    assert fake.calls[-1][0] == "DELETE" and not fake.open_sessions


def test_the_session_is_deleted_even_when_the_task_fails():
    fake = FakeRest(system(), fail={("POST", RESET): RestError("POST answered HTTP 500", status=500)})
    with pytest.raises(RestError):
        run(fake, state="on")
    assert fake.calls[-1][0] == "DELETE" and not fake.open_sessions


def test_a_bmc_without_session_service_is_used_with_basic_auth_and_a_warning():
    fake = FakeRest(system(), sessions=False)
    result = run(fake, state="on")
    assert result["auth"] == "basic" and "no SessionService" in result["warnings"][0]
    assert fake.username == "ops" and not any(c[0] == "DELETE" for c in fake.calls)


def test_a_bmc_answering_404_to_session_creation_falls_back_to_basic_auth():
    fake = FakeRest(system(), fail={("POST", "/redfish/v1/SessionService/Sessions"):
                                    RestError("POST answered HTTP 404: not found", status=404)})
    result = run(fake, state="off")
    assert result["auth"] == "basic" and "HTTP 404" in result["warnings"][0] and not result["changed"]


def test_state_on_twice_changes_nothing_the_second_time():
    fake = FakeRest(system())
    assert run(fake, state="on")["changed"]
    again = run(fake, state="on")
    assert not again["changed"] and again["actions"] == [] and again["power_state_before"] == "On"
    assert not any(c[1] == RESET for c in fake.calls[-4:])


def test_check_mode_reports_the_plan_and_sends_no_change():
    fake = FakeRest(system(power="On"))
    result = run(fake, check_mode=True, state="force_restart", boot={"target": "Pxe", "mode": "once"})
    assert result["changed"] and result["reset_types"] == ["ForceRestart"]
    assert result["actions"][0] == "PATCH Boot BootSourceOverrideEnabled=Once, BootSourceOverrideTarget=Pxe"
    assert not any(c[0] in ("PATCH",) or c[1] == RESET for c in fake.calls)
    assert fake.system["Boot"]["BootSourceOverrideEnabled"] == "Disabled"


def test_boot_once_and_restart_in_one_run_sets_the_override_before_the_reset():
    fake = FakeRest(system(power="On"))
    result = run(fake, state="force_restart", boot={"target": "Pxe", "mode": "once"}, gather_facts=True)
    order = [c[0] for c in fake.calls if c[0] in ("PATCH", "POST") and c[1] != "/redfish/v1/SessionService/Sessions"]
    assert order == ["PATCH", "POST"]
    assert result["boot"]["enabled"] == "Disabled" and result["boot_before"]["enabled"] == "Disabled"
    assert result["inventory"]["cpus"] == {"count": 2, "model": "Xeon", "cores": 16, "threads": 32}
    assert result["inventory"]["memory_gib"] == 192 and result["inventory"]["serial"] == "S1"


def test_waiting_for_a_power_state_that_never_comes_fails_naming_wait_timeout():
    fake = FakeRest(system())
    clock = iter(range(0, 1000, 3)).__next__
    client = R.Redfish("https://bmc", "ops", "pw", rest=fake, sleep=lambda s: None, clock=clock)
    with pytest.raises(R.RedfishError, match=r"wait_timeout: the system did not reach PowerState On within 5s "
                                             r"\(it is Off\)"):
        client.wait_power(SYS, "On", 5, poll=0)


def test_a_multi_system_bmc_needs_system_id():
    fake = FakeRest(system())
    fake.root["Systems"] = {"@odata.id": "/redfish/v1/Systems"}
    original = fake.request

    def request(method, path, **kw):
        if path == "/redfish/v1/Systems":
            return 200, {"Members": [{"@odata.id": SYS}, {"@odata.id": "/redfish/v1/Systems/2"}]}, {}
        if path == "/redfish/v1/Systems/2":
            return 200, dict(system(), Id="2"), {}
        return original(method, path, **kw)

    fake.request = request
    with pytest.raises(R.RedfishError, match=r"system_id: the BMC at https://bmc manages 2 systems \(1, 2\)"):
        run(fake, state="on")
    assert run(fake, state="on", system_id="1")["system_id"] == "1"
    with pytest.raises(R.RedfishError, match="system_id: '7' is not a system"):
        run(fake, state="on", system_id="7")
