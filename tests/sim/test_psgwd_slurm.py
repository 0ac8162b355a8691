# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

"""Slurm prolog/epilog for gateways against two psgw-agents on loopback and a recorded ``scontrol``."""

import io
import json
import os
import pathlib
import threading
import types

import pytest

from ansible_collections.msa.hpc.plugins.module_utils import _gw_pool as P
from ansible_collections.msa.hpc.plugins.module_utils import _gw_routing as R
from msa_sim.psgwd import pingpong, protocol as proto
from msa_sim.psgwd import slurm
from msa_sim.psgwd.agent import Agent, AgentServer

ROOT = pathlib.Path(__file__).resolve().parents[2]
UID, GID = os.getuid(), os.getgid()


def scontrol_text(workdir, licenses="gateway:2", comment="gw_plugin=booster,gw_cleanup", boosters="booster[01-03]",
                  uid=UID, gid=GID):
    user = "UserId=alice(%d) GroupId=alice(%d)" % (uid, gid)
    return (
        "JobId=200 HetJobId=200 HetJobOffset=0 JobName=hello %s Priority=1 Partition=cm JobState=CONFIGURING "
        "NodeList=cluster[01-02] BatchHost=cluster01 Licenses=%s Comment=%s WorkDir=%s\n"
        "JobId=201 HetJobId=200 HetJobOffset=1 JobName=hello %s Priority=1 Partition=esb JobState=CONFIGURING "
        "NodeList=%s BatchHost=booster01 Licenses=(null) WorkDir=%s\n"
        % (user, licenses, comment, workdir, user, boosters, workdir))


@pytest.fixture
def site(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT / "sim"), str(ROOT / "collections")]))
    servers, agents = [], []
    for name in ("gw01", "gw02"):
        agent = Agent(name, [("ib", "127.0.0.2"), ("extoll", "127.0.0.3")], str(tmp_path / name),
                      str(tmp_path / name / "run"))
        server = AgentServer(("127.0.0.1", 0), agent, "tok")
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True).start()
        servers.append(server)
        agents.append(agent)
    pool_file = tmp_path / "pool.json"
    pool_file.write_text(json.dumps({"route_fabric": "ib", "cluster_partitions": ["cm"], "gateways": [
        {"name": a.name, "addresses": {"ib": "127.0.0.2", "extoll": "127.0.0.3"},
         "agent": "http://127.0.0.1:%d" % s.server_address[1]} for a, s in zip(agents, servers)]}))
    (tmp_path / "token").write_text("tok\n")
    workdir = tmp_path / "work"
    workdir.mkdir()
    scontrol = tmp_path / "scontrol"
    record = tmp_path / "scontrol.out"
    record.write_text(scontrol_text(workdir))
    scontrol.write_text("#!/bin/sh\ncat %s\n" % record)
    scontrol.chmod(0o755)
    argv = ["--pool-file", str(pool_file), "--db", str(tmp_path / "pool.db"), "--token-file",
            str(tmp_path / "token"), "--scontrol", str(scontrol), "--report-dir", str(tmp_path / "reports")]
    yield types.SimpleNamespace(argv=argv, workdir=workdir, record=record, tmp=tmp_path, agents=agents,
                                db=str(tmp_path / "pool.db"))
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


def test_prolog_starts_daemons_writes_the_routing_file_and_epilog_undoes_it(site):
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
    data = pingpong.payload(200_000, 1)
    res = proto.send_message(gateway, proto.envelope("200", "cluster02", "booster03", receiver_addr, len(data),
                                                     30_000, proto.digest(data)), data)
    t.join(10)
    lsock.close()
    assert side == "cluster" and res["match"] and results[0]["match"]

    code, out = run(site, "epilog")
    assert code == 0
    assert not route.exists()  # gw_cleanup was asked
    assert [a.list() for a in site.agents] == [[], []]
    with P.GatewayPool(site.db) as pool:
        assert pool.counts()["free"] == 2
    report = json.loads((site.tmp / "reports" / "200.json").read_text())
    moved = sum(((s or {}).get("directions", {}).get("ib->extoll", {}).get("bytes", 0))
                for s in report["gateways"].values())
    assert moved == 200_000
    assert "ib->extoll 200000 bytes" in out


def test_epilog_keeps_the_routing_file_without_cleanup_and_runs_twice_harmlessly(site):
    site.record.write_text(scontrol_text(site.workdir, comment="gw_file=routes.txt"))
    assert run(site, "prolog")[0] == 0
    assert (site.workdir / "routes.txt").exists()
    assert run(site, "epilog")[0] == 0
    assert run(site, "epilog")[0] == 0
    assert (site.workdir / "routes.txt").exists()


HELPER = ROOT / "collections/ansible_collections/msa/hpc/roles/gateway/files/msa-gw-userfile"


@pytest.fixture
def as_slurm_user(site, monkeypatch):
    """The hooks run as SlurmUser (uid 4242) for alice (uid 1234): a fake sudo records its arguments and runs the
    role's real helper."""
    monkeypatch.setattr(slurm.os, "geteuid", lambda: 4242)
    site.record.write_text(scontrol_text(site.workdir, uid=1234, gid=1234))
    bin_dir = site.tmp / "bin"
    bin_dir.mkdir()
    sudo = bin_dir / "sudo"
    sudo.write_text('#!/bin/sh\necho "$*" >> %s\n[ -e %s ] && { echo "sudo: a password is required" >&2; exit 1; }\n'
                    'shift 3\nexec "$@"\n' % (site.tmp / "sudo.log", site.tmp / "refuse"))
    sudo.chmod(0o755)
    monkeypatch.setenv("PATH", "%s:%s" % (bin_dir, os.environ["PATH"]))
    site.argv += ["--user-helper", str(HELPER)]
    return site.tmp / "sudo.log"


def test_hooks_running_as_slurm_user_write_and_remove_the_routing_file_as_the_job_user_through_sudo(
        site, as_slurm_user):
    code, out = run(site, "prolog")
    assert code == 0, out
    route = site.workdir / "psgw-route-200"
    assert len(R.read_routing_file(str(route)).gateways) == 2
    assert oct(route.stat().st_mode & 0o777) == "0o644"
    assert as_slurm_user.read_text().splitlines() == ["-n -u #1234 %s write %s" % (HELPER, route)]
    assert run(site, "epilog")[0] == 0
    assert not route.exists()  # gw_cleanup
    assert as_slurm_user.read_text().splitlines()[-1] == "-n -u #1234 %s remove %s" % (HELPER, route)
    assert not list(site.workdir.glob(".psgw-route-200.tmp*"))


def test_a_refused_sudo_fails_the_prolog_for_requeue_naming_the_file_and_frees_the_gateways(site, as_slurm_user):
    (site.tmp / "refuse").touch()
    code, _ = run(site, "prolog")
    assert code == slurm.REQUEUE
    assert not (site.workdir / "psgw-route-200").exists()
    with P.GatewayPool(site.db) as pool:
        assert pool.counts()["free"] == 2
    log = as_slurm_user.read_text()
    assert "write %s" % (site.workdir / "psgw-route-200") in log
    assert "append %s" % (site.workdir / "JOB-200-psgw.err") in log  # the error file is tried too


def test_the_helper_refuses_relative_paths_and_unknown_actions(tmp_path):
    import subprocess
    for argv, why in ((["write", "rel/path"], "not an absolute path"), (["chmod", str(tmp_path / "x")], "usage")):
        proc = subprocess.run([str(HELPER)] + argv, input=b"", capture_output=True, check=False)
        assert proc.returncode == 2 and why in proc.stderr.decode()


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
    site.record.write_text(scontrol_text(site.workdir, licenses="gateway:3"))
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
    site.record.write_text(scontrol_text(site.workdir, licenses="(null)", comment="(null)"))
    assert run(site, "prolog") == (0, "")
    site.record.write_text(scontrol_text(site.workdir))
    code, out = run(site, "prolog", job="201")
    assert code == 0 and "later component" in out
    assert not (site.workdir / "psgw-route-200").exists()


def test_gateway_count_from_the_comment_when_no_license_is_given(site):
    site.record.write_text(scontrol_text(site.workdir, licenses="(null)", comment="gw_num=1,gw_cleanup"))
    assert run(site, "prolog")[0] == 0
    assert len(R.read_routing_file(str(site.workdir / "psgw-route-200")).gateways) == 1
    assert run(site, "epilog")[0] == 0


@pytest.mark.parametrize("text, names", [
    ("cluster[01-03,07]", ["cluster01", "cluster02", "cluster03", "cluster07"]),
    ("a[1-2]b[08-09],c", ["a1b08", "a1b09", "a2b08", "a2b09", "c"]),
    ("(null)", []),
])
def test_slurm_host_lists_expand_like_scontrol(text, names):
    assert slurm.expand_hostlist(text) == names


def test_licenses_and_comment_options_parse():
    assert slurm.parse_licenses("nam:1,gateway:3", "gateway") == 3
    assert slurm.parse_licenses("gateway*2", "gateway") == 2
    assert slurm.parse_licenses("(null)", "gateway") == 0
    assert slurm.parse_comment("gw_file=/home/u/r.txt,gw_plugin=booster,gw_cleanup") == {
        "file": "/home/u/r.txt", "plugin": "booster", "cleanup": True}
    assert slurm.parse_comment("gw_cleanup=no")["cleanup"] is False
