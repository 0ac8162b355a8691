# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

"""NAM/GCE service layer and the nam_segment / gce_comm modules against the stand-in manager on 127.0.0.1 (not
among the collection's unit tests, which must not import the simulation)."""

import json

import pytest
from ansible.module_utils.testing import patch_module_args

from ansible_collections.msa.hpc.plugins.module_utils._gce import GceService, ensure_communicator
from ansible_collections.msa.hpc.plugins.module_utils._manager import manager_argument_spec, manager_client
from ansible_collections.msa.hpc.plugins.module_utils._nam import ManagerError, NamService, ensure_segment
from ansible_collections.msa.hpc.plugins.modules import gce_comm, nam_segment
from msa_sim.nammgr import testing

CONF = """
[manager]
state_dir = {state}
users_file = {users}
aat_size = 2
admin_reserve_percent = 0
[nam:nam01]
capacity = 1G
[gce:gce01]
node_id = 130
"""


@pytest.fixture
def endpoint(tmp_path):
    manager = testing.InProcess(testing.write_config(tmp_path, CONF, {"slurm": ("admin", "pw"),
                                                                      "alice": ("user", "alice-pw")}))
    yield manager.url
    manager.stop()


def conn(endpoint, **extra):
    params = {"endpoint": endpoint, "username": "slurm", "password": "pw", "token": None, "validate_certs": True,
              "timeout": 5}
    params.update(extra)
    return params


def seg(state="present", name="scratch", **kw):
    params = {"state": state, "name": name, "size": None, "volatile": True, "job": None, "owner": None,
              "device": None, "reserved": False, "node": None, "vpid": None}
    params.update(kw)
    return params


def test_manager_argument_spec_hides_secrets_and_builds_a_client(endpoint):
    spec = manager_argument_spec(name=dict(type="str"))
    assert spec["password"]["no_log"] and spec["token"]["no_log"] and "name" in spec
    client = manager_client(conn(endpoint))
    assert client.username == "slurm" and client.timeout == 5


def test_present_allocates_once_and_reports_the_placement(endpoint):
    nam = NamService(manager_client(conn(endpoint)))
    first = ensure_segment(nam, seg(size="256M", job="4", owner="alice"))
    assert first["changed"] and (first["device"], first["offset"], first["size"]) == ("nam01", 0, 256 << 20)
    again = ensure_segment(nam, seg(size="256M", job="4", owner="alice"))
    assert not again["changed"] and again["id"] == first["id"]
    assert again["diff"]["before"] == again["diff"]["after"]


def test_a_different_size_for_an_existing_name_is_refused(endpoint):
    nam = NamService(manager_client(conn(endpoint)))
    ensure_segment(nam, seg(size="1M"))
    with pytest.raises(ManagerError) as exc:
        ensure_segment(nam, seg(size="2M"))
    assert "cannot be resized" in str(exc.value) and "size '2M'" in str(exc.value)


def test_check_mode_changes_nothing_on_the_manager(endpoint):
    nam = NamService(manager_client(conn(endpoint)))
    planned = ensure_segment(nam, seg(size="1G"), check_mode=True)
    assert planned["changed"] and planned["allocation"]["size"] == 1 << 30
    assert nam.find("scratch") is None
    ensure_segment(nam, seg(size="1G"))
    assert ensure_segment(nam, seg("absent"), check_mode=True)["changed"]
    assert nam.find("scratch") is not None


def test_attach_and_detach_are_idempotent_and_a_full_aat_is_an_error(endpoint):
    nam = NamService(manager_client(conn(endpoint)))
    res = ensure_segment(nam, seg("attached", size="1M", node="esb01", vpid=0))
    assert res["changed"] and res["attachment"]["aat_index"] == 0 and res["allocation"]["attachments"]
    assert not ensure_segment(nam, seg("attached", node="esb01", vpid=0))["changed"]
    ensure_segment(nam, seg("attached", node="esb02", vpid=0))
    with pytest.raises(ManagerError) as exc:
        ensure_segment(nam, seg("attached", node="esb03", vpid=0))
    assert exc.value.code == "aat_full"
    assert ensure_segment(nam, seg("detached", node="esb01", vpid=0))["changed"]
    assert not ensure_segment(nam, seg("detached", node="esb01", vpid=0))["changed"]
    assert not ensure_segment(nam, seg("detached", name="nothing", node="esb01", vpid=0))["changed"]


def test_absent_frees_and_a_second_run_changes_nothing(endpoint):
    nam = NamService(manager_client(conn(endpoint)))
    ensure_segment(nam, seg(size="1M"))
    assert ensure_segment(nam, seg("absent"))["changed"]
    assert not ensure_segment(nam, seg("absent"))["changed"]
    assert nam.devices()[0]["pools"]["volatile"]["free_segments"] == 1


def test_a_user_cannot_allocate_for_someone_else(endpoint):
    nam = NamService(manager_client(conn(endpoint, username="alice", password="alice-pw")))
    with pytest.raises(ManagerError) as exc:
        ensure_segment(nam, seg(size="1M", owner="bob"))
    assert exc.value.status == 403


def comm(state="present", name="world", **kw):
    params = {"state": state, "name": name, "members": None, "root": None, "job": None, "owner": None}
    params.update(kw)
    return params


def test_communicator_is_created_once_and_recreated_when_members_change(endpoint):
    gce = GceService(manager_client(conn(endpoint)))
    members = ["esb01:0", "esb01:1", {"node": "esb02", "vpid": 0}]
    first = ensure_communicator(gce, comm(members=members, job="9"))
    assert first["changed"] and first["comm_id"] == 0 and first["limits_left"] == {"communicators": 255}
    assert first["fallback"] is None
    assert not ensure_communicator(gce, comm(members=members, job="9"))["changed"]
    changed = ensure_communicator(gce, comm(members=members[:2], job="9"))
    assert changed["changed"] and changed["communicator"]["size"] == 2 and changed["id"] != first["id"]
    assert ensure_communicator(gce, comm("absent"))["changed"]
    assert not ensure_communicator(gce, comm("absent"))["changed"]


def test_a_communicator_over_1024_processes_reports_the_software_fallback(endpoint):
    gce = GceService(manager_client(conn(endpoint)))
    members = ["esb%03d:%d" % (i // 8, i % 8) for i in range(1025)]
    res = ensure_communicator(gce, comm(members=members))
    assert not res["changed"] and res["fallback"] == "software" and "1024" in res["fallback_reason"]
    assert gce.find("world") is None


def test_a_root_outside_the_members_is_refused(endpoint):
    gce = GceService(manager_client(conn(endpoint)))
    with pytest.raises(ManagerError) as exc:
        ensure_communicator(gce, comm(members=["a:0"], root="b:0"))
    assert "root b:0" in str(exc.value)


def run_module(module, args, capsys):
    with patch_module_args(args):
        with pytest.raises(SystemExit):
            module.main()
    return json.loads(capsys.readouterr().out)


def test_nam_segment_module_is_idempotent_and_fails_cleanly(endpoint, capsys):
    args = {"endpoint": endpoint, "username": "slurm", "password": "pw", "name": "ckpt", "size": "64M",
            "job": "12", "owner": "alice"}
    first = run_module(nam_segment, args, capsys)
    assert first["changed"] and first["size"] == 64 << 20 and "pw" not in json.dumps(first["invocation"])
    assert not run_module(nam_segment, args, capsys)["changed"]
    res = run_module(nam_segment, dict(args, name="big", size="4G"), capsys)
    assert res["failed"] and res["code"] == "no_space" and "largest free segment" in res["msg"]
    res = run_module(nam_segment, dict(args, name="odd", size="lots"), capsys)
    assert res["failed"] and res["msg"].startswith("size: 'lots'")
    res = run_module(nam_segment, dict(args, state="attached"), capsys)
    assert res["failed"] and "node" in res["msg"]
    res = run_module(nam_segment, dict(args, password="wrong"), capsys)
    assert res["failed"] and "401" in res["msg"]


def test_gce_comm_module_reports_fallback_without_failing(endpoint, capsys):
    args = {"endpoint": endpoint, "username": "slurm", "password": "pw", "name": "big",
            "members": ["n%d:0" % i for i in range(2000)], "_ansible_check_mode": True}
    res = run_module(gce_comm, args, capsys)
    assert not res.get("failed") and not res["changed"] and res["fallback"] == "software"
    res = run_module(gce_comm, dict(args, members=["n0:0", "n1:0"], _ansible_check_mode=False), capsys)
    assert res["changed"] and res["comm_id"] == 0 and res["limits_left"]["communicators"] == 255
