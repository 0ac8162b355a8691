# SPDX-License-Identifier: GPL-3.0-or-later
"""The reduction engine of a GCE board: every rank of a communicator posts its buffer for an operation's sequence
number; when all have arrived the board reduces them and answers each rank with the result.

The GCE's own limits (seed 004 Table 1) hold here as on the hardware: at most 8 operations of a communicator in
flight (ICID of 3 bits), buffers of at most 8 MiB, the 16 operations and the data types of module_utils/_gce.
A rank that does not arrive within the timeout fails the operation for everyone, naming the ranks missing.
"""
from __future__ import annotations

import array
import operator
import threading
import time

from ansible_collections.msa.hpc.plugins.module_utils import _gce as G

# array typecodes of the data types the board computes on (a class of _gce.DATATYPES with a machine type here).
TYPECODES = {}
for _code in "bBhHiIlLqQfd":
    _size = array.array(_code).itemsize
    _cls = "float" if _code in "fd" else ("uint" if _code.isupper() else "int")
    TYPECODES.setdefault("%s%d" % (_cls, 8 * _size), _code)

ELEMENTWISE = {
    "sum": operator.add, "prod": operator.mul, "min": min, "max": max,
    "band": operator.and_, "bor": operator.or_, "bxor": operator.xor,
    "land": lambda a, b: int(bool(a) and bool(b)), "lor": lambda a, b: int(bool(a) or bool(b)),
    "lxor": lambda a, b: int(bool(a) != bool(b)),
}
BITWISE = ("band", "bor", "bxor")


class CollectiveError(Exception):
    def __init__(self, message, status=400, code="invalid"):
        super().__init__(message)
        self.status = status
        self.code = code


def reduce_buffers(op, datatype, buffers):
    """The element-wise reduction of ``buffers`` (bytes, rank order) as bytes of ``datatype``."""
    code = TYPECODES[datatype]
    func = ELEMENTWISE[op]
    arrays = [array.array(code, bytes(b)) for b in buffers]
    acc = arrays[0]
    for other in arrays[1:]:
        acc = array.array(code, map(func, acc, other))
    return acc.tobytes()


class Operation:
    def __init__(self, size, op, datatype, nbytes):
        self.size, self.op, self.datatype, self.nbytes = size, op, datatype, nbytes
        self.buffers = {}
        self.result = None
        self.error = None
        self.fetched = 0


class Engine:
    """Operations in flight per communicator identity (communicator id and creation time from the capability)."""

    def __init__(self, max_timeout=300.0):
        self.max_timeout = max_timeout
        self.cond = threading.Condition()
        self.ops = {}       # (comm, created) -> {seq: Operation}

    def check(self, op, datatype, nbytes):
        if op not in ELEMENTWISE and op != "barrier":
            raise CollectiveError("op %r is not an operation this GCE reduces (%s, barrier)"
                                  % (op, ", ".join(ELEMENTWISE)), code="unsupported")
        if op == "barrier":
            if nbytes:
                raise CollectiveError("length %d: a barrier carries no data" % nbytes)
            return
        if datatype not in TYPECODES:
            raise CollectiveError("datatype %r is not one the GCE reduces here (%s)"
                                  % (datatype, ", ".join(sorted(TYPECODES))), code="unsupported")
        if op in BITWISE and datatype.startswith("float"):
            raise CollectiveError("op %s is not defined on %s" % (op, datatype), code="unsupported")
        if nbytes > G.MAX_OPERATION_SIZE:
            raise CollectiveError("length %d exceeds the GCE limit of %d bytes" % (nbytes, G.MAX_OPERATION_SIZE),
                                  code="max_operation_size")
        if nbytes % array.array(TYPECODES[datatype]).itemsize:
            raise CollectiveError("length %d is not a multiple of the %s element" % (nbytes, datatype))

    def allreduce(self, claims, rank, seq, op, datatype, data, timeout):
        """Post ``data`` of ``rank`` for operation ``seq`` and wait for the reduction of all ranks."""
        size = int(claims["size"])
        key = (int(claims["comm"]), float(claims["created"]))
        for field, value, upper in (("rank", rank, size - 1), ("seq", seq, (1 << 62))):
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= upper:
                raise CollectiveError("%s %r is not between 0 and %d" % (field, value, upper))
        self.check(op, datatype, len(data))
        timeout = min(float(timeout), self.max_timeout)
        deadline = time.monotonic() + timeout
        with self.cond:
            inflight = self.ops.setdefault(key, {})
            current = inflight.get(seq)
            if current is None:
                if len(inflight) >= G.MAX_OPERATIONS_PER_COMMUNICATOR:
                    raise CollectiveError("communicator %s already has %d operations in flight, the GCE limit "
                                          "(ICID of 3 bits)" % (key[0], len(inflight)), 409,
                                          "max_operations_per_communicator")
                current = inflight[seq] = Operation(size, op, datatype, len(data))
            if (current.op, current.datatype, current.nbytes) != (op, datatype, len(data)):
                raise CollectiveError("rank %d posted %s/%s/%d bytes for operation %d, other ranks %s/%s/%d bytes"
                                      % (rank, op, datatype, len(data), seq, current.op, current.datatype,
                                         current.nbytes), 409, "mismatch")
            if rank in current.buffers:
                raise CollectiveError("rank %d posted operation %d twice" % (rank, seq), 409, "duplicate")
            current.buffers[rank] = bytes(data)
            if len(current.buffers) == size and current.error is None:
                current.result = b"" if op == "barrier" else reduce_buffers(
                    op, datatype, [current.buffers[r] for r in range(size)])
                current.buffers = dict.fromkeys(current.buffers, b"")
                self.cond.notify_all()
            while current.result is None and current.error is None:
                left = deadline - time.monotonic()
                if left <= 0:
                    missing = sorted(set(range(size)) - set(current.buffers))
                    current.error = ("operation %d on communicator %s timed out after %.0f s: ranks %s never "
                                     "arrived" % (seq, key[0], timeout, _ranks(missing)))
                    self.cond.notify_all()
                    break
                self.cond.wait(left)
            current.fetched += 1
            if current.fetched == len(current.buffers) or current.error is not None and \
                    current.fetched >= len(current.buffers):
                inflight.pop(seq, None)
                if not inflight:
                    self.ops.pop(key, None)
            if current.error is not None:
                raise CollectiveError(current.error, 504, "timeout")
            return current.result


def _ranks(ranks):
    text = ", ".join(str(r) for r in ranks[:16])
    return text + (" and %d more" % (len(ranks) - 16) if len(ranks) > 16 else "")
