# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

"""NAM sizes in human units and the service layer over the NAM/GCE manager's REST API (any RestClient)."""

import re
from decimal import Decimal, InvalidOperation
from urllib.parse import quote

# Binary multiples throughout, as Slurm reads memory sizes: "M", "MB" and "MiB" all mean 2**20 bytes.
UNITS = {"": 0, "K": 1, "M": 2, "G": 3, "T": 4, "P": 5, "E": 6}
SIZE_RE = re.compile(r"^\s*(?P<num>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*(?P<unit>[KMGTPE]?)(?P<i>i?)(?P<b>B?)\s*$",
                     re.IGNORECASE)


class SizeError(ValueError):
    """A size that cannot be read; the message names the field and the value."""


def parse_size(value, field="size"):
    """``512M``, ``2G``, ``1.5TiB``, ``4096`` or an int → bytes (binary multiples; a whole, positive number)."""
    if isinstance(value, bool):
        raise SizeError("%s %r is not a size (expected bytes or a number with K, M, G, T, P or E)" % (field, value))
    if isinstance(value, int):
        if value <= 0:
            raise SizeError("%s %r must be positive" % (field, value))
        return value
    if isinstance(value, float):
        value = repr(value)
    if not isinstance(value, str):
        raise SizeError("%s %r is not a size (expected bytes or a number with K, M, G, T, P or E)" % (field, value))
    m = SIZE_RE.match(value)
    if not m or (m.group("i") and not m.group("unit")):
        raise SizeError("%s %r is not a size (expected a number with an optional unit K, M, G, T, P or E, "
                        "e.g. 512M, 2G, 1.5TiB)" % (field, value))
    try:
        number = Decimal(m.group("num"))
    except InvalidOperation:
        raise SizeError("%s %r is not a size" % (field, value)) from None
    scaled = number * (1 << (10 * UNITS[m.group("unit").upper()]))
    if scaled != scaled.to_integral_value():
        raise SizeError("%s %r is not a whole number of bytes (%s)" % (field, value, scaled))
    if scaled <= 0:
        raise SizeError("%s %r must be positive" % (field, value))
    return int(scaled)


def format_size(nbytes):
    """Bytes → the shortest exact binary form (``1.5GiB``, ``4KiB``, ``100B``)."""
    nbytes = int(nbytes)
    for unit in ("E", "P", "T", "G", "M", "K"):
        scale = 1 << (10 * UNITS[unit])
        if nbytes >= scale:
            text = ("%.3f" % (Decimal(nbytes) / scale)).rstrip("0").rstrip(".")
            if Decimal(text) * scale == nbytes:
                return text + unit + "iB"
    return "%dB" % nbytes


class ManagerError(Exception):
    """The manager refused a request; ``code`` is its error code (``no_space``, ``aat_full``, ...)."""

    def __init__(self, message, code=None, status=None, details=None):
        super().__init__(message)
        self.code = code
        self.status = status
        self.details = details or {}


def _error(status, body, what):
    err = (body or {}).get("error") if isinstance(body, dict) else None
    if isinstance(err, dict):
        return ManagerError("%s: %s" % (what, err.get("message")), err.get("code"), status, err)
    return ManagerError("%s: HTTP %s" % (what, status), None, status)


class NamService:
    """NAM operations of the manager: allocations by id or name, attach and detach, job clean-up."""

    def __init__(self, client):
        self.client = client

    def _call(self, method, path, body=None, ok=(200, 201), what=None):
        status, payload, _ = self.client.request(method, path, body=body, expect=tuple(ok) + (400, 403, 404, 409))
        if status not in ok:
            raise _error(status, payload, what or "%s %s" % (method, path))
        return status, payload

    def devices(self):
        return self._call("GET", "nam/devices")[1]["devices"]

    def find(self, name):
        """The live allocation called ``name``, or None."""
        found = self._call("GET", "nam/allocations?name=%s" % _quote(name))[1]["allocations"]
        return found[0] if found else None

    def get(self, alloc_id):
        status, payload = self._call("GET", "nam/allocations/%s" % alloc_id, ok=(200, 404))
        return payload if status == 200 else None

    def list(self, job=None, owner=None):
        query = "&".join("%s=%s" % (k, _quote(v)) for k, v in (("job", job), ("owner", owner)) if v is not None)
        return self._call("GET", "nam/allocations" + ("?" + query if query else ""))[1]["allocations"]

    def allocate(self, size, volatile=True, job=None, owner=None, name=None, device=None, reserved=False):
        body = {"size": size, "volatile": bool(volatile), "job": job, "owner": owner, "name": name,
                "device": device, "reserved": bool(reserved)}
        return self._call("POST", "nam/allocations", {k: v for k, v in body.items() if v is not None},
                          what="allocate %s of NAM memory" % format_size(size))[1]

    def free(self, alloc_id):
        """Free one allocation; False when it was already gone."""
        status, _ = self._call("DELETE", "nam/allocations/%s" % alloc_id, ok=(200, 404))
        return status == 200

    def attach(self, alloc_id, node, vpid):
        return self._call("POST", "nam/allocations/%s/attach" % alloc_id, {"node": node, "vpid": vpid},
                          what="attach node %s vpid %s to allocation %s" % (node, vpid, alloc_id))[1]

    def detach(self, alloc_id, node, vpid):
        return self._call("POST", "nam/allocations/%s/detach" % alloc_id, {"node": node, "vpid": vpid})[1]

    def free_job(self, job):
        return self._call("DELETE", "nam/jobs/%s" % _quote(job))[1]

    def free_orphans(self, live_jobs=None, owner=None, dry_run=False):
        body = {"dry_run": bool(dry_run)}
        if live_jobs is not None:
            body["live_jobs"] = [str(j) for j in live_jobs]
        if owner is not None:
            body["owner"] = owner
        return self._call("POST", "nam/admin/orphans", body)[1]


class GceService:
    """GCE operations of the manager: communicators by id or name, and the limits left."""

    def __init__(self, client):
        self.client = client

    _call = NamService._call

    def limits(self):
        return self._call("GET", "gce/limits")[1]

    def find(self, name):
        found = self._call("GET", "gce/communicators?name=%s" % _quote(name))[1]["communicators"]
        return found[0] if found else None

    def create(self, members, root=None, name=None, job=None, owner=None, size=None):
        body = {"members": members, "root": root, "name": name, "job": job, "owner": owner, "size": size}
        return self._call("POST", "gce/communicators", {k: v for k, v in body.items() if v is not None},
                          what="create GCE communicator %s" % (name or ""))[1]

    def release(self, comm_id):
        status, _ = self._call("DELETE", "gce/communicators/%s" % comm_id, ok=(200, 404))
        return status == 200

    def free_job(self, job):
        return self._call("DELETE", "gce/jobs/%s" % _quote(job))[1]


def _quote(value):
    return quote(str(value), safe="")
