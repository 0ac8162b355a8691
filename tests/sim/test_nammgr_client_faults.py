# SPDX-License-Identifier: GPL-3.0-or-later
"""The NAM manager's client when the manager dies mid-answer, refuses, or stalls: ClientError, never a traceback."""
from __future__ import annotations

import http.client
import io
import os
import pwd
import stat

import pytest

from ansible_collections.msa.hpc.tests.unit.plugins.module_utils.faulty_http import FaultyServer, free_port
from msa_sim.nammgr import client as C
from tests.helpers import squeue_json

ALLOC = {"id": 3, "name": "slurm-42", "job": "42", "owner": "bob", "size": 1 << 20, "device": "nam01",
         "offset": 0, "volatile": True}


@pytest.fixture
def manager():
    srv = FaultyServer()
    yield srv
    srv.close()


@pytest.fixture(autouse=True)
def squeue(tmp_path, monkeypatch):
    """The hooks read the job with squeue --json: job 42 of this test's user asking 1M of NAM with one nam licence
    (the prolog writes the job's token file as the job's user, in its working directory)."""
    record = tmp_path / "job.json"
    record.write_text(squeue_json({"job_id": 42, "comment": "nam=1M", "licenses": "nam:1"},
                                  user_name=pwd.getpwuid(os.getuid()).pw_name, user_id=os.getuid(),
                                  group_id=os.getgid(), current_working_directory=str(tmp_path)))
    (tmp_path / "squeue").write_text("#!/bin/sh\ncat %s\n" % record)
    (tmp_path / "squeue").chmod(0o755)
    monkeypatch.setenv("PATH", "%s:%s" % (tmp_path, os.environ["PATH"]))


def prolog(url, *options):
    out, err = io.StringIO(), io.StringIO()
    env = {"SLURM_JOB_ID": "42", "NAM_MANAGER_URL": url, "NAM_MANAGER_CLIENT_CONF": "/nonexistent"}
    rc = C.main(list(options) + ["prolog"], env=env, out=out, err=err)
    return rc, out.getvalue(), err.getvalue()


def test_a_manager_killed_mid_answer_is_outcome_unknown_not_incomplete_read(manager):
    manager.script = ["half"]
    with pytest.raises(C.ClientError) as err:
        C.Client(manager.url, retries=0).call("POST", "/nam/allocations", {"size": 1})
    assert not isinstance(err.value, http.client.HTTPException)
    assert err.value.outcome == "unknown" and "lost the NAM manager at %s" % manager.url in str(err.value)


def test_the_prolog_requeues_with_a_sentence_when_the_manager_dies_mid_answer(manager):
    manager.script = ["half", "half"]      # the allocation, then the check whether it was made
    rc, _, err = prolog(manager.url, "--retries", "0")
    assert rc == C.REQUEUE
    # the collection's NAM hook (module_utils/node/nam_hooks) over RestClient: one line naming the job and the request
    assert err.startswith("nam prolog: job 42: POST /nam/allocations: ") and "answer was lost" in err
    assert "Traceback" not in err and err.count("\n") == 1
    assert "checking whether it was carried out failed too" in err
    assert manager.count("POST") == 1


TOKEN = ("answer", 201, {"token": "job.b3duZXI.sig", "owner": "x", "job": "42", "expires": 1})


def test_the_prolog_finds_the_allocation_its_lost_answer_made_and_does_not_allocate_twice(manager, tmp_path):
    manager.script = ["half", ("answer", 200, {"allocations": [dict(ALLOC, job="41"), ALLOC]}), TOKEN]
    rc, out, err = prolog(manager.url)
    assert rc == 0 and "allocation 3 of 1MiB on nam01" in out, err
    assert manager.count("POST", "/nam/allocations") == 1
    assert manager.count("GET", "/nam/allocations?name=slurm-42") == 1
    # the job's token for its own code, readable by the job's user only
    token = tmp_path / ".msa-nam-42.token"
    assert token.read_text() == "job.b3duZXI.sig\n" and stat.S_IMODE(token.stat().st_mode) == 0o600


def test_the_prolog_allocates_again_when_the_lost_post_made_nothing(manager):
    manager.script = ["drop", ("answer", 200, {"allocations": []}), ("answer", 201, ALLOC), TOKEN]
    assert prolog(manager.url)[0] == 0
    assert [(m, p) for m, p, _ in manager.seen] == [("POST", "/nam/allocations"), ("GET", "/nam/allocations?name=slurm-42"),
                                                    ("POST", "/nam/allocations"), ("POST", "/auth/job-token")]


def test_a_refused_connection_is_not_done():
    url = "http://127.0.0.1:%d" % free_port()
    with pytest.raises(C.ClientError) as err:
        C.Client(url, retries=1, sleep=lambda s: None).call("GET", "/nam/devices")
    assert err.value.outcome == "not_done" and "cannot reach the NAM manager at %s" % url in str(err.value)


def test_a_stall_after_the_request_is_outcome_unknown(manager):
    manager.script = ["stall"]
    with pytest.raises(C.ClientError) as err:
        C.Client(manager.url, timeout=0.3, retries=2, sleep=lambda s: None).call("POST", "/nam/allocations", {})
    assert err.value.outcome == "unknown" and "timed out" in str(err.value)
    assert manager.count("POST") == 1


def test_an_answer_of_the_manager_keeps_its_status_and_code(manager):
    manager.script = [("answer", 409, {"error": {"code": "no_space", "message": "no contiguous free segment"}})]
    with pytest.raises(C.ClientError) as err:
        C.Client(manager.url).call("POST", "/nam/allocations", {})
    assert (err.value.status, err.value.code, err.value.outcome) == (409, "no_space", None)
    assert str(err.value) == "POST /nam/allocations: HTTP 409: no contiguous free segment"


def test_the_epilog_frees_again_when_the_answer_of_the_free_was_lost(manager, tmp_path):
    (tmp_path / ".msa-nam-42.token").write_text("job.x.y\n")
    manager.script = [("answer", 200, {"job": "42", "revoked": True, "detached": 2}), "drop",
                      ("answer", 200, {"freed": [3], "bytes": 1 << 20, "kept": []}), ("answer", 200, {"released": []})]
    out, err = io.StringIO(), io.StringIO()
    env = {"SLURM_JOB_ID": "42", "NAM_MANAGER_URL": manager.url, "NAM_MANAGER_CLIENT_CONF": "/nonexistent"}
    assert C.main(["epilog"], env=env, out=out, err=err) == 0
    assert "freed allocations [3] (1MiB)" in out.getvalue(), err.getvalue()
    # the job's token revoked before anything else
    assert manager.seen[0][:2] == ("DELETE", "/auth/job-token/42")
    assert "job 42: token revoked, 2 AAT entries removed" in out.getvalue()
    # volatile allocations freed, non-volatile ones kept for the owner's next job; the token file removed
    assert manager.count("DELETE", "/nam/jobs/42?keep=nonvolatile") == 2 and manager.count("DELETE", "/gce/jobs/42") == 1
    assert not (tmp_path / ".msa-nam-42.token").exists()
