# SPDX-License-Identifier: GPL-3.0-or-later
"""The BMC's ``deprecated_resources`` setting: off, the deprecated forms (Chassis Power and Thermal, IndicatorLED,
the Manager's VirtualMedia link) are gone (404, absent, a PATCH of them refused) and the current forms carry the same
readings; on, both are served and agree."""
from __future__ import annotations

import pytest

from msa_sim.bmc import auth, config
from tests.sim.test_bmc_redfish import USERS, call, make

SYSTEM, CHASSIS, MANAGER = "/redfish/v1/Systems/1", "/redfish/v1/Chassis/1", "/redfish/v1/Managers/BMC"
DEPRECATED_URIS = (CHASSIS + "/Power", CHASSIS + "/Thermal")
CURRENT_URIS = (CHASSIS + "/PowerSubsystem", CHASSIS + "/PowerSubsystem/PowerSupplies",
                CHASSIS + "/PowerSubsystem/PowerSupplies/PSU1", CHASSIS + "/ThermalSubsystem",
                CHASSIS + "/ThermalSubsystem/Fans", CHASSIS + "/ThermalSubsystem/Fans/Fan1",
                CHASSIS + "/ThermalSubsystem/Fans/Fan2", CHASSIS + "/EnvironmentMetrics")


def _bmc(tmp_path, deprecated):
    bmc, store = make(tmp_path, deprecated_resources=deprecated)
    bmc.passwords = {u: p for u, (p, _) in USERS.items()}
    return bmc, store


@pytest.fixture()
def current_only(tmp_path):
    bmc, store = _bmc(tmp_path, False)
    yield bmc
    store.close()


@pytest.fixture()
def both(tmp_path):
    bmc, store = _bmc(tmp_path, True)
    yield bmc
    store.close()


def test_the_default_serves_the_deprecated_forms():
    good = {"username": "a", "password_hash": auth.hash_password("x", iterations=1000)}
    conf = config.validate({"bmcs": [{"name": "n1", "users": [good]}]})
    assert conf["bmcs"][0]["deprecated_resources"] is True


def test_a_setting_that_is_not_a_boolean_is_refused_naming_the_field_and_the_value():
    good = {"username": "a", "password_hash": auth.hash_password("x", iterations=1000)}
    with pytest.raises(config.ConfigError, match=r"bmcs\[0\] \(n1\)\.deprecated_resources: 'no' is not true or false"):
        config.validate({"bmcs": [{"name": "n1", "users": [good], "deprecated_resources": "no"}]})
    with pytest.raises(config.ConfigError, match=r"defaults: unknown key 'deprecated_resource'"):
        config.validate({"defaults": {"deprecated_resource": False}, "bmcs": [{"name": "n1", "users": [good]}]})
    conf = config.validate({"defaults": {"deprecated_resources": False}, "bmcs": [{"name": "n1", "users": [good]}]})
    assert conf["bmcs"][0]["deprecated_resources"] is False


def test_off_the_deprecated_uris_answer_404_and_the_properties_are_absent(current_only):
    for uri in DEPRECATED_URIS:
        status, body, _ = call(current_only, "GET", uri)
        assert status == 404, (uri, status, body)
    system = call(current_only, "GET", SYSTEM)[1]
    chassis = call(current_only, "GET", CHASSIS)[1]
    manager = call(current_only, "GET", MANAGER)[1]
    assert "IndicatorLED" not in system and system["LocationIndicatorActive"] is False
    assert not {"IndicatorLED", "Power", "Thermal"} & set(chassis), sorted(chassis)
    assert "VirtualMedia" not in manager
    assert system["VirtualMedia"] == {"@odata.id": SYSTEM + "/VirtualMedia"}  # where the media live
    assert call(current_only, "GET", SYSTEM + "/VirtualMedia/CD1")[0] == 200
    for uri in CURRENT_URIS:
        assert call(current_only, "GET", uri)[0] == 200, uri
    assert call(current_only, "GET", CHASSIS + "/ThermalSubsystem/Fans/Fan3")[0] == 404


def test_off_a_patch_of_indicator_led_is_refused_and_location_indicator_active_works(current_only):
    for uri in (SYSTEM, CHASSIS):
        status, body, _ = call(current_only, "PATCH", uri, {"IndicatorLED": "Lit"})
        assert status == 400 and "IndicatorLED" in str(body), (uri, status, body)
        assert call(current_only, "PATCH", uri, {"LocationIndicatorActive": "yes"})[0] == 400
        status, body, _ = call(current_only, "PATCH", uri, {"LocationIndicatorActive": True})
        assert status == 200 and body["LocationIndicatorActive"] is True and "IndicatorLED" not in body
        assert call(current_only, "GET", uri)[1]["LocationIndicatorActive"] is True
    assert call(current_only, "PATCH", SYSTEM, {"LocationIndicatorActive": False}, user="viewer")[0] == 403


def test_on_both_forms_are_served_and_agree(both):
    for uri in DEPRECATED_URIS + CURRENT_URIS:
        assert call(both, "GET", uri)[0] == 200, uri
    assert call(both, "GET", MANAGER)[1]["VirtualMedia"] == {"@odata.id": SYSTEM + "/VirtualMedia"}
    for uri in (SYSTEM, CHASSIS):
        body = call(both, "PATCH", uri, {"IndicatorLED": "Lit"})[1]
        assert (body["IndicatorLED"], body["LocationIndicatorActive"]) == ("Lit", True)
        body = call(both, "PATCH", uri, {"LocationIndicatorActive": False})[1]
        assert (body["IndicatorLED"], body["LocationIndicatorActive"]) == ("Off", False)
        body = call(both, "PATCH", uri, {"LocationIndicatorActive": True})[1]
        assert (body["IndicatorLED"], body["LocationIndicatorActive"]) == ("Blinking", True)
        status, body, _ = call(both, "PATCH", uri, {"IndicatorLED": "Off", "LocationIndicatorActive": True})
        assert status == 400 and "conflicts" in str(body), body
    power = call(both, "GET", CHASSIS + "/Power")[1]
    metrics = call(both, "GET", CHASSIS + "/EnvironmentMetrics")[1]
    assert power["PowerControl"][0]["PowerConsumedWatts"] == pytest.approx(metrics["PowerWatts"]["Reading"], abs=5)
    thermal = call(both, "GET", CHASSIS + "/Thermal")[1]
    assert thermal["Temperatures"][0]["ReadingCelsius"] == metrics["TemperatureCelsius"]["Reading"]
    fan = call(both, "GET", CHASSIS + "/ThermalSubsystem/Fans/Fan1")[1]
    assert fan["SpeedPercent"]["SpeedRPM"] == thermal["Fans"][0]["Reading"]
    psu = call(both, "GET", CHASSIS + "/PowerSubsystem/PowerSupplies/PSU1")[1]
    assert psu["PowerCapacityWatts"] == power["PowerSupplies"][0]["PowerCapacityWatts"]


def test_off_the_readings_follow_the_node_power(current_only):
    assert call(current_only, "POST", SYSTEM + "/Actions/ComputerSystem.Reset", {"ResetType": "On"})[0] == 204
    on = call(current_only, "GET", CHASSIS + "/EnvironmentMetrics")[1]["PowerWatts"]["Reading"]
    assert call(current_only, "POST", SYSTEM + "/Actions/ComputerSystem.Reset", {"ResetType": "ForceOff"})[0] == 204
    off = call(current_only, "GET", CHASSIS + "/EnvironmentMetrics")[1]["PowerWatts"]["Reading"]
    fan = call(current_only, "GET", CHASSIS + "/ThermalSubsystem/Fans/Fan2")[1]["SpeedPercent"]["SpeedRPM"]
    assert off == 8.0 and fan == 0 and on != off, (on, off, fan)


def test_an_led_lit_while_on_reads_as_active_after_the_setting_is_turned_off(tmp_path):
    bmc, store = _bmc(tmp_path, True)
    assert call(bmc, "PATCH", CHASSIS, {"IndicatorLED": "Lit"})[0] == 200
    store.close()
    bmc, store = _bmc(tmp_path, False)
    try:
        assert call(bmc, "GET", CHASSIS)[1]["LocationIndicatorActive"] is True
    finally:
        store.close()
