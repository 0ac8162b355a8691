# SPDX-License-Identifier: GPL-3.0-or-later
"""The callers that POST: a request whose answer was lost is looked up, and sent again only when it did not happen."""
from __future__ import annotations

import pytest

from ansible_collections.msa.hpc.plugins.module_utils._gce import GceService
from ansible_collections.msa.hpc.plugins.module_utils._nam import NamService
from ansible_collections.msa.hpc.plugins.module_utils._redfish import Redfish
from ansible_collections.msa.hpc.plugins.module_utils._rest import OutcomeUnknownError, RestClient
from ansible_collections.msa.hpc.plugins.module_utils.slurm.model import validate
from ansible_collections.msa.hpc.plugins.module_utils.slurm.render import plan
from ansible_collections.msa.hpc.plugins.module_utils.slurm.rest import RestTransport, SlurmRestError
from ansible_collections.msa.hpc.tests.unit.plugins.module_utils.faulty_http import FaultyServer

ALLOC = {"id": 9, "name": "scratch", "job": "42", "owner": "bob", "size": 1 << 20, "device": "nam01"}
SYS = "/redfish/v1/Systems/n1"
RESET = SYS + "/Actions/ComputerSystem.Reset"


@pytest.fixture
def server():
    srv = FaultyServer()
    yield srv
    srv.close()


def rest(srv, **kw):
    return RestClient(srv.url, sleep=lambda s: None, **kw)


def methods(srv):
    return [seen[0] for seen in srv.seen]


def test_a_nam_allocation_whose_answer_was_cut_is_found_by_name_not_made_twice(server):
    server.script = ["half", ("answer", 200, {"allocations": [ALLOC]})]
    got = NamService(rest(server)).allocate(1 << 20, job="42", name="scratch")
    assert got == ALLOC and methods(server) == ["POST", "GET"]


def test_a_nam_allocation_of_that_name_for_another_job_is_not_taken_for_ours(server):
    server.script = ["drop", ("answer", 200, {"allocations": [dict(ALLOC, job="41")]}),
                     ("answer", 201, dict(ALLOC, id=10))]
    assert NamService(rest(server)).allocate(1 << 20, job="42", name="scratch")["id"] == 10
    assert methods(server) == ["POST", "GET", "POST"]


def test_a_nam_allocation_without_a_name_cannot_be_looked_up_and_is_outcome_unknown(server):
    server.script = ["drop"]
    with pytest.raises(OutcomeUnknownError):
        NamService(rest(server)).allocate(1 << 20, job="42")
    assert methods(server) == ["POST"]


def test_a_gce_communicator_whose_answer_was_lost_is_found_by_name(server):
    comm = {"id": 4, "comm_id": 1, "name": "c", "job": "42", "members": []}
    server.script = ["drop", ("answer", 200, {"communicators": [comm]}), ("answer", 200, {"left": {"comms": 255}})]
    got = GceService(rest(server)).create([{"node": "n1", "vpid": 0}], name="c", job="42")
    assert got == dict(comm, limits_left={"comms": 255})
    assert methods(server) == ["POST", "GET", "GET"]


def _squeue(*jobs):
    return {"errors": [], "jobs": [{"job_id": i, "name": n, "user_name": "alice", "job_state": "PENDING"}
                                   for i, n in jobs]}


(SUB,) = plan(validate({"name": "relax", "components": [{"partition": "cm", "command": "true"}]}))


def test_a_timed_out_job_submission_that_slurm_took_is_not_submitted_again(server):
    server.script = [("answer", 200, _squeue((5, "relax"))), "stall", ("answer", 200, _squeue((5, "relax"), (6, "relax")))]
    transport = RestTransport(server.url, "alice", "tok", timeout=1, retries=2, api_version="v0.0.38")
    transport.client._sleep = lambda s: None
    assert transport.submit(SUB) == 6
    assert methods(server) == ["GET", "POST", "GET"]


def test_a_lost_job_submission_that_slurm_did_not_take_is_sent_once_more(server):
    server.script = [("answer", 200, _squeue()), "drop", ("answer", 200, _squeue()),
                     ("answer", 200, {"errors": [], "job_id": 7})]
    transport = RestTransport(server.url, "alice", "tok", retries=2, api_version="v0.0.38")
    transport.client._sleep = lambda s: None
    assert transport.submit(SUB) == 7
    assert methods(server) == ["GET", "POST", "GET", "POST"]


def test_a_lost_job_submission_that_cannot_be_checked_is_reported_as_unknown(server):
    server.script = [("answer", 200, _squeue()), "drop"] + ["drop"] * 5
    transport = RestTransport(server.url, "alice", "tok", retries=1, api_version="v0.0.38")
    transport.client._sleep = lambda s: None
    with pytest.raises(SlurmRestError) as err:
        transport.submit(SUB)
    assert err.value.kind == "unknown" and "check squeue before trying again" in str(err.value)
    assert methods(server).count("POST") == 1 and "tok" not in str(err.value)


def _system(**props):
    return dict({"@odata.id": SYS, "PowerState": "Off", "LastResetTime": "t0",
                 "Actions": {"#ComputerSystem.Reset": {"target": RESET}}}, **props)


def test_a_power_on_whose_answer_was_lost_is_not_sent_again_when_the_node_is_on(server):
    server.script = ["drop", ("answer", 200, _system(PowerState="PoweringOn"))]
    Redfish(server.url, "u", "p", rest=rest(server)).reset(_system(), "On", SYS)
    assert methods(server) == ["POST", "GET"]


def test_a_force_restart_whose_answer_was_lost_is_sent_again_when_last_reset_time_did_not_move(server):
    server.script = ["drop", ("answer", 200, _system(PowerState="On")), ("answer", 204, {})]
    Redfish(server.url, "u", "p", rest=rest(server)).reset(_system(PowerState="On"), "ForceRestart", SYS)
    assert methods(server) == ["POST", "GET", "POST"]


def test_a_restart_that_cannot_be_told_apart_is_outcome_unknown_not_a_second_restart(server):
    bare = _system(PowerState="On")
    del bare["LastResetTime"]
    server.script = ["drop", ("answer", 200, bare)]
    with pytest.raises(OutcomeUnknownError, match="shows no LastResetTime"):
        Redfish(server.url, "u", "p", rest=rest(server)).reset(bare, "GracefulRestart", SYS)
    assert methods(server) == ["POST", "GET"]


def test_a_boot_patch_whose_answer_was_lost_is_found_in_place(server):
    patch = {"BootSourceOverrideEnabled": "Once", "BootSourceOverrideTarget": "Pxe"}
    server.script = ["half", ("answer", 200, _system(Boot=dict(patch)))]
    Redfish(server.url, "u", "p", rest=rest(server)).patch_boot(SYS, patch)
    assert methods(server) == ["PATCH", "GET"]
