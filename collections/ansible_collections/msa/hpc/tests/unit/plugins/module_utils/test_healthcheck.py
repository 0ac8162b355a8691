# SPDX-License-Identifier: GPL-3.0-or-later
"""The node health check: each check's failure names what was seen; drain on failure, resume only its own drains."""
from __future__ import annotations

import io
import json
import subprocess

import pytest

from ansible_collections.msa.hpc.plugins.module_utils.node import healthcheck as H
from ansible_collections.msa.hpc.plugins.module_utils._rest import NotDoneError, OutcomeUnknownError, RestError


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


# what the EMP master answers for nodes/3 and nodes/3/link (the fabric manager API of docs/architecture.md)
NODE3 = {"id": 3, "guid": "0x3", "type": "Tourmalet", "address": "10.24.0.42", "state": "up", "routes_version": 4}
LINKS3 = [{"port": 0, "state": "up", "peer": {"id": 2, "port": 1}, "expected_peer": {"id": 2, "port": 1}},
          {"port": 1, "state": "up", "peer": {"id": 4, "port": 0}, "expected_peer": {"id": 4, "port": 0}},
          {"port": 5, "state": "up", "peer": {"id": 9, "port": 2}, "expected_peer": None}]


def emp(links=None, node=None, peers=None):
    answers = {"nodes/%d" % i: dict(NODE3, id=i, state="up") for i in (2, 4, 9)}
    answers.update(peers or {})
    answers.update({"nodes/3": NODE3 if node is None else node, "nodes/3/link": LINKS3 if links is None else links})
    return FakeClient(answers)


def scontrol_node(name, state, flags=(), reason=""):
    """``sinfo --json`` of 22.05 (v0.0.38): every node, whatever --nodes says."""
    return json.dumps({"meta": {}, "errors": [], "nodes": [
        {"name": "cm01", "state": "idle", "state_flags": ["DRAIN"], "reason": "msa-health: munge: x"},
        {"name": name, "state": state, "state_flags": list(flags), "reason": reason}]})


def test_munge_needs_a_credential_that_unmunge_accepts():
    calls = []

    def run(argv, stdin=None):
        calls.append(argv[0])
        return done("CRED") if argv[0] == "munge" else done(returncode=1, stderr="Invalid credential")
    with pytest.raises(H.CheckFailed, match=r"unmunge refused the node's own credential \(Invalid credential\)"):
        H.check_munge(run=run)
    assert calls == ["munge", "unmunge"]
    H.check_munge(run=lambda argv, stdin=None: done("CRED"))


def test_mounts_and_services_name_what_is_missing():
    with pytest.raises(H.CheckFailed, match="^mount /scratch: not mounted$"):
        H.check_mounts(["/home", "/scratch"], probe=lambda paths: ["/scratch: not mounted"])
    states = {"dcdbpusher": "failed", "munge": "active"}
    with pytest.raises(H.CheckFailed, match="service not active: dcdbpusher failed$"):
        H.check_services(["munge", "dcdbpusher"], run=lambda argv: done(states[argv[2]] + "\n"))
    H.check_services(["munge"], run=lambda argv: done("active\n"))


def test_an_extoll_link_down_per_the_manager_is_named_with_its_port_and_peer():
    H.check_extoll(emp(), 3)
    cut = [dict(LINKS3[0]), dict(LINKS3[1], state="down", peer=None), dict(LINKS3[2], state="down", peer=None)]
    with pytest.raises(H.CheckFailed, match=r"^EXTOLL link down per the fabric manager: port 1 to node 4 port 0$"):
        H.check_extoll(emp(cut), 3)   # port 5 has no expected peer (not cabled in the topology): not a failure


def test_a_link_down_because_its_far_end_node_is_down_is_not_this_nodes_failure():
    cut = [dict(LINKS3[0], state="down", peer=None), dict(LINKS3[1], state="down", peer=None), LINKS3[2]]
    # node 4 is powered off (the manager reports it down): only the link to node 2, which is up, counts
    with pytest.raises(H.CheckFailed, match=r"^EXTOLL link down per the fabric manager: port 0 to node 2 port 1$"):
        H.check_extoll(emp(cut, peers={"nodes/4": dict(NODE3, id=4, state="down")}), 3)
    H.check_extoll(emp(cut, peers={"nodes/4": dict(NODE3, id=4, state="down"), "nodes/2": dict(NODE3, id=2,
                                                                                               state="gone")}), 3)
    # a peer absent from the fabric the manager discovered (404) is down too; one it cannot tell about (an error)
    # counts as up: the link is this node's failure
    cut = [LINKS3[0], dict(LINKS3[1], state="down", peer=None)]
    H.check_extoll(emp(cut, peers={"nodes/4": RestError("GET nodes/4 answered HTTP 404: unknown", status=404)}), 3)
    with pytest.raises(H.CheckFailed, match="port 1 to node 4 port 0$"):
        H.check_extoll(emp(cut, peers={"nodes/4": RestError("GET nodes/4 answered HTTP 503", status=503)}), 3)


def test_an_extoll_node_gone_or_unknown_to_the_manager_fails():
    with pytest.raises(H.CheckFailed, match="EXTOLL node 3 is gone per the fabric manager"):
        H.check_extoll(emp(node=dict(NODE3, state="gone")), 3)
    unknown = FakeClient({"nodes/3": RestError("GET nodes/3 answered HTTP 404: node 3 is unknown", status=404)})
    assert H.run_checks([("extoll", lambda: H.check_extoll(unknown, 3))]) == ([
        ("extoll", "RestError: GET nodes/3 answered HTTP 404: node 3 is unknown")], [])


def test_an_extoll_answer_that_is_not_numbers_is_refused():
    with pytest.raises(H.CheckFailed, match="answered port '1; rm', not a number"):
        H.check_extoll(emp([dict(LINKS3[1], state="down", port="1; rm")]), 3)


def test_a_gateway_needs_its_agent_and_both_fabric_links():
    ok = {"ok": True, "fabrics": {"ib": {"up": True}, "extoll": {"up": True}}}
    H.check_gateway(FakeClient({"v1/health": ok}))
    one_down = {"ok": False, "fabrics": {"ib": {"up": True},
                                         "extoll": {"up": False, "reason": "no ext* port has its link up"}}}
    with pytest.raises(H.CheckFailed, match=r"^gateway fabric down: extoll \(no ext\* port has its link up\)$"):
        H.check_gateway(FakeClient({"v1/health": one_down}))
    with pytest.raises(H.CheckFailed, match="reports 1 fabric"):
        H.check_gateway(FakeClient({"v1/health": {"ok": True, "fabrics": {"ib": {"up": True}}}}))
    # the agent before issue 22 answered addresses, not link states: that is no proof of a link
    with pytest.raises(H.CheckFailed, match="gateway fabric down: extoll .down., ib .down."):
        H.check_gateway(FakeClient({"v1/health": {"ok": True, "fabrics": {"ib": "10.1.0.1", "extoll": "10.2.0.1"}}}))


def test_a_fabric_manager_that_does_not_answer_makes_the_extoll_check_unknown_not_failed():
    refused = NotDoneError("GET nodes/3: cannot connect to 10.22.0.10:9000 (ConnectionRefusedError)")
    assert H.run_checks([("extoll", lambda: H.check_extoll(FakeClient({"nodes/3": refused}), 3))]) == ([], [
        ("extoll", "the fabric manager does not answer: GET nodes/3: cannot connect to 10.22.0.10:9000 "
                   "(ConnectionRefusedError)")])
    # the manager gone in the middle of the check (asking for a peer) is unknown too
    cut = [LINKS3[0], dict(LINKS3[1], state="down", peer=None)]
    lost = OutcomeUnknownError("GET nodes/4: the request was sent but the answer was lost (TimeoutError)")
    assert H.run_checks([("extoll", lambda: H.check_extoll(emp(cut, peers={"nodes/4": lost}), 3))])[0] == []
    # an untrusted certificate is an answer (a misconfigured node or manager): the check fails
    untrusted = NotDoneError("GET nodes/3: the TLS certificate of 10.22.0.10:9000 is not trusted", retryable=False)
    assert H.run_checks([("extoll", lambda: H.check_extoll(FakeClient({"nodes/3": untrusted}), 3))]) == ([
        ("extoll", "NotDoneError: GET nodes/3: the TLS certificate of 10.22.0.10:9000 is not trusted")], [])


def test_every_check_runs_and_a_check_that_crashes_is_a_failure():
    def boom():
        raise KeyError("fabrics")

    def bad():
        raise H.CheckFailed("not mounted: /home")
    failed, unknown = H.run_checks([("mounts", bad), ("gateway", boom), ("munge", lambda: None)])
    assert failed == [("mounts", "not mounted: /home"), ("gateway", "KeyError: 'fabrics'")] and unknown == []


@pytest.mark.parametrize("state, reason, failed, expected", [
    ("IDLE", "", [("extoll", "link down")], ("drain", "msa-health: extoll: link down")),
    ("IDLE", "", [], (None, None)),
    ("IDLE+DRAIN", "msa-health: extoll: link down", [], ("resume", None)),
    ("MIXED+DRAIN", "maintenance by admin", [], (None, None)),                         # not ours: left alone
    ("IDLE+DRAIN", "maintenance by admin", [("munge", "x")], (None, None)),           # not ours, even failing
    ("IDLE+DRAIN", "msa-health: extoll: link down", [("extoll", "link down")], (None, None)),  # unchanged
    ("IDLE+DRAIN", "msa-health: extoll: link down", [("munge", "x")], ("drain", "msa-health: munge: x")),
    ("DOWN", "msa-health: old", [], (None, None)),                                     # down, not drained: Slurm's
])
def test_decide_drains_on_failure_and_resumes_only_its_own_drains(state, reason, failed, expected):
    assert H.decide(state, reason, failed) == expected


UNKNOWN = [("extoll", "the fabric manager does not answer: refused")]


@pytest.mark.parametrize("state, reason, failed, expected", [
    ("IDLE", "", [], (None, None)),                                          # not drained for an unknown check
    ("IDLE+DRAIN", "msa-health: extoll: link down", [], (None, None)),       # nor resumed: it cannot tell
    ("IDLE", "", [("munge", "x")], ("drain", "msa-health: munge: x")),       # a real failure still drains
])
def test_an_unknown_check_neither_drains_nor_resumes(state, reason, failed, expected):
    assert H.decide(state, reason, failed, UNKNOWN) == expected


def test_a_long_or_unprintable_reason_is_one_short_readable_line():
    action, text = H.decide("IDLE", "", [("mounts", "not mounted: " + ", ".join("/m%d" % i for i in range(80)))])
    assert action == "drain" and len(text) <= H.REASON_MAX and text.endswith("…")
    assert H.decide("IDLE", "", [("gateway", "a\nb\x1b[31m  c")])[1] == "msa-health: gateway: a b [31m c"


def test_node_state_reads_the_state_flags_and_reason_of_sinfo_json():
    out = scontrol_node("esb01", "idle", ["DRAIN"], "msa-health: extoll: port 1 to node 4 port 0")
    assert H.node_state("esb01", run=lambda argv: done(out)) == ("IDLE+DRAIN",
                                                                 "msa-health: extoll: port 1 to node 4 port 0")
    with pytest.raises(H.CheckFailed, match="no record of the node"):
        H.node_state("esb02", run=lambda argv: done(out))


@pytest.mark.parametrize("config, message", [
    ({"node": "esb01; reboot"}, "node: 'esb01; reboot' is not a Slurm node name"),
    ({"node": "esb01", "mounts": ["home"]}, "mounts: .* not absolute"),
    ({"node": "esb01", "services": ["--now"]}, "services: .* starts with '-'"),
    ({"node": "esb01", "extoll": {"url": "https://m:9000", "node_id": "3"}}, "extoll.node_id: '3' is not a number"),
    ({"node": "esb01", "gateway": {}}, "gateway: {} has no url"),
])
def test_a_configuration_a_root_process_would_misuse_is_refused(config, message):
    with pytest.raises(ValueError, match=message):
        H.validate_config(config)


def _main(tmp_path, config, node_json, emp_client):
    path = tmp_path / "hc.json"
    path.write_text(json.dumps(config))
    issued, err = [], io.StringIO()

    def run(argv, stdin=None, timeout=20):
        issued.append(argv)
        if argv[:2] == ["sinfo", "--json"]:
            return done(node_json)
        if argv[0] == "systemctl":
            return done("active\n")
        return done("CRED")
    rc = H.main([str(path)], make_client=lambda spec: emp_client, run=run, probe=lambda paths: [], err=err)
    return rc, issued, err.getvalue()


CONFIG = {"node": "esb01", "mounts": ["/"], "services": ["dcdbpusher"],
          "extoll": {"url": "https://10.22.0.10:9000", "token_file": "/etc/extoll/emp.token", "node_id": 3}}


def test_main_drains_a_node_whose_extoll_link_is_down(tmp_path):
    cut = [LINKS3[0], dict(LINKS3[1], state="down", peer=None)]
    rc, issued, err = _main(tmp_path, CONFIG, scontrol_node("esb01", "idle"), emp(cut))
    assert rc == 0 and issued[-1] == ["scontrol", "update", "nodename=esb01", "state=drain",
                                      "reason=msa-health: extoll: EXTOLL link down per the fabric manager: "
                                      "port 1 to node 4 port 0"]
    assert "drain esb01: msa-health: extoll" in err


def test_main_leaves_the_node_as_it_is_while_the_fabric_manager_does_not_answer(tmp_path):
    refused = FakeClient({"nodes/3": NotDoneError("GET nodes/3: cannot connect to 10.22.0.10:9000 (refused)")})
    for flags, reason in (((), ""), (("DRAIN",), "msa-health: extoll: x")):
        rc, issued, err = _main(tmp_path, CONFIG, scontrol_node("esb01", "idle", flags, reason), refused)
        assert rc == 0 and not any(a[:2] == ["scontrol", "update"] for a in issued)
        assert "extoll: unknown, the node is left as it is: the fabric manager does not answer" in err


def test_main_resumes_its_own_drain_once_the_link_is_back_and_leaves_an_operators(tmp_path):
    rc, issued, dummy = _main(tmp_path, CONFIG, scontrol_node("esb01", "idle", ["DRAIN"], "msa-health: extoll: x"),
                              emp())
    assert rc == 0 and issued[-1] == ["scontrol", "update", "nodename=esb01", "state=resume"]
    rc, issued, dummy = _main(tmp_path, CONFIG, scontrol_node("esb01", "idle", ["DRAIN"], "disk swap"), emp())
    assert rc == 0 and not any(a[:2] == ["scontrol", "update"] for a in issued)


def test_a_client_that_cannot_be_made_is_the_checks_failure(tmp_path):
    def no_token(spec):
        raise OSError("[Errno 2] No such file or directory: '/etc/extoll/emp.token'")
    path = tmp_path / "hc.json"
    path.write_text(json.dumps(CONFIG))
    issued = []

    def run(argv, stdin=None, timeout=20):
        issued.append(argv)
        return done(scontrol_node("esb01", "idle")) if argv[:2] == ["sinfo", "--json"] else done("active\n")
    assert H.main([str(path)], make_client=no_token, run=run, probe=lambda paths: [], err=io.StringIO()) == 0
    assert issued[-1][-1].startswith("reason=msa-health: extoll: client not usable: OSError: [Errno 2]")


def test_main_says_why_it_cannot_run(tmp_path):
    err = io.StringIO()
    assert H.main([str(tmp_path / "absent.json")], err=err) == 1
    assert err.getvalue().startswith("msa-hpc-healthcheck: %s: " % (tmp_path / "absent.json"))


def test_validate_only_reads_the_configuration(tmp_path):
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    good.write_text(json.dumps(CONFIG))
    bad.write_text(json.dumps(dict(CONFIG, node="esb01 && x")))
    calls = []
    assert H.main(["--validate", str(good)], run=lambda *a, **k: calls.append(a), err=io.StringIO()) == 0
    err = io.StringIO()
    assert H.main(["--validate", str(bad)], err=err) == 1 and "is not a Slurm node name" in err.getvalue()
    assert calls == []


def test_node_state_reads_real_22_05_json():
    import pathlib
    fixture = pathlib.Path(__file__).parent / "fixtures/slurm/rest_v0.0.38_nodes_dev2.json"
    assert H.node_state("cm01", run=lambda argv: done(fixture.read_text())) == ("IDLE", "")
