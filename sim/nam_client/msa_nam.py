# SPDX-License-Identifier: GPL-3.0-or-later
"""NAM from a job's code, in the spirit of libNAM (seed 004 §2.2.1): attach the job's allocation, then put and get
bytes by offset. Standard library only (python3 on any node).

    import msa_nam
    with msa_nam.attach() as nam:            # the job's allocation (slurm-<jobid>), or attach("results")
        nam.put(0, b"hello")
        assert nam.get(0, 5) == b"hello"

The job's token comes from the controller's NAM prolog (``.msa-nam-<jobid>.token`` in the job's working directory,
mode 0600); where that directory is not shared with the job's nodes, the library proves the job's user to the
manager with a munge credential (``munge -n -s job=<id>``) and the manager hands the same token over to a running
job of that uid that holds NAM or GCE. The manager's URL and CA from ``/etc/nam-manager/job.conf`` (``url=``, ``ca_path=``) or
NAM_MANAGER_URL / NAM_MANAGER_CA_PATH / MSA_NAM_TOKEN(_FILE). The manager answers an attach with a capability for
the allocation's board; the data then moves between the job and the NAM board directly, over TLS, never through
the manager. Every offset and length is checked here and again on the board.

Outside a job, a user lists and frees their own non-volatile allocations (those no job holds) as themselves, proved
to the manager with munge (``munge -n -s owner=<name>``, the way Slurm's own commands prove a user):

    python3 -m msa_nam list [--json]
    python3 -m msa_nam free ID [ID ...]
"""
from __future__ import annotations

import argparse
import http.client
import json
import os
import pwd
import socket
import ssl
import subprocess
import sys
import urllib.parse

DEFAULT_CONF = "/etc/nam-manager/job.conf"
TOKEN_FILE = ".msa-nam-%s.token"
# One request carries at most this much; larger transfers are split (the board accepts up to 64 MiB).
CHUNK = 16 << 20


class NamError(Exception):
    """A refused or failed NAM operation; ``field`` and ``value`` name the argument when one was wrong."""

    def __init__(self, message, field=None, value=None, status=None, code=None):
        super().__init__(message)
        self.field, self.value, self.status, self.code = field, value, status, code


def read_conf(path):
    conf = {}
    try:
        with open(path, "r", encoding="utf-8") as fh:
            for line in fh:
                line = line.strip()
                if line and not line.startswith("#") and "=" in line:
                    key, value = line.split("=", 1)
                    conf[key.strip()] = value.strip()
    except FileNotFoundError:
        pass
    return conf


def job_id(env):
    """The id the prolog knows the job by (a heterogeneous job's leader)."""
    return env.get("SLURM_HET_JOB_ID") or env.get("SLURM_JOB_ID")


def find_token(env, conn=None):
    """The job's token: MSA_NAM_TOKEN, the file MSA_NAM_TOKEN_FILE, the prolog's file in the job's directory, or
    (with ``conn``, the manager's Connection) the manager's answer to a munge credential of this job's user."""
    if env.get("MSA_NAM_TOKEN"):
        return env["MSA_NAM_TOKEN"].strip()
    candidates = [env["MSA_NAM_TOKEN_FILE"]] if env.get("MSA_NAM_TOKEN_FILE") else []
    jid = job_id(env)
    if jid:
        for directory in (env.get("SLURM_SUBMIT_DIR"), os.getcwd()):
            if directory:
                candidates.append(os.path.join(directory, TOKEN_FILE % jid))
    for path in candidates:
        try:
            with open(path, "r", encoding="utf-8") as fh:
                return fh.read().strip()
        except FileNotFoundError:
            continue
    if jid and conn is not None:
        return munge_token(conn, jid)
    raise NamError("no NAM/GCE token for this job (looked for %s): the job needs --network-attached-memory or "
                   "--global-collective-engine" % (", ".join(candidates) or "MSA_NAM_TOKEN"))


def _munged_token(conn, payload, path, what, why):
    """A token from the manager's ``path`` for a munge credential of the calling user with ``payload``."""
    try:
        proc = subprocess.run(["munge", "-n", "-s", payload], capture_output=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        raise NamError("%s, and munge cannot run: %s" % (why, exc)) from None
    if proc.returncode != 0:
        raise NamError("%s, and munge failed: %s" % (why, proc.stderr.decode(errors="replace").strip()))
    status, raw = conn.call("POST", path, json.dumps({"credential": proc.stdout.decode().strip()}).encode(),
                            {"Content-Type": "application/json"})
    if status != 201:
        raise error_of(status, raw, what)
    return json.loads(raw)["token"]


def munge_token(conn, jid):
    """The job's token from the manager, for a munge credential of the calling user naming job ``jid``."""
    return _munged_token(conn, "job=%s" % jid, "/auth/munge-job-token",
                         "job %s's NAM/GCE token (the job needs --network-attached-memory or "
                         "--global-collective-engine)" % jid, "no NAM/GCE token file for job %s" % jid)


def owner_token(conn, owner):
    """An owner's token (list and free its non-volatile allocations), for a munge credential of the calling user."""
    return _munged_token(conn, "owner=%s" % owner, "/auth/munge-owner-token", "%s's owner token" % owner,
                         "%s's NAM allocations need a munge credential" % owner)


def _context(ca_path):
    if ca_path and os.path.isdir(ca_path):
        return ssl.create_default_context(capath=ca_path)
    return ssl.create_default_context(cafile=ca_path or None)


class Connection:
    """One kept-alive HTTP(S) connection; ``call`` returns (status, body bytes)."""

    def __init__(self, url, ca_path=None, timeout=60.0):
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("https", "http") or not parts.hostname:
            raise NamError("%r is not an https URL" % url, "url", url)
        self.base = parts.path.rstrip("/")
        self.timeout = timeout
        if parts.scheme == "https":
            self.conn = http.client.HTTPSConnection(parts.hostname, parts.port or 443, timeout=timeout,
                                                    context=_context(ca_path))
        else:
            self.conn = http.client.HTTPConnection(parts.hostname, parts.port or 80, timeout=timeout)
        self.url = url

    # how a kept-alive connection the server closed while it was idle (its keep-alive deadline) shows: a plain close,
    # or a TLS connection's end without close_notify (SSLEOFError on the next write)
    STALE = (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError, ConnectionAbortedError,
             ssl.SSLEOFError, ssl.SSLZeroReturnError)

    def call(self, method, path, body=None, headers=None):
        for attempt in (0, 1):
            reused = self.conn.sock is not None
            try:
                self.conn.request(method, self.base + path, body=body, headers=headers or {})
                resp = self.conn.getresponse()
                return resp.status, resp.read()
            except self.STALE as exc:
                self.conn.close()        # a kept-alive connection the server closed: once more on a new one
                if attempt or not reused:
                    raise NamError("cannot reach %s: %s" % (self.url, exc)) from None
            except (OSError, http.client.HTTPException) as exc:
                self.conn.close()
                raise NamError("cannot reach %s: %s" % (self.url, exc)) from None
        raise NamError("cannot reach %s" % self.url)

    def close(self):
        self.conn.close()


def error_of(status, raw, what):
    try:
        err = json.loads(raw).get("error") or {}
    except (ValueError, AttributeError):
        err = {}
    return NamError("%s: %s" % (what, err.get("message") or "HTTP %d" % status), err.get("field"), err.get("value"),
                    status, err.get("code"))


class Manager:
    """The NAM/GCE manager as a job sees it: JSON calls with the job's token."""

    def __init__(self, url=None, token=None, ca_path=None, conf=None, env=None, timeout=60.0, owner=None):
        env = os.environ if env is None else env
        conf = read_conf(conf or env.get("NAM_MANAGER_JOB_CONF") or DEFAULT_CONF)
        url = url or env.get("NAM_MANAGER_URL") or conf.get("url")
        if not url:
            raise NamError("the NAM manager's URL is not known (NAM_MANAGER_URL or url= in %s)" % DEFAULT_CONF)
        self.ca_path = ca_path or env.get("NAM_MANAGER_CA_PATH") or conf.get("ca_path")
        self.env = env
        self.timeout = timeout
        self.conn = Connection(url, self.ca_path, timeout)
        # owner: the calling user outside a job (its own allocations only), else the job's token
        self.token = token or (owner_token(self.conn, owner) if owner else find_token(env, self.conn))

    def call(self, method, path, body=None, ok=(200, 201)):
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Authorization": "Bearer " + self.token, "Content-Type": "application/json"}
        status, raw = self.conn.call(method, path, data, headers)
        if status not in ok:
            raise error_of(status, raw, "%s %s" % (method, path))
        return json.loads(raw) if raw else {}

    def close(self):
        self.conn.close()


def _check_int(value, field):
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise NamError("%s %r is not a non-negative integer" % (field, value), field, value)
    return value


class Allocation:
    """An attached NAM allocation: ``put``/``get`` by offset within its ``size`` bytes."""

    def __init__(self, manager, record, access, process):
        self.manager, self.record, self.process = manager, record, process
        self.id, self.name, self.size = record["id"], record.get("name"), access["size"]
        self.volatile, self.device = access["volatile"], access["device"]
        self._auth = {"Authorization": "Capability " + access["capability"]}
        self.board = Connection(access["url"], manager.ca_path, manager.timeout)

    def _bounds(self, offset, length, what):
        _check_int(offset, "offset")
        _check_int(length, what)
        if offset + length > self.size:
            field, value = ("offset", offset) if offset >= self.size else (what, length)
            raise NamError("offset %d + %s %d is beyond the %d bytes of NAM allocation %s"
                           % (offset, what, length, self.size, self.id), field, value)

    def put(self, offset, data):
        """Write ``data`` (bytes-like) at ``offset``; returns the number of bytes written."""
        view = memoryview(data).cast("B")
        self._bounds(offset, len(view), "length")
        pos = 0
        while pos < len(view) or pos == 0:
            piece = view[pos:pos + CHUNK]
            status, raw = self.board.call("PUT", "/v1/nam/%d?offset=%d" % (self.id, offset + pos), piece,
                                          dict(self._auth, **{"Content-Type": "application/octet-stream"}))
            if status != 200:
                raise error_of(status, raw, "put %d bytes at offset %d" % (len(piece), offset + pos))
            pos += len(piece)
            if not piece:
                break
        return len(view)

    def get(self, offset, length):
        """Read ``length`` bytes from ``offset``."""
        self._bounds(offset, length, "length")
        out = bytearray()
        while len(out) < length:
            n = min(CHUNK, length - len(out))
            status, raw = self.board.call("GET", "/v1/nam/%d?offset=%d&length=%d" % (self.id, offset + len(out), n),
                                          None, self._auth)
            if status != 200:
                raise error_of(status, raw, "get %d bytes at offset %d" % (n, offset + len(out)))
            out += raw
        return bytes(out)

    def sync(self):
        """Make what was put durable (non-volatile memory survives the job only once synced)."""
        status, raw = self.board.call("POST", "/v1/nam/%d/sync" % self.id, b"", self._auth)
        if status != 200:
            raise error_of(status, raw, "sync")

    def close(self):
        """Detach this process (its AAT entry) and close the connections."""
        try:
            self.manager.call("POST", "/nam/allocations/%d/detach" % self.id, self.process)
        finally:
            self.board.close()
            self.manager.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def attach(name=None, allocation=None, manager=None, **kw):
    """Attach this process to a NAM allocation of the job's user: ``allocation`` by id, ``name``, or by default
    the job's own (``slurm-<jobid>``). ``manager`` (a Manager) or its arguments (url, token, ca_path, env)."""
    mgr = manager or Manager(**kw)
    env = mgr.env
    if allocation is not None:
        record = mgr.call("GET", "/nam/allocations/%d" % _check_int(allocation, "allocation"))
    else:
        name = name or "slurm-%s" % job_id(env)
        found = mgr.call("GET", "/nam/allocations?name=%s" % urllib.parse.quote(name, safe=""))["allocations"]
        if not found:
            raise NamError("no NAM allocation called %r belongs to this job's user" % name, "name", name)
        record = found[0]
    process = {"node": socket.gethostname(), "vpid": os.getpid()}
    mgr.call("POST", "/nam/allocations/%d/attach" % record["id"], process)
    access = mgr.call("POST", "/nam/allocations/%d/access" % record["id"])
    return Allocation(mgr, record, access, process)


def owned(manager):
    """The allocations of the manager's user (an owner's token: its own; ``expires`` when the site set an expiry)."""
    return manager.call("GET", "/nam/allocations")["allocations"]


def free(manager, allocation):
    """Free a non-volatile allocation of the owner that no job holds; the record freed."""
    return manager.call("DELETE", "/nam/allocations/%d" % _check_int(allocation, "allocation"))["freed"]


def main(argv=None, out=sys.stdout, err=sys.stderr, **kw):
    """``list`` and ``free`` for the calling user (the owner), outside a job."""
    ap = argparse.ArgumentParser(prog="python3 -m msa_nam", description="Your own NAM allocations: list them, free "
                                 "the non-volatile ones no job holds (proved to the manager with munge).")
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("list", help="your allocations").add_argument("--json", action="store_true")
    sub.add_parser("free", help="free non-volatile allocations by id").add_argument("ids", nargs="+", type=int)
    args = ap.parse_args(argv)
    try:
        mgr = Manager(owner=kw.pop("owner", None) or pwd.getpwuid(os.getuid()).pw_name, **kw)
        if args.cmd == "list":
            allocs = owned(mgr)
            if args.json:
                print(json.dumps(allocs, indent=2, sort_keys=True), file=out)
            for a in [] if args.json else allocs:
                print("%-6s %-24s %-11s %12d bytes  job %-8s expires %s" % (
                    a["id"], a.get("name") or "-", "volatile" if a["volatile"] else "nonvolatile", a["size"],
                    a.get("job") or "-", a.get("expires") and int(a["expires"]) or "never"), file=out)
        else:
            for alloc_id in args.ids:
                rec = free(mgr, alloc_id)
                print("freed %s (%d bytes)" % (rec["id"], rec["size"]), file=out)
    except NamError as exc:
        print("msa_nam: %s" % exc, file=err)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
