# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

"""Tests of the compute nodes' route hook: the routes from the gateways' pairs, checked against the pool file."""

import io
import json
import subprocess
import types

import pytest

from ansible_collections.msa.hpc.plugins.module_utils.node import gw_node_routes as NR

NODES = {"cm01": {"ib": "10.1.0.20"}, "cm02": {"ib": "10.1.0.21"}, "esb01": {"extoll": "10.2.0.40"},
         "esb02": {"extoll": "10.2.0.41"}, "both01": {"ib": "10.1.0.90", "extoll": "10.2.0.90"}}
POOL = {"route_fabric": "ib", "nodes": NODES, "gateways": [
    {"name": "gw01", "addresses": {"ib": "10.1.0.201", "extoll": "10.2.0.201"}, "agent": "https://gw01:7433"},
    {"name": "gw02", "addresses": {"ib": "10.1.0.202", "extoll": "10.2.0.202"}, "agent": "https://gw02:7433"}]}
PAIRS = {"gw01": [["10.1.0.20", "10.2.0.40"], ["10.1.0.21", "10.2.0.40"]],
         "gw02": [["10.1.0.20", "10.2.0.41"], ["10.1.0.21", "10.2.0.41"]]}


class Ip:
    """``ip`` (or a route helper) as the hook runs it: records each command, fails on request."""

    def __init__(self, fail=()):
        self.calls, self.fail = [], fail

    def __call__(self, argv, **_kw):
        self.calls.append(argv)
        bad = any(f in argv for f in self.fail)
        return subprocess.CompletedProcess(argv, 2 if bad else 0, "", "RTNETLINK answers: No such process"
                                           if bad else "")


@pytest.fixture
def opts(tmp_path):
    pool = tmp_path / "pool.json"
    pool.write_text(json.dumps(POOL))
    return types.SimpleNamespace(pool_file=str(pool), token_file="", ca_file="", state_dir=str(tmp_path / "routes"),
                                 route_helper="")


def fetch(pairs=None):
    seen = []

    def get(gw, job_id, token, ca):
        seen.append((gw["name"], job_id))
        return (PAIRS if pairs is None else pairs).get(gw["name"], [])
    get.seen = seen
    return get


def test_a_cluster_node_routes_each_booster_peer_via_its_gateways_cluster_address(opts):
    ip = Ip()
    routes = NR.prolog("42", "cm01", opts, run=ip, fetch=fetch())
    assert routes == [("10.2.0.40", "10.1.0.201"), ("10.2.0.41", "10.1.0.202")]
    assert ip.calls == [["ip", "route", "replace", "10.2.0.40/32", "via", "10.1.0.201"],
                        ["ip", "route", "replace", "10.2.0.41/32", "via", "10.1.0.202"]]


def test_a_booster_node_routes_its_cluster_peers_via_the_gateways_booster_address_and_the_epilog_removes_them(opts):
    ip = Ip()
    NR.prolog("42", "esb02", opts, run=ip, fetch=fetch())
    assert ip.calls == [["ip", "route", "replace", "10.1.0.20/32", "via", "10.2.0.202"],
                        ["ip", "route", "replace", "10.1.0.21/32", "via", "10.2.0.202"]]
    ip.calls.clear()
    assert NR.epilog("42", opts, run=ip) == [("10.1.0.20", "10.2.0.202"), ("10.1.0.21", "10.2.0.202")]
    assert ip.calls == [["ip", "route", "del", "10.1.0.20/32", "via", "10.2.0.202"],
                        ["ip", "route", "del", "10.1.0.21/32", "via", "10.2.0.202"]]
    assert NR.epilog("42", opts, run=ip) == []   # once only


def test_a_route_another_running_job_installed_too_stays(opts):
    NR.prolog("42", "esb02", opts, run=Ip(), fetch=fetch())
    NR.prolog("43", "esb02", opts, run=Ip(), fetch=fetch({"gw02": [["10.1.0.20", "10.2.0.41"]]}))
    ip = Ip()
    assert NR.epilog("42", opts, run=ip) == [("10.1.0.21", "10.2.0.202")]


def test_a_route_helper_replaces_ip_route(opts):
    opts.route_helper = "/usr/lib/msa-hpc/bin/sim-tunnel"
    ip = Ip()
    NR.prolog("42", "esb01", opts, run=ip, fetch=fetch())
    assert ip.calls[0] == ["/usr/lib/msa-hpc/bin/sim-tunnel", "add", "10.1.0.20", "10.2.0.201", "10.2.0.40"]


def test_nodes_on_neither_or_both_sides_or_unknown_need_no_routes(opts):
    ip = Ip()
    assert NR.prolog("42", "both01", opts, run=ip, fetch=fetch()) == []
    assert NR.prolog("42", "login01", opts, run=ip, fetch=fetch()) == []
    assert NR.prolog("42", "cm01", opts, run=ip, fetch=fetch({})) == []
    assert ip.calls == []


@pytest.mark.parametrize("pairs, message", [
    ({"gw01": [["10.1.0.20", "10.9.9.9"]]}, "gateway gw01: pairs[0]: '10.9.9.9' is no compute node's extoll address"),
    ({"gw01": [["10.2.0.40", "10.1.0.20"]]}, "'10.2.0.40' is no compute node's ib address"),
    ({"gw02": [["10.1.0.20"]]}, "gateway gw02: pairs[0] ['10.1.0.20'] is not [cluster address, booster address]"),
    ({"gw01": [["10.1.0.20", "10.2.0.40"]], "gw02": [["10.1.0.20", "10.2.0.40"]]},
     "peer 10.2.0.40 of 10.1.0.20 is reached through two gateways"),
])
def test_pairs_the_pool_file_does_not_vouch_for_install_nothing(opts, pairs, message):
    ip = Ip()
    with pytest.raises((NR.RouteError, ValueError)) as exc:
        NR.prolog("42", "cm01", opts, run=ip, fetch=fetch(pairs))
    assert message in str(exc.value)
    assert ip.calls == []


def test_main_checks_the_job_id_and_reports_a_failed_route_in_one_line(opts, monkeypatch):
    argv = ["prolog", "--pool-file", opts.pool_file, "--token-file", "", "--state-dir", opts.state_dir]
    err = io.StringIO()
    assert NR.main(argv, env={"SLURM_JOB_ID": "4;2", "SLURMD_NODENAME": "cm01"}, err=err) == 1
    assert "SLURM_JOB_ID: '4;2' is not a Slurm job id" in err.getvalue()
    monkeypatch.setattr(NR, "agent_pairs", fetch())
    monkeypatch.setattr(NR.subprocess, "run", Ip(fail=("10.2.0.41/32",)))
    err, out = io.StringIO(), io.StringIO()
    assert NR.main(argv, env={"SLURM_JOB_ID": "42", "SLURMD_NODENAME": "cm01"}, out=out, err=err) == 1
    assert "psgw routes prolog: job 42: ip route replace 10.2.0.41/32 via 10.1.0.202 failed: RTNETLINK" in \
        err.getvalue()


def test_a_heterogeneous_jobs_component_asks_the_agents_by_its_leaders_id_and_keeps_its_own_routes(opts, monkeypatch):
    seen = fetch()
    monkeypatch.setattr(NR, "agent_pairs", seen)
    monkeypatch.setattr(NR.subprocess, "run", Ip())
    argv = ["prolog", "--pool-file", opts.pool_file, "--token-file", "", "--state-dir", opts.state_dir]
    env = {"SLURM_JOB_ID": "43", "SLURM_HET_JOB_ID": "42", "SLURMD_NODENAME": "esb01"}
    assert NR.main(argv, env=env, out=io.StringIO(), err=io.StringIO()) == 0
    assert seen.seen == [("gw01", "42"), ("gw02", "42")]
    with open(opts.state_dir + "/43.json", encoding="utf-8") as fh:
        assert json.load(fh)["routes"] == \
            [["10.1.0.20", "10.2.0.201"], ["10.1.0.21", "10.2.0.201"]]
    err = io.StringIO()
    assert NR.main(argv, env=dict(env, SLURM_HET_JOB_ID="4 2"), out=io.StringIO(), err=err) == 1
    assert "SLURM_HET_JOB_ID: '4 2' is not a Slurm job id" in err.getvalue()


def test_a_later_job_sharing_a_peer_through_another_gateway_leaves_the_route_and_gets_it_when_the_first_ends(opts):
    first, second = {"gw01": [["10.1.0.20", "10.2.0.40"]]}, {"gw02": [["10.1.0.20", "10.2.0.40"]]}
    ip = Ip()
    assert NR.prolog("42", "cm01", opts, run=ip, fetch=fetch(first)) == [("10.2.0.40", "10.1.0.201")]
    assert NR.prolog("43", "cm01", opts, run=ip, fetch=fetch(second)) == []   # the older job's route stays
    assert ip.calls == [["ip", "route", "replace", "10.2.0.40/32", "via", "10.1.0.201"]]
    ip.calls.clear()
    moved = []
    assert NR.epilog("42", opts, run=ip, moved=moved) == []
    assert moved == [("10.2.0.40", "10.1.0.201", "10.1.0.202")]
    assert ip.calls == [["ip", "route", "replace", "10.2.0.40/32", "via", "10.1.0.202"]]
    ip.calls.clear()
    assert NR.epilog("43", opts, run=ip) == [("10.2.0.40", "10.1.0.202")]
    assert ip.calls == [["ip", "route", "del", "10.2.0.40/32", "via", "10.1.0.202"]]


def test_when_the_later_job_ends_first_the_older_jobs_route_is_untouched(opts):
    ip = Ip()
    NR.prolog("42", "cm01", opts, run=ip, fetch=fetch({"gw01": [["10.1.0.20", "10.2.0.40"]]}))
    NR.prolog("43", "cm01", opts, run=ip, fetch=fetch({"gw02": [["10.1.0.20", "10.2.0.40"]]}))
    ip.calls.clear()
    moved = []
    assert NR.epilog("43", opts, run=ip, moved=moved) == [] and moved == [] and ip.calls == []
    assert NR.epilog("42", opts, run=ip) == [("10.2.0.40", "10.1.0.201")]


def test_a_route_helper_hands_a_shared_route_over_by_removing_then_adding(opts, monkeypatch):
    opts.route_helper = "/usr/lib/msa-hpc/bin/sim-tunnel"
    ip = Ip()
    NR.prolog("42", "esb01", opts, run=ip, fetch=fetch({"gw01": [["10.1.0.20", "10.2.0.40"]]}))
    NR.prolog("43", "esb01", opts, run=ip, fetch=fetch({"gw02": [["10.1.0.20", "10.2.0.40"]]}))
    ip.calls.clear()
    out = io.StringIO()
    argv = ["epilog", "--pool-file", opts.pool_file, "--state-dir", opts.state_dir, "--route-helper", opts.route_helper]
    monkeypatch.setattr(NR.subprocess, "run", ip)
    assert NR.main(argv, env={"SLURM_JOB_ID": "42"}, out=out, err=io.StringIO()) == 0
    assert ip.calls == [[opts.route_helper, "del", "10.1.0.20", "10.2.0.201", "10.2.0.40"],
                        [opts.route_helper, "add", "10.1.0.20", "10.2.0.202", "10.2.0.40"]]
    assert "10.1.0.20 handed over from 10.2.0.201 to 10.2.0.202" in out.getvalue()


def test_a_gateway_whose_agent_does_not_answer_serves_no_pair_and_fails_no_job(opts, monkeypatch):
    from ansible_collections.msa.hpc.plugins.module_utils._rest import NotDoneError, RestError

    def get(gw, job_id, token, ca):
        if gw["name"] == "gw02":   # powered off: nothing listens at its agent's address
            raise NR.AgentUnreachable("gateway gw02: agent https://gw02:7433: cannot connect (No route to host)")
        return PAIRS["gw01"]
    skipped, ip = [], Ip()
    assert NR.prolog("42", "cm01", opts, run=ip, fetch=get, skipped=skipped) == [("10.2.0.40", "10.1.0.201")]
    assert skipped == ["gateway gw02: agent https://gw02:7433: cannot connect (No route to host)"]

    class Client:
        def __init__(self, error):
            self.error = error

        def __call__(self, *_a, **_kw):
            return self

        def request(self, *_a, **_kw):
            raise self.error
    gw = POOL["gateways"][1]
    monkeypatch.setattr(NR, "RestClient", Client(NotDoneError("cannot connect to gw02:7433 (refused)")))
    with pytest.raises(NR.AgentUnreachable):
        NR.agent_pairs(gw, "42", None)
    # an untrusted certificate or an HTTP error is no silence: the prolog fails on it
    for error in (NotDoneError("the TLS certificate of gw02:7433 is not trusted", retryable=False),
                  RestError("GET /v1/jobs/42 answered HTTP 500", status=500)):
        monkeypatch.setattr(NR, "RestClient", Client(error))
        with pytest.raises(NR.RouteError) as exc:
            NR.agent_pairs(gw, "42", None)
        assert not isinstance(exc.value, NR.AgentUnreachable)
