# SPDX-License-Identifier: GPL-3.0-or-later
"""The health check: each check's failure names what was seen; drain on failure, resume only its own drains."""
from __future__ import annotations

import json
import subprocess

import pytest

from ansible_collections.msa.hpc.plugins.module_utils import _healthcheck as H


def done(stdout="", returncode=0, stderr=""):
    return subprocess.CompletedProcess([], returncode, stdout, stderr)


class FakeClient:
    """Answers GETs from a dict; a value that is an exception is raised (an unreachable service)."""

    def __init__(self, answers):
        self.answers = answers

    def get(self, path):
        value = self.answers[path]
        if isinstance(value, Exception):
            raise value
        return value


def test_munge_needs_a_credential_that_unmunge_accepts():
    calls = []

    def run(argv, stdin=None):
        calls.append(argv[0])
        return done("CRED") if argv[0] == "munge" else done(returncode=1, stderr="Invalid credential")
    with pytest.raises(H.CheckFailed, match="unmunge refused the node's own credential \\(Invalid credential\\)"):
        H.check_munge({}, run=run)
    assert calls == ["munge", "unmunge"]
    H.check_munge({}, run=lambda argv, stdin=None: done("CRED"))


def test_mounts_and_services_name_what_is_missing():
    with pytest.raises(H.CheckFailed, match="not mounted: /scratch$"):
        H.check_mounts(["/home", "/scratch"], ismount=lambda p: p == "/home")
    states = {"dcdb-pusher": "failed", "munge": "active"}
    with pytest.raises(H.CheckFailed, match="service not active: dcdb-pusher failed$"):
        H.check_services(["munge", "dcdb-pusher"], run=lambda argv: done(states[argv[2]] + "\n"))


@pytest.mark.parametrize("missing", [
    [{"a": "esb01", "b": "esb02"}], [["esb02:1", "esb01:3"]], ["esb01:3-esb02:1"],
])
def test_an_extoll_link_of_this_node_missing_per_the_manager_fails(missing):
    client = FakeClient({"network/missinglinks": missing, "network/missingnodes": []})
    with pytest.raises(H.CheckFailed, match="EXTOLL link down per the fabric manager: .*esb01"):
        H.check_extoll({}, client, "esb01")
    H.check_extoll({}, client, "esb03")  # another node's link is not this node's failure


def test_a_node_the_manager_misses_fails():
    client = FakeClient({"network/missinglinks": [], "network/missingnodes": [{"name": "dam01"}]})
    with pytest.raises(H.CheckFailed, match="EXTOLL node dam01 missing"):
        H.check_extoll({}, client, "dam01")


def test_a_gateway_needs_its_agent_and_both_fabrics():
    ok = {"ok": True, "fabrics": {"ib": {"up": True}, "extoll": {"up": True}}}
    H.check_gateway(FakeClient({"v1/health": ok}))
    one_down = {"ok": True, "fabrics": {"ib": {"up": True}, "extoll": {"up": False}}}
    with pytest.raises(H.CheckFailed, match="gateway fabric down: extoll$"):
        H.check_gateway(FakeClient({"v1/health": one_down}))
    with pytest.raises(H.CheckFailed, match="fewer than two fabrics"):
        H.check_gateway(FakeClient({"v1/health": {"ok": True, "fabrics": {"ib": "up"}}}))


def test_a_manager_that_does_not_answer_fails_naming_it():
    with pytest.raises(H.CheckFailed, match="NAM manager not reachable: connection refused"):
        H.check_manager(FakeClient({"health": OSError("connection refused")}), "NAM")


def test_every_check_runs_and_a_check_that_crashes_is_a_failure():
    def boom():
        raise KeyError("fabrics")

    def bad():
        raise H.CheckFailed("not mounted: /home")
    failed = H.run_checks([("mounts", bad), ("gateway", boom), ("munge", lambda: None)])
    assert failed == [("mounts", "not mounted: /home"), ("gateway", "check could not run: KeyError: 'fabrics'")]


@pytest.mark.parametrize("state, reason, failed, expected", [
    ("IDLE", "", [("extoll", "link down")], ("drain", "msa-health: extoll: link down")),
    ("IDLE", "", [], (None, None)),
    ("IDLE+DRAIN", "msa-health: extoll: link down", [], ("resume", None)),
    ("MIXED+DRAIN", "maintenance by admin", [], (None, None)),                        # not ours: left alone
    ("IDLE+DRAIN", "maintenance by admin", [("munge", "x")], (None, None)),          # not ours, even failing
    ("IDLE+DRAIN", "msa-health: extoll: link down", [("extoll", "link down")], (None, None)),  # unchanged
    ("IDLE+DRAIN", "msa-health: extoll: link down", [("munge", "x")], ("drain", "msa-health: munge: x")),
])
def test_decide_drains_on_failure_and_resumes_only_its_own_drains(state, reason, failed, expected):
    assert H.decide(state, reason, failed) == expected


def test_a_long_reason_is_cut_readably():
    action, text = H.decide("IDLE", "", [("mounts", "not mounted: " + ", ".join("/m%d" % i for i in range(80)))])
    assert action == "drain" and len(text) <= H.REASON_MAX and text.endswith("…")


def test_node_state_reads_a_reason_with_spaces():
    line = ("NodeName=esb01 Arch=x86_64 CoresPerSocket=1 State=IDLE+DRAIN ThreadsPerCore=1 "
            "Reason=msa-health: extoll: link down [root@2026-11-25T03:30:00]")
    state, reason = H.node_state("esb01", run=lambda argv: done(line + "\n"))
    assert state == "IDLE+DRAIN" and reason == "msa-health: extoll: link down"


def test_main_drains_a_node_whose_check_fails(tmp_path):
    config = tmp_path / "hc.json"
    config.write_text(json.dumps({"node": "esb01", "apis": {"extoll": {"url": "https://mgmt01:9000"}}}))
    issued = []

    def run(argv, stdin=None, timeout=20):
        issued.append(argv)
        if argv[0] == "scontrol" and argv[1] == "--oneliner":
            return done("NodeName=esb01 State=IDLE\n")
        return done("CRED")
    client = FakeClient({"network/missinglinks": [["esb01:2", "esb02:0"]], "network/missingnodes": []})
    assert H.main([str(config)], make_client=lambda spec: client, run=run) == 0
    assert issued[-1] == ["scontrol", "update", "nodename=esb01", "state=drain",
                          "reason=msa-health: extoll: EXTOLL link down per the fabric manager: esb01:2-esb02:0"]


def test_main_says_why_it_cannot_run(tmp_path, capsys):
    assert H.main([str(tmp_path / "absent.json")]) == 1
    assert "msa-hpc-healthcheck: " in capsys.readouterr().err
