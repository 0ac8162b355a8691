# SPDX-License-Identifier: GPL-3.0-or-later
"""Job credentials die with the job (issue 34): a job's token acts only while its grant is live, within what Slurm
granted it; non-volatile allocations have an owner quota and an expiry, and their owner lists and frees them; the
sweep revokes, frees and expires what ended jobs left. Store units, then the API over HTTP on 127.0.0.1."""
from __future__ import annotations

import json
import os
import sqlite3
import time

import io
import sys

import pytest

from msa_sim.nammgr import api, testing
from msa_sim.rma.testing import ROOT
from tests.sim.test_nammgr_api import CONF as API_CONF, USERS, call as api_call

sys.path.insert(0, os.path.join(ROOT, "sim", "nam_client"))
import msa_nam  # noqa: E402
from msa_sim.nammgr.store import SCHEMA_VERSION, Store, StoreError

UNIT = 4096
MIB = 1 << 20


def make_store(path=":memory:", **policy):
    store = Store(path, synchronous="off" if path == ":memory:" else "normal", granularity=UNIT)
    store.configure_nonvolatile(**policy)
    store.sync_devices([{"name": "nam01", "node_id": 129, "capacity": 64 * UNIT, "nonvolatile_capacity": 32 * UNIT,
                         "aat_size": 8, "reserve_percent": 0}], [{"name": "gce01", "node_id": 130}])
    return store


# ---------------------------------------------------------------------------------------------------- store units

def test_a_grant_keeps_its_serial_while_live_and_a_revoked_one_is_replaced():
    store = make_store()
    first = store.grant_job("7", "alice", 2, 1, time.time() + 60, uid=5001)
    assert store.job_token_valid("alice", "7", first["serial"])
    again = store.grant_job("7", "alice", 4, 1, time.time() + 60, uid=5001)     # the prolog run again
    assert again["serial"] == first["serial"] and again["aat_entries"] == 4
    assert not store.job_token_valid("bob", "7", first["serial"])
    assert store.revoke_job("7") == {"job": "7", "revoked": True, "detached": 0}
    assert not store.job_token_valid("alice", "7", first["serial"])
    assert store.revoke_job("7")["revoked"] is False                            # idempotent
    requeued = store.grant_job("7", "alice", 2, 1, time.time() + 60)
    assert requeued["serial"] != first["serial"] and store.job_token_valid("alice", "7", requeued["serial"])
    assert not store.job_token_valid("alice", "7", first["serial"])             # the earlier run's tokens stay dead
    store.grant_job("8", "alice", 1, 0, time.time() - 1)
    assert not store.job_token_valid("alice", "8", store.job_grant("8")["serial"])   # expired
    assert store.owner_uid("alice") == 5001 and store.owner_uid("bob") is None


def test_a_jobs_aat_entries_are_bounded_by_its_grant_and_die_with_it():
    store = make_store()
    store.grant_job("7", "alice", 2, 0, time.time() + 60)
    own = store.allocate(UNIT, owner="alice", job="7")
    kept = store.allocate(UNIT, volatile=False, owner="alice")        # an earlier job's non-volatile data
    store.attach(own["id"], "esb01", 1, "alice", job="7")
    assert store.attach(own["id"], "esb01", 1, "alice", job="7")[1] is False    # the same process again: no new entry
    store.attach(kept["id"], "esb01", 1, "alice", job="7")
    with pytest.raises(StoreError) as err:
        store.attach(own["id"], "esb02", 1, "alice", job="7")
    assert err.value.status == 403 and err.value.code == "beyond_grant"
    assert "job 7 may hold 2 AAT entries (aat_entries=2" in err.value.message and "holds 2 already" in err.value.message
    assert store.detach(kept["id"], "esb01", 1, "alice")
    store.attach(own["id"], "esb02", 1, "alice", job="7")
    store.attach(kept["id"], "dam01", 3, "alice")                     # not through a job's token: not counted
    assert store.revoke_job("7")["detached"] == 2
    assert [a["node"] for a in store.get(kept["id"])["attachments"]] == ["dam01"]
    assert store.get(own["id"])["attachments"] == []
    with pytest.raises(StoreError, match="job 9 may hold 0 AAT entries"):    # a job with no grant at all
        store.attach(own["id"], "esb01", 2, "alice", job="9")


def test_a_jobs_communicators_are_bounded_by_its_gce_licences():
    store = make_store()
    store.grant_job("7", "alice", 0, 1, time.time() + 60)
    comm, fb = store.create_communicator([("esb01", 0)], ("esb01", 0), "alice", job="7", limit_job="7")
    assert fb is None
    with pytest.raises(StoreError) as err:
        store.create_communicator([("esb01", 1)], ("esb01", 1), "alice", job="7", limit_job="7")
    assert err.value.code == "beyond_grant" and "2 GCE communicators" not in err.value.message
    assert "job 7 may hold 1 GCE communicators (communicators=1" in err.value.message
    store.release_communicator(comm["id"])
    assert store.create_communicator([("esb01", 1)], ("esb01", 1), "alice", job="7", limit_job="7")[1] is None


def test_non_volatile_allocations_are_bounded_per_owner_in_bytes_and_count():
    store = make_store(quota_bytes=8 * UNIT, quota_count=2)
    store.allocate(4 * UNIT, volatile=False, owner="alice")
    with pytest.raises(StoreError) as err:
        store.allocate(5 * UNIT, volatile=False, owner="alice", job="3")
    assert err.value.status == 409 and err.value.code == "quota"
    assert "owner alice holds 16KiB of non-volatile NAM; nonvolatile_quota=32KiB (32768 bytes) leaves 16KiB, " \
           "20KiB (20480 bytes) asked" in err.value.message
    store.allocate(4 * UNIT, volatile=False, owner="alice")
    with pytest.raises(StoreError, match="owner alice holds 2 non-volatile allocations; nonvolatile_quota_count=2"):
        store.allocate(UNIT, volatile=False, owner="alice")
    store.allocate(UNIT, volatile=False, owner="bob")                   # each owner has a quota of their own
    store.allocate(20 * UNIT, owner="alice")                            # volatile memory is Slurm's (licences)
    store.allocate(UNIT, volatile=False, owner="alice", reserved=True)  # an administrator's reserve allocation
    assert store.check() == []


def test_the_sweep_revokes_frees_keeps_and_expires_by_what_slurm_still_runs():
    store = make_store(lifetime=100)
    for job in ("1", "2", "3"):
        store.grant_job(job, "alice", 4, 1, time.time() + 600)
    live_vol = store.allocate(UNIT, owner="alice", job="1")
    dead_vol = store.allocate(UNIT, owner="alice", job="2")
    dead_nv = store.allocate(UNIT, volatile=False, owner="alice", job="2")
    old_nv = store.allocate(UNIT, volatile=False, owner="bob")
    store.attach(dead_nv["id"], "esb01", 1, "alice", job="2")
    store.db.execute("UPDATE allocations SET created=created-1000 WHERE id=?", (old_nv["id"],))
    assert store.get(old_nv["id"])["expires"] == pytest.approx(store.get(old_nv["id"])["created"] + 100)
    before = (store.allocations(), store.job_grant("2"))
    dry = store.sweep(["1"], dry_run=True)
    assert [a["id"] for a in dry["freed"]] == [dead_vol["id"]] and dry["revoked"] == ["2", "3"]
    assert (store.allocations(), store.job_grant("2")) == before                 # a dry run changes nothing
    done = store.sweep(["1"])
    assert [a["id"] for a in done["freed"]] == [dead_vol["id"]]
    assert [a["id"] for a in done["kept"]] == [dead_nv["id"]] and done["revoked"] == ["2", "3"]
    assert [a["id"] for a in done["expired"]] == [old_nv["id"]]
    left = {a["id"]: a for a in store.allocations()}
    assert set(left) == {live_vol["id"], dead_nv["id"]}
    assert left[dead_nv["id"]]["job"] is None and left[dead_nv["id"]]["attachments"] == []
    assert store.job_grant("1")["revoked"] is None and store.job_grant("2")["revoked"] is not None
    assert store.check() == []


def test_the_sweep_leaves_what_is_younger_than_min_age():
    store = make_store()
    store.grant_job("5", "alice", 1, 1, time.time() + 600)
    young = store.allocate(UNIT, owner="alice", job="5")
    store.create_communicator([("esb01", 0)], ("esb01", 0), "alice", job="5")
    done = store.sweep([], min_age=60)
    assert done == {"freed": [], "kept": [], "expired": [], "revoked": []}
    assert store.release_where(live_jobs=[], min_age=60) == []
    assert store.get(young["id"]) is not None and store.job_grant("5")["revoked"] is None
    assert [a["id"] for a in store.sweep([])["freed"]] == [young["id"]]


def test_a_version_1_state_is_upgraded_with_its_aat_entries_kept(tmp_path):
    path = str(tmp_path / "v1.db")
    store = make_store(path)
    alloc = store.allocate(UNIT, owner="alice", job="4")
    store.attach(alloc["id"], "esb01", 1, "alice")
    store.close()
    db = sqlite3.connect(path)       # what issue 33's manager left: no job column, no grants, version 1
    db.executescript("DROP INDEX attachments_job; ALTER TABLE attachments DROP COLUMN job; DROP TABLE job_grants; "
                     "DROP TABLE owners; UPDATE schema_version SET version=1;")
    db.close()
    store = Store(path, synchronous="normal", granularity=UNIT)
    assert store.schema_version() == SCHEMA_VERSION == 2
    assert [a["node"] for a in store.get(alloc["id"])["attachments"]] == ["esb01"]
    store.grant_job("4", "alice", 1, 0, time.time() + 60)
    assert store.check() == []


# ---------------------------------------------------------------------------------------------------- over HTTP

# test_nammgr_api's manager with room for the grants' AAT entries, no administrator reserve, and the site's limits
CONF = API_CONF.replace("aat_size = 2", "aat_size = 16").replace("admin_reserve_percent = 25", """\
admin_reserve_percent = 0
job_token_ttl = 7200
nonvolatile_quota = 64M
nonvolatile_quota_count = 2""")
assert "aat_size = 16" in CONF and "admin_reserve_percent = 0" in CONF, CONF


@pytest.fixture
def served(tmp_path):
    server = testing.InProcess(testing.write_config(tmp_path, CONF, USERS))
    yield server
    server.stop()


def call(base, method, path, body=None, user="slurm", token=None):
    """test_nammgr_api's call, as ``user`` (basic auth) or with a bearer ``token``."""
    if token:
        return api_call(base, method, path, body, user=None, headers={"Authorization": "Bearer " + token})
    return api_call(base, method, path, body, user=user)


def grant(url, job, **limits):
    body = dict({"owner": "alice", "job": job, "aat_entries": 2, "communicators": 1}, **limits)
    status, answer = call(url, "POST", "/auth/job-token", body)
    assert status == 201, answer
    return answer


def job_routes():
    """Every route a job's token opens, with a request for it (path ids filled in from ``ids``)."""
    return [(method, rx.pattern) for method, rx, _, open_route, job_ok in api.Handler.routes if job_ok]


def test_a_revoked_jobs_token_is_refused_on_every_route_it_opened(served):
    url = served.url
    tok = grant(url, "21")["token"]
    alloc = call(url, "POST", "/nam/allocations", {"size": "1M", "owner": "alice", "job": "21", "name": "slurm-21"})[1]
    comm = call(url, "POST", "/gce/communicators", {"members": [{"node": "esb01", "vpid": 0}]}, token=tok)[1]
    requests = {("GET", "^/nam/allocations$"): ("/nam/allocations", None),
                ("GET", "^/nam/allocations/([^/]+)$"): ("/nam/allocations/%d" % alloc["id"], None),
                ("POST", "^/nam/allocations/([^/]+)/attach$"): ("/nam/allocations/%d/attach" % alloc["id"],
                                                               {"node": "esb01", "vpid": 7}),
                ("POST", "^/nam/allocations/([^/]+)/detach$"): ("/nam/allocations/%d/detach" % alloc["id"],
                                                               {"node": "esb01", "vpid": 7}),
                ("POST", "^/nam/allocations/([^/]+)/access$"): ("/nam/allocations/%d/access" % alloc["id"], {}),
                ("GET", "^/gce/limits$"): ("/gce/limits", None),
                ("POST", "^/gce/communicators$"): ("/gce/communicators", {"members": [{"node": "esb01", "vpid": 1}]}),
                ("GET", "^/gce/communicators$"): ("/gce/communicators", None),
                ("GET", "^/gce/communicators/([^/]+)$"): ("/gce/communicators/%d" % comm["id"], None),
                ("POST", "^/gce/communicators/([^/]+)/access$"): ("/gce/communicators/%d/access" % comm["id"], {}),
                ("DELETE", "^/gce/communicators/([^/]+)$"): ("/gce/communicators/%d" % comm["id"], None)}
    assert set(job_routes()) == set(requests)        # a route opened to jobs later must be added here
    before = {key: call(url, key[0], path, body, token=tok)[0] for key, (path, body) in requests.items()
              if key[0] == "GET"}
    assert set(before.values()) == {200}             # the token works while the job runs
    attach = requests[("POST", "^/nam/allocations/([^/]+)/attach$")]
    assert call(url, "POST", attach[0], attach[1], token=tok)[0] == 201
    assert call(url, "DELETE", "/auth/job-token/21", user="alice")[0] == 403     # only the admin revokes
    assert call(url, "DELETE", "/auth/job-token/21")[1] == {"job": "21", "revoked": True, "detached": 1}
    for key, (path, body) in requests.items():
        status, answer = call(url, key[0], path, body, token=tok)
        assert status == 401 and answer["error"]["code"] == "unauthorized", (key, status, answer)
    assert call(url, "GET", "/gce/communicators/%d" % comm["id"])[0] == 200    # nothing was changed by it
    assert call(url, "GET", "/nam/allocations/%d" % alloc["id"])[1]["attachments"] == []


def test_a_jobs_token_lives_for_its_time_limit_not_a_day(served):
    answer = grant(served.url, "22", ttl=600)
    assert answer["expires"] == pytest.approx(time.time() + 600, abs=30)
    assert grant(served.url, "23", ttl=10 ** 6)["expires"] == pytest.approx(time.time() + 7200, abs=30)  # the site's
    served.store.db.execute("UPDATE job_grants SET expires=? WHERE job='22'", (time.time() - 1,))
    assert call(served.url, "GET", "/nam/allocations", token=answer["token"])[0] == 401
    status, body = call(served.url, "POST", "/auth/job-token", {"owner": "alice", "job": "24", "aat_entries": -1})
    assert status == 400 and "aat_entries -1 is not an integer of at least 0" in body["error"]["message"]


def test_a_request_beyond_the_grant_is_refused_naming_the_limit_and_the_value(served):
    url = served.url
    tok = grant(url, "31", aat_entries=1, communicators=0)["token"]
    alloc = call(url, "POST", "/nam/allocations", {"size": "1M", "owner": "alice", "job": "31"})[1]
    path = "/nam/allocations/%d/attach" % alloc["id"]
    assert call(url, "POST", path, {"node": "esb01", "vpid": 1}, token=tok)[0] == 201
    status, body = call(url, "POST", path, {"node": "esb01", "vpid": 2}, token=tok)
    assert status == 403 and body["error"]["code"] == "beyond_grant"
    assert (body["error"]["limit"], body["error"]["value"]) == ("aat_entries", 1)
    status, body = call(url, "POST", "/gce/communicators", {"members": [{"node": "esb01", "vpid": 0}]}, token=tok)
    assert status == 403 and "communicators=0" in body["error"]["message"]
    assert call(url, "GET", "/gce/communicators")[1]["communicators"] == []
    assert len(call(url, "GET", "/nam/allocations/%d" % alloc["id"])[1]["attachments"]) == 1


@pytest.fixture
def munge_bin(tmp_path, monkeypatch):
    """``unmunge`` and ``squeue`` on PATH answering for uid 5001 (alice) and ``payload``; job 41 runs for alice."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()

    def answer(payload, uid=5001):
        (bin_dir / "unmunge").write_text("#!/bin/sh\ncat >/dev/null\nprintf 'STATUS: Success (0)\\nUID: x (%d)\\n"
                                         "\\n%s\\n'\n" % (uid, payload))
        (bin_dir / "squeue").write_text("#!/bin/sh\necho '5001|alice|RUNNING|nam:1'\n")
        (bin_dir / "munge").write_text("#!/bin/sh\n[ \"$3\" = '%s' ] && echo MUNGE:x:\n" % payload)
        for name in ("unmunge", "squeue", "munge"):
            (bin_dir / name).chmod(0o755)
    monkeypatch.setenv("PATH", "%s:%s" % (bin_dir, os.environ["PATH"]))
    return answer


def test_munge_hands_over_a_jobs_token_only_while_its_grant_is_live(served, munge_bin):
    url = served.url
    munge_bin("job=41")
    status, body = call(url, "POST", "/auth/munge-job-token", {"credential": "MUNGE:x:"}, user=None)
    assert status == 403 and "job 41 has no live NAM/GCE grant" in body["error"]["message"]
    first = grant(url, "41", uid=5001)
    status, body = call(url, "POST", "/auth/munge-job-token", {"credential": "MUNGE:x:"}, user=None)
    assert status == 201 and body["expires"] == first["expires"]
    assert call(url, "GET", "/nam/allocations", token=body["token"])[0] == 200
    call(url, "DELETE", "/auth/job-token/41")
    assert call(url, "POST", "/auth/munge-job-token", {"credential": "MUNGE:x:"}, user=None)[0] == 403
    assert call(url, "GET", "/nam/allocations", token=body["token"])[0] == 401


def test_an_owner_lists_and_frees_only_its_own_unheld_non_volatile_allocations(served, munge_bin):
    url = served.url
    grant(url, "51", uid=5001)                       # the manager learns alice's uid from Slurm's job record
    nv = call(url, "POST", "/nam/allocations", {"size": "16M", "owner": "alice", "volatile": False})[1]
    held = call(url, "POST", "/nam/allocations", {"size": "16M", "owner": "alice", "volatile": False, "job": "51"})[1]
    vol = call(url, "POST", "/nam/allocations", {"size": "16M", "owner": "alice", "job": "51"})[1]
    other = call(url, "POST", "/nam/allocations", {"size": "1M", "owner": "carol", "volatile": False})[1]
    status, body = call(url, "POST", "/nam/allocations", {"size": "40M", "owner": "alice", "volatile": False})
    assert status == 409 and "nonvolatile_quota_count=2" in body["error"]["message"]    # the site's quota
    munge_bin("owner=alice", uid=5002)
    status, body = call(url, "POST", "/auth/munge-owner-token", {"credential": "MUNGE:x:"}, user=None)
    assert status == 403 and "the credential is of uid 5002, owner alice is uid 5001" in body["error"]["message"]
    munge_bin("owner=alice")
    status, body = call(url, "POST", "/auth/munge-owner-token", {"credential": "MUNGE:x:"}, user=None)
    assert status == 201 and body["owner"] == "alice"
    tok = body["token"]
    listed = call(url, "GET", "/nam/allocations", token=tok)[1]["allocations"]
    assert {a["id"] for a in listed} == {nv["id"], held["id"], vol["id"]}
    for alloc, why in ((held, "held by job 51"), (vol, "volatile")):
        status, body = call(url, "DELETE", "/nam/allocations/%d" % alloc["id"], token=tok)
        assert status == 409 and why in body["error"]["message"]
    status, body = call(url, "DELETE", "/nam/allocations/%d" % other["id"], token=tok)
    assert status == 403 and body["error"]["code"] == "not_owner"
    for method, path, body in (("POST", "/nam/allocations", {"size": "1M"}),
                               ("POST", "/gce/communicators", {"members": [{"node": "esb01", "vpid": 0}]}),
                               ("POST", "/nam/allocations/%d/attach" % nv["id"], {"node": "esb01", "vpid": 1})):
        status, answer = call(url, method, path, body, token=tok)
        assert status == 403 and "an owner's token may not" in answer["error"]["message"], (method, path)
    assert call(url, "DELETE", "/nam/allocations/%d" % nv["id"], token=tok)[0] == 200
    assert {a["id"] for a in call(url, "GET", "/nam/allocations")[1]["allocations"]} == {
        held["id"], vol["id"], other["id"]}
    munge_bin("owner=nobody-known")
    status, body = call(url, "POST", "/auth/munge-owner-token", {"credential": "MUNGE:x:"}, user=None)
    assert status == 403 and "knows no uid for owner nobody-known" in body["error"]["message"]


def test_the_orphan_sweep_over_http_is_the_administrators(served):
    url = served.url
    tok = grant(url, "61")["token"]
    call(url, "POST", "/nam/allocations", {"size": "1M", "owner": "alice", "job": "61"})
    assert call(url, "POST", "/nam/admin/orphans", {"live_jobs": []}, user="alice")[0] == 403
    status, body = call(url, "POST", "/nam/admin/orphans", {"live_jobs": [], "min_age": 0})
    assert status == 200 and body["revoked"] == ["61"] and len(body["freed"]) == 1
    assert call(url, "GET", "/nam/allocations", token=tok)[0] == 401


def test_the_owner_lists_and_frees_with_the_client_library_outside_a_job(served, munge_bin):
    grant(served.url, "71", uid=5001)
    nv = call(served.url, "POST", "/nam/allocations", {"size": "8M", "owner": "alice", "volatile": False})[1]
    munge_bin("owner=alice")

    def run(*argv):
        out, err = io.StringIO(), io.StringIO()
        code = msa_nam.main(list(argv), out=out, err=err, owner="alice", url=served.url, env={}, conf="/nonexistent")
        return code, out.getvalue(), err.getvalue()
    code, out, _ = run("list", "--json")
    assert code == 0 and [a["id"] for a in json.loads(out)] == [nv["id"]]
    assert run("free", str(nv["id"]))[:2] == (0, "freed %d (8388608 bytes)\n" % nv["id"])
    code, _, err = run("free", str(nv["id"]))
    assert code == 1 and "NAM allocation %d does not exist" % nv["id"] in err


def test_the_site_sets_the_non_volatile_quota_and_expiry_in_manager_conf():
    from msa_sim.nammgr import config
    cfg = config.parse("[manager]\nnonvolatile_quota = 64G\nnonvolatile_quota_count = 8\nnonvolatile_expiry_days = 30\n")
    assert (cfg.nonvolatile_quota, cfg.nonvolatile_quota_count, cfg.nonvolatile_expiry_days) == (64 << 30, 8, 30)
    assert config.parse("").nonvolatile_quota == 0                  # no limit unless the site sets one
    with pytest.raises(config.ConfigError, match=r"nonvolatile_quota_count = '-1' is outside 0"):
        config.parse("[manager]\nnonvolatile_quota_count = -1\n")


def test_a_board_capability_lives_no_longer_than_the_token_it_was_asked_with():
    from msa_sim.nammgr.auth import Principal
    from msa_sim.nammgr.datapath import DataPath
    data = DataPath(b"k" * 32, {"nam01": "https://127.0.0.1:1"}, ttl=86400)
    alloc = {"id": 1, "device": "nam01", "created": 1.0, "address": 0, "size": 4096, "volatile": True,
             "owner": "alice", "name": None}
    job = Principal("alice", "user", job="7", expires=int(time.time()) + 120)
    assert 100 <= data.nam_access(alloc, job)["expires_in"] <= 120
    assert data.nam_access(alloc, Principal("slurm", "admin"))["expires_in"] == 86400
