# SPDX-License-Identifier: GPL-3.0-or-later
"""GCE collectives from a job's code, in the spirit of libGCE (seed 004 §2.2.2): allreduce and barrier of an MPI
communicator offloaded to the Global Collective Engine, and the MPI library's software collective used instead when
the GCE cannot run the operation (Table 1's limits). Standard library only; ``comm`` is an mpi4py communicator (or
anything with rank, size, bcast, allreduce, allgather and barrier).

    from mpi4py import MPI
    import msa_gce
    gce = msa_gce.Gce(MPI.COMM_WORLD)        # collective: rank 0 creates the communicator on the GCE
    total = gce.allreduce([1.0, 2.0], "sum")
    print(gce.last_path)                     # "gce", or "software: <why>"
    gce.barrier()
    gce.close()

Without MPI (no mpi4py on the node), ``SlurmComm()`` is a communicator of the tasks of one ``srun`` step, built
from Slurm's environment (SLURM_PROCID, SLURM_NTASKS, SLURM_STEP_NODELIST): rank 0 on the step's first node serves
the other ranks over TCP, JSON only (no pickle). Its collectives are the "software collective" of such a job.

The decision to fall back depends only on the call's arguments and the communicator, so every rank takes the same
path. A rank that never arrives fails the operation on every rank with an error naming it (GceError), after the
timeout; nothing hangs.
"""
from __future__ import annotations

import array
import json
import os
import socket
import subprocess
import sys
import time

from msa_nam import Connection, Manager, NamError, error_of

# Seed 004 Table 1 (the same numbers as the collection's module_utils/_gce.py; a test keeps them equal).
MAX_OPERATION_SIZE = 8 << 20
MAX_PROCESSES_PER_COMMUNICATOR = 1024
# The operations and element types this GCE reduces (the rest of Table 1's 16 operations and 64 types go to software).
OPERATIONS = ("sum", "prod", "min", "max", "land", "lor", "lxor", "band", "bor", "bxor")
BITWISE = ("band", "bor", "bxor")
TYPECODES = {"b": "int8", "B": "uint8", "h": "int16", "H": "uint16", "i": "int32", "I": "uint32",
             "l": "int%d" % (8 * array.array("l").itemsize), "L": "uint%d" % (8 * array.array("L").itemsize),
             "q": "int64", "Q": "uint64", "f": "float32", "d": "float64"}


class GceError(NamError):
    """A collective that failed on the GCE (a rank missing, a refused capability): not a reason to fall back."""


def _mpi_ops():
    """mpi4py's reduction operations, by name, when the job's code has imported mpi4py.MPI; never imported here:
    importing it initialises MPI, which fails in a step srun started without --mpi=pmix (a SlurmComm job's)."""
    MPI = sys.modules.get("mpi4py.MPI")  # pylint: disable=invalid-name
    if MPI is None:
        return {}
    return {MPI.SUM: "sum", MPI.PROD: "prod", MPI.MIN: "min", MPI.MAX: "max", MPI.LAND: "land", MPI.LOR: "lor",
            MPI.LXOR: "lxor", MPI.BAND: "band", MPI.BOR: "bor", MPI.BXOR: "bxor"}


def _rank_size(comm):
    rank = comm.Get_rank() if hasattr(comm, "Get_rank") else comm.rank
    size = comm.Get_size() if hasattr(comm, "Get_size") else comm.size
    return rank, size


def encode(values):
    """``(typecode, buffer, scalar)`` for a number, a list of numbers or an array.array; None when the GCE has no
    type for it (the reason as the second element)."""
    scalar = isinstance(values, (int, float)) and not isinstance(values, bool)
    if scalar:
        values = [values]
    if isinstance(values, array.array):
        if values.typecode not in TYPECODES:
            return None, "array typecode %r has no GCE data type" % values.typecode, False
        return values.typecode, values, scalar
    if isinstance(values, (list, tuple)) and values:
        if all(isinstance(v, int) and not isinstance(v, bool) for v in values):
            try:
                return "q", array.array("q", values), scalar
            except OverflowError:
                return None, "an integer does not fit in 64 bits", False
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
            return "d", array.array("d", values), scalar
    return None, "type %s has no GCE data type (numbers, lists of numbers, array.array)" % type(values).__name__, False


class SlurmComm:
    """The tasks of one srun step as a communicator, without MPI: ``rank``, ``size``, ``allgather``, ``bcast``,
    ``barrier`` and ``allreduce`` (of numbers, or element-wise of equal-length sequences) through rank 0, which
    listens on ``port`` (by default one derived from the job and step ids) of the step's first node."""

    def __init__(self, env=None, port=None, timeout=60, root_host=None):
        env = os.environ if env is None else env
        try:
            self.rank, self.size = int(env["SLURM_PROCID"]), int(env["SLURM_NTASKS"])
            job, step = int(env["SLURM_JOB_ID"]), int(env.get("SLURM_STEP_ID", "0"))
            nodelist = env["SLURM_STEP_NODELIST"]
        except (KeyError, ValueError) as exc:
            raise NamError("not a task of an srun step (%s): SlurmComm needs SLURM_PROCID, SLURM_NTASKS, SLURM_JOB_ID "
                           "and SLURM_STEP_NODELIST" % exc) from None
        self.port = int(port or 20000 + (job * 16 + step) % 20000)
        self.timeout = timeout
        self.peers = []
        if self.size == 1:
            return
        if self.rank == 0:
            self._serve()
        else:
            self._connect(root_host or self._first_node(nodelist))

    @staticmethod
    def _first_node(nodelist):
        proc = subprocess.run(["scontrol", "show", "hostnames", nodelist], capture_output=True, timeout=30,
                              check=False)
        nodes = proc.stdout.decode().split()
        if proc.returncode != 0 or not nodes:
            raise NamError("cannot expand the step's node list %r: %s" % (nodelist, proc.stderr.decode().strip()))
        return nodes[0]

    def _serve(self):
        with socket.create_server(("", self.port), reuse_port=False) as srv:
            srv.settimeout(self.timeout)
            peers = {}
            while len(peers) < self.size - 1:
                try:
                    sock = srv.accept()[0]
                except socket.timeout:
                    raise NamError("SlurmComm: %d of %d ranks reached rank 0 on port %d within %d s"
                                   % (len(peers) + 1, self.size, self.port, self.timeout)) from None
                sock.settimeout(self.timeout)
                fh = sock.makefile("rwb")
                hello = json.loads(fh.readline() or b"{}")
                rank = hello.get("rank")
                if not isinstance(rank, int) or not 0 < rank < self.size or rank in peers:
                    sock.close()
                    continue
                peers[rank] = (sock, fh)
            self.peers = [peers[r] for r in range(1, self.size)]

    def _connect(self, host):
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                sock = socket.create_connection((host, self.port), timeout=self.timeout)
                break
            except OSError as exc:
                if time.monotonic() > deadline:
                    raise NamError("SlurmComm: rank %d cannot reach rank 0 at %s:%d: %s"
                                   % (self.rank, host, self.port, exc)) from None
                time.sleep(0.2)
        fh = sock.makefile("rwb")
        fh.write(json.dumps({"rank": self.rank}).encode() + b"\n")
        fh.flush()
        self.peers = [(sock, fh)]

    @staticmethod
    def _send(fh, obj):
        fh.write(json.dumps(obj, default=lambda o: o.tolist()).encode() + b"\n")
        fh.flush()

    @staticmethod
    def _recv(fh):
        line = fh.readline()
        if not line:
            raise NamError("SlurmComm: a rank left the communicator")
        return json.loads(line)

    def allgather(self, obj):
        """Every rank's ``obj`` (JSON values; array.array as a list), in rank order, on every rank."""
        if self.size == 1:
            return [json.loads(json.dumps(obj, default=lambda o: o.tolist()))]
        if self.rank == 0:
            everything = [json.loads(json.dumps(obj, default=lambda o: o.tolist()))]
            everything += [self._recv(peer[1]) for peer in self.peers]
            for peer in self.peers:
                self._send(peer[1], everything)
            return everything
        self._send(self.peers[0][1], obj)
        return self._recv(self.peers[0][1])

    def bcast(self, obj, root=0):
        return self.allgather(obj if self.rank == root else None)[root]

    def barrier(self):
        self.allgather(None)

    def allreduce(self, value, op="sum"):
        if not isinstance(op, str) or op not in SOFTWARE:
            raise NamError("SlurmComm reduces with %s, not %r" % (", ".join(SOFTWARE), op), "op", op)
        func = SOFTWARE[op]
        gathered = self.allgather(value)
        if isinstance(value, (list, tuple, array.array)):
            result = list(gathered[0])
            for other in gathered[1:]:
                result = [func(a, b) for a, b in zip(result, other)]
            return result
        result = gathered[0]
        for other in gathered[1:]:
            result = func(result, other)
        return result

    def close(self):
        for sock, fh in self.peers:
            fh.close()
            sock.close()
        self.peers = []


class Gce:
    """A communicator on the GCE. Create it on every rank of ``comm`` at the same time (it is collective)."""

    def __init__(self, comm, name=None, manager=None, timeout=60, **kw):
        self.comm = comm
        self.rank, self.size = _rank_size(comm)
        self.timeout = int(timeout)
        self.seq = 0
        self.last_path = None
        self.board = self.manager = self.access = None
        self.unusable = None        # why the whole communicator runs in software
        info = None
        hosts = comm.allgather(socket.gethostname())     # the members' nodes, in rank order
        if self.rank == 0:
            info = self._create(hosts, name, manager, kw)
        info = comm.bcast(info, root=0)
        if "fallback" in info:
            self.unusable = info["fallback"]
        else:
            self.access = info["access"]
            self.board = Connection(self.access["url"], info["ca_path"], self.timeout + 30)
            self._auth = {"Authorization": "Capability " + self.access["capability"],
                          "Content-Type": "application/octet-stream"}

    def _create(self, hosts, name, manager, kw):
        if self.size > MAX_PROCESSES_PER_COMMUNICATOR:
            return {"fallback": "%d ranks exceed the GCE limit of %d processes per communicator"
                                % (self.size, MAX_PROCESSES_PER_COMMUNICATOR)}
        try:
            self.manager = manager or Manager(**kw)
            body = {"members": [{"node": host, "vpid": rank} for rank, host in enumerate(hosts)]}
            if name:
                body["name"] = name
            comm = self.manager.call("POST", "/gce/communicators", body)
            if comm.get("fallback"):
                return {"fallback": comm.get("reason") or comm.get("limit")}
            access = self.manager.call("POST", "/gce/communicators/%d/access" % comm["id"])
        except NamError as exc:
            return {"fallback": "the GCE is not available: %s" % exc}
        return {"access": access, "ca_path": self.manager.ca_path}

    # ------------------------------------------------------------------ the decision

    def _why_software(self, op, typecode, nbytes):
        if self.unusable:
            return self.unusable
        if op not in OPERATIONS:
            return "op %r is not one the GCE runs (%s)" % (op, ", ".join(OPERATIONS))
        if typecode is None:
            return None
        if op in BITWISE and TYPECODES[typecode].startswith("float"):
            return "op %s is not defined on %s" % (op, TYPECODES[typecode])
        if nbytes > MAX_OPERATION_SIZE:
            return "%d bytes exceed the GCE limit of %d bytes (8 MiB) per operation" % (nbytes, MAX_OPERATION_SIZE)
        return None

    def _post(self, op, datatype, payload):
        seq = self.seq
        self.seq += 1
        status, raw = self.board.call(
            "POST", "/v1/gce/%d/allreduce?rank=%d&seq=%d&op=%s&datatype=%s&timeout=%d" % (
                self.access["communicator"], self.rank, seq, op, datatype, self.timeout), payload, self._auth)
        if status != 200:
            err = error_of(status, raw, "GCE %s (operation %d, rank %d)" % (op, seq, self.rank))
            raise GceError(str(err), err.field, err.value, err.status, err.code)
        return raw

    # ------------------------------------------------------------------ collectives

    def allreduce(self, values, op="sum"):
        """Element-wise reduction of every rank's ``values`` (a number, a list of numbers or an array.array);
        ``op`` a name (sum, prod, min, max, land, lor, lxor, band, bor, bxor) or an mpi4py MPI.Op."""
        name = _mpi_ops().get(op, op) if not isinstance(op, str) else op
        typecode, buf, scalar = encode(values)
        nbytes = len(buf) * buf.itemsize if typecode else 0
        why = self._why_software(name, typecode, nbytes) or (buf if typecode is None else None)
        if why:
            self.last_path = "software: %s" % why
            return self._software(values, op, name)
        raw = self._post(name, TYPECODES[typecode], buf.tobytes())
        self.last_path = "gce"
        result = array.array(typecode, raw)
        if scalar:
            return result[0]
        return result if isinstance(values, array.array) else result.tolist()

    def _software(self, values, op, name):
        """The MPI library's own collective: ``comm.allreduce`` for a number (or what the GCE has no type for),
        element-wise over ``comm.allgather`` for a sequence (mpi4py's allreduce would concatenate lists)."""
        mpi_op = op
        if isinstance(op, str):
            mpi_op = {v: k for k, v in _mpi_ops().items()}.get(op, op)
        if not isinstance(values, (list, tuple, array.array)) or name not in SOFTWARE:
            return self.comm.allreduce(values, op=mpi_op)
        func = SOFTWARE[name]
        gathered = self.comm.allgather(values)
        result = list(gathered[0])
        for other in gathered[1:]:
            result = [func(a, b) for a, b in zip(result, other)]
        return array.array(values.typecode, result) if isinstance(values, array.array) else result

    def barrier(self):
        if self.unusable:
            self.last_path = "software: %s" % self.unusable
            self.comm.barrier()
            return
        self._post("barrier", "none", b"")
        self.last_path = "gce"

    def close(self):
        """Release the communicator on the GCE (collective: rank 0 releases it after every rank is done)."""
        if self.board is not None:
            self.board.close()
        self.comm.barrier()
        if self.rank == 0 and self.manager is not None:
            try:
                self.manager.call("DELETE", "/gce/communicators/%d" % self.access["communicator"])
            finally:
                self.manager.close()


SOFTWARE = {"sum": lambda a, b: a + b, "prod": lambda a, b: a * b, "min": min, "max": max,
            "land": lambda a, b: int(bool(a) and bool(b)), "lor": lambda a, b: int(bool(a) or bool(b)),
            "lxor": lambda a, b: int(bool(a) != bool(b)), "band": lambda a, b: a & b, "bor": lambda a, b: a | b,
            "bxor": lambda a, b: a ^ b}
