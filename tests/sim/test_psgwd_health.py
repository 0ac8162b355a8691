# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

"""A gateway whose agent stops answering leaves the pool and Slurm's licences, and returns when it answers again."""

import io
import json
import os
import pathlib
import pwd
import threading
import types

import pytest

from ansible_collections.msa.hpc.plugins.module_utils import _gw_pool as P
from msa_sim.psgwd import slurm
from msa_sim.psgwd.agent import Agent, AgentServer
from tests.helpers import fake_scontrol, interfaces_up, squeue_json

ROOT = pathlib.Path(__file__).resolve().parents[2]
DEAD = "http://127.0.0.1:9"  # discard port: nothing listens

def job_record(workdir, licenses):
    common = {"user_name": pwd.getpwuid(os.getuid()).pw_name, "user_id": os.getuid(), "group_id": os.getgid(),
              "current_working_directory": str(workdir), "comment": ""}
    return squeue_json({"job_id": 300, "partition": "cm", "nodes": "cluster01", "licenses": licenses},
                             {"partition": "esb", "nodes": "booster01", "licenses": ""}, **common)


@pytest.fixture
def site(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT / "sim"), str(ROOT / "collections")]))
    servers, urls = [], []
    for name in ("gw01", "gw02"):
        agent = Agent(name, [("ib", "127.0.0.2"), ("extoll", "127.0.0.3")], str(tmp_path / name),
                      str(tmp_path / name / "run"),
                      interfaces=interfaces_up("127.0.0.2", "127.0.0.3"))
        server = AgentServer(("127.0.0.1", 0), agent, "tok")
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True).start()
        servers.append((server, agent))
        urls.append("http://127.0.0.1:%d" % server.server_address[1])
    workdir = tmp_path / "work"
    workdir.mkdir()
    (tmp_path / "token").write_text("tok\n")
    job = tmp_path / "job.txt"
    job.write_text(job_record(workdir, "gateway:1"))
    scontrol = fake_scontrol(tmp_path)
    squeue = tmp_path / "squeue"
    squeue.write_text("#!/bin/sh\ncat %s\n" % job)
    squeue.chmod(0o755)
    pool_file = tmp_path / "pool.json"

    def agents(*alive):
        pool_file.write_text(json.dumps({"route_fabric": "ib", "cluster_partitions": ["cm"], "gateways": [
            {"name": name, "addresses": {"ib": "127.0.0.2", "extoll": "127.0.0.3"},
             "agent": url if name in alive else DEAD} for name, url in zip(("gw01", "gw02"), urls)]}))
    agents("gw01", "gw02")
    argv = ["--pool-file", str(pool_file), "--db", str(tmp_path / "pool.db"), "--token-file", str(tmp_path / "token"),
            "--scontrol", str(scontrol), "--squeue", str(squeue), "--report-dir", str(tmp_path / "reports"), "--health-timeout", "2"]
    yield types.SimpleNamespace(argv=argv, agents=agents, job=job, workdir=workdir, tmp=tmp_path,
                                db=str(tmp_path / "pool.db"))
    for server, agent in servers:
        for rec in agent.store.all():
            agent.stop(rec["job"])
        server.shutdown()
        server.server_close()


def run(site, action):
    out = io.StringIO()
    code = slurm.main([action] + site.argv, env={"SLURM_JOB_ID": "300"}, out=out)
    return code, out.getvalue()


def reservation(site):
    path = site.tmp / "res.json"
    return json.loads(path.read_text()).get(slurm.RESERVATION) if path.exists() else None


def states(site):
    with P.GatewayPool(site.db) as pool:
        return {g["name"]: g["state"] for g in pool.gateways()}


def test_health_takes_a_dead_gateway_out_of_the_pool_and_its_licence_out_of_slurm(site):
    assert run(site, "health") == (0, "")
    assert reservation(site) is None
    site.agents("gw02")
    code, out = run(site, "health")
    assert code == 0
    assert "gateway gw01 is down (unreachable: agent %s unreachable" % DEAD in out
    assert states(site) == {"gw01": "down", "gw02": "up"}
    assert reservation(site) == "gateway:1"
    assert run(site, "health") == (0, "")  # nothing changed: no scontrol update either
    assert "update" not in (site.tmp / "scontrol.log").read_text()


def test_a_job_is_given_the_live_gateway_even_before_the_timer_noticed(site):
    site.agents("gw02")  # gw01 would come first by LRU order
    code, out = run(site, "prolog")
    assert code == 0, out
    with P.GatewayPool(site.db) as pool:
        assert [g["name"] for g in pool.allocation("300")["gateways"]] == ["gw02"]
    assert run(site, "epilog")[0] == 0


def test_too_few_live_gateways_requeue_the_job_naming_the_dead_one(site):
    site.job.write_text(job_record(site.workdir, "gateway:2"))
    site.agents("gw02")
    assert run(site, "prolog")[0] == slurm.REQUEUE
    err = (site.workdir / "JOB-300-psgw.err").read_text()
    assert "(busy); not available: gw01 (down unreachable" in err
    with P.GatewayPool(site.db) as pool:
        assert pool.allocation("300") is None


def test_a_gateway_that_answers_again_returns_to_the_pool_and_its_licence_to_slurm(site):
    site.agents("gw02")
    run(site, "health")
    site.agents("gw01", "gw02")
    code, out = run(site, "health")
    assert code == 0 and "gateway gw01 is up" in out
    assert states(site) == {"gw01": "up", "gw02": "up"}
    assert reservation(site) is None
    site.job.write_text(job_record(site.workdir, "gateway:2"))
    assert run(site, "prolog")[0] == 0
    assert run(site, "epilog")[0] == 0


def test_drained_gateways_keep_their_licences_reserved_until_put_back(site):
    with P.GatewayPool(site.db) as pool:
        pool.sync(P.load_pool_file(site.argv[1])[0])
        pool.set_state(["gw02"], "drain", "maintenance")
    run(site, "health")
    assert reservation(site) == "gateway:1" and states(site)["gw02"] == "drain"
    with P.GatewayPool(site.db) as pool:
        pool.set_state(["gw02"], "up")
    run(site, "health")
    assert reservation(site) is None
