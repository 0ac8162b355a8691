# SPDX-License-Identifier: GPL-3.0-or-later
"""GCE limits of seed 004 Table 1, the checks that decide on the software fall-back, and the communicator service."""
from __future__ import annotations

from ansible_collections.msa.hpc.plugins.module_utils._nam import ManagerError, ManagerService, quote_path
from ansible_collections.msa.hpc.plugins.module_utils._rest import send_again

MIB = 1 << 20

# Seed 004, Table 1: GCE hardware parameters and limits of the DEEP-EST prototype.
MAX_OPERATION_SIZE = 8 * MIB           # max. collective operation data size (count varies with data type size)
MAX_COMMUNICATORS = 256                # in the system, over all jobs; Comm ID length 8 bits
MAX_OPERATIONS_PER_COMMUNICATOR = 8    # concurrent collective operations; ICID length 3 bits
MAX_PROCESSES_PER_COMMUNICATOR = 1024  # rank length 10 bits
ADDRESS_BITS = 64                      # memory address length
OPERATION_BITS = 4                     # arithmetic-logical operation encoding: 16 operations
DATATYPE_BITS = (4, 2)                 # data type and size encoding: 4 + 2 bits, 64 data types

LIMITS = {
    "max_operation_size": MAX_OPERATION_SIZE,
    "max_communicators": MAX_COMMUNICATORS,
    "max_operations_per_communicator": MAX_OPERATIONS_PER_COMMUNICATOR,
    "max_processes_per_communicator": MAX_PROCESSES_PER_COMMUNICATOR,
    "address_bits": ADDRESS_BITS,
    "operation_encodings": 1 << OPERATION_BITS,
    "datatype_encodings": 1 << sum(DATATYPE_BITS),
}

# The 16 operation codes (4 bits). The seed fixes only their number; these are the MPI operations the
# GCE offloads, in encoding order.
OPERATIONS = ("sum", "prod", "min", "max", "land", "lor", "lxor", "band", "bor", "bxor",
              "minloc", "maxloc", "replace", "barrier", "bcast", "allgather")

# Data type = 4-bit type class x 2-bit element size (1, 2, 4 or 8 bytes): 64 encodings.
TYPE_CLASSES = ("int", "uint", "float", "bool", "char", "complex", "pair_int", "pair_float",
                "logical", "byte", "packed", "bfloat", "fixed", "index", "user0", "user1")
ELEMENT_SIZES = (1, 2, 4, 8)
DATATYPES = {"%s%d" % (cls, 8 * size): size for cls in TYPE_CLASSES for size in ELEMENT_SIZES}


class Fallback(Exception):
    """The GCE cannot serve this request; the MPI library must use its software collectives."""

    def __init__(self, limit, reason):
        super().__init__(reason)
        self.limit = limit
        self.reason = reason

    def as_dict(self):
        return {"fallback": "software", "limit": self.limit, "reason": self.reason}


def check_communicator_size(size, in_use=0, max_communicators=MAX_COMMUNICATORS):
    """Raise Fallback when a communicator of ``size`` processes cannot live on the GCE."""
    if size > MAX_PROCESSES_PER_COMMUNICATOR:
        raise Fallback("max_processes_per_communicator",
                       "a communicator of %d processes exceeds the GCE limit of %d processes per communicator "
                       "(rank field of 10 bits); use software collectives"
                       % (size, MAX_PROCESSES_PER_COMMUNICATOR))
    if in_use >= max_communicators:
        raise Fallback("max_communicators",
                       "all %d GCE communicators of the system are in use (Comm ID field of 8 bits); "
                       "use software collectives" % max_communicators)


def check_operation(op, datatype, size, active=0):
    """Raise Fallback when one collective operation cannot run on the GCE; return its element count."""
    if op not in OPERATIONS:
        raise Fallback("operation_encodings", "operation %r is not one of the GCE's %d operations (%s)"
                       % (op, len(OPERATIONS), ", ".join(OPERATIONS)))
    if datatype not in DATATYPES:
        raise Fallback("datatype_encodings", "data type %r is not one of the GCE's %d data types "
                       "(a class from %s with 8, 16, 32 or 64 bits, e.g. float64)"
                       % (datatype, len(DATATYPES), ", ".join(TYPE_CLASSES)))
    if size > MAX_OPERATION_SIZE:
        raise Fallback("max_operation_size", "an operation of %d bytes exceeds the GCE limit of %d bytes (8 MiB)"
                       % (size, MAX_OPERATION_SIZE))
    if size % DATATYPES[datatype]:
        raise ValueError("size %d is not a multiple of the %d-byte element of %s"
                         % (size, DATATYPES[datatype], datatype))
    if active >= MAX_OPERATIONS_PER_COMMUNICATOR:
        raise Fallback("max_operations_per_communicator",
                       "the communicator already runs %d concurrent operations, the GCE limit (ICID field of 3 bits)"
                       % MAX_OPERATIONS_PER_COMMUNICATOR)
    return size // DATATYPES[datatype]


def normalise_process(value, field):
    """``{"node": N, "vpid": V}`` (or ``"N:V"``) → (node, vpid) with node a name or EXTOLL node id, vpid an int."""
    if isinstance(value, str) and ":" in value:
        node, vpid = value.rsplit(":", 1)
        value = {"node": node, "vpid": vpid}
    if not isinstance(value, dict) or "node" not in value or "vpid" not in value:
        raise ValueError("%s %r is not a process (expected {node: ..., vpid: ...} or 'node:vpid')" % (field, value))
    node, vpid = value["node"], value["vpid"]
    if isinstance(node, bool) or not isinstance(node, (int, str)) or str(node).strip() == "":
        raise ValueError("%s.node %r is not a node name or EXTOLL node id" % (field, node))
    try:
        vpid = int(vpid)
    except (TypeError, ValueError):
        raise ValueError("%s.vpid %r is not an integer" % (field, vpid)) from None
    if isinstance(value["vpid"], bool) or vpid < 0:
        raise ValueError("%s.vpid %r is not a non-negative integer" % (field, value["vpid"]))
    return str(node).strip(), vpid


class GceService(ManagerService):
    """GCE operations of the manager: communicators by id or name, and the limits left."""

    def limits(self):
        return self._call("GET", "gce/limits")[1]

    def find(self, name):
        found = self._call("GET", "gce/communicators?name=%s" % quote_path(name))[1]["communicators"]
        return found[0] if found else None

    def create(self, members, root=None, name=None, job=None, owner=None, size=None):
        body = {"members": members, "root": root, "name": name, "job": job, "owner": owner, "size": size}

        def made_already():
            comm = self.find(name)
            return dict(comm, limits_left=self.limits()["left"]) if comm and comm.get("job") == job else None
        return self._call("POST", "gce/communicators", {k: v for k, v in body.items() if v is not None},
                          what="create GCE communicator %s" % (name or ""),
                          lookup=made_already if name is not None else None)[1]

    def release(self, comm_id):
        status = self._call("DELETE", "gce/communicators/%s" % comm_id, ok=(200, 404))[0]
        return status == 200

    def free_job(self, job):
        return self._call("DELETE", "gce/jobs/%s" % quote_path(job), lookup=send_again)[1]

    def free_orphans(self, live_jobs, min_age=0):
        """Release the communicators of every job not in ``live_jobs`` (older than ``min_age`` seconds)."""
        return self._call("POST", "gce/admin/orphans", {"live_jobs": [str(j) for j in live_jobs],
                                                        "min_age": int(min_age)})[1]


def _same(comm, members, root):
    return ([(m["node"], m["vpid"]) for m in comm["members"]] == members and
            (comm["root"]["node"], comm["root"]["vpid"]) == root)


def ensure_communicator(gce, params, check_mode=False):
    """Bring communicator ``params["name"]`` to ``params["state"]``; the result of the gce_comm module.

    A communicator whose members or root differ is released and created again (MPI communicators are
    immutable). When the GCE cannot hold it (more than 1024 processes, all 256 Comm IDs in use) nothing
    changes and the result says ``fallback: software`` with the reason: the MPI library then uses its
    software collectives, as seed 004 requires.
    """
    name = params["name"]
    before = gce.find(name)
    result = {"changed": False, "communicator": None, "id": None, "comm_id": None, "fallback": None,
              "fallback_reason": None}
    if params["state"] == "absent":
        if before is not None:
            result["changed"] = True
            if not check_mode:
                gce.release(before["id"])
        result["limits_left"] = gce.limits()["left"] if not check_mode or before is None else None
        result["diff"] = {"before": _comm_summary(before), "after": {}}
        return result
    raw = params.get("members") or []
    if not raw:
        raise ManagerError("members is required: the processes of communicator %r in rank order" % name)
    members = [normalise_process(m, "members[%d]" % i) for i, m in enumerate(raw)]
    root = normalise_process(params["root"], "root") if params.get("root") else members[0]
    if root not in members:
        raise ManagerError("root %s:%s is not one of the members of communicator %r" % (root[0], root[1], name))
    if len(set(members)) != len(members):
        raise ManagerError("members of communicator %r list a process twice" % name)
    if before is not None and _same(before, members, root):
        result.update(communicator=before, id=before["id"], comm_id=before["comm_id"],
                      limits_left=gce.limits()["left"], diff={"before": _comm_summary(before),
                                                              "after": _comm_summary(before)})
        return result
    limits = gce.limits()
    in_use = limits["in_use"]["communicators"] - (1 if before is not None else 0)
    try:
        if not limits.get("devices"):
            raise Fallback("gce_devices", "no GCE device is configured; use software collectives")
        check_communicator_size(len(members), in_use)
    except Fallback as fb:
        result.update(fallback="software", fallback_reason=fb.reason, fallback_limit=fb.limit,
                      limits_left=limits["left"], diff={"before": _comm_summary(before),
                                                        "after": _comm_summary(before)})
        if before is not None:
            result["communicator"], result["id"], result["comm_id"] = before, before["id"], before["comm_id"]
        return result
    planned = {"name": name, "members": [{"node": n, "vpid": v} for n, v in members],
               "root": {"node": root[0], "vpid": root[1]}, "size": len(members), "job": params.get("job"),
               "owner": params.get("owner"), "id": None, "comm_id": None}
    result["changed"] = True
    if check_mode:
        left = dict(limits["left"], communicators=limits["left"]["communicators"] - (0 if before else 1))
        result.update(communicator=planned, limits_left=left)
    else:
        if before is not None:
            gce.release(before["id"])
        answer = gce.create([{"node": n, "vpid": v} for n, v in members], {"node": root[0], "vpid": root[1]},
                            name, params.get("job"), params.get("owner"))
        if answer.get("fallback"):   # another job took the last Comm ID in between
            result.update(changed=before is not None, fallback="software", fallback_reason=answer["reason"],
                          fallback_limit=answer.get("limit"), limits_left=gce.limits()["left"])
            result["diff"] = {"before": _comm_summary(before), "after": {}}
            return result
        result.update(communicator=answer, id=answer["id"], comm_id=answer["comm_id"],
                      limits_left=answer.get("limits_left"))
    result["diff"] = {"before": _comm_summary(before), "after": _comm_summary(result["communicator"])}
    return result


def _comm_summary(comm):
    if not comm:
        return {}
    return {"name": comm.get("name"), "id": comm.get("id"), "size": comm.get("size"),
            "root": "%s:%s" % (comm["root"]["node"], comm["root"]["vpid"]),
            "members": ["%s:%s" % (m["node"], m["vpid"]) for m in comm["members"]]}
