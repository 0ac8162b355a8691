# SPDX-License-Identifier: GPL-3.0-or-later
"""NAM and GCE from a job's code (issue 21): the client library (sim/nam_client/msa_nam.py, msa_gce.py)
against a real manager and real NAM and GCE board processes (msa_sim.rma), all over TLS on 127.0.0.1."""
from __future__ import annotations

import array
import concurrent.futures
import functools
import http.client
import json
import operator
import os
import random
import sys
import threading

import pytest

from ansible_collections.msa.hpc.plugins.module_utils import _gce as G
from ansible_collections.msa.hpc.plugins.module_utils._rest import tls_context
from msa_sim.rma import capability as C
from msa_sim.rma.testing import ROOT, System

sys.path.insert(0, os.path.join(ROOT, "sim", "nam_client"))
import msa_gce  # noqa: E402
import msa_nam  # noqa: E402

MIB = 1 << 20


@pytest.fixture(scope="module")
def system(tmp_path_factory):
    sys_ = System(str(tmp_path_factory.mktemp("namgce")))
    yield sys_
    sys_.stop()


def manager_for(system, owner, job_id):
    """The manager as the code of job ``job_id`` of ``owner`` reaches it (the token its prolog wrote)."""
    env = {"SLURM_JOB_ID": str(job_id)}
    return msa_nam.Manager(system.url, system.job(owner, job_id), system.ca, conf=os.devnull, env=env)


def board_request(system, method, path, token, body=None):
    conn = http.client.HTTPSConnection("127.0.0.1", system.nam.port, timeout=30, context=tls_context(ca_path=system.ca))
    try:
        conn.request(method, path, body=body, headers={"Authorization": "Capability " + token})
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


# ------------------------------------------------------------------ NAM

def test_put_and_get_round_trip_through_the_nam_board(system):
    system.allocate("alice", 101, 4 * MIB)
    data = random.Random(1).randbytes(3 * MIB + 17)
    with msa_nam.attach(manager=manager_for(system, "alice", 101)) as nam:
        assert (nam.name, nam.size, nam.volatile, nam.device) == ("slurm-101", 4 * MIB, True, "nam01")
        assert nam.put(4096, data) == len(data)
        assert nam.get(4096, len(data)) == data
        assert nam.get(4 * MIB - 100, 100) == bytes(100)      # never written: zeros
        nam.put(4094, memoryview(b"head"))
        assert nam.get(4094, 6) == b"head" + data[2:4]
    system.end_job(101)


def test_the_data_lives_on_the_board_not_in_the_manager(system):
    rec = system.allocate("alice", 102, 64 * 1024)
    marker = b"only-on-the-nam-board-%d" % os.getpid()
    with msa_nam.attach(allocation=rec["id"], manager=manager_for(system, "alice", 102)) as nam:
        nam.put(0, marker)
    with open(os.path.join(system.nam_volatile, "volatile.pool"), "rb") as fh:
        fh.seek(rec["address"])
        assert fh.read(len(marker)) == marker
    state = os.path.join(system.workdir, "mgr-state")
    for name in os.listdir(state):
        with open(os.path.join(state, name), "rb") as fh:
            assert marker not in fh.read()
    system.end_job(102)


@pytest.mark.parametrize("offset,length,field,value", [
    (-1, 1, "offset", -1), (4 * MIB + 1, 0, "offset", 4 * MIB + 1), (4 * MIB - 3, 4, "length", 4),
    ("8", 1, "offset", "8"), (0, 4 * MIB + 1, "length", 4 * MIB + 1)])
def test_an_access_outside_the_allocation_is_refused_naming_field_and_value(system, offset, length, field, value):
    system.allocate("alice", 103, 4 * MIB)
    with msa_nam.attach(manager=manager_for(system, "alice", 103)) as nam:
        with pytest.raises(msa_nam.NamError) as exc:
            nam.get(offset, length)
        assert (exc.value.field, exc.value.value) == (field, value)
        assert str(value) in str(exc.value)
        with pytest.raises(msa_nam.NamError) as exc:
            nam.put(offset, b"x" * length)
        assert (exc.value.field, exc.value.value) == (field, value)
    system.end_job(103)


def test_the_board_itself_checks_every_offset_and_length(system):
    """A client that skips its own checks gets the same refusal from the board, naming the field and the value."""
    system.allocate("alice", 104, 64 * 1024)
    mgr = manager_for(system, "alice", 104)
    rec = mgr.call("GET", "/nam/allocations?name=slurm-104")["allocations"][0]
    cap = mgr.call("POST", "/nam/allocations/%d/access" % rec["id"])["capability"]
    status, body = board_request(system, "GET", "/v1/nam/%d?offset=65530&length=10" % rec["id"], cap)
    err = json.loads(body)["error"]
    assert (status, err["field"], err["value"]) == (400, "length", 10), err
    status, body = board_request(system, "PUT", "/v1/nam/%d?offset=65536" % rec["id"], cap, b"x")
    assert status == 400 and json.loads(body)["error"]["field"] == "offset"
    status, body = board_request(system, "GET", "/v1/nam/%d?offset=-5&length=1" % rec["id"], cap)
    assert status == 400 and json.loads(body)["error"] == {
        "code": "invalid", "field": "offset", "value": "-5", "message": "offset '-5' is not a non-negative integer"}
    mgr.close()
    system.end_job(104)


def test_another_users_allocation_is_refused(system):
    alice = system.allocate("alice", 105, 64 * 1024, name="alice-private")
    with msa_nam.attach(manager=manager_for(system, "alice", 105), name="alice-private") as nam:
        nam.put(0, b"secret of alice")
        alice_cap = nam._auth["Authorization"].split(" ", 1)[1]   # pylint: disable=protected-access
    bob = manager_for(system, "bob", 106)
    with pytest.raises(msa_nam.NamError) as exc:
        msa_nam.attach(allocation=alice["id"], manager=bob)
    assert exc.value.status == 403 and "belongs to alice" in str(exc.value)
    with pytest.raises(msa_nam.NamError) as exc:
        msa_nam.attach(name="alice-private", manager=manager_for(system, "bob", 106))
    assert exc.value.field == "name"
    with pytest.raises(msa_nam.NamError) as exc:
        bob.call("POST", "/nam/allocations/%d/access" % alice["id"])
    assert exc.value.status == 403
    # a job's token reaches nothing but its owner's own things: no allocating past Slurm's licences
    with pytest.raises(msa_nam.NamError) as exc:
        bob.call("POST", "/nam/allocations", {"size": 4096, "owner": "bob"})
    assert exc.value.status == 403
    # a capability is bound to its allocation, and only the manager's key makes one
    bob_rec = system.allocate("bob", 106, 64 * 1024)
    status, _ = board_request(system, "GET", "/v1/nam/%d?offset=0&length=15" % bob_rec["id"], alice_cap)
    assert status == 403
    claims = dict(json.loads(__import__("base64").urlsafe_b64decode(alice_cap.split(".")[0] + "==")),
                  owner="bob")
    forged = C.sign(b"x" * 64, claims, 60)
    status, body = board_request(system, "GET", "/v1/nam/%d?offset=0&length=15" % alice["id"], forged)
    assert status == 403 and b"signature" in body
    status, _ = board_request(system, "GET", "/v1/nam/%d?offset=0&length=15" % alice["id"], "")
    assert status == 401
    system.end_job(105)
    system.end_job(106)


def test_nonvolatile_data_survives_the_job_for_its_owners_next_job(system):
    rec = system.allocate("alice", 107, 256 * 1024, volatile=False, name="alice-results")
    data = random.Random(7).randbytes(200 * 1024)
    with msa_nam.attach(manager=manager_for(system, "alice", 107), name="alice-results") as nam:
        assert nam.volatile is False
        nam.put(1000, data)
        nam.sync()
    ended = system.end_job(107)
    assert ended["kept"] == [rec["id"]] and ended["freed"] == []
    assert system.admin("GET", "/nam/allocations/%d" % rec["id"])["job"] is None
    with msa_nam.attach(manager=manager_for(system, "alice", 108), name="alice-results") as nam:
        assert nam.get(1000, len(data)) == data
    with pytest.raises(msa_nam.NamError):
        msa_nam.attach(manager=manager_for(system, "bob", 109), name="alice-results")
    system.admin("DELETE", "/nam/allocations/%d" % rec["id"])


def test_volatile_data_is_scrubbed_at_free_and_a_reallocation_reads_zeros(system):
    size = 512 * 1024
    first = system.allocate("alice", 110, size)
    mgr = manager_for(system, "alice", 110)
    nam = msa_nam.attach(manager=mgr)
    nam.put(0, b"\xa5" * size)
    old_cap = nam._auth["Authorization"].split(" ", 1)[1]   # pylint: disable=protected-access
    nam.close()
    assert system.end_job(110)["freed"] == [first["id"]]
    with open(os.path.join(system.nam_volatile, "volatile.pool"), "rb") as fh:   # scrubbed on the board at free
        fh.seek(first["address"])
        assert fh.read(size) == bytes(size)
    second = system.allocate("bob", 111, size)
    assert (second["address"], second["size"]) == (first["address"], first["size"])   # the same memory
    with msa_nam.attach(manager=manager_for(system, "bob", 111)) as nam:
        assert nam.get(0, size) == bytes(size)
        nam.put(0, b"bob")
    status, body = board_request(system, "GET", "/v1/nam/%d?offset=0&length=3" % first["id"], old_cap)
    assert status == 410 and b"freed" in body
    system.end_job(111)


# ------------------------------------------------------------------ GCE

class Group:
    def __init__(self, size):
        self.size = size
        self.barrier = threading.Barrier(size, timeout=120)
        self.slots = [None] * size


SOFT = {"sum": operator.add, "prod": operator.mul, "min": min, "max": max}


class ThreadComm:
    """The software collectives of an MPI library, between threads (one per rank)."""

    def __init__(self, group, rank):
        self.group, self.rank, self.size = group, rank, group.size
        self.software_calls = 0

    def allgather(self, obj):
        self.software_calls += 1
        self.group.slots[self.rank] = obj
        self.group.barrier.wait()
        out = list(self.group.slots)
        self.group.barrier.wait()
        return out

    def bcast(self, obj, root=0):
        return self.allgather(obj if self.rank == root else None)[root]

    def allreduce(self, obj, op="sum"):
        return functools.reduce(SOFT[op], self.allgather(obj))

    def barrier(self):
        self.group.barrier.wait()


def run_ranks(size, body):
    """``body(comm)`` on ``size`` threads; their results in rank order (an exception on any rank is raised)."""
    group = Group(size)
    results, errors = [None] * size, []

    def run(rank):
        try:
            results[rank] = body(ThreadComm(group, rank))
        except BaseException as exc:   # pylint: disable=broad-except
            errors.append(exc)
            group.barrier.abort()
    threads = [threading.Thread(target=run, args=(r,)) for r in range(size)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    if errors:
        raise errors[0]
    return results


def test_gce_allreduce_equals_a_plain_python_reduction_over_every_rank(system):
    ranks = 4
    rnd = random.Random(3)
    floats = [[rnd.uniform(-1e3, 1e3) for _ in range(1000)] for _ in range(ranks)]
    ints = [[rnd.randrange(-2 ** 40, 2 ** 40) for _ in range(257)] for _ in range(ranks)]

    def body(comm):
        gce = msa_gce.Gce(comm, manager=manager_for(system, "alice", 120) if comm.rank == 0 else None)
        comm.software_calls = 0          # from here on: the collectives of the caller only
        out = {"sum": gce.allreduce(floats[comm.rank], "sum"), "max": gce.allreduce(ints[comm.rank], "max"),
               "bxor": gce.allreduce(array.array("q", ints[comm.rank]), "bxor"),
               "scalar": gce.allreduce(comm.rank + 1, "prod"), "path": gce.last_path,
               "software": comm.software_calls}
        gce.close()
        return out
    results = run_ranks(ranks, body)
    want_sum = [functools.reduce(operator.add, col) for col in zip(*floats)]
    for res in results:
        assert res["sum"] == want_sum            # the board adds in rank order, as the reduction here
        assert res["max"] == [max(col) for col in zip(*ints)]
        assert list(res["bxor"]) == [functools.reduce(operator.xor, col) for col in zip(*ints)]
        assert res["scalar"] == 24
        assert (res["path"], res["software"]) == ("gce", 0)
    assert system.admin("GET", "/gce/communicators")["communicators"] == []    # released by close()


@pytest.mark.parametrize("case", ["size", "type", "op"])
def test_each_table_1_limit_falls_back_to_the_software_collective_and_says_why(system, case):
    ranks = 3
    big = (G.MAX_OPERATION_SIZE // 8) + 1      # float64 elements: 8 bytes over 8 MiB

    def body(comm):
        gce = msa_gce.Gce(comm, manager=manager_for(system, "alice", 130) if comm.rank == 0 else None)
        comm.software_calls = 0
        if case == "size":
            got = gce.allreduce([float(comm.rank)] * big, "sum")
            ok = got[0] == got[-1] == 3.0 and len(got) == big
        elif case == "type":
            got = gce.allreduce("r%d" % comm.rank, "sum")          # no GCE data type: MPI's own allreduce
            ok = got == "r0r1r2"
        else:
            got = gce.allreduce(comm.rank + 5, "replace")          # an operation the GCE does not run here
            ok = got is not None
        path, calls = gce.last_path, comm.software_calls
        after = gce.allreduce([1, 2], "sum")                       # the same communicator still offloads
        gce.close()
        return ok, path, calls, after, gce.last_path
    SOFT["replace"] = lambda a, b: b
    results = run_ranks(ranks, body)
    reason = {"size": "exceed the GCE limit of 8388608 bytes (8 MiB)", "type": "type str has no GCE data type",
              "op": "op 'replace' is not one the GCE runs"}[case]
    for ok, path, calls, after, later in results:
        assert ok and path.startswith("software: ") and reason in path, path
        assert calls == 1                                           # the caller's collective ran, once
        assert (after, later) == ([3, 6], "gce")


class WideComm:
    """One rank of a communicator with more processes than the GCE holds (the others mirror it)."""
    rank, size = 0, G.MAX_PROCESSES_PER_COMMUNICATOR + 1

    def __init__(self):
        self.calls = []

    def bcast(self, obj, root=0):
        return obj

    def allgather(self, obj):
        self.calls.append("allgather")
        return [obj] * self.size

    def allreduce(self, obj, op="sum"):
        self.calls.append("allreduce")
        return obj * self.size

    def barrier(self):
        self.calls.append("barrier")


def test_a_communicator_over_1024_ranks_runs_in_software_and_says_why():
    comm = WideComm()
    gce = msa_gce.Gce(comm, manager=object())     # never asked: the limit is known before the manager
    assert gce.allreduce(2, "sum") == 2 * 1025
    assert gce.last_path == "software: 1025 ranks exceed the GCE limit of 1024 processes per communicator"
    assert gce.allreduce([1.0, 2.0], "max") == [1.0, 2.0]
    gce.barrier()
    assert gce.last_path.startswith("software: 1025 ranks")
    assert comm.calls == ["allgather", "allreduce", "allgather", "barrier"]   # the first: the members' hosts


def test_the_library_carries_table_1_as_module_utils_states_it():
    assert msa_gce.MAX_OPERATION_SIZE == G.MAX_OPERATION_SIZE
    assert msa_gce.MAX_PROCESSES_PER_COMMUNICATOR == G.MAX_PROCESSES_PER_COMMUNICATOR
    assert set(msa_gce.OPERATIONS) <= set(G.OPERATIONS)
    assert set(msa_gce.TYPECODES.values()) <= set(G.DATATYPES)


def test_gce_barrier_releases_no_rank_before_the_last_arrives(system):
    ranks = 4
    last_arrived = threading.Event()

    def body(comm):
        gce = msa_gce.Gce(comm, manager=manager_for(system, "alice", 140) if comm.rank == 0 else None)
        comm.barrier()
        if comm.rank == ranks - 1:
            for _ in range(20):       # let the other ranks post first
                threading.Event().wait(0.01)
            last_arrived.set()
        gce.barrier()
        seen = last_arrived.is_set()
        path = gce.last_path
        gce.close()
        return seen, path
    assert run_ranks(ranks, body) == [(True, "gce")] * ranks


def test_a_rank_that_never_arrives_fails_the_operation_with_a_clear_error(system):
    def body(comm):
        gce = msa_gce.Gce(comm, manager=manager_for(system, "alice", 150) if comm.rank == 0 else None, timeout=1)
        if comm.rank == 0:
            with pytest.raises(msa_gce.GceError) as exc:
                gce.allreduce([1.0], "sum")
            err = exc.value
        else:
            err = None
        gce.close()
        return err
    err = run_ranks(2, body)[0]
    assert err.status == 504 and err.code == "timeout" and "ranks 1 never arrived" in str(err)


def test_another_users_job_gets_no_capability_for_a_communicator(system):
    alice = manager_for(system, "alice", 160)
    comm = alice.call("POST", "/gce/communicators", {"members": [{"node": "esb01", "vpid": 0}]})
    assert comm["job"] == "160"      # a job's communicator is the job's: its epilog releases it
    bob = manager_for(system, "bob", 161)
    with pytest.raises(msa_nam.NamError) as exc:
        bob.call("POST", "/gce/communicators/%d/access" % comm["id"])
    assert exc.value.status == 403
    assert system.admin("DELETE", "/gce/jobs/160")["released"] == [comm["id"]]


def test_slurm_comm_without_mpi_gathers_broadcasts_and_reduces_over_tcp():
    """SlurmComm: the tasks of one srun step as a communicator (no MPI on the node), over real sockets."""
    size, port = 3, 20000 + random.Random().randrange(20000)
    big = array.array("q", range(1000))

    def body(rank):
        env = {"SLURM_PROCID": str(rank), "SLURM_NTASKS": str(size), "SLURM_JOB_ID": "7",
               "SLURM_STEP_NODELIST": "localhost"}
        comm = msa_gce.SlurmComm(env, port=port, timeout=30, root_host="127.0.0.1")
        try:
            return (comm.allgather("r%d" % rank), comm.bcast({"v": rank}, root=1), comm.allreduce(rank + 2, "prod"),
                    comm.allreduce(big, "sum"), comm.allreduce([rank], "max"))
        finally:
            comm.barrier()
            comm.close()
    with concurrent.futures.ThreadPoolExecutor(size) as pool:
        results = list(pool.map(body, range(size)))
    for gathered, bcast, prod, total, most in results:
        assert gathered == ["r0", "r1", "r2"] and bcast == {"v": 1} and prod == 24 and most == [2]
        assert total == [3 * v for v in big]


def test_slurm_comm_names_what_is_missing_outside_a_step():
    with pytest.raises(msa_gce.NamError, match="not a task of an srun step .*SLURM_PROCID"):
        msa_gce.SlurmComm({"SLURM_NTASKS": "2"})


def test_the_library_never_imports_mpi4py_itself(tmp_path, monkeypatch):
    """Importing mpi4py.MPI initialises MPI, which fails in a step srun started without --mpi=pmix (a SlurmComm
    job's, now that the node image has mpi4py): the library uses mpi4py's operations only when the job's code has
    imported it."""
    pkg = tmp_path / "mpi4py"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "MPI.py").write_text("raise RuntimeError('MPI_Init from an import')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "mpi4py", raising=False)
    monkeypatch.delitem(sys.modules, "mpi4py.MPI", raising=False)
    assert msa_gce._mpi_ops() == {}  # pylint: disable=protected-access
    assert "mpi4py.MPI" not in sys.modules

    class FakeMPI:  # what the job's own `from mpi4py import MPI` put into sys.modules
        SUM, PROD, MIN, MAX, LAND, LOR, LXOR, BAND, BOR, BXOR = range(10)
    monkeypatch.setitem(sys.modules, "mpi4py.MPI", FakeMPI)
    assert msa_gce._mpi_ops()[FakeMPI.MAX] == "max"  # pylint: disable=protected-access
