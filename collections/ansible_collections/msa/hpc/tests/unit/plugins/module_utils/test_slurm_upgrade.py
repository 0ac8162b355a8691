# SPDX-License-Identifier: GPL-3.0-or-later
"""Slurm's upgrade rules: at most two (three from 24.11) major releases per jump, no downgrade, dbd > ctld > d."""
from __future__ import annotations

import pytest

from ansible_collections.msa.hpc.plugins.module_utils._slurm_upgrade import UpgradeError, parse, plan, releases_back

DEB = "22.05.8-4+deb12u3"
SYSTEM = {"mgmt01": {"slurmdbd": DEB, "slurmctld": DEB}, "cm01": {"slurmd": DEB}, "esb01": {"slurmd": DEB}}


def test_versions_read_upstream_debian_and_epoch():
    assert parse("22.05.8") == parse(DEB) == parse("1:22.05.8-1") == (7, 8)
    assert parse("23.02.10~rc1") == (8, 10)


@pytest.mark.parametrize("text", ["22.5.8", "22.05", "slurm-22.05.8", "", None, "99.01.1"])
def test_unreadable_or_unknown_versions_are_refused_naming_the_field(text):
    with pytest.raises(UpgradeError, match=r"^target="):
        plan(SYSTEM, text)


def test_one_and_two_releases_ahead_give_the_steps_in_slurms_order():
    for target in ("23.02.7-1", "23.11.4"):
        steps = plan(SYSTEM, target)
        assert [s["daemon"] for s in steps] == ["slurmdbd", "slurmctld", "slurmd"]
        assert steps[2]["hosts"] == ["cm01", "esb01"] and steps[0]["from"] == [DEB]


def test_three_releases_ahead_is_refused_naming_the_release_to_go_through():
    with pytest.raises(UpgradeError) as err:
        plan(SYSTEM, "24.05.1")
    assert "target=24.05.1" in str(err.value) and "3 major releases back" in str(err.value)
    assert "upgrade through 23.11 first" in str(err.value)


def test_from_24_11_three_releases_back_are_accepted():
    assert releases_back("24.11.0") == 3 and releases_back("24.05.0") == 2
    installed = {"mgmt01": {"slurmdbd": "24.11.1", "slurmctld": "24.11.1"}, "cm01": {"slurmd": "23.11.9"}}
    assert [s["daemon"] for s in plan(installed, "25.05.0")] == ["slurmdbd", "slurmctld", "slurmd"]
    with pytest.raises(UpgradeError, match="4 major releases back.*upgrade through 25.05 first"):
        plan({"cm01": {"slurmd": "23.11.9"}}, "25.11.0")


def test_a_downgrade_is_refused():
    with pytest.raises(UpgradeError, match="newer; Slurm has no downgrade"):
        plan(SYSTEM, "21.08.8")
    with pytest.raises(UpgradeError, match="no downgrade"):
        plan({"cm01": {"slurmd": "22.05.9"}}, "22.05.8")


def test_a_daemon_already_at_the_target_has_no_step():
    half = {"mgmt01": {"slurmdbd": "23.02.7", "slurmctld": "23.02.7"}, "cm01": {"slurmd": DEB}}
    assert plan(half, "23.02.7") == [{"daemon": "slurmd", "package": "slurmd", "hosts": ["cm01"], "from": [DEB]}]
    assert plan(SYSTEM, DEB) == []


def test_a_system_whose_order_is_already_broken_is_refused():
    broken = {"mgmt01": {"slurmdbd": DEB, "slurmctld": "23.02.7"}}
    with pytest.raises(UpgradeError, match="slurmctld on mgmt01 has 23.02.7, newer than slurmdbd"):
        plan(broken, "23.02.7")
    # a newer micro release of one major is not a break: RPCs are compatible within a major
    assert plan({"mgmt01": {"slurmdbd": "22.05.8", "slurmctld": "22.05.9"}}, "22.05.9")[0]["daemon"] == "slurmdbd"


def test_unknown_daemons_are_refused():
    with pytest.raises(UpgradeError, match=r"installed\[cm01\]: unknown daemon 'slurmrestd'"):
        plan({"cm01": {"slurmrestd": DEB}}, DEB)


TRIXIE = "24.11.5-4+deb13u1"
FORKY = "26.05.5-1"
SYSTEM_24 = {"mgmt01": {"slurmdbd": TRIXIE, "slurmctld": TRIXIE}, "mgmt02": {"slurmctld": TRIXIE},
             "cm01": {"slurmd": TRIXIE}, "esb01": {"slurmd": TRIXIE}}


@pytest.mark.parametrize("source", ["24.11.5", "25.05.3", "25.11.1"])
def test_26_05_upgrades_directly_from_the_three_releases_before_it(source):
    installed = {"mgmt01": {"slurmdbd": source, "slurmctld": source}, "cm01": {"slurmd": source}}
    assert [s["daemon"] for s in plan(installed, FORKY)] == ["slurmdbd", "slurmctld", "slurmd"]


def test_22_05_to_24_11_is_refused_naming_both_releases_and_the_way_through():
    with pytest.raises(UpgradeError) as err:
        plan(SYSTEM, TRIXIE)
    text = str(err.value)
    assert text.startswith("target=%s: " % TRIXIE) and "has %s, 4 major releases back" % DEB in text
    assert "Slurm 24.11 upgrades directly from the 3 releases before it only (23.02, 23.11, 24.05)" in text
    assert "upgrade through 23.11 first" in text


def test_24_05_to_26_05_is_refused():
    with pytest.raises(UpgradeError, match=r"has 24.05.8, 4 major releases back; Slurm 26.05 .* \(24.11, 25.05, "
                                           r"25.11\); upgrade through 25.11 first"):
        plan({"cm01": {"slurmd": "24.05.8"}}, FORKY)


def test_a_target_the_collection_does_not_support_is_refused_naming_installed_and_target():
    with pytest.raises(UpgradeError) as err:
        plan({"mgmt01": {"slurmctld": "20.11.9"}}, "21.08.8")
    assert str(err.value) == ("target=21.08.8: Slurm 21.08 is not a release this collection supports as a target "
                              "(supported: 24.11, 25.05, 25.11, 26.05); installed: slurmctld on mgmt01: 20.11.9")
    # a step of the way out of 22.05, and a micro update of the installed release, are accepted
    assert plan(SYSTEM, "23.11.10")[0]["from"] == [DEB] and plan(SYSTEM, "22.05.9")[0]["daemon"] == "slurmdbd"


def test_a_release_newer_than_any_known_is_refused_naming_installed_and_target():
    trixie = "24.11.5-4+deb13u1"
    with pytest.raises(UpgradeError) as err:
        plan({"mgmt01": {"slurmdbd": trixie, "slurmctld": trixie}, "cm01": {"slurmd": trixie}}, "27.05.1-1")
    assert str(err.value) == ("target=27.05.1-1: Slurm major release 27.05 is not one this collection knows "
                              "(17.02 … 26.05); installed: slurmdbd on mgmt01: %s, slurmctld on mgmt01: %s, "
                              "slurmd on cm01: %s" % (trixie, trixie, trixie))


def test_a_step_out_of_slurms_order_is_refused_before_it_runs():
    with pytest.raises(UpgradeError) as err:
        plan(SYSTEM_24, FORKY, step="slurmd")
    assert str(err.value) == ("step=slurmd: slurmdbd on mgmt01 still has %s, below the target %s; Slurm upgrades "
                              "slurmdbd, then slurmctld, then slurmd: upgrade slurmdbd first" % (TRIXIE, FORKY))
    half = dict(SYSTEM_24, mgmt01={"slurmdbd": FORKY, "slurmctld": FORKY})
    with pytest.raises(UpgradeError, match="step=slurmd: slurmctld on mgmt02 still has 24.11.5-4"):
        plan(half, FORKY, step="slurmd")
    expected = {"daemon": "slurmctld", "package": "slurmctld", "hosts": ["mgmt02"], "from": [TRIXIE]}
    assert plan(half, FORKY, step="slurmctld")[0] == expected
    with pytest.raises(UpgradeError, match="step='slurmrestd': not a daemon of the upgrade"):
        plan(SYSTEM_24, FORKY, step="slurmrestd")


@pytest.mark.parametrize("key", ["StateSaveLocation", "SlurmdSpoolDir"])
def test_a_state_or_spool_directory_that_would_move_is_refused(key):
    moved = {key: {"installed": "/var/lib/slurm/x", "target": "/var/spool/slurm/x"}}
    with pytest.raises(UpgradeError) as err:
        plan(SYSTEM_24, FORKY, settings=moved)
    assert str(err.value).startswith("%s=/var/spool/slurm/x: the upgrade to %s would move it from /var/lib/slurm/x"
                                     % (key, FORKY))
    assert "slurmctld on mgmt01: %s" % TRIXIE in str(err.value)
    kept = {key: {"installed": "/var/lib/slurm/x/", "target": "/var/lib/slurm/x"}}
    assert len(plan(SYSTEM_24, FORKY, settings=kept)) == 3
