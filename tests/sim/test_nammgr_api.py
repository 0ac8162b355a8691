# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

"""The NAM/GCE manager over HTTP on 127.0.0.1: auth, ownership, AAT and size errors, GCE fall-back, client CLI."""

import base64
import io
import json
import os
import pwd
import threading
import urllib.error
import urllib.request

import pytest

from msa_sim.nammgr import client as C
from msa_sim.nammgr import testing
from ansible_collections.msa.hpc.plugins.module_utils.node import nam_hooks as H
from tests.helpers import fake_scontrol, squeue_json

ME = pwd.getpwuid(os.getuid())

USERS = {"alice": ("user", "alice-pw"), "bob": ("user", "bob-pw"), "slurm": ("admin", "slurm-pw")}
CONF = """
[manager]
state_dir = {state}
users_file = {users}
aat_size = 2
admin_reserve_percent = 25
[nam:nam01]
node_id = 129
capacity = 1G
nonvolatile_capacity = 1G
[gce:gce01]
node_id = 130
"""


@pytest.fixture
def manager(tmp_path):
    served = testing.InProcess(testing.write_config(tmp_path, CONF, USERS))
    yield served.url
    served.stop()


def call(base, method, path, body=None, user="alice", headers=None):
    hdrs = dict(headers or {})
    if user:
        raw = ("%s:%s" % (user, USERS[user][1])).encode()
        hdrs["Authorization"] = "Basic " + base64.b64encode(raw).decode()
    req = urllib.request.Request(base + path, method=method, headers=hdrs,
                                 data=json.dumps(body).encode() if body is not None else None)
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_callers_without_valid_credentials_get_401_but_health_is_open(manager):
    assert call(manager, "GET", "/nam/allocations", user=None)[0] == 401
    bad = {"Authorization": "Basic " + base64.b64encode(b"alice:wrong").decode()}
    status, body = call(manager, "GET", "/nam/allocations", user=None, headers=bad)
    assert status == 401 and body["error"]["code"] == "unauthorized"
    assert call(manager, "GET", "/nam/allocations", user=None, headers={"Authorization": "Bearer x.y"})[0] == 401
    status, body = call(manager, "GET", "/health", user=None)
    assert status == 200 and body["schema_version"] == 2


def test_a_bearer_token_from_basic_auth_works_for_later_calls(manager):
    status, tok = call(manager, "POST", "/auth/token", {})
    assert status == 201 and tok["role"] == "user"
    status, body = call(manager, "POST", "/nam/allocations", {"size": "1M"}, user=None,
                        headers={"Authorization": "Bearer " + tok["token"]})
    assert status == 201 and body["owner"] == "alice"


def test_allocation_answers_its_placement_and_only_the_owner_may_touch_it(manager):
    status, alloc = call(manager, "POST", "/nam/allocations", {"size": "256M", "job": "7", "name": "scratch"})
    assert status == 201
    assert (alloc["device"], alloc["node_id"], alloc["offset"], alloc["size"]) == ("nam01", 129, 0, 256 << 20)
    path = "/nam/allocations/%d" % alloc["id"]
    for method, sub in (("GET", ""), ("DELETE", ""), ("POST", "/attach")):
        status, body = call(manager, method, path + sub, {"node": "esb01", "vpid": 1} if sub else None, user="bob")
        assert status == 403 and body["error"]["code"] == "not_owner", (method, sub)
    assert call(manager, "GET", "/nam/allocations", user="bob")[1]["allocations"] == []
    status, body = call(manager, "POST", "/nam/allocations", {"size": "1M", "owner": "alice"}, user="bob")
    assert status == 403
    assert call(manager, "GET", path, user="slurm")[0] == 200          # administrators may
    assert call(manager, "DELETE", path)[0] == 200
    status, body = call(manager, "GET", path)
    assert status == 404 and body["error"]["code"] == "not_found"


def test_a_full_aat_is_refused_with_409(manager):
    alloc = call(manager, "POST", "/nam/allocations", {"size": "1M"})[1]
    path = "/nam/allocations/%d/" % alloc["id"]
    assert call(manager, "POST", path + "attach", {"node": "esb01", "vpid": 0})[0] == 201
    assert call(manager, "POST", path + "attach", {"node": "esb01", "vpid": 0})[0] == 200
    assert call(manager, "POST", path + "attach", {"node": 17, "vpid": 1})[0] == 201
    status, body = call(manager, "POST", path + "attach", {"node": "esb02", "vpid": 0})
    assert status == 409 and body["error"]["code"] == "aat_full"
    assert call(manager, "POST", path + "detach", {"node": 17, "vpid": 1})[1] == {"detached": True}
    assert call(manager, "POST", path + "attach", {"node": "esb02", "vpid": 0})[1]["aat_index"] == 1


def test_a_request_larger_than_any_free_segment_says_what_is_left(manager):
    status, body = call(manager, "POST", "/nam/allocations", {"size": "2G"})
    assert status == 409 and body["error"]["code"] == "no_space"
    assert body["error"]["largest_free"] == 1 << 30 and "largest free segment is 1GiB" in body["error"]["message"]
    status, body = call(manager, "POST", "/nam/allocations", {"size": "1G"})
    assert status == 409 and "administrator reserve" in body["error"]["message"]
    assert call(manager, "POST", "/nam/allocations", {"size": "1G", "reserved": True})[0] == 403
    assert call(manager, "POST", "/nam/allocations", {"size": "1G", "reserved": True}, user="slurm")[0] == 201


def test_bad_input_is_answered_with_400_naming_the_field(manager):
    status, body = call(manager, "POST", "/nam/allocations", {"size": "12 parsecs"})
    assert status == 400 and "size: '12 parsecs'" in body["error"]["message"]
    status, body = call(manager, "POST", "/nam/allocations", {"size": "1M", "volatile": "yes"})
    assert status == 400 and "volatile" in body["error"]["message"]


def test_gce_communicators_fall_back_to_software_beyond_1024_processes(manager):
    status, body = call(manager, "POST", "/gce/communicators", {"size": 1025})
    assert status == 200 and body["fallback"] == "software" and "1024" in body["reason"]
    members = [{"node": "esb%02d" % (i // 4), "vpid": i % 4} for i in range(1024)]
    status, comm = call(manager, "POST", "/gce/communicators", {"members": members, "root": members[5],
                                                                "job": "9", "name": "world"})
    assert status == 201 and comm["size"] == 1024 and comm["fallback"] is None
    assert comm["limits_left"] == {"communicators": 255}
    status, body = call(manager, "POST", "/gce/communicators/%d/operations" % comm["id"],
                        {"op": "sum", "datatype": "float64", "size": 16 << 20})
    assert status == 200 and body["limit"] == "max_operation_size"
    assert call(manager, "DELETE", "/gce/communicators/%d" % comm["id"], user="bob")[0] == 403
    limits = call(manager, "GET", "/gce/limits")[1]
    assert limits["limits"]["max_communicators"] == 256 and limits["left"]["communicators"] == 255
    assert call(manager, "DELETE", "/gce/jobs/9")[1]["released"] == [comm["id"]]


def test_orphans_are_freed_only_by_administrators(manager):
    a = call(manager, "POST", "/nam/allocations", {"size": "1M", "job": "100"})[1]
    b = call(manager, "POST", "/nam/allocations", {"size": "1M", "job": "101"})[1]
    assert call(manager, "POST", "/nam/admin/orphans", {"live_jobs": ["101"]})[0] == 403
    status, body = call(manager, "POST", "/nam/admin/orphans", {"live_jobs": ["101"]}, user="slurm")
    assert status == 200 and body["freed"] == [a["id"]]
    assert call(manager, "GET", "/nam/allocations/%d" % b["id"])[0] == 200
    assert call(manager, "GET", "/nam/admin/check", user="slurm")[1] == {"ok": True, "problems": []}


def cli(manager, *argv, env=None, user="slurm"):
    out, err = io.StringIO(), io.StringIO()
    env = dict(env or {}, NAM_MANAGER_URL=manager, NAM_MANAGER_USER=user, NAM_MANAGER_PASSWORD=USERS[user][1],
               NAM_MANAGER_CLIENT_CONF="/nonexistent")
    rc = C.main(list(argv), env=env, out=out, err=err)
    return rc, out.getvalue(), err.getvalue()


def test_client_allocates_for_a_job_and_frees_it_idempotently(manager):
    rc, out, _ = cli(manager, "alloc", "--job", "55", "--user", "alice", "--size", "64M", "--name", "job55")
    assert rc == 0 and out.strip().isdigit()
    assert cli(manager, "alloc", "--job", "55", "--user", "alice", "--size", "64M", "--name", "job55")[1] == out
    rc, _, err = cli(manager, "alloc", "--job", "56", "--user", "alice", "--size", "64M", "--name", "job55")
    assert rc == 1 and "for job 55" in err
    assert call(manager, "GET", "/nam/allocations/%s" % out.strip())[1]["owner"] == "alice"
    rc, out, _ = cli(manager, "free-job", "--job", "55")
    assert rc == 0 and "freed 1 allocations (64MiB)" in out
    assert "freed 0 allocations" in cli(manager, "free-job", "--job", "55")[1]
    rc, _, err = cli(manager, "alloc", "--job", "1", "--user", "alice", "--size", "1.3", "--name", "x")
    assert rc == 1 and "--size: '1.3'" in err


@pytest.fixture
def job(tmp_path, monkeypatch):
    """A fake ``squeue --json`` on PATH answering for the job written with ``job(...)``; the job belongs
    to the user running the tests (its error file lands in the job's working directory)."""
    bin_dir, record, workdir = tmp_path / "bin", tmp_path / "job.json", tmp_path / "work"
    bin_dir.mkdir()
    workdir.mkdir()
    (bin_dir / "squeue").write_text("#!/bin/sh\ncat %s\n" % record)
    (bin_dir / "squeue").chmod(0o755)
    monkeypatch.setenv("PATH", "%s:%s" % (bin_dir, os.environ["PATH"]))

    def write(job_id, comment="", licenses=""):
        record.write_text(squeue_json({"job_id": int(job_id), "comment": comment, "licenses": licenses},
                                            user_name=ME.pw_name, user_id=ME.pw_uid, group_id=ME.pw_gid,
                                            current_working_directory=str(workdir)))
        return workdir / ("JOB-%s-nam.err" % job_id)
    return write


def hook(manager, action, job_id):
    env = {"SLURM_JOB_ID": str(job_id), "NAM_MANAGER_URL": manager, "NAM_MANAGER_USER": "slurm",
           "NAM_MANAGER_PASSWORD": USERS["slurm"][1], "NAM_MANAGER_CLIENT_CONF": "/nonexistent"}
    return cli(manager, action, env=env)


def test_prolog_allocates_the_exact_size_of_a_packjob_comment_and_epilog_frees_it(manager, job):
    # msa.hpc.slurm_packjob asks Slurm for whole GiB licences and puts the exact size in the comment
    job(77, "msa:gw_num=1;nam_bytes=%d;gce=1" % (100 << 20), "gateway:1,nam:1,gce:1")
    rc, out, err = hook(manager, "prolog", 77)
    assert rc == 0 and "100MiB" in out, err
    allocs = call(manager, "GET", "/nam/jobs/77", user="slurm")[1]["allocations"]
    assert [(a["name"], a["size"], a["owner"]) for a in allocs] == [("slurm-77", 100 << 20, ME.pw_name)]
    assert hook(manager, "prolog", 77)[0] == 0                  # a second prolog run reuses it
    assert len(call(manager, "GET", "/nam/jobs/77", user="slurm")[1]["allocations"]) == 1
    rc, out, _ = hook(manager, "epilog", 77)
    assert rc == 0 and call(manager, "GET", "/nam/jobs/77", user="slurm")[1]["allocations"] == []


def test_prolog_reads_a_handwritten_request_and_fails_the_job_when_the_nam_is_full(manager, job):
    job(78, "gw_num=2,nam=512M,nam_nonvolatile", "nam:1")
    assert hook(manager, "prolog", 78)[0] == 0
    alloc = call(manager, "GET", "/nam/jobs/78", user="slurm")[1]["allocations"][0]
    assert alloc["volatile"] is False and alloc["size"] == 512 << 20
    err_file = job(79, "nam=2G", "nam:2")
    rc, _, err = hook(manager, "prolog", 79)
    assert rc == C.REQUEUE and "no contiguous free segment" in err
    assert "no contiguous free segment" in err_file.read_text()
    job(80, "none")
    assert hook(manager, "prolog", 80)[0] == 0


@pytest.mark.parametrize("comment, licenses, message", [
    ("nam=2G", "nam:1", "nam: 2GiB (2147483648 bytes) is more than the 1 nam licence (1GiB) Slurm granted the job"),
    ("msa:nam_bytes=1073741825", "nam:1", "is more than the 1 nam licence"),
    ("nam=1G", "", "nam: 1GiB (1073741824 bytes) is more than the 0 nam licences (none)"),
    ("gce=1", "nam:1", "gce: '1' asks for the GCE but Slurm granted the job no gce licence"),
    ("msa:gce=1", "", "no gce licence"),
    ("nam_nonvolatile", "", "nam_nonvolatile: True is given but the job has no NAM"),
    ("nam=lots", "nam:1", "nam: 'lots' is not a size"),
])
def test_the_prolog_refuses_more_than_the_licences_slurm_granted(manager, job, comment, licenses, message):
    err_file = job(90, comment, licenses)
    rc, out, err = hook(manager, "prolog", 90)
    assert rc == C.REQUEUE and message in err and "Traceback" not in err + out
    lines = err_file.read_text().splitlines()
    assert len(lines) == 1 and lines[0].startswith("nam: job 90 refused: ") and message in lines[0]
    assert call(manager, "GET", "/nam/jobs/90", user="slurm")[1]["allocations"] == []


def test_a_refused_job_is_not_requeued_and_carries_the_refusal(manager, job, tmp_path):
    job(91, "gce=1", "")
    fake_scontrol(tmp_path)
    env = {"SLURM_JOB_ID": "91"}
    out, err = io.StringIO(), io.StringIO()
    env.update(NAM_MANAGER_URL=manager, NAM_MANAGER_USER="slurm", NAM_MANAGER_PASSWORD=USERS["slurm"][1],
               NAM_MANAGER_CLIENT_CONF="/nonexistent")
    assert H.main(["--scontrol", str(tmp_path / "scontrol"), "prolog"], env=env, out=out, err=err) == H.REQUEUE
    log = (tmp_path / "scontrol.log").read_text().splitlines()
    assert log == ["update JobId=91 Requeue=0 AdminComment=refused: nam: job 91 refused: gce: '1' asks for the GCE "
                   "but Slurm granted the job no gce licence (ask with --licenses=gce:1)"]
    assert "job 91: not requeued, the refusal is its AdminComment" in err.getvalue()


def test_a_nam_license_counts_one_gib_when_the_comment_has_no_size(job):
    from ansible_collections.msa.hpc.plugins.module_utils.slurm import jobs as S
    from ansible_collections.msa.hpc.plugins.module_utils.node.nam_hooks import nam_request
    job(81, "msa:gw_num=2", "nam:3,gce:1")
    records = S.read_job("81")
    assert nam_request(records) == {"size": 3 << 30, "volatile": True, "name": "slurm-81", "device": None,
                                    "gce": False}
    job(81, "msa:gce=1;nam_bytes=1536", "nam:3,gce:1")
    assert nam_request(S.read_job("81"))["size"] == 1536
    job(81, "msa:gce=1", "gce:1")
    assert nam_request(S.read_job("81")) == {"size": 0, "volatile": True, "name": "slurm-81", "device": None,
                                             "gce": True}


def test_the_allocation_is_named_after_the_job_whatever_the_comment_says(job):
    from ansible_collections.msa.hpc.plugins.module_utils.slurm import jobs as S
    from ansible_collections.msa.hpc.plugins.module_utils.node.nam_hooks import nam_request
    # a comment written before job_submit.lua refused nam_name: another job's name is not squatted
    job(82, "nam=1G,nam_name=slurm-81", "nam:1")
    assert nam_request(S.read_job("82"))["name"] == "slurm-82"


def test_epilog_never_fails_even_when_the_manager_is_away():
    out, err = io.StringIO(), io.StringIO()
    env = {"SLURM_JOB_ID": "5", "NAM_MANAGER_URL": "http://127.0.0.1:9", "NAM_MANAGER_CLIENT_CONF": "/nonexistent"}
    assert C.main(["--timeout", "1", "--retries", "0", "epilog"], env=env, out=out, err=err) == 0
    assert "nam epilog: job 5: " in out.getvalue() and "127.0.0.1:9" in out.getvalue()
    assert "Connection refused" in out.getvalue() and "an orphan sweep frees it later" in out.getvalue()


def test_concurrent_clients_never_get_overlapping_segments(manager):
    answers, errors = [], []

    def worker(n):
        for i in range(15):
            status, body = call(manager, "POST", "/nam/allocations", {"size": (n + i % 3 + 1) << 20, "job": str(n)})
            (answers if status == 201 else errors).append(body)
            if status == 201 and i % 4 == 0:
                call(manager, "DELETE", "/nam/allocations/%d" % body["id"])
                answers.remove(body)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(answers) == 6 * 11
    spans = sorted((a["offset"], a["offset"] + a["size"]) for a in answers)
    assert all(end <= nxt for (_, end), (nxt, _) in zip(spans, spans[1:]))
    assert call(manager, "GET", "/nam/admin/check", user="slurm")[1] == {"ok": True, "problems": []}


def nam_health(tmp_path, url):
    """One run of msa-nam-hook health against ``url`` with an scontrol stand-in that knows nam:64 and gce:1."""
    scontrol = tmp_path / "scontrol"
    if not scontrol.exists():
        fake_scontrol(tmp_path, {"gateway": 2, "nam": 64, "gce": 1})
    (tmp_path / "client.conf").write_text("url=%s\n" % url)
    out, err = io.StringIO(), io.StringIO()
    code = H.main(["health", "--conf", str(tmp_path / "client.conf"), "--scontrol", str(scontrol),
                   "--health-timeout", "2"], env={}, out=out, err=err)
    state = tmp_path / "res.json"
    held = json.loads(state.read_text()).get(H.RESERVATION) if state.exists() else None
    return code, out.getvalue() + err.getvalue(), held


def test_health_holds_every_nam_and_gce_licence_while_the_manager_is_down_and_frees_them_when_it_answers(
        manager, tmp_path):
    assert nam_health(tmp_path, manager) == (0, "", None)
    code, said, held = nam_health(tmp_path, "http://127.0.0.1:9")  # nothing listens on the discard port
    assert code == 0 and held == "gce:1,nam:64"  # the gateways' licences are not the manager's
    assert said.startswith("nam health: the NAM/GCE manager is down (") and "msa_nam_down holds gce:1,nam:64" in said
    assert nam_health(tmp_path, "http://127.0.0.1:9") == (0, "", "gce:1,nam:64")  # no change, nothing said
    assert "update" not in (tmp_path / "scontrol.log").read_text()
    code, said, held = nam_health(tmp_path, manager)
    assert (code, held) == (0, None) and "reservation msa_nam_down removed" in said


def test_health_fails_naming_scontrol_when_it_cannot_hold_the_licences(tmp_path):
    (tmp_path / "scontrol").write_text("#!/bin/sh\necho 'slurm_load_licenses error: Unable to contact slurm "
                                       "controller' >&2\nexit 1\n")
    (tmp_path / "scontrol").chmod(0o755)
    code, said, held = nam_health(tmp_path, "http://127.0.0.1:9")
    assert code == 1 and held is None
    assert said.startswith("nam health: ") and "show licenses: slurm_load_licenses error" in said
