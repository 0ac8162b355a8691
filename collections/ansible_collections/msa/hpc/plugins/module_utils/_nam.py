# SPDX-License-Identifier: GPL-3.0-or-later
"""NAM sizes in human units and the service layer over the NAM/GCE manager's REST API (any RestClient)."""
from __future__ import annotations

from urllib.parse import quote

from ansible_collections.msa.hpc.plugins.module_utils._rest import send_again
from ansible_collections.msa.hpc.plugins.module_utils._sizes import SizeError, format_size, parse_size  # noqa: F401 pylint: disable=unused-import

# Sizes have one parser in the collection (_sizes: powers of 1024 in every spelling); re-exported here for the
# callers that know them as NAM sizes.


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


class ManagerService:
    """Base of the NAM and GCE services: one RestClient, manager errors turned into ManagerError."""

    def __init__(self, client):
        self.client = client

    def _call(self, method, path, body=None, ok=(200, 201), what=None, lookup=None):
        """``lookup`` finds what a POST whose answer was lost made (None: it made nothing), so it is not repeated."""
        status, payload = self.client.request(method, path, body=body, expect=tuple(ok) + (400, 403, 404, 409),
                                              lookup=lookup)[:2]
        if status not in ok:
            raise _error(status, payload, what or "%s %s" % (method, path))
        return status, payload


class NamService(ManagerService):
    """NAM operations of the manager: allocations by id or name, attach and detach, job clean-up."""

    def devices(self):
        return self._call("GET", "nam/devices")[1]["devices"]

    def find(self, name):
        """The live allocation called ``name``, or None."""
        found = self._call("GET", "nam/allocations?name=%s" % quote_path(name))[1]["allocations"]
        return found[0] if found else None

    def get(self, alloc_id):
        status, payload = self._call("GET", "nam/allocations/%s" % alloc_id, ok=(200, 404))
        return payload if status == 200 else None

    def list(self, job=None, owner=None):
        query = "&".join("%s=%s" % (k, quote_path(v)) for k, v in (("job", job), ("owner", owner)) if v is not None)
        return self._call("GET", "nam/allocations" + ("?" + query if query else ""))[1]["allocations"]

    def allocate(self, size, volatile=True, job=None, owner=None, name=None, device=None, reserved=False):
        body = {"size": size, "volatile": bool(volatile), "job": job, "owner": owner, "name": name,
                "device": device, "reserved": bool(reserved)}
        return self._call("POST", "nam/allocations", {k: v for k, v in body.items() if v is not None},
                          what="allocate %s of NAM memory" % format_size(size),
                          lookup=self._made(name, job) if name is not None else None)[1]

    def _made(self, name, job):
        """The lookup of an allocation by its name (and job): the one a lost answer was about, or None."""
        def made_already():
            found = self._call("GET", "nam/allocations?name=%s" % quote_path(name))[1]["allocations"]
            want = None if job is None else str(job)
            return next((a for a in found if a.get("job") == want), None)
        return made_already

    def free(self, alloc_id):
        """Free one allocation; False when it was already gone."""
        status = self._call("DELETE", "nam/allocations/%s" % alloc_id, ok=(200, 404))[0]
        return status == 200

    def attach(self, alloc_id, node, vpid):
        # The manager answers a repeated attach with the entry it has (200), so sending one again cannot duplicate.
        return self._call("POST", "nam/allocations/%s/attach" % alloc_id, {"node": node, "vpid": vpid},
                          what="attach node %s vpid %s to allocation %s" % (node, vpid, alloc_id),
                          lookup=send_again)[1]

    def detach(self, alloc_id, node, vpid):
        return self._call("POST", "nam/allocations/%s/detach" % alloc_id, {"node": node, "vpid": vpid},
                          lookup=send_again)[1]

    def free_job(self, job, keep_nonvolatile=False):
        """Free a job's allocations; ``keep_nonvolatile``: only the volatile ones, the non-volatile ones stay for
        their owner's next job (the epilog)."""
        # Freeing a job's allocations twice frees nothing more: a free whose answer was lost is sent again.
        return self._call("DELETE", "nam/jobs/%s%s" % (quote_path(job), "?keep=nonvolatile" if keep_nonvolatile
                                                       else ""), lookup=send_again)[1]

    def job_token(self, owner, job, grant=None):
        """A token for the code of job ``job`` of ``owner``: it reaches that user's allocations and communicators,
        within ``grant`` (what Slurm granted the job: ``uid``, ``ttl`` seconds, ``aat_entries``, ``communicators``),
        until the job ends (revoke_job_token)."""
        body = dict(grant or {}, owner=owner, job=str(job))
        return self._call("POST", "auth/job-token", {k: v for k, v in body.items() if v is not None},
                          what="issue a token for job %s" % job, lookup=send_again)[1]

    def revoke_job_token(self, job):
        """Job ``job`` ended: its tokens stop working and the AAT entries its processes made are removed."""
        return self._call("DELETE", "auth/job-token/%s" % quote_path(job), lookup=send_again)[1]

    def free_orphans(self, live_jobs=None, owner=None, dry_run=False, min_age=0):
        body = {"dry_run": bool(dry_run), "min_age": int(min_age)}
        if live_jobs is not None:
            body["live_jobs"] = [str(j) for j in live_jobs]
        if owner is not None:
            body["owner"] = owner
        return self._call("POST", "nam/admin/orphans", body)[1]


def quote_path(value):
    """One URL path segment or query value."""
    return quote(str(value), safe="")


def _summary(alloc):
    if alloc is None:
        return {}
    keys = ("id", "name", "device", "volatile", "offset", "size", "requested", "job", "owner", "reserved")
    out = {k: alloc.get(k) for k in keys}
    out["attachments"] = sorted("%s:%s" % (a["node"], a["vpid"]) for a in alloc.get("attachments", []))
    return out


def _placement(alloc):
    if not alloc:
        return {"allocation": None}
    return {"allocation": alloc, "id": alloc["id"], "size": alloc["size"], "device": alloc["device"],
            "offset": alloc["offset"], "address": alloc["address"]}


def ensure_segment(nam, params, check_mode=False):
    """Bring the allocation ``params["name"]`` to ``params["state"]``; the result of the nam_segment module.

    ``present`` allocates it when missing (a NAM allocation cannot be resized: a different size or kind is an
    error), ``absent`` frees it, ``attached``/``detached`` add or remove the (node, vpid) AAT entry, creating
    the allocation first for ``attached`` when a size is given.
    """
    state, name = params["state"], params["name"]
    size = parse_size(params["size"], "size") if params.get("size") not in (None, "") else None
    volatile = params.get("volatile", True)
    before = nam.find(name)
    after, attachment, changed = before, None, False
    if state == "absent":
        if before is not None:
            changed = True
            if not check_mode:
                nam.free(before["id"])
            after = None
    else:
        if before is None and state == "detached":
            pass
        elif before is None:
            if size is None:
                raise ManagerError("size is required to create NAM allocation %r (e.g. size: 2G)" % name)
            changed = True
            if check_mode:
                after = {"id": None, "name": name, "size": size, "requested": size, "volatile": volatile,
                         "device": params.get("device"), "offset": None, "address": None, "job": params.get("job"),
                         "owner": params.get("owner"), "reserved": params.get("reserved", False), "attachments": []}
            else:
                after = nam.allocate(size, volatile, params.get("job"), params.get("owner"), name,
                                     params.get("device"), params.get("reserved", False))
        else:
            if size is not None and size not in (before["requested"], before["size"]):
                raise ManagerError("size %r: NAM allocation %r exists with %s (id %s); allocations cannot be resized, "
                                   "free it first (state: absent)"
                                   % (params["size"], name, format_size(before["size"]), before["id"]))
            if bool(volatile) != bool(before["volatile"]):
                kind = "volatile" if before["volatile"] else "non-volatile"
                raise ManagerError("volatile %s: NAM allocation %r exists in %s memory (id %s); free it first "
                                   "(state: absent)" % (volatile, name, kind, before["id"]))
        if state in ("attached", "detached") and after is not None:
            node, vpid = str(params["node"]), int(params["vpid"])
            entry = [a for a in after.get("attachments", []) if (str(a["node"]), a["vpid"]) == (node, vpid)]
            if state == "attached" and not entry:
                changed = True
                if check_mode:
                    attachment = {"node": node, "vpid": vpid, "aat_index": None}
                    after = dict(after, attachments=after.get("attachments", []) + [attachment])
                else:
                    attachment = nam.attach(after["id"], node, vpid)
                    after = nam.get(after["id"])
            elif state == "attached":
                attachment = dict(entry[0], allocation=after["id"], device=after["device"], address=after["address"],
                                  size=after["size"])
            elif entry:
                changed = True
                if not check_mode:
                    nam.detach(after["id"], node, vpid)
                    after = nam.get(after["id"])
                else:
                    after = dict(after, attachments=[a for a in after["attachments"] if a not in entry])
    result = dict(_placement(after), changed=changed,
                  diff={"before": _summary(before), "after": _summary(after)})
    if attachment is not None:
        result["attachment"] = attachment
    return result
