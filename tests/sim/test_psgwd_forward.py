# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

"""Per-job forwarding of a gateway (msa_sim.psgwd.forward): the nft ruleset, the checks of the pairs, and the agent
opening it on POST, closing it on DELETE and when the job's psgwd dies. nft itself is a recording fake here."""

import json
import os
import pathlib
import signal
import subprocess
import threading
import time

import pytest

from ansible_collections.msa.hpc.plugins.module_utils.node import gw_node_routes as NR
from msa_sim.psgwd import agent as agent_mod
from msa_sim.psgwd import forward as fwd
from msa_sim.psgwd.agent import Agent, AgentError, AgentServer
from tests.helpers import FakeNft, interfaces_up
from tests.sim.test_psgwd_agent import SECRET, TOKEN, call

ROOT = pathlib.Path(__file__).resolve().parents[2]
IB, EXTOLL = "10.43.0.0/24", "10.44.0.0/24"
CM1, CM2, ESB1, ESB2 = "10.43.0.20", "10.43.0.21", "10.44.0.40", "10.44.0.41"


def rule(match, action):
    return "add rule inet msa_gw forward %s %s" % (match, action)


# --------------------------------------------------------------------------- the ruleset

def test_without_jobs_the_chain_drops_everything_but_transit_inside_the_booster_fabric():
    script = fwd.render(IB, EXTOLL, {})
    assert script.splitlines() == [
        "add table inet msa_gw",
        "add chain inet msa_gw forward { type filter hook forward priority filter; policy drop; }",
        "flush chain inet msa_gw forward",
        rule("ip saddr 10.44.0.0/24 ip daddr 10.44.0.0/24", 'accept comment "booster fabric transit"')]


def test_a_job_accepts_each_pair_both_ways_counting_bytes_per_direction():
    script = fwd.render(IB, EXTOLL, {"42": [(CM1, ESB1), (CM2, ESB1)]})
    lines = script.splitlines()
    assert "add counter inet msa_gw job42_c2b" in lines and "add counter inet msa_gw job42_b2c" in lines
    assert [line for line in lines if "job42" in line and line.startswith("add rule")] == [
        rule("ip saddr %s ip daddr %s" % (CM1, ESB1), "counter name job42_c2b accept"),
        rule("ip saddr %s ip daddr %s" % (ESB1, CM1), "counter name job42_b2c accept"),
        rule("ip saddr %s ip daddr %s" % (CM2, ESB1), "counter name job42_c2b accept"),
        rule("ip saddr %s ip daddr %s" % (ESB1, CM2), "counter name job42_b2c accept")]
    # counters are added (kept when they exist) before the chain is flushed and refilled: one transaction
    assert lines.index("add counter inet msa_gw job42_c2b") < lines.index("flush chain inet msa_gw forward")


def test_closed_pairs_are_reset_and_the_counters_of_closed_jobs_only_are_deleted():
    script = fwd.render(IB, EXTOLL, {"7": [(CM2, ESB2)]}, closed=[(CM1, ESB1)],
                        existing_counters=["job7_c2b", "job7_b2c", "job42_c2b", "job42_b2c", "site_counter"])
    lines = script.splitlines()
    assert rule("ip saddr %s ip daddr %s" % (CM1, ESB1), "meta l4proto tcp reject with tcp reset") in lines
    assert rule("ip saddr %s ip daddr %s" % (ESB1, CM1), "reject with icmpx admin-prohibited") in lines
    assert [line for line in lines if line.startswith("delete")] == [
        "delete counter inet msa_gw job42_b2c", "delete counter inet msa_gw job42_c2b"]
    assert not any(CM1 in line and "accept" in line for line in lines)


def test_ipv6_fabrics_get_ip6_matches():
    script = fwd.render("fd00:43::/64", "fd00:44::/64", {"3": [("fd00:43::20", "fd00:44::40")]})
    assert rule("ip6 saddr fd00:43::20 ip6 daddr fd00:44::40", "counter name job3_c2b accept") in script


# --------------------------------------------------------------------------- what a request may name

NETS = (fwd.network(IB, "ib"), fwd.network(EXTOLL, "extoll"))


def test_pairs_are_checked_deduplicated_and_sorted():
    assert fwd.check_pairs([[CM2, ESB1], [CM1, ESB2], [CM2, ESB1]], *NETS) == [(CM1, ESB2), (CM2, ESB1)]
    assert fwd.check_pairs([], *NETS) == []


@pytest.mark.parametrize("pairs, message", [
    ([[ESB1, CM1]], "pairs[0]: cluster address 10.44.0.40 is outside this gateway's cluster network 10.43.0.0/24"),
    ([[CM1, "10.42.0.5"]], "pairs[0]: booster address 10.42.0.5 is outside this gateway's booster network"),
    ([[CM1, ESB1], [CM1, "0.0.0.0/0"]], "pairs[1]: booster address '0.0.0.0/0' is not an IP address"),
    ([[CM1, "10.44.0.40; flush ruleset"]], "is not an IP address"),
    ([[CM1, "10.44.0.0"]], "booster address 10.44.0.0 is not a host of 10.44.0.0/24"),
    ([[CM1]], "pairs[0] ['10.43.0.20'] is not [cluster address, booster address]"),
    ({"a": 1}, "pairs must be a list"),
    ([[CM1, "fd00::1"]], "outside this gateway's booster network"),
])
def test_a_pair_outside_this_gateways_fabrics_is_refused_naming_it(pairs, message):
    with pytest.raises(fwd.ForwardError, match=None) as exc:
        fwd.check_pairs(pairs, *NETS)
    assert message in str(exc.value)


def test_the_pair_count_and_the_job_id_are_bounded():
    with pytest.raises(fwd.ForwardError, match="3 pairs, at most 2"):
        fwd.check_pairs([[CM1, ESB1]] * 3, *NETS, limit=2)
    for bad in ("42;", "abc", "", "1" * 11, "4 2"):
        with pytest.raises(fwd.ForwardError, match="not a numeric Slurm job id"):
            fwd.check_job(bad)


def test_counters_are_read_from_nft_json():
    text = json.dumps({"nftables": [{"metainfo": {}}, {"counter": {
        "family": "inet", "table": "msa_gw", "name": "job42_c2b", "packets": 3, "bytes": 4500}}, {"counter": {
            "family": "inet", "table": "other", "name": "job42_c2b", "packets": 9, "bytes": 9}}]})
    counters = fwd.parse_counters(text)
    assert counters == {"job42_c2b": {"packets": 3, "bytes": 4500}}
    assert fwd.job_counters(counters, "42", "ib", "extoll") == {
        "ib->extoll": {"packets": 3, "bytes": 4500}, "extoll->ib": {"packets": 0, "bytes": 0}}


# --------------------------------------------------------------------------- the Forwarder's state

def test_open_is_idempotent_close_keeps_the_others_counters_and_resets_expire():
    nft = FakeNft()
    f = fwd.Forwarder(IB, EXTOLL, ("ib", "extoll"), run=nft, hold=60)
    f.open("42", [[CM1, ESB1]], now=0)
    f.open("43", [[CM2, ESB2]], now=0)
    nft.counters["job43_c2b"] = {"packets": 2, "bytes": 2000}
    nft.counters["job42_b2c"] = {"packets": 1, "bytes": 100}
    first = nft.scripts[-1]
    f.open("42", [[CM1, ESB1]], now=1)
    assert nft.scripts[-1] == first and nft.counters["job42_b2c"]["bytes"] == 100  # re-POST: same rules, counts kept
    assert f.close("42", now=10) == {"ib->extoll": {"packets": 0, "bytes": 0},
                                     "extoll->ib": {"packets": 1, "bytes": 100}}
    assert "job42_b2c" not in nft.counters and nft.counters["job43_c2b"]["bytes"] == 2000
    assert rule("ip saddr %s ip daddr %s" % (CM1, ESB1), "meta l4proto tcp reject with tcp reset") in nft.rules()
    assert f.close("42", now=11) is None
    assert f.expire(now=69) is False
    assert f.expire(now=70) is True
    assert not any("reject" in r for r in nft.rules())
    assert any(CM2 in r and "accept" in r for r in nft.rules())


def test_a_pair_still_used_by_another_job_is_not_reset_and_a_reopened_pair_is_accepted_again():
    nft = FakeNft()
    f = fwd.Forwarder(IB, EXTOLL, run=nft)
    f.open("1", [[CM1, ESB1]], now=0)
    f.open("2", [[CM1, ESB1]], now=0)
    f.close("1", now=1)
    assert not any("reject" in r for r in nft.rules())
    f.close("2", now=2)
    assert any("reject" in r for r in nft.rules())
    f.open("3", [[CM1, ESB1]], now=3)
    assert not any("reject" in r for r in nft.rules())


def test_a_failing_nft_is_an_error_naming_it():
    nft = FakeNft()
    nft.fail = "Error: Could not process rule: Operation not permitted"
    f = fwd.Forwarder(IB, EXTOLL, run=nft)
    with pytest.raises(fwd.ForwardError, match="Operation not permitted"):
        f.open("1", [[CM1, ESB1]], now=0)


# --------------------------------------------------------------------------- the agent

@pytest.fixture
def fwd_agent(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT / "sim"), str(ROOT / "collections")]))
    nft = FakeNft()
    clock = [0.0]
    agent = Agent("gw01", [("ib", "127.0.0.2"), ("extoll", "127.0.0.3")], str(tmp_path / "state"),
                  str(tmp_path / "run"), interfaces=interfaces_up("127.0.0.2", "127.0.0.3"),
                  forwarder=fwd.Forwarder(IB, EXTOLL, ("ib", "extoll"), run=nft, hold=30), clock=lambda: clock[0])
    server = AgentServer(("127.0.0.1", 0), agent, TOKEN)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True).start()
    yield "http://127.0.0.1:%d" % server.server_address[1], agent, nft, clock, server
    for rec in agent.store.all():
        agent.stop(rec["job"])
    server.shutdown()
    server.server_close()


def test_post_opens_the_jobs_pairs_get_shows_bytes_delete_closes_them(fwd_agent):
    base, _agent, nft, _, _server = fwd_agent
    status, rec = call(base, "POST", "/v1/jobs", {"job": "42", "secret": SECRET, "pairs": [[CM1, ESB1], [CM2, ESB1]]})
    assert status == 201 and rec["pairs"] == [[CM1, ESB1], [CM2, ESB1]]
    assert sum("job42_c2b accept" in r for r in nft.rules()) == 2
    again = {"job": "42", "secret": SECRET, "pairs": [[CM1, ESB1], [CM2, ESB1]]}
    assert call(base, "POST", "/v1/jobs", again)[0] == 200
    nft.counters["job42_c2b"] = {"packets": 10, "bytes": 65536}
    status, rec = call(base, "GET", "/v1/jobs/42")
    assert status == 200 and rec["forwarded"]["ib->extoll"]["bytes"] == 65536
    status, res = call(base, "DELETE", "/v1/jobs/42")
    assert status == 200 and res["stats"]["forwarded"]["ib->extoll"]["bytes"] == 65536
    assert not any("accept" in r and CM1 in r for r in nft.rules())
    assert any("tcp reset" in r and CM1 in r for r in nft.rules())
    assert "job42_c2b" not in nft.counters


def test_bad_pairs_are_refused_before_any_psgwd_starts(fwd_agent):
    base, agent, nft, _, _server = fwd_agent
    status, body = call(base, "POST", "/v1/jobs", {"job": "42", "secret": SECRET, "pairs": [[CM1, "10.99.0.1"]]})
    assert status == 400 and "booster address 10.99.0.1 is outside" in body["error"]["message"]
    status, body = call(base, "POST", "/v1/jobs", {"job": "job-42", "secret": SECRET, "pairs": []})
    assert status == 400 and "not a numeric Slurm job id" in body["error"]["message"]
    assert agent.list() == [] and nft.scripts == []


def test_a_failed_nft_stops_the_psgwd_it_started(fwd_agent):
    base, agent, nft, _, _server = fwd_agent
    nft.fail = "Error: Operation not permitted"
    status, body = call(base, "POST", "/v1/jobs", {"job": "42", "secret": SECRET, "pairs": [[CM1, ESB1]]})
    assert status == 500 and "forwarding not opened" in body["error"]["message"]
    assert agent.list() == []


def test_killing_the_jobs_psgwd_closes_its_forwarding_and_delete_still_reports_the_bytes(fwd_agent):
    base, agent, nft, clock, _server = fwd_agent
    rec = call(base, "POST", "/v1/jobs", {"job": "42", "secret": SECRET, "pairs": [[CM1, ESB1]]})[1]
    call(base, "POST", "/v1/jobs", {"job": "43", "secret": SECRET, "pairs": [[CM2, ESB2]]})
    nft.counters["job42_b2c"] = {"packets": 4, "bytes": 4096}
    assert agent.monitor() == []
    os.kill(rec["pid"], signal.SIGKILL)
    deadline = time.monotonic() + 10
    while call(base, "GET", "/v1/jobs/42")[1]["running"] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert agent.monitor() == ["42"]
    assert any("tcp reset" in r and CM1 in r for r in nft.rules())
    assert any("accept" in r and CM2 in r for r in nft.rules())  # the other job keeps its path
    res = call(base, "DELETE", "/v1/jobs/42")[1]
    assert res["stats"]["forwarded"]["extoll->ib"]["bytes"] == 4096
    clock[0] = 31
    agent.monitor()
    assert not any("reject" in r for r in nft.rules())


def test_a_restarted_agent_applies_the_stored_pairs_again(fwd_agent, tmp_path):
    base, _agent, nft, _, _server = fwd_agent
    call(base, "POST", "/v1/jobs", {"job": "42", "secret": SECRET, "pairs": [[CM1, ESB1]]})
    again = Agent("gw01", [("ib", "127.0.0.2"), ("extoll", "127.0.0.3")], str(tmp_path / "state"),
                  str(tmp_path / "run"), forwarder=fwd.Forwarder(IB, EXTOLL, ("ib", "extoll"), run=nft))
    nft.scripts.clear()
    again.restore()
    assert again.forwarder.jobs == {"42": [(CM1, ESB1)]}
    assert sum("job42" in r for r in nft.rules()) == 2


def test_an_agent_without_forwarding_gives_the_pairs_to_its_psgwd_only(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT / "sim"), str(ROOT / "collections")]))
    agent = Agent("gw01", [("ib", "127.0.0.2"), ("extoll", "127.0.0.3")], str(tmp_path / "s"), str(tmp_path / "r"))
    with pytest.raises(AgentError, match=r"pairs\[0\]: booster address 'esb' is not an IP address"):
        agent.start("42", 0, [[CM1, "esb"]], SECRET)
    assert agent.list() == []
    try:
        agent.start("42", 0, [[CM1, ESB1]], SECRET)
        pairs_file = tmp_path / "r" / "psgwd-42.pairs"
        assert json.loads(pairs_file.read_text()) == {"job": "42", "pairs": [[CM1, ESB1]]}
        assert oct(pairs_file.stat().st_mode & 0o777) == "0o600"
    finally:
        agent.stop("42")
    assert not pairs_file.exists()


def test_the_compute_nodes_read_only_token_reads_a_jobs_pairs_and_nothing_else(fwd_agent):
    base, _agent, _nft, _, server = fwd_agent
    server_read = "node-read-token"
    server.read_token = server_read
    assert call(base, "POST", "/v1/jobs", {"job": "42", "secret": SECRET, "pairs": [[CM1, ESB1]]})[0] == 201
    gw = {"name": "gw01", "agent": base}
    assert NR.agent_pairs(gw, "42", server_read) == [[CM1, ESB1]]
    assert NR.agent_pairs(gw, "43", server_read) == []   # a job this gateway does not serve
    assert call(base, "GET", "/v1/jobs", token=server_read)[0] == 401
    assert call(base, "DELETE", "/v1/jobs/42", token=server_read)[0] == 401
    assert call(base, "POST", "/v1/jobs", {"job": "43", "secret": SECRET}, token=server_read)[0] == 401
    with pytest.raises(NR.RouteError, match="gateway gw01: agent .*401"):
        NR.agent_pairs(gw, "42", "wrong")


@pytest.mark.parametrize("extra, message", [
    (["--forward-network", "ib=10.43.0.0/24"], "--forward-network is needed for both fabrics"),
    (["--forward-network", "eth=10.42.0.0/24"], "--forward-network 'eth=10.42.0.0/24' is not NAME=CIDR of a --fabric"),
    (["--tunnel", "vxlan"], "--tunnel vxlan needs --forward-network"),
])
def test_the_agent_refuses_a_half_configured_forwarding_at_start(extra, message, capsys):
    argv = ["--fabric", "ib=127.0.0.2", "--fabric", "extoll=127.0.0.3", "--insecure-no-auth"] + extra
    with pytest.raises(SystemExit) as exc:
        agent_mod.main(argv)
    assert exc.value.code == 2 and message in capsys.readouterr().err


def test_a_bad_forward_network_is_an_error_naming_it(tmp_path, capsys):
    argv = ["--fabric", "ib=127.0.0.2", "--fabric", "extoll=127.0.0.3", "--insecure-no-auth", "--state-dir",
            str(tmp_path / "s"), "--run-dir", str(tmp_path / "r"), "--forward-network", "ib=10.43.0.0/33",
            "--forward-network", "extoll=10.44.0.0/24"]
    assert agent_mod.main(argv) == 2
    assert "cluster network '10.43.0.0/33' is not an IP network" in capsys.readouterr().err


def test_torus_transit_is_accepted_by_port_interfaces_and_a_bad_prefix_is_refused():
    script = fwd.render(IB, EXTOLL, {}, transit_prefix="ext")
    assert rule('iifname "ext*" oifname "ext*"', 'accept comment "torus transit"') in script.splitlines()
    with pytest.raises(fwd.ForwardError, match="port interface prefix .* is not an interface name"):
        fwd.render(IB, EXTOLL, {}, transit_prefix='ext"; flush ruleset')


# --------------------------------------------------------------------------- ending a job whose psgwd died

class FakeSlurm:
    """Records the Slurm commands the JobEnder runs; ``fail`` maps a command word to its error output."""

    def __init__(self, fail=None):
        self.calls = []
        self.fail = dict(fail or {})

    def __call__(self, argv, **kwargs):
        assert kwargs["timeout"] > 0 and kwargs["check"] is False
        self.env = kwargs.get("env")
        self.calls.append(list(argv))
        word = argv[1] if argv[0].endswith("scontrol") else "scancel"
        if word in self.fail:
            return subprocess.CompletedProcess(argv, 1, "", self.fail[word])
        return subprocess.CompletedProcess(argv, 0, "", "")


def _ender(slurm, started=None):
    """A JobEnder whose threads are recorded in ``started`` and run by the test (``run_all``)."""
    started = [] if started is None else started
    return agent_mod.JobEnder("gw01", "/usr/bin/scontrol", "/usr/bin/scancel", run=slurm,
                              spawn=lambda fn, *a: started.append((fn, a))), started


def run_all(started):
    while started:
        fn, args = started.pop(0)
        fn(*args)


def test_a_lost_job_is_notified_commented_and_cancelled_once_naming_gateway_job_and_psgwd():
    slurm = FakeSlurm()
    ender, started = _ender(slurm)
    assert ender.end("42") is True
    assert slurm.calls == []          # nothing runs on the caller's thread
    assert ender.end("42") is False   # once per job
    run_all(started)
    msg = ender.message("42")
    assert "gateway gw01" in msg and "psgwd" in msg and "job 42" in msg
    assert slurm.calls == [["/usr/bin/scontrol", "notify", "42", msg],
                           ["/usr/bin/scontrol", "update", "JobId=42", "AdminComment=" + msg],
                           ["/usr/bin/scancel", "42"]]
    assert ender.results["42"] == {"notify": "ok", "comment": "ok", "cancel": "ok"}


def test_a_failing_slurm_command_is_logged_and_the_others_still_run(caplog):
    slurm = FakeSlurm(fail={"notify": "scontrol: error: Invalid job id specified"})
    ender, started = _ender(slurm)
    ender.end("42")
    run_all(started)
    assert [c[1] for c in slurm.calls] == ["notify", "update", "42"]
    assert ender.results["42"]["notify"] == "scontrol: error: Invalid job id specified"
    assert ender.results["42"]["cancel"] == "ok"
    assert "job 42: notify failed" in caplog.text and "Invalid job id" in caplog.text


def test_a_missing_or_hanging_slurm_command_is_an_error_not_a_crash():
    def run(argv, **kwargs):
        if "scancel" in argv[0]:
            raise subprocess.TimeoutExpired(argv, kwargs["timeout"])
        raise FileNotFoundError(2, "No such file or directory", argv[0])
    ender, started = _ender(run)
    ender.end("42")
    run_all(started)
    assert "No such file" in ender.results["42"]["notify"]
    assert "timed out" in ender.results["42"]["cancel"]


@pytest.mark.parametrize("job", ["job-42", "0", "42; reboot", "12345678901", ""])
def test_a_value_that_is_no_slurm_job_id_is_never_passed_to_slurm(job, caplog):
    slurm = FakeSlurm()
    ender, started = _ender(slurm)
    assert ender.end(job) is False
    run_all(started)
    assert slurm.calls == [] and "is not a Slurm job id" in caplog.text


def test_the_monitor_ends_the_job_whose_psgwd_died_once_and_the_others_not(fwd_agent):
    base, agent, _nft, _, _server = fwd_agent
    slurm = FakeSlurm()
    agent.ender, started = _ender(slurm)
    rec = call(base, "POST", "/v1/jobs", {"job": "42", "secret": SECRET, "pairs": [[CM1, ESB1]]})[1]
    call(base, "POST", "/v1/jobs", {"job": "43", "secret": SECRET, "pairs": [[CM2, ESB2]]})
    agent.monitor()
    assert started == []
    os.kill(rec["pid"], signal.SIGKILL)
    deadline = time.monotonic() + 10
    while call(base, "GET", "/v1/jobs/42")[1]["running"] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert agent.monitor() == ["42"]
    agent.monitor()
    assert len(started) == 1          # the next rounds do not end it again
    run_all(started)
    assert ["/usr/bin/scancel", "42"] in slurm.calls and not any("43" in c for c in slurm.calls)
    call(base, "DELETE", "/v1/jobs/42")   # the epilog: the id may be used again
    assert "42" not in agent.ender.ended


def test_a_slow_slurmctld_does_not_hold_the_monitor(fwd_agent):
    base, agent, _nft, _, _server = fwd_agent
    release = threading.Event()

    def slow(argv, **_kwargs):
        release.wait(10)
        return subprocess.CompletedProcess(argv, 0, "", "")
    agent.ender = agent_mod.JobEnder("gw01", run=slow)
    rec = call(base, "POST", "/v1/jobs", {"job": "42", "secret": SECRET, "pairs": [[CM1, ESB1]]})[1]
    os.kill(rec["pid"], signal.SIGKILL)
    deadline = time.monotonic() + 10
    while call(base, "GET", "/v1/jobs/42")[1]["running"] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert agent.monitor() == ["42"]   # returned while every Slurm command still waits
    assert "42" not in agent.ender.results
    release.set()
    deadline = time.monotonic() + 10
    while "42" not in agent.ender.results and time.monotonic() < deadline:
        time.sleep(0.05)
    assert agent.ender.results["42"]["cancel"] == "ok"


def test_end_lost_jobs_is_off_by_default_and_its_commands_are_options(monkeypatch, tmp_path):
    made = {}

    class Stop(Exception):
        pass

    def fake_agent(*args, **kwargs):
        made.update(kwargs)
        raise Stop
    monkeypatch.setattr(agent_mod, "Agent", fake_agent)
    base = ["--fabric", "ib=127.0.0.2", "--fabric", "extoll=127.0.0.3", "--insecure-no-auth"]
    with pytest.raises(Stop):
        agent_mod.main(base)
    assert made["ender"] is None
    with pytest.raises(Stop):
        agent_mod.main(base + ["--name", "gw07", "--end-lost-jobs", "--scontrol", "/opt/slurm/bin/scontrol",
                               "--scancel", "/x/scancel"])
    ender = made["ender"]
    assert (ender.gateway, ender.scontrol, ender.scancel) == ("gw07", "/opt/slurm/bin/scontrol", "/x/scancel")


def test_the_slurm_commands_fetch_their_configuration_from_the_conf_server_given():
    slurm = FakeSlurm()
    ender = agent_mod.JobEnder("gw01", run=slurm, spawn=lambda fn, *a: fn(*a), conf_server="mgmt01,mgmt02:6817")
    ender.end("42")
    assert slurm.env["SLURM_CONF_SERVER"] == "mgmt01,mgmt02:6817" and "PATH" in slurm.env
    plain = FakeSlurm()
    agent_mod.JobEnder("gw01", run=plain, spawn=lambda fn, *a: fn(*a)).end("43")
    assert plain.env is None


def test_a_bad_conf_server_is_an_error_naming_it(tmp_path, capsys):
    argv = ["--fabric", "ib=127.0.0.2", "--fabric", "extoll=127.0.0.3", "--insecure-no-auth", "--state-dir",
            str(tmp_path / "s"), "--run-dir", str(tmp_path / "r"), "--end-lost-jobs",
            "--slurm-conf-server", "mgmt01;reboot"]
    assert agent_mod.main(argv) == 2
    assert "--slurm-conf-server 'mgmt01;reboot' is not HOST[:PORT]" in capsys.readouterr().err
