# SPDX-License-Identifier: GPL-3.0-or-later
"""REST API of the NAM/GCE manager (JSON over HTTP/1.1; basic auth or a bearer token on all but /health).

  GET    /health                                  {"ok": true, "schema_version": 2, ...}   (no auth)
  POST   /auth/token                              {"token", "expires", "user", "role"}     (basic auth)
  GET    /nam/devices                             boards with their pools, free bytes, largest segment, AAT use
  GET    /nam/devices/<name>/segments             the free-segment table of one board
  POST   /nam/allocations                         {size, volatile, job, owner, name, device, reserved} -> 201
  GET    /nam/allocations[?job=&owner=&name=]     {"allocations": [...]} (users see their own)
  GET    /nam/allocations/<id>                    one allocation with its attachments
  DELETE /nam/allocations/<id>                    free it (and its AAT entries)
  POST   /nam/allocations/<id>/attach             {node, vpid} -> 201 AAT entry (200 when already attached)
  POST   /nam/allocations/<id>/detach             {node, vpid} -> {"detached": bool}
  GET    /nam/jobs/<job>, DELETE /nam/jobs/<job>  a job's allocations; free them all (idempotent);
                                                  ?keep=nonvolatile: free the volatile ones, keep the others
                                                  for their owner (the Slurm epilog)
  POST   /nam/allocations/<id>/access             a capability for the allocation's board {capability, url, ...}
  POST   /auth/job-token                          {owner, job, uid, ttl, aat_entries, communicators} -> a token for a
                                                  job's code, valid until the job's end (admin; what Slurm granted)
  DELETE /auth/job-token/<job>                    the job ended: its tokens stop working, its AAT entries go (admin)
  POST   /auth/munge-job-token                    {credential} -> the token of a running job whose user made the
                                                  munge credential (payload job=<id>; no other auth, see munge.py)
  POST   /auth/munge-owner-token                  {credential} -> an owner's token (payload owner=<name>): list and
                                                  free the owner's non-volatile allocations no job holds
  POST   /nam/admin/orphans                       {live_jobs: [...], min_age} (the maintenance sweep: revoke, free
                                                  volatile, keep non-volatile, expire) | {owner} | {job}, dry_run
  GET    /nam/admin/check                         invariants of the state (admin)
  GET    /gce/limits                              Table 1 limits, what is in use and what is left
  POST   /gce/communicators                       {members, root, size, name, job, owner} -> 201, or 200 fallback
  GET    /gce/communicators[?name=&job=]          {"communicators": [...]}
  GET    /gce/communicators/<id>, DELETE ...      one communicator; release it
  POST   /gce/communicators/<id>/operations       {op, datatype, size} -> 201 {icid}, or 200 fallback
  DELETE /gce/communicators/<id>/operations/<icid>
  POST   /gce/communicators/<id>/access           a capability for the communicator's GCE board
  DELETE /gce/jobs/<job>, POST /gce/admin/orphans like their NAM counterparts

Errors answer ``{"error": {"code": ..., "message": ...}}`` with 400, 401, 403, 404 or 409.

A job token (a principal with ``job`` set, for the owner, role user) reaches only the routes marked ``job_ok``:
the owner's own allocations (read, attach, access) and communicators (create for the job, read, access, release),
attaching and creating no more than the job's grant allows. An owner's token reaches only the routes marked
``owner_ok``.
"""
from __future__ import annotations

import base64
import binascii
import json
import logging
import re
import pwd
import socket
import subprocess
import time
from urllib.parse import parse_qs, urlsplit

from ansible_collections.msa.hpc.plugins.module_utils import _gce as G
from ansible_collections.msa.hpc.plugins.module_utils._nam import SizeError, parse_size
from ansible_collections.msa.hpc.plugins.module_utils.node.tlsserver import BodyError, TLSThreadingHTTPServer, \
    dispatching
from msa_sim.nammgr import munge
from msa_sim.nammgr.fields import ApiError, bool_ as _bool, count as _count, ident as _ident, process as _process
from msa_sim.nammgr.store import StoreError

log = logging.getLogger("nam-manager")
# Bodies are small JSON documents; the largest is an orphan sweep's list of live jobs. The open routes (the munge
# credential exchange) take less, since anyone may send them.
MAX_BODY = 1 << 20
MAX_OPEN_BODY = 16 << 10
MAX_SIZE = 1 << 62


class Manager:
    """The operations behind the API, with the ownership rules: users act on their own, admins on all."""

    def __init__(self, store, auth, data=None, job_token_ttl=86400):
        self.store = store
        self.auth = auth
        self.data = data
        self.job_token_ttl = job_token_ttl
        auth.job_check = store.job_token_valid   # a job's token acts only while its job's grant is live

    def datapath(self):
        if self.data is None:
            raise ApiError(409, "no_data_path", "the manager has no device_key_file: it issues no capabilities for "
                           "the boards' data paths")
        return self.data

    def retire(self, allocs):
        """Tell the boards to scrub what was just freed (after the commit; best effort, see DataPath.retire)."""
        if self.data is not None:
            for alloc in allocs:
                self.data.retire(alloc)

    @staticmethod
    def _owner(who, body):
        owner = _ident(body.get("owner"), "owner") or who.name
        if owner != who.name and not who.admin:
            raise ApiError(403, "forbidden", "%s may not act for owner %s (only administrators may)"
                           % (who.name, owner))
        return owner

    def allocate(self, who, body):
        try:
            size = parse_size(body.get("size"), "size")
        except SizeError as exc:
            raise ApiError(400, "invalid", str(exc)) from None
        if size > MAX_SIZE:
            raise ApiError(400, "invalid", "size %r is larger than any NAM" % (body.get("size"),))
        reserved = _bool(body.get("reserved"), "reserved", False)
        if reserved and not who.admin:
            raise ApiError(403, "forbidden", "only administrators may allocate from the administrator reserve")
        return self.store.allocate(size, volatile=_bool(body.get("volatile"), "volatile", True),
                                   owner=self._owner(who, body), job=_ident(body.get("job"), "job"),
                                   name=_ident(body.get("name"), "name"), device=_ident(body.get("device"), "device"),
                                   reserved=reserved, created_by=who.name)

    def create_communicator(self, who, body):
        owner = self._owner(who, body)
        members = body.get("members")
        size = body.get("size")
        if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size < 1):
            raise ApiError(400, "invalid", "size %r is not a positive integer" % (size,))
        if members is None:
            if size is not None and size > G.MAX_PROCESSES_PER_COMMUNICATOR:
                return None, G.Fallback("max_processes_per_communicator", _too_big(size))
            raise ApiError(400, "invalid", "members is required: the rank-ordered list of {node, vpid}")
        if not isinstance(members, list) or not members:
            raise ApiError(400, "invalid", "members %r is not a non-empty list of {node, vpid}" % (members,))
        if size is not None and size != len(members):
            raise ApiError(400, "invalid", "size %d does not match the %d members" % (size, len(members)))
        if len(members) > G.MAX_PROCESSES_PER_COMMUNICATOR:
            return None, G.Fallback("max_processes_per_communicator", _too_big(len(members)))
        procs = [_process(m, "members[%d]" % i) for i, m in enumerate(members)]
        if len(set(procs)) != len(procs):
            dup = next(p for p in procs if procs.count(p) > 1)
            raise ApiError(400, "invalid", "members lists node %s vpid %d more than once" % dup)
        root = _process(body["root"], "root") if body.get("root") is not None else procs[0]
        if root not in procs:
            raise ApiError(400, "invalid", "root node %s vpid %d is not among the members" % root)
        job = who.job if who.job is not None else _ident(body.get("job"), "job")
        return self.store.create_communicator(procs, root, owner, name=_ident(body.get("name"), "name"), job=job,
                                              limit_job=who.job)

    def grant_job(self, body):
        """Record what Slurm granted a job and issue its token: ``{token, expires, owner, job, grant}``."""
        owner, job = _ident(body.get("owner"), "owner", True), _ident(body.get("job"), "job", True)
        ttl = _count(body.get("ttl", self.job_token_ttl), "ttl", 1)
        limits = {key: _count(body.get(key, 0), key, 0) for key in ("aat_entries", "communicators")}
        uid = _count(body["uid"], "uid", 0) if body.get("uid") is not None else None
        # a job's time limit beyond the site's longest token is cut to it (the job is not refused for it)
        grant = self.store.grant_job(job, owner, uid=uid, expires=time.time() + min(ttl, self.job_token_ttl),
                                     **limits)
        tok, expires = self.auth.issue_job(owner, job, grant["serial"], grant["expires"])
        return {"token": tok, "expires": expires, "owner": owner, "job": job,
                "grant": {key: grant[key] for key in ("aat_entries", "communicators")}}

    def gce_limits(self):
        in_use, devices = self.store.gce_usage()
        return {"limits": dict(G.LIMITS), "operations": list(G.OPERATIONS), "datatypes": sorted(G.DATATYPES),
                "in_use": {"communicators": in_use},
                "left": {"communicators": max(0, G.MAX_COMMUNICATORS - in_use)} if devices else {"communicators": 0},
                "devices": devices}



def _too_big(size):
    return ("a communicator of %d processes exceeds the GCE limit of %d processes per communicator "
            "(rank field of 10 bits); use software collectives" % (size, G.MAX_PROCESSES_PER_COMMUNICATOR))


class Handler(dispatching("GET", "POST", "DELETE")):
    protocol_version = "HTTP/1.1"
    server_version = "nam-manager/1"
    routes = []
    max_body = MAX_BODY

    def setup(self):
        super().setup()
        # Headers and body leave in two writes; without this, Nagle + delayed ACK cost 40 ms per keep-alive call.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, fmt, *args):
        log.debug("%s %s", self.address_string(), fmt % args)

    # -------------------------------------------------------------- plumbing

    def _send(self, status, payload, headers=None):
        data = json.dumps(payload, sort_keys=True).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)

    def _error(self, status, code, message, headers=None, **details):
        self._send(status, {"error": dict(details, code=code, message=message)}, headers)

    def _body(self, maximum):
        raw = self.read_body(maximum)
        if not raw.strip():
            return {}
        try:
            body = json.loads(raw)
        except ValueError as exc:
            raise ApiError(400, "invalid", "request body is not JSON: %s" % exc) from None
        if not isinstance(body, dict):
            raise ApiError(400, "invalid", "request body must be a JSON object")
        return body

    def _principal(self):
        header = self.headers.get("Authorization") or ""
        scheme, _, value = header.partition(" ")
        auth = self.server.manager.auth
        if scheme.lower() == "basic":
            try:
                user, _, password = base64.b64decode(value.strip(), validate=True).decode().partition(":")
            except (binascii.Error, UnicodeDecodeError):
                return None
            return auth.basic(user, password)
        if scheme.lower() == "bearer":
            return auth.bearer(value.strip())
        return None

    def _dispatch(self, method):
        url = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        try:
            for route_method, pattern, func, open_route, job_ok in self.routes:
                m = pattern.match(url.path.rstrip("/") or "/")
                if m is None:
                    continue
                if route_method != method:
                    continue
                who = None
                if not open_route:
                    who = self._principal()
                    if who is None:
                        return self._error(401, "unauthorized", "authentication required (basic auth with a user of "
                                           "users.conf, or a bearer token from POST /auth/token)",
                                           {"WWW-Authenticate": 'Basic realm="nam-manager"'})
                    if who.job is not None and not job_ok:
                        return self._error(403, "forbidden", "a job's token may not %s %s (only its owner's "
                                           "allocations and communicators)" % (method, url.path))
                # the body is read only now, once its sender is known (or the route is open, and takes little)
                body = self._body(MAX_OPEN_BODY if open_route else MAX_BODY) if method in ("POST", "PUT", "DELETE") \
                    else {}
                status, payload = func(self.server.manager, who, body, query, *m.groups())
                return self._send(status, payload)
            if any(r[1].match(url.path.rstrip("/") or "/") for r in self.routes):
                return self._error(405, "method_not_allowed", "%s is not allowed on %s" % (method, url.path))
            return self._error(404, "not_found", "no such endpoint: %s" % url.path)
        except StoreError as exc:
            return self._error(exc.status, exc.code, exc.message, **exc.details)
        except BodyError as exc:
            return self._send(exc.status, exc.document())
        except Exception as exc:  # an unexpected fault must still answer, and be logged with its traceback
            log.exception("%s %s failed", method, self.path)
            return self._error(500, "internal", "internal error: %s" % exc.__class__.__name__)


def route(method, pattern, open_route=False, job_ok=False, owner_ok=False):
    def wrap(func):
        def guarded(mgr, who, body, query, *groups):
            if who is not None and who.owner_only and not owner_ok:
                raise ApiError(403, "forbidden", "an owner's token may not %s %s (only list and free its own "
                               "non-volatile allocations)" % (method, pattern.replace("([^/]+)", "<id>")))
            return func(mgr, who, body, query, *groups)
        Handler.routes.append((method, re.compile("^" + pattern + "$"), guarded, open_route, job_ok))
        return func
    return wrap


def _admin(who):
    if not who.admin:
        raise ApiError(403, "forbidden", "%s is not an administrator" % who.name)


def _int_id(value, what):
    if not value.isdigit():
        raise ApiError(404, "not_found", "%s %s does not exist" % (what, value))
    return int(value)


def _as_user(who):
    """The owner to enforce: None for administrators (they may touch everything)."""
    return None if who.admin else who.name


def _fallback_answer(fb):
    return 200, dict(fb.as_dict(), created=False)


# ------------------------------------------------------------------ routes

@route("GET", "/health", open_route=True)
def health(mgr, who, body, query):
    return 200, {"ok": True, "schema_version": mgr.store.schema_version(),
                 "nam_devices": len(mgr.store.nam_devices()), "gce_devices": len(mgr.store.gce_usage()[1])}


@route("POST", "/auth/token")
def token(mgr, who, body, query):
    ttl = body.get("ttl")
    if ttl is not None and (isinstance(ttl, bool) or not isinstance(ttl, int) or not 0 < ttl <= mgr.auth.token_ttl):
        raise ApiError(400, "invalid", "ttl %r is not between 1 and %d seconds" % (ttl, mgr.auth.token_ttl))
    tok, expires = mgr.auth.issue(who, ttl)
    return 201, {"token": tok, "expires": expires, "user": who.name, "role": who.role}


@route("POST", "/auth/job-token")
def job_token(mgr, who, body, query):
    _admin(who)
    return 201, mgr.grant_job(body)


@route("DELETE", "/auth/job-token/([^/]+)")
def job_token_revoke(mgr, who, body, query, job):
    _admin(who)
    done = mgr.store.revoke_job(_ident(job, "job", True))
    if done["revoked"] or done["detached"]:
        log.info("job %s ended: its tokens are revoked, %d AAT entries removed", job, done["detached"])
    return 200, done


def _munged(check, *args, **kw):
    """What ``check`` (of munge.py) makes of a munge credential, its refusals as ApiError."""
    try:
        return check(*args, **kw)
    except munge.MungeError as exc:
        raise ApiError(exc.status, "unauthorized" if exc.status == 401 else "forbidden" if exc.status == 403
                       else "invalid", str(exc), field="credential") from None
    except (OSError, ValueError, subprocess.SubprocessError) as exc:
        raise ApiError(503, "unavailable", "cannot check the munge credential: %s" % exc) from None


@route("POST", "/auth/munge-job-token", open_route=True)
def munge_job_token(mgr, who, body, query):
    owner, job = _munged(munge.owner_and_job, body.get("credential"))
    grant = mgr.store.job_grant(job)
    if grant is None or grant["owner"] != owner or grant["revoked"] is not None or grant["expires"] < time.time():
        raise ApiError(403, "forbidden", "job %s has no live NAM/GCE grant (its prolog gave it none, or it ended)"
                       % job, field="credential")
    tok, expires = mgr.auth.issue_job(_ident(owner, "owner", True), job, grant["serial"], grant["expires"])
    log.info("job token for job %s of %s handed over on a munge credential", job, owner)
    return 201, {"token": tok, "expires": expires, "owner": owner, "job": job}


@route("POST", "/auth/munge-owner-token", open_route=True)
def munge_owner_token(mgr, who, body, query):
    owner = _munged(munge.owner_of, body.get("credential"), mgr.store.owner_uid, getpwnam=pwd.getpwnam)
    tok, expires = mgr.auth.issue_owner(owner)
    return 201, {"token": tok, "expires": expires, "owner": owner}


@route("GET", "/nam/devices")
def nam_devices(mgr, who, body, query):
    return 200, {"devices": mgr.store.nam_devices()}


@route("GET", "/nam/devices/([^/]+)/segments")
def nam_segments(mgr, who, body, query, device):
    if not any(d["name"] == device for d in mgr.store.nam_devices()):
        raise ApiError(404, "not_found", "NAM device %s does not exist" % device)
    return 200, {"device": device, "free_segments": mgr.store.free_segments(device)}


@route("POST", "/nam/allocations")
def nam_allocate(mgr, who, body, query):
    return 201, mgr.allocate(who, body)


@route("GET", "/nam/allocations", job_ok=True, owner_ok=True)
def nam_list(mgr, who, body, query):
    owner = query.get("owner")
    if not who.admin:
        if owner not in (None, who.name):
            raise ApiError(403, "forbidden", "%s may list only its own allocations" % who.name)
        owner = who.name
    return 200, {"allocations": mgr.store.allocations(job=query.get("job"), owner=owner, name=query.get("name"),
                                                      device=query.get("device"))}


def _owned(mgr, who, alloc_id):
    """The NAM allocation ``alloc_id`` if it exists and ``who`` owns it (or is an administrator)."""
    alloc = mgr.store.get(_int_id(alloc_id, "NAM allocation"))
    if alloc is None:
        raise ApiError(404, "not_found", "NAM allocation %s does not exist" % alloc_id, id=alloc_id)
    if not who.admin and alloc["owner"] != who.name:
        raise ApiError(403, "not_owner", "NAM allocation %s belongs to %s, not to %s"
                       % (alloc_id, alloc["owner"], who.name), id=alloc["id"])
    return alloc


@route("GET", "/nam/allocations/([^/]+)", job_ok=True, owner_ok=True)
def nam_get(mgr, who, body, query, alloc_id):
    return 200, _owned(mgr, who, alloc_id)


@route("DELETE", "/nam/allocations/([^/]+)", owner_ok=True)
def nam_free(mgr, who, body, query, alloc_id):
    if who.owner_only:
        held = _owned(mgr, who, alloc_id)
        if held["volatile"] or held["job"] is not None:
            raise ApiError(409, "in_use", "NAM allocation %s is %s: an owner's token frees only non-volatile "
                           "allocations no job holds" % (alloc_id, "volatile" if held["volatile"]
                                                         else "held by job %s" % held["job"]), id=held["id"])
    alloc = mgr.store.free(_int_id(alloc_id, "NAM allocation"), _as_user(who))
    mgr.retire([alloc])
    return 200, {"freed": alloc, "detached": len(alloc["attachments"])}


@route("POST", "/nam/allocations/([^/]+)/attach", job_ok=True)
def nam_attach(mgr, who, body, query, alloc_id):
    node, vpid = _process(body, "process")
    entry, created = mgr.store.attach(_int_id(alloc_id, "NAM allocation"), node, vpid, _as_user(who), job=who.job)
    return (201 if created else 200), dict(entry, created=created)


@route("POST", "/nam/allocations/([^/]+)/detach", job_ok=True)
def nam_detach(mgr, who, body, query, alloc_id):
    node, vpid = _process(body, "process")
    return 200, {"detached": mgr.store.detach(_int_id(alloc_id, "NAM allocation"), node, vpid, _as_user(who))}


@route("GET", "/nam/jobs/([^/]+)")
def nam_job(mgr, who, body, query, job):
    allocs = mgr.store.allocations(job=_ident(job, "job"), owner=_as_user(who))
    return 200, {"job": job, "allocations": allocs}


@route("DELETE", "/nam/jobs/([^/]+)")
def nam_free_job(mgr, who, body, query, job):
    keep = query.get("keep")
    if keep not in (None, "nonvolatile"):
        raise ApiError(400, "invalid", "keep %r is not nonvolatile" % keep)
    if keep:
        freed, kept = mgr.store.end_job(_ident(job, "job"), _as_user(who))
    else:
        freed, kept = mgr.store.free_where(job=_ident(job, "job"), user=_as_user(who)), []
    mgr.retire(freed)
    return 200, {"job": job, "freed": [a["id"] for a in freed], "bytes": sum(a["size"] for a in freed),
                 "kept": [a["id"] for a in kept]}


@route("POST", "/nam/allocations/([^/]+)/access", job_ok=True)
def nam_access(mgr, who, body, query, alloc_id):
    return 201, mgr.datapath().nam_access(_owned(mgr, who, alloc_id), who)


def _orphan_args(body):
    live = body.get("live_jobs")
    if live is not None and (not isinstance(live, list) or
                             not all(isinstance(j, (str, int)) and not isinstance(j, bool) for j in live)):
        raise ApiError(400, "invalid", "live_jobs %r is not a list of job ids" % (live,))
    args = {"live_jobs": live, "owner": _ident(body.get("owner"), "owner"), "job": _ident(body.get("job"), "job"),
            "dry_run": _bool(body.get("dry_run"), "dry_run", False),
            "min_age": _count(body.get("min_age", 0), "min_age", 0)}
    if live is None and args["owner"] is None and args["job"] is None:
        raise ApiError(400, "invalid", "give live_jobs (every allocation of another job is freed), owner or job")
    return args


@route("POST", "/nam/admin/orphans")
def nam_orphans(mgr, who, body, query):
    _admin(who)
    args = _orphan_args(body)
    if args["live_jobs"] is not None and args["owner"] is None and args["job"] is None:
        done = mgr.store.sweep(args["live_jobs"], args["min_age"], args["dry_run"])
    else:
        args.pop("min_age")
        done = {"freed": mgr.store.free_where(**args), "kept": [], "expired": [], "revoked": []}
    gone = done["freed"] + done["expired"]
    if not args["dry_run"]:
        mgr.retire(gone)
        if gone or done["revoked"]:
            log.info("%s: orphaned NAM allocations %s freed, non-volatile %s expired, %s kept for their owners, "
                     "grants of ended jobs %s revoked", who.name, [a["id"] for a in done["freed"]],
                     [a["id"] for a in done["expired"]], [a["id"] for a in done["kept"]], done["revoked"])
    return 200, {"freed": [a["id"] for a in done["freed"]], "allocations": done["freed"], "dry_run": args["dry_run"],
                 "bytes": sum(a["size"] for a in gone), "kept": [a["id"] for a in done["kept"]],
                 "expired": [a["id"] for a in done["expired"]], "revoked": done["revoked"]}


@route("GET", "/nam/admin/check")
def nam_check(mgr, who, body, query):
    _admin(who)
    problems = mgr.store.check()
    return 200, {"ok": not problems, "problems": problems}


@route("GET", "/gce/limits", job_ok=True)
def gce_limits(mgr, who, body, query):
    return 200, mgr.gce_limits()


@route("POST", "/gce/communicators", job_ok=True)
def gce_create(mgr, who, body, query):
    comm, fb = mgr.create_communicator(who, body)
    if fb is not None:
        return _fallback_answer(fb)
    return 201, dict(comm, created=True, fallback=None, limits_left=mgr.gce_limits()["left"])


@route("GET", "/gce/communicators", job_ok=True)
def gce_list(mgr, who, body, query):
    owner = None if who.admin else who.name
    return 200, {"communicators": mgr.store.communicators(name=query.get("name"), job=query.get("job"), owner=owner)}


@route("GET", "/gce/communicators/([^/]+)", job_ok=True)
def gce_get(mgr, who, body, query, comm_id):
    comm = mgr.store.communicator(_int_id(comm_id, "GCE communicator"))
    if comm is None:
        raise ApiError(404, "not_found", "GCE communicator %s does not exist" % comm_id, id=comm_id)
    if not who.admin and comm["owner"] != who.name:
        raise ApiError(403, "not_owner", "GCE communicator %s belongs to %s, not to %s"
                       % (comm_id, comm["owner"], who.name), id=comm["id"])
    return 200, comm


@route("POST", "/gce/communicators/([^/]+)/access", job_ok=True)
def gce_access(mgr, who, body, query, comm_id):
    comm = gce_get(mgr, who, body, query, comm_id)[1]
    return 201, mgr.datapath().gce_access(comm, who)


@route("DELETE", "/gce/communicators/([^/]+)", job_ok=True)
def gce_release(mgr, who, body, query, comm_id):
    comm = mgr.store.release_communicator(_int_id(comm_id, "GCE communicator"), _as_user(who))
    return 200, {"released": comm, "limits_left": mgr.gce_limits()["left"]}


@route("POST", "/gce/communicators/([^/]+)/operations")
def gce_operation(mgr, who, body, query, comm_id):
    size = body.get("size")
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise ApiError(400, "invalid", "size %r is not a positive number of bytes" % (size,))
    op, fb = mgr.store.start_operation(_int_id(comm_id, "GCE communicator"), str(body.get("op")),
                                       str(body.get("datatype")), size, _as_user(who))
    if fb is not None:
        return _fallback_answer(fb)
    return 201, dict(op, fallback=None)


@route("DELETE", "/gce/communicators/([^/]+)/operations/([0-9]+)")
def gce_operation_done(mgr, who, body, query, comm_id, icid):
    done = mgr.store.finish_operation(_int_id(comm_id, "GCE communicator"), int(icid), _as_user(who))
    return 200, {"finished": done}


@route("DELETE", "/gce/jobs/([^/]+)")
def gce_release_job(mgr, who, body, query, job):
    comms = mgr.store.release_where(job=_ident(job, "job"), user=_as_user(who))
    return 200, {"job": job, "released": [c["id"] for c in comms]}


@route("POST", "/gce/admin/orphans")
def gce_orphans(mgr, who, body, query):
    _admin(who)
    comms = mgr.store.release_where(**_orphan_args(body))
    return 200, {"released": [c["id"] for c in comms], "communicators": comms}


class Server(TLSThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, address, manager, tls=None):
        super().__init__(address, Handler, tls=tls)
        self.manager = manager
