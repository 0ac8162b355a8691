# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

"""Slurm prolog/epilog for gateways against two psgw-agents on loopback and a recorded ``squeue --json``."""

import io
import json
import os
import pathlib
import threading
import pwd
import sys
import types

import pytest

from ansible_collections.msa.hpc.plugins.module_utils import _gw_pool as P
from ansible_collections.msa.hpc.plugins.module_utils import _gw_routing as R
from ansible_collections.msa.hpc.plugins.module_utils.node import userfile as U
from ansible_collections.msa.hpc.plugins.module_utils._rest import RestClient, RestError
from msa_sim.psgwd import pingpong, protocol as proto
from msa_sim.psgwd import forward as fwd
from msa_sim.psgwd import slurm
from msa_sim.psgwd.agent import Agent, AgentServer
from tests.helpers import FakeNft, fake_scontrol, interfaces_up, squeue_json

ROOT = pathlib.Path(__file__).resolve().parents[2]
UID, GID = os.getuid(), os.getgid()


def squeue_text(workdir, licenses="gateway:2", comment="gw_plugin=booster,gw_cleanup", boosters="booster[01-03]",
                  uid=UID, gid=GID):
    """``squeue --json`` with a hetjob of the user running the tests: 2 cluster and 3 booster nodes."""
    common = {"user_name": pwd.getpwuid(uid).pw_name if uid == UID else "alice", "user_id": uid, "group_id": gid,
              "current_working_directory": str(workdir), "job_state": "CONFIGURING"}
    return squeue_json({"job_id": 200, "partition": "cm", "nodes": "cluster[01-02]", "licenses": licenses,
                              "comment": comment},
                             {"partition": "esb", "nodes": boosters, "licenses": "", "comment": comment}, **common)


@pytest.fixture
def site(tmp_path, monkeypatch, request):
    """Two agents; ``request.param == "per-gateway"`` gives each its own token (the controller holds both)."""
    per_gateway = getattr(request, "param", None) == "per-gateway"
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT / "sim"), str(ROOT / "collections")]))
    servers, agents = [], []
    for name in ("gw01", "gw02"):
        # each agent forwards the pairs of the pool file's nodes (addresses below) through a recording nft
        agent = Agent(name, [("ib", "127.0.0.2"), ("extoll", "127.0.0.3")], str(tmp_path / name),
                      str(tmp_path / name / "run"),
                      interfaces=interfaces_up("127.0.0.2", "127.0.0.3"),
                      forwarder=fwd.Forwarder("10.43.0.0/24", "10.44.0.0/24", ("ib", "extoll"), run=FakeNft()))
        server = AgentServer(("127.0.0.1", 0), agent, "tok-" + name if per_gateway else "tok")
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True).start()
        servers.append(server)
        agents.append(agent)
    pool_file = tmp_path / "pool.json"
    pool_file.write_text(json.dumps({"route_fabric": "ib", "cluster_partitions": ["cm"], "gateways": [
        {"name": a.name, "addresses": {"ib": "127.0.0.2", "extoll": "127.0.0.3"},
         "agent": "http://127.0.0.1:%d" % s.server_address[1]} for a, s in zip(agents, servers)]}))
    (tmp_path / "token").write_text(json.dumps({a.name: "tok-" + a.name for a in agents}) if per_gateway else "tok\n")
    workdir = tmp_path / "work"
    workdir.mkdir()
    squeue = tmp_path / "squeue"
    record = tmp_path / "squeue.json"
    record.write_text(squeue_text(workdir))
    squeue.write_text("#!/bin/sh\ncat %s\n" % record)
    squeue.chmod(0o755)
    argv = ["--pool-file", str(pool_file), "--db", str(tmp_path / "pool.db"), "--token-file",
            str(tmp_path / "token"), "--squeue", str(squeue), "--report-dir", str(tmp_path / "reports")]
    yield types.SimpleNamespace(argv=argv, workdir=workdir, record=record, tmp=tmp_path, agents=agents,
                                db=str(tmp_path / "pool.db"), pool_file=pool_file,
                                urls=["http://127.0.0.1:%d" % s.server_address[1] for s in servers])
    for agent in agents:
        for rec in agent.store.all():
            agent.stop(rec["job"])
    for server in servers:
        server.shutdown()
        server.server_close()


def run(site, action, job="200"):
    out = io.StringIO()
    code = slurm.main([action] + site.argv, env={"SLURM_JOB_ID": job}, out=out)
    return code, out.getvalue()


# the job's nodes on loopback: cluster02 sends from 127.0.0.4, booster03 receives on 127.0.0.3
LOOPBACK_NODES = {"cluster01": {"ib": "127.0.0.1"}, "cluster02": {"ib": "127.0.0.4"},
                  "booster01": {"extoll": "127.0.0.5"}, "booster02": {"extoll": "127.0.0.6"},
                  "booster03": {"extoll": "127.0.0.3"}}


def test_prolog_starts_daemons_writes_the_routing_file_and_epilog_undoes_it(site):
    for agent in site.agents:
        agent.forwarder = None  # their psgwds relay the job's pairs (loopback addresses are no fabric network here)
    with_nodes(site, LOOPBACK_NODES)
    code, out = run(site, "prolog")
    assert code == 0, out
    route = site.workdir / "psgw-route-200"
    table = R.read_routing_file(str(route))
    assert sorted(table.clusters) == ["cluster01", "cluster02"]
    assert sorted(table.boosters) == ["booster01", "booster02", "booster03"]
    assert all(len(v) == 1 for v in table.booster_gateways().values())  # gw_plugin=booster from the comment
    assert len(table.gateways) == 2 and all(g.startswith("127.0.0.2:") for g in table.gateways)
    assert [len(a.list()) for a in site.agents] == [1, 1]

    receiver_addr = []
    import socket
    lsock = socket.socket()
    lsock.bind(("127.0.0.3", 0))
    lsock.listen(1)
    receiver_addr = "127.0.0.3:%d" % lsock.getsockname()[1]
    results = []
    t = threading.Thread(target=lambda: results.append(pingpong.receive_one(lsock.accept()[0], "200")))
    t.start()
    gateway, side = pingpong.find_route(str(route), "cluster02", "booster03")
    secret_file = site.workdir / "psgw-route-200.secret"  # the job's secret, the user's only
    assert oct(secret_file.stat().st_mode & 0o777) == "0o600"
    secret = pingpong.read_secret(routing_file=str(route), env={})
    data = pingpong.payload(200_000, 1)
    env = proto.envelope("200", "cluster02", "booster03", receiver_addr, len(data), 30_000, proto.digest(data))
    with pytest.raises(proto.ProtocolError, match="refused connection from 127.0.0.4 on ib: wrong job secret"):
        proto.send_message(gateway, env, data, "x" * len(secret), source=("127.0.0.4", 0))
    outside = dict(env, dst=dict(env["dst"], addr="127.0.0.7:%d" % lsock.getsockname()[1]))  # a node of no pair
    with pytest.raises(proto.ProtocolError, match=r"127\.0\.0\.4 -> 127\.0\.0\.7 is not a node pair of job 200"):
        proto.send_message(gateway, outside, data, secret, source=("127.0.0.4", 0))
    res = proto.send_message(gateway, env, data, secret, source=("127.0.0.4", 0))
    t.join(10)
    lsock.close()
    assert side == "cluster" and res["match"] and results[0]["match"]

    code, out = run(site, "epilog")
    assert code == 0
    assert not route.exists()  # gw_cleanup was asked
    assert not secret_file.exists()
    assert [a.list() for a in site.agents] == [[], []]
    with P.GatewayPool(site.db) as pool:
        assert pool.counts()["free"] == 2
    report = json.loads((site.tmp / "reports" / "200.json").read_text())
    moved = sum(((s or {}).get("directions", {}).get("ib->extoll", {}).get("bytes", 0))
                for s in report["gateways"].values())
    assert moved == 200_000
    assert "ib->extoll 200000 bytes" in out


def test_epilog_keeps_the_routing_file_without_cleanup_and_runs_twice_harmlessly(site):
    site.record.write_text(squeue_text(site.workdir, comment="gw_file=routes.txt"))
    assert run(site, "prolog")[0] == 0
    assert (site.workdir / "routes.txt").exists()
    assert run(site, "epilog")[0] == 0
    assert run(site, "epilog")[0] == 0
    assert (site.workdir / "routes.txt").exists() and not (site.workdir / "routes.txt.secret").exists()


@pytest.fixture
def as_slurm_user(site, monkeypatch):
    """The hooks run as SlurmUser (uid 4242): a fake sudo records its arguments and runs the collection's helper
    (module_utils/node/userfile.helper_main, as the role's msa-hpc-userfile does), which reads the job itself."""
    monkeypatch.setattr(U.os, "geteuid", lambda: 4242)
    bin_dir = site.tmp / "bin"
    bin_dir.mkdir()
    (bin_dir / "squeue").symlink_to(site.tmp / "squeue")
    helper = bin_dir / "msa-hpc-userfile"
    # the test runs as root, so its jobs are root's, which the real helper refuses (test_userfile.py proves that):
    # here the helper's uid bound is lifted, to test the hooks' way through sudo
    helper.write_text("#!%s\nimport sys\nsys.path.insert(0, %r)\n"
                      "from ansible_collections.msa.hpc.plugins.module_utils.node import userfile as U\n"
                      "U.check_uid = lambda job, minimum: None\n"
                      "sys.exit(U.helper_main())\n" % (sys.executable, str(ROOT / "collections")))
    helper.chmod(0o755)
    sudo = bin_dir / "sudo"
    sudo.write_text('#!/bin/sh\necho "$*" >> %s\n[ -e %s ] && { echo "sudo: a password is required" >&2; exit 1; }\n'
                    'shift 1\nexec "$@"\n' % (site.tmp / "sudo.log", site.tmp / "refuse"))
    sudo.chmod(0o755)
    monkeypatch.setenv("PATH", "%s:%s" % (bin_dir, os.environ["PATH"]))
    site.argv += ["--user-helper", str(helper)]
    site.helper = helper
    return site.tmp / "sudo.log"


def test_hooks_running_as_slurm_user_write_and_remove_the_routing_file_through_the_helper(site, as_slurm_user):
    code, out = run(site, "prolog")
    assert code == 0, out
    route = site.workdir / "psgw-route-200"
    assert len(R.read_routing_file(str(route)).gateways) == 2
    assert oct(route.stat().st_mode & 0o777) == "0o644"
    secret = "%s.secret" % route
    assert as_slurm_user.read_text().splitlines() == [
        "-n %s %s 200 %s gw_file" % (site.helper, action, path)
        for action, path in (("check", route), ("secret", secret), ("write", route))]
    assert oct(os.stat(secret).st_mode & 0o777) == "0o600"
    assert run(site, "epilog")[0] == 0
    assert not route.exists() and not os.path.exists(secret)  # gw_cleanup; the secret goes whatever is asked
    assert as_slurm_user.read_text().splitlines()[-2:] == [
        "-n %s remove 200 %s gw_file" % (site.helper, path) for path in (secret, route)]
    assert not list(site.workdir.glob(".psgw-route-200.tmp*"))


def test_a_refused_sudo_fails_the_prolog_for_requeue_naming_the_file_and_frees_the_gateways(site, as_slurm_user):
    (site.tmp / "refuse").touch()
    code, _ = run(site, "prolog")
    assert code == slurm.REQUEUE
    assert not (site.workdir / "psgw-route-200").exists()
    with P.GatewayPool(site.db) as pool:
        assert pool.allocation("200") is None
    assert [a.list() for a in site.agents] == [[], []]
    log = as_slurm_user.read_text()
    assert "check 200 %s" % (site.workdir / "psgw-route-200") in log  # asked before any gateway is taken
    assert "append 200 %s error_file" % (site.workdir / "JOB-200-psgw.err") in log  # the error file is tried too


def test_the_helper_writes_only_for_the_job_it_reads_from_slurm(site, as_slurm_user):
    """SlurmUser names a path of the job's user's but the job belongs to another uid: the helper, not running as
    root and not as that uid, refuses; and a path outside the job's directories is refused whoever runs it."""
    import subprocess
    site.record.write_text(squeue_text(site.workdir, uid=1234, gid=1234))
    proc = subprocess.run([str(site.helper), "write", "200", str(site.workdir / "x")], input=b"x",
                          capture_output=True, check=False)
    assert proc.returncode == 3 and not (site.workdir / "x").exists()
    assert "uid 1234 of job user 'alice' has no account" in proc.stderr.decode() or \
        "cannot write" in proc.stderr.decode()
    site.record.write_text(squeue_text(site.workdir))
    proc = subprocess.run([str(site.helper), "write", "200", "/etc/msa-evil"], input=b"x", capture_output=True,
                          check=False)
    assert proc.returncode == 3 and "gw_file: '/etc/msa-evil' is outside" in proc.stderr.decode()
    assert not os.path.exists("/etc/msa-evil")


def test_busy_pool_makes_the_prolog_fail_for_requeue_without_leaking_gateways(site):
    with P.GatewayPool(site.db) as pool:
        pool.sync(P.load_pool_file(site.argv[1])[0])
        pool.allocate("199", 1)
    code, _ = run(site, "prolog")
    assert code == slurm.REQUEUE
    err = (site.workdir / "JOB-200-psgw.err").read_text()
    assert "only 1 of 2 are free now (busy)" in err
    with P.GatewayPool(site.db) as pool:
        assert pool.allocation("200") is None and pool.counts()["free"] == 1
    assert [a.list() for a in site.agents] == [[], []]


def test_more_gateways_than_the_pool_has_is_reported_as_too_small(site):
    site.record.write_text(squeue_text(site.workdir, licenses="gateway:3"))
    assert run(site, "prolog")[0] == slurm.REQUEUE
    assert "(too_small)" in (site.workdir / "JOB-200-psgw.err").read_text()


def test_unreachable_agent_rolls_back_the_allocation_and_started_daemons(site):
    pool_file = pathlib.Path(site.argv[1])
    data = json.loads(pool_file.read_text())
    data["gateways"][1]["agent"] = "http://127.0.0.1:9"  # discard port: nothing listens
    pool_file.write_text(json.dumps(data))
    code, _ = run(site, "prolog")
    assert code == slurm.REQUEUE
    assert "unreachable" in (site.workdir / "JOB-200-psgw.err").read_text()
    assert [a.list() for a in site.agents] == [[], []]
    with P.GatewayPool(site.db) as pool:
        assert pool.allocation("200") is None


def test_jobs_without_a_gateway_request_and_later_components_are_left_alone(site):
    site.record.write_text(squeue_text(site.workdir, licenses="(null)", comment="(null)"))
    assert run(site, "prolog") == (0, "")
    site.record.write_text(squeue_text(site.workdir))
    code, out = run(site, "prolog", job="201")
    assert code == 0 and "later component" in out
    assert not (site.workdir / "psgw-route-200").exists()


def test_the_comment_may_ask_fewer_gateways_than_the_licences_never_more(site):
    site.record.write_text(squeue_text(site.workdir, comment="gw_num=1,gw_cleanup"))
    assert run(site, "prolog")[0] == 0
    assert len(R.read_routing_file(str(site.workdir / "psgw-route-200")).gateways) == 1
    assert run(site, "epilog")[0] == 0
    site.record.write_text(squeue_text(site.workdir, licenses="", comment="gw_num=1"))
    assert run(site, "prolog")[0] == slurm.REQUEUE
    err = (site.workdir / "JOB-200-psgw.err").read_text()
    assert "gw_num: 1 asks more gateways than the 0 gateway licences Slurm granted the job" in err
    with P.GatewayPool(site.db) as pool:
        assert pool.allocation("200") is None


@pytest.mark.parametrize("comment, message", [
    ("gw_plugin=/home/u/x.py", "gw_plugin: '/home/u/x.py' is not a bare name"),
    ("msa:gw_num=2;gw_plugin=os:system", "gw_plugin: 'os:system' is not a bare name"),
    ("gw_plugin=..", "gw_plugin: '..' is not a bare name"),
    ("gw_plugin=nosuch", "gw_plugin: unknown routing strategy 'nosuch'"),
    ("gw_file=/etc/cron.d/evil", "gw_file: '/etc/cron.d/evil' is outside the job user's home"),
    ("gw_file=../../x", "gw_file: '../../x' climbs out of its directory"),
    ("gw_num=2,gw_cleanup=perhaps", "gw_cleanup: 'perhaps' is not a boolean"),
])
def test_a_job_asking_what_it_may_not_is_refused_before_any_gateway_is_taken(site, comment, message):
    site.record.write_text(squeue_text(site.workdir, comment=comment))
    out, err = io.StringIO(), io.StringIO()
    (site.tmp / "ctl").mkdir()
    scontrol = fake_scontrol(site.tmp / "ctl")
    code = slurm.main(["prolog"] + site.argv + ["--scontrol", str(scontrol)], env={"SLURM_JOB_ID": "200"}, out=out,
                      err=err)
    assert code == slurm.REQUEUE
    # not requeued for ever: the job's Requeue flag is cleared and the refusal is its AdminComment
    [update] = (site.tmp / "ctl/scontrol.log").read_text().splitlines()
    assert update.startswith("update JobId=200 Requeue=0 AdminComment=refused: psgw: job 200 refused: ")
    assert message in update
    lines = (site.workdir / "JOB-200-psgw.err").read_text().splitlines()
    assert len(lines) == 1 and message in lines[0] and lines[0].startswith("psgw: job 200 refused: ")
    assert message in err.getvalue() and "Traceback" not in err.getvalue() + out.getvalue()
    assert [a.list() for a in site.agents] == [[], []]
    with P.GatewayPool(site.db) as pool:
        assert pool.allocation("200") is None
    assert not os.path.exists("/etc/cron.d/evil")


def test_bad_records_from_slurm_end_in_one_line_not_a_traceback(site):
    good = json.loads(squeue_text(site.workdir))
    for field, value, message in (("user_name", "root;id", "user_name 'root;id' is not a user name"),
                                  ("user_id", -1, "user_id: -1 is not a numeric id"),
                                  ("current_working_directory", "../x", "current_working_directory '../x' is not"),
                                  ("licenses", "gateway:lots", "licenses: 'gateway:lots' is not name[:count]"),
                                  ("nodes", "cluster[01-", "nodes 'cluster[01-'")):
        data = json.loads(json.dumps(good))
        data["jobs"][-2][field] = value  # the leader
        site.record.write_text(json.dumps(data))
        out, err = io.StringIO(), io.StringIO()
        assert slurm.main(["prolog"] + site.argv, env={"SLURM_JOB_ID": "200"}, out=out, err=err) == slurm.REQUEUE
        assert err.getvalue().count("\n") == 1 and message in err.getvalue(), err.getvalue()
        assert "Traceback" not in err.getvalue()
    data = json.loads(json.dumps(good))
    data["jobs"][0]["user_name"] = "not;a;user"   # another job's bad record is not this job's business
    site.record.write_text(json.dumps(data))
    assert run(site, "prolog")[0] == 0 and run(site, "epilog")[0] == 0
    err = io.StringIO()
    assert slurm.main(["prolog"] + site.argv, env={"SLURM_JOB_ID": "../1"}, out=out, err=err) == slurm.REQUEUE
    assert "SLURM_JOB_ID: '../1' is not a Slurm job id" in err.getvalue()


def _with_delayed_part(site, comment="msa:delay=1;delay_after=200", uid=UID, nodes="dam[01-02]", job_id=300):
    """The leader hetjob 200 and its delayed part (its own job on DAM, the booster side) in squeue's answer."""
    data = json.loads(squeue_text(site.workdir, comment="gw_file=routes.txt"))
    part = dict(next(j for j in data["jobs"] if j["job_id"] == 200), job_id=job_id, het_job_id=0, het_job_offset=0,
                partition="dam", nodes=nodes, licenses="", comment=comment, user_id=uid,
                user_name=pwd.getpwuid(uid).pw_name if uid == UID else "alice")
    data["jobs"].append(part)
    site.record.write_text(json.dumps(data))


def test_a_delayed_part_joins_its_leaders_routing_file_when_it_starts_and_leaves_at_its_end(site, as_slurm_user):
    _with_delayed_part(site)
    assert run(site, "prolog")[0] == 0
    route = site.workdir / "routes.txt"
    before = route.read_bytes()
    code, out = run(site, "prolog", job="300")
    assert code == 0, out
    after = route.read_bytes()
    assert after.startswith(before)   # the running leader's routes stay as they are
    table = R.read_routing_file(str(route))
    assert sorted(table.boosters) == ["booster01", "booster02", "booster03", "dam01", "dam02"]
    assert {(c, b) for _g, c, b in table.routes() if b.startswith("dam")} == {
        (c, b) for c in ("cluster01", "cluster02") for b in ("dam01", "dam02")}
    assert {g for g, _c, b in table.routes() if b.startswith("dam")} <= set(table.gateways)
    assert "4 routes of its nodes dam01 dam02 added to %s" % route in out
    assert "append 200 %s gw_file" % route in as_slurm_user.read_text()   # written as the leader's user
    code, out = run(site, "epilog", job="300")
    assert code == 0 and route.read_bytes() == before, out
    assert run(site, "epilog", job="300")[1] == ""   # once only


def test_a_delayed_part_of_another_user_or_without_a_leader_with_gateways_changes_no_routing_file(site):
    _with_delayed_part(site, uid=0 if UID else 1)
    assert run(site, "prolog")[0] == 0
    route = site.workdir / "routes.txt"
    before = route.read_bytes()
    code, out = run(site, "prolog", job="300")
    assert code == 0 and route.read_bytes() == before
    assert "job 300 not added to the routing file of its leader 200: its leader 200 belongs to" in out
    _with_delayed_part(site, comment="msa:delay=1;delay_after=250")   # a leader that holds no gateways
    assert run(site, "prolog", job="300") == (0, "")


# --------------------------------------------------------------------------- the gateways' forwarding of node pairs

NODES = {"cluster01": {"ib": "10.43.0.21"}, "cluster02": {"ib": "10.43.0.22"},
         "booster01": {"extoll": "10.44.0.41"}, "booster02": {"extoll": "10.44.0.42"},
         "booster03": {"extoll": "10.44.0.43"}, "dam01": {"extoll": "10.44.0.61"}, "dam02": {"extoll": "10.44.0.62"}}


def with_nodes(site, nodes=None):
    """The pool file with the compute nodes' fabric addresses: the prolog then opens forwarding per pair."""
    data = json.loads(site.pool_file.read_text())
    data["nodes"] = NODES if nodes is None else nodes
    site.pool_file.write_text(json.dumps(data))


def forwarded(site, job="200"):
    """``{gateway endpoint: {(cluster node, booster node)}}`` the agents forward, translated back to node names."""
    names = {a: n for n, fabrics in NODES.items() for a in fabrics.values()}
    return {"127.0.0.2:%d" % a.store.get(job)["port"]: {(names[c], names[b]) for c, b in a.forwarder.jobs[job]}
            for a in site.agents if job in a.forwarder.jobs}


def test_each_gateway_forwards_exactly_the_pairs_the_routing_file_routes_through_it(site):
    with_nodes(site)
    code, out = run(site, "prolog")
    assert code == 0, out
    table = R.read_routing_file(str(site.workdir / "psgw-route-200"))
    expected = {}
    for gw, c, b in table.routes():
        expected.setdefault(gw, set()).add((c, b))
    assert forwarded(site) == expected and sum(map(len, expected.values())) == 6
    assert "psgw: job 200: forwarding " in out
    gw01 = site.agents[0]
    gw01.forwarder.run.counters["job200_c2b"] = {"packets": 3, "bytes": 3000}
    code, out = run(site, "epilog")
    assert code == 0 and forwarded(site) == {}
    assert "gw01: no traffic; forwarded extoll->ib 0 bytes, ib->extoll 3000 bytes" in out
    report = json.loads((site.tmp / "reports" / "200.json").read_text())
    assert report["gateways"]["gw01"]["forwarded"]["ib->extoll"]["bytes"] == 3000


def test_without_node_addresses_no_pairs_are_sent(site):
    assert run(site, "prolog")[0] == 0
    assert forwarded(site) == {} and [len(a.list()) for a in site.agents] == [1, 1]


def test_a_node_without_an_address_fails_the_prolog_and_undoes_everything(site):
    with_nodes(site, {n: a for n, a in NODES.items() if n != "booster02"})
    code, _ = run(site, "prolog")
    assert code == slurm.REQUEUE
    err = (site.workdir / "JOB-200-psgw.err").read_text()
    assert "node booster02 has no extoll address in the pool file's nodes" in err
    assert [a.list() for a in site.agents] == [[], []] and forwarded(site) == {}
    with P.GatewayPool(site.db) as pool:
        assert pool.counts()["free"] == 2


def test_a_bad_node_address_in_the_pool_file_is_an_error_naming_it(site):
    with_nodes(site, dict(NODES, booster02={"extoll": "10.44.0.999"}))
    err = io.StringIO()
    assert slurm.main(["prolog"] + site.argv, env={"SLURM_JOB_ID": "200"}, out=io.StringIO(), err=err) == \
        slurm.REQUEUE
    assert "nodes.booster02.extoll: '10.44.0.999' is not an IP address" in err.getvalue()
    assert [a.list() for a in site.agents] == [[], []]


def test_a_delayed_part_adds_its_pairs_to_the_leaders_gateways_and_takes_them_away_at_its_end(site, as_slurm_user):
    with_nodes(site)
    _with_delayed_part(site)
    assert run(site, "prolog")[0] == 0
    before = set().union(*forwarded(site).values())
    assert run(site, "prolog", job="300")[0] == 0
    added = set().union(*forwarded(site).values()) - before
    assert added == {(c, b) for c in ("cluster01", "cluster02") for b in ("dam01", "dam02")}
    table = R.read_routing_file(str(site.workdir / "routes.txt"))
    assert all((c, b) in forwarded(site)[gw] for gw, c, b in table.routes())
    assert run(site, "epilog", job="300")[0] == 0
    assert set().union(*forwarded(site).values()) == before


@pytest.mark.parametrize("site", ["per-gateway"], indirect=True)
def test_the_controller_gives_each_agent_its_own_token_and_one_gateways_token_is_refused_by_the_other(site):
    code, out = run(site, "prolog")
    assert code == 0, out
    assert [len(a.list()) for a in site.agents] == [1, 1]
    # what root on gw01 holds (its own token) against gw02's agent: refused, and gw02's job left running
    client = RestClient(site.urls[1], token="tok-gw01", token_header="Authorization", retries=0)
    for method, path in (("DELETE", "/v1/jobs/200"), ("GET", "/v1/jobs"), ("POST", "/v1/jobs")):
        with pytest.raises(RestError) as refused:
            client.request(method, path, body={"job": "201", "port": 0} if method == "POST" else None)
        assert refused.value.status == 401, (method, path)
    assert [len(a.list()) for a in site.agents] == [1, 1]
    code, out = run(site, "epilog")
    assert code == 0, out
    assert [a.list() for a in site.agents] == [[], []]


@pytest.mark.parametrize("site", ["per-gateway"], indirect=True)
def test_a_token_file_without_a_gateways_token_fails_the_prolog_naming_it(site):
    (site.tmp / "token").write_text(json.dumps({"gw01": "tok-gw01"}))
    code, out = run(site, "prolog")
    assert code != 0 and "no token for gateway gw02" in out, out
    assert [a.list() for a in site.agents][1] == []
