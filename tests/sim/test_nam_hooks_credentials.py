# SPDX-License-Identifier: GPL-3.0-or-later
"""The collection's NAM hooks (module_utils/node/nam_hooks) and a job's credentials (issue 34): the prolog records
what Slurm granted the job with its token, the epilog revokes it, and the sweep hands the manager the live jobs."""
from __future__ import annotations

import io
import json
import os
import pwd
import subprocess
import time

import pytest

from msa_sim.nammgr import testing
from msa_sim.nammgr.api import Handler
from ansible_collections.msa.hpc.plugins.module_utils.node import nam_hooks as H
from ansible_collections.msa.hpc.plugins.module_utils.slurm import jobs as S
from tests.helpers import squeue_json
from tests.sim.test_nammgr_grants import CONF, USERS, call

ME = pwd.getpwuid(os.getuid())


@pytest.fixture
def served(tmp_path):
    server = testing.InProcess(testing.write_config(tmp_path, CONF, USERS))
    (tmp_path / "client.conf").write_text("url=%s\nuser=slurm\npassword=%s\n" % (server.url, USERS["slurm"][1]))
    yield server
    server.stop()


@pytest.fixture
def squeue(tmp_path):
    """A ``squeue`` answering ``squeue --json`` with the jobs written by ``squeue(...)`` (of the test's user)."""
    record, script = tmp_path / "jobs.json", tmp_path / "squeue"
    script.write_text("#!/bin/sh\ncat %s\n" % record)
    script.chmod(0o755)
    (tmp_path / "work").mkdir()

    def write(*components, **common):
        record.write_text(squeue_json(*components, **dict(
            dict(user_name=ME.pw_name, user_id=ME.pw_uid, group_id=ME.pw_gid,
                 current_working_directory=str(tmp_path / "work")), **common)))
        return str(script)
    return write


def hook(tmp_path, action, job_id, squeue_cmd, *extra):
    out, err = io.StringIO(), io.StringIO()
    code = H.main([action, "--conf", str(tmp_path / "client.conf"), "--squeue", squeue_cmd] + list(extra),
                  env={"SLURM_JOB_ID": str(job_id)}, out=out, err=err)
    return code, out.getvalue() + err.getvalue()


def test_the_grant_counts_cpus_with_nam_gce_licences_and_the_time_limit():
    comps = [{"uid": 5, "cpus": 2, "time_limit": 10, "licenses": {"nam": 2, "gce": 3}},
             {"uid": 5, "cpus": 4, "time_limit": 30, "licenses": {"nam": 2, "gce": 3}}]
    assert H.job_grant(comps, grace=60) == {"uid": 5, "aat_entries": 6, "communicators": 3, "ttl": 30 * 60 + 60}
    gce_only = [{"uid": 5, "cpus": 8, "time_limit": None, "licenses": {"gce": 1}}]
    assert H.job_grant(gce_only) == {"uid": 5, "aat_entries": 0, "communicators": 1, "ttl": None}


def test_the_record_reads_cpus_and_time_limit_and_unlimited_as_none():
    rec = S.parse_jobs(squeue_json({"job_id": 70, "cpus": 3, "time_limit": 15}), 70)[0]
    assert (rec["cpus"], rec["time_limit"]) == (3, 15)
    unlimited = {"set": True, "infinite": True, "number": 0}
    rec = S.parse_jobs(squeue_json({"job_id": 70, "cpus": None, "time_limit": unlimited}), 70)[0]
    assert (rec["cpus"], rec["time_limit"]) == (None, None)


def test_the_prolog_records_the_grant_and_the_epilog_revokes_the_jobs_token(served, squeue, tmp_path):
    cmd = squeue({"job_id": 71, "comment": "msa:nam_bytes=%d;gce=1" % (1 << 20), "licenses": "nam:1,gce:2",
                  "cpus": 3, "time_limit": 10})
    code, said = hook(tmp_path, "prolog", 71, cmd, "--token-grace", "60")
    assert code == 0, said
    grant = served.store.job_grant("71")
    assert (grant["owner"], grant["uid"], grant["aat_entries"], grant["communicators"]) == (ME.pw_name, ME.pw_uid,
                                                                                            3, 2)
    assert grant["expires"] == pytest.approx(time.time() + 660, abs=30)     # its time limit, not a day
    token = (tmp_path / "work" / ".msa-nam-71.token").read_text().strip()
    assert call(served.url, "GET", "/nam/allocations", token=token)[0] == 200
    code, said = hook(tmp_path, "epilog", 71, cmd)
    assert code == 0 and "job 71: token revoked" in said, said
    assert call(served.url, "GET", "/nam/allocations", token=token)[0] == 401
    assert not (tmp_path / "work" / ".msa-nam-71.token").exists()


def test_the_sweep_revokes_and_frees_what_ended_jobs_left_and_keeps_the_live(served, squeue, tmp_path):
    url = served.url
    for job in ("80", "81"):
        call(url, "POST", "/auth/job-token", {"owner": ME.pw_name, "job": job, "aat_entries": 1})
        call(url, "POST", "/nam/allocations", {"size": "1M", "owner": ME.pw_name, "job": job})
    nv = call(url, "POST", "/nam/allocations", {"size": "1M", "owner": ME.pw_name, "job": "81", "volatile": False})[1]
    cmd = squeue({"job_id": 80, "job_state": "RUNNING"}, job_id=80)
    code, said = hook(tmp_path, "sweep", 0, cmd, "--min-age", "0")
    assert code == 0 and "tokens of ended jobs ['81'] revoked" in said and "kept for their owners" in said, said
    left = {a["id"]: a for a in call(url, "GET", "/nam/allocations")[1]["allocations"]}
    assert sorted(a["job"] for a in left.values() if a["volatile"]) == ["80"]
    assert left[nv["id"]]["job"] is None                                       # non-volatile kept for its owner
    assert served.store.job_grant("80")["revoked"] is None and served.store.job_grant("81")["revoked"]
    code, said = hook(tmp_path, "sweep", 0, cmd, "--min-age", "0")
    assert code == 0 and said == ""                                            # nothing more to do, nothing said


def test_live_jobs_are_those_slurm_has_not_ended_with_their_leaders():
    text = squeue_json({"job_id": 90, "job_state": "RUNNING"}, {"job_id": 91, "job_state": ["COMPLETING"]})
    fake = lambda argv, **kw: subprocess.CompletedProcess(argv, 0, text, "")  # noqa: E731
    live = H.live_jobs("squeue", run=fake)
    assert {"90", "91"} <= set(live)
    ended = {str(j["job_id"]) for j in json.loads(text)["jobs"] if j["job_state"] in ("CANCELLED", "COMPLETED")}
    assert ended and not ended & set(live)                       # the fixture's cancelled jobs are not live
    failing = lambda argv, **kw: subprocess.CompletedProcess(argv, 1, "", "Unable to contact slurm controller")  # noqa
    with pytest.raises(H.HookError, match="cannot list the jobs with squeue: Unable to contact"):
        H.live_jobs("squeue", run=failing)


def test_a_sweep_that_cannot_list_the_jobs_frees_nothing(served, tmp_path):
    call(served.url, "POST", "/nam/allocations", {"size": "1M", "owner": ME.pw_name, "job": "95"})
    (tmp_path / "broken").write_text("#!/bin/sh\necho 'slurm_load_jobs error' >&2\nexit 1\n")
    (tmp_path / "broken").chmod(0o755)
    code, said = hook(tmp_path, "sweep", 0, str(tmp_path / "broken"), "--min-age", "0")
    assert code == 1 and "cannot list the jobs" in said
    assert len(call(served.url, "GET", "/nam/allocations")[1]["allocations"]) == 1


def test_the_epilog_frees_even_when_the_manager_cannot_revoke(served, squeue, tmp_path):
    """A manager without the revocation (an older one) still gets the job's allocations freed."""
    cmd = squeue({"job_id": 96, "comment": "msa:nam_bytes=%d" % (1 << 20), "licenses": "nam:1", "time_limit": 5})
    assert hook(tmp_path, "prolog", 96, cmd)[0] == 0
    route = next(r for r in Handler.routes if r[1].pattern == "^/auth/job-token/([^/]+)$")
    Handler.routes.remove(route)
    try:
        code, said = hook(tmp_path, "epilog", 96, cmd)
    finally:
        Handler.routes.insert(0, route)
    assert code == 0 and "job 96: token not revoked: " in said and "the sweep revokes it sooner" in said, said
    assert "freed allocations [" in said
    assert call(served.url, "GET", "/nam/jobs/96")[1]["allocations"] == []
