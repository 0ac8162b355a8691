# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

"""Slurm's RebootProgram (module_utils/node/bmc_reboot) against the msa-bmc stand-in over verified TLS: a session, the
restart the BMC allows, no password anywhere in what it prints, clear refusals."""

import io
import json
import os
import shutil
import subprocess

import pytest

from ansible_collections.msa.hpc.plugins.module_utils.node import bmc_reboot as R
from msa_sim.bmc import testing

USERS = {"admin": ("Adm1n-pw-0", "Administrator"), "viewer": ("v1ew-pw-0", "ReadOnly"),
         "reimage": ("R31mage-pw-0", "MsaReimageOperator"), "reset": ("R3set-pw-0", "SystemResetOperator")}


@pytest.fixture(scope="module")
def bmc(tmp_path_factory):
    if not shutil.which("openssl"):
        pytest.skip("openssl is needed to make the test BMC's certificate")
    tmp = str(tmp_path_factory.mktemp("bmc_reboot"))
    ca, tls = testing.make_tls(tmp)
    with open(os.path.join(tmp, "power.json"), "w", encoding="utf-8") as handle:
        json.dump({"cycle": "On", "restart": "On"}, handle)
    service = testing.start(tmp, [{"name": "cycle", "tls": tls},
                                  {"name": "restart", "tls": tls, "reset_types": ["On", "ForceOff", "ForceRestart"]}],
                            USERS)
    try:
        yield {"service": service, "ca": ca, "tmp": tmp}
    finally:
        service.stop()


def write_config(bmc, name, user="admin", **extra):
    password = os.path.join(bmc["tmp"], "pw-" + user)
    with open(password, "w", encoding="utf-8") as handle:
        handle.write(USERS[user][0] + "\n")
    path = os.path.join(bmc["tmp"], "%s-%s.json" % (name, user))
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(dict({"endpoint": bmc["service"].url(name), "username": user, "password_file": password,
                        "ca_path": bmc["ca"]}, **extra), handle)
    return path


def boots(bmc, name):
    return bmc["service"].store.system(name)["boots"]


def test_a_reboot_power_cycles_the_node_through_a_session_it_opened(bmc):
    before, sessions = boots(bmc, "cycle"), len(bmc["service"].store.sessions("cycle"))
    err = io.StringIO()
    assert R.main([write_config(bmc, "cycle")], err=err) == 0
    assert boots(bmc, "cycle") == before + 1
    assert "sent PowerCycle" in err.getvalue() and USERS["admin"][0] not in err.getvalue()
    # here the program outlives the reset, so it logs out; on a node the power cut ends it first
    assert len(bmc["service"].store.sessions("cycle")) == sessions


def test_a_bmc_without_power_cycle_gets_the_nearest_restart(bmc):
    before = boots(bmc, "restart")
    config = R.load_config(write_config(bmc, "restart", reset="power_cycle"))
    assert R.reboot(config) == ["ForceOff", "On"] and boots(bmc, "restart") == before + 1
    config = R.load_config(write_config(bmc, "restart", reset="force_restart"))
    assert R.reboot(config) == ["ForceRestart"] and boots(bmc, "restart") == before + 2


def test_an_account_without_the_right_fails_naming_the_bmc(bmc):
    err = io.StringIO()
    assert R.main([write_config(bmc, "cycle", user="viewer")], err=err) == 1
    assert "\nmsa-hpc-reboot: BMC %s: POST " % bmc["service"].url("cycle") in err.getvalue()
    assert "403" in err.getvalue() and USERS["viewer"][0] not in err.getvalue()


def test_a_bmc_whose_certificate_is_not_the_ca_s_is_refused(bmc, tmp_path):
    other_ca, _ = testing.make_tls(str(tmp_path))
    before = boots(bmc, "cycle")
    err = io.StringIO()
    assert R.main([write_config(bmc, "cycle", ca_path=other_ca)], err=err) == 1
    assert "CERTIFICATE_VERIFY_FAILED" in err.getvalue() and boots(bmc, "cycle") == before


@pytest.mark.parametrize("config, says", [
    ({"username": "admin", "password_file": "/x"}, "endpoint: None is not set"),
    ({"endpoint": "https://b", "username": "admin", "password_file": "/nonexistent/pw"}, "password_file: "),
    ({"endpoint": "https://b", "username": "admin", "password_file": "/x", "reset": "off"},
     "reset: 'off' is not one of graceful_restart, force_restart, power_cycle"),
])
def test_a_configuration_that_cannot_reboot_is_refused_naming_the_field(tmp_path, config, says):
    path = tmp_path / "bmc.json"
    path.write_text(json.dumps(config))
    err = io.StringIO()
    assert R.main(["--validate", str(path)], err=err) == 1 and says in err.getvalue()


def _sinfo(reason):
    def run(argv, **_):
        body = {"nodes": [{"name": "cm01", "state": "idle", "state_flags": ["REBOOT_ISSUED"], "reason": reason}]}
        return subprocess.CompletedProcess(argv, 0, stdout=json.dumps(body), stderr="")
    return run


def test_a_reimage_boots_the_image_once_through_the_node_account_of_the_reimage_role(bmc):
    image = "localhost/msa-compute:0123456789ab"
    before = boots(bmc, "cycle")
    path = write_config(bmc, "cycle", user="reimage", auth="basic", node_name="cm01",
                        image_pattern=r"localhost/msa-[a-z0-9-]+:[0-9a-f]{12}")
    err = io.StringIO()
    assert R.main([path], err=err, run=_sinfo("msa-reimage " + image)) == 0, err.getvalue()
    row = bmc["service"].store.system("cycle")
    assert row["boots"] == before + 1 and json.loads(row["settings"])["boot_image"] == image
    assert row["boot_enabled"] == "Disabled"  # the override was Once: that boot consumed it
    # a reset-only account (no MsaBootOverride) cannot: refused by the BMC, and no reset was sent
    path = write_config(bmc, "cycle", user="reset", auth="basic", node_name="cm01",
                        image_pattern=r"localhost/msa-[a-z0-9-]+:[0-9a-f]{12}")
    err = io.StringIO()
    assert R.main([path], err=err, run=_sinfo("msa-reimage " + image)) == 1
    assert "403" in err.getvalue() and bmc["service"].store.system("cycle")["boots"] == before + 1
