# SPDX-License-Identifier: GPL-3.0-or-later
"""Licence-only reservations: what scontrol is asked, and what its answers are read as."""
from __future__ import annotations

import pytest

from ansible_collections.msa.hpc.plugins.module_utils.slurm import reservations as V

# `scontrol -o show licenses` of Slurm 22.05 on a simulated system
LICENSES = ("LicenseName=gateway Total=2 Used=0 Free=2 Reserved=0 Remote=no\n"
            "LicenseName=nam Total=64 Used=3 Free=61 Reserved=0 Remote=no\n"
            "LicenseName=gce Total=1 Used=0 Free=1 Reserved=0 Remote=no")
RESV = ("ReservationName=msa_nam_down StartTime=2026-11-27T01:00:00 EndTime=2027-11-27T01:00:00 Duration=365-00:00:00 "
        "Nodes=(null) NodeCnt=0 CoreCnt=0 Features=(null) PartitionName=(null) Flags=ANY_NODES TRES=(null) "
        "Users=root Groups=(null) Accounts=(null) Licenses=gce*1,nam*64 State=ACTIVE BurstBuffer=(null) Watts=n/a "
        "MaxStartDelay=(null)")


class Scontrol:
    """Answers ``scontrol`` from a dict of argument tuples; records every call."""

    def __init__(self, answers):
        self.answers, self.calls = answers, []

    def __call__(self, scontrol, *args):
        self.calls.append(args)
        return self.answers.get(args, (0, ""))


def test_license_totals_reads_every_licence():
    fake = Scontrol({("-o", "show", "licenses"): (0, LICENSES)})
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(V, "scontrol_run", fake)
        assert V.license_totals("scontrol") == {"gateway": 2, "nam": 64, "gce": 1}
        fake.answers[("-o", "show", "licenses")] = (1, "slurm_load_licenses error: Unable to contact slurm controller")
        with pytest.raises(V.ReservationError, match="show licenses: slurm_load_licenses error"):
            V.license_totals("scontrol")


@pytest.mark.parametrize("current, wanted, expected", [
    (None, {"nam": 64, "gce": 1}, ("create", "reservation=msa_nam_down", "starttime=now", "duration=infinite",
                                   "users=root", "flags=any_nodes", "licenses=gce:1,nam:64")),
    (RESV, {"nam": 64, "gce": 1}, None),                                  # Slurm's own "*" spelling: no change
    (RESV, {"nam": 32, "gce": 1}, ("update", "reservation=msa_nam_down", "licenses=gce:1,nam:32")),
    (RESV, {"nam": 0, "gce": 0}, ("delete", "reservation=msa_nam_down")),
    (None, {}, None),
])
def test_sync_reservation_asks_only_for_the_change(current, wanted, expected):
    show = ("-o", "show", "reservation", "msa_nam_down")
    fake = Scontrol({show: (0, current) if current else (1, "Reservation msa_nam_down not found")})
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(V, "scontrol_run", fake)
        assert V.sync_reservation("scontrol", "msa_nam_down", wanted) is (expected is not None)
    assert fake.calls[1:] == ([expected] if expected else [])


def test_a_refused_change_names_the_licences_and_the_reservation():
    fake = Scontrol({("create", "reservation=r", "starttime=now", "duration=infinite", "users=root", "flags=any_nodes",
                      "licenses=nam:64"): (1, "Requested licenses are invalid"),
                     ("-o", "show", "reservation", "r"): (1, "Reservation r not found")})
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(V, "scontrol_run", fake)
        with pytest.raises(V.ReservationError, match="cannot hold 64 nam licences in reservation r: Requested"):
            V.sync_reservation("scontrol", "r", {"nam": 64})


# --- the readers of licence and reservation records ---------------------------------------------------------------

FIXTURES = __import__("pathlib").Path(__file__).parents[1] / "fixtures" / "slurm"


def test_parse_licenses_reads_real_22_05_output_with_and_without_one_line_records():
    text = (FIXTURES / "scontrol_show_licenses_22.05_dev2.txt").read_text()
    expected = {"gateway": {"total": 2, "used": 0, "free": 2}, "gce": {"total": 1, "used": 0, "free": 1},
                "nam": {"total": 7, "used": 0, "free": 7}}
    assert V.parse_licenses(text) == expected
    # without -o each field sits on its own indented line
    blocks = "\n".join(line.replace(" Total", "\n    Total") for line in text.splitlines())
    assert V.parse_licenses(blocks) == expected
    assert V.parse_licenses(LICENSES)["nam"] == {"total": 64, "used": 3, "free": 61}


def test_parse_licenses_leaves_out_what_has_no_total_and_fills_in_free():
    assert V.parse_licenses("LicenseName=x Total=n/a\nLicenseName=y Total=4 Used=1") == {
        "y": {"total": 4, "used": 1, "free": 3}}
    assert V.parse_licenses("") == V.parse_licenses(None) == {}


def test_parse_reservations_keeps_values_whole_and_keys_by_name():
    other = RESV.replace("msa_nam_down", "msa_delay_42").replace("Licenses=gce*1,nam*64", "Licenses=(null)")
    found = V.parse_reservations(RESV + "\n" + other + "\n")
    assert sorted(found) == ["msa_delay_42", "msa_nam_down"]
    assert found["msa_nam_down"]["Licenses"] == "gce*1,nam*64" and found["msa_nam_down"]["Flags"] == "ANY_NODES"
    assert found["msa_delay_42"]["Licenses"] == "(null)" and found["msa_delay_42"]["Users"] == "root"
    assert V.parse_reservations("No reservations in the system\n") == {}
