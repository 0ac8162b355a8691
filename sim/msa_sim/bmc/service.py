# SPDX-License-Identifier: GPL-3.0-or-later
"""One BMC's Redfish service: routing, authentication, privileges and the headers DSP0266 requires; HTTP-free so it
is testable directly. The resources live in systems, accounts, update, events and metadata."""
from __future__ import annotations

import base64
import binascii
import contextlib
import hashlib
import json
import re
import threading
import time
import urllib.parse

from msa_sim.bmc import resource as R
from msa_sim.bmc.accounts import AccountsMixin
from msa_sim.bmc.auth import CredentialCache
from msa_sim.bmc.backend import BackendError
from msa_sim.bmc.config import ConfigError, validate_fault
from msa_sim.bmc.events import EventsMixin
from msa_sim.bmc.metadata import MetadataMixin
from msa_sim.bmc.resource import Fail, Principal, Response
from msa_sim.bmc.systems import SystemsMixin
from msa_sim.bmc.update import UpdateMixin

# re-exported for the callers of the one-module service (tests, bench)
ROOT, SESSIONS, FAULTS, error_body, etag = R.ROOT, R.SESSIONS, R.FAULTS, R.error_body, R.etag
HTTP_METHODS = ("GET", "HEAD", "POST", "PATCH", "PUT", "DELETE")


class Bmc(SystemsMixin, AccountsMixin, UpdateMixin, EventsMixin, MetadataMixin):
    """The Redfish service of one simulated node's BMC."""

    def __init__(self, conf, backend, store, clock=time.time, log=None):
        self.conf = conf
        self.name = conf["name"]
        self.backend = backend
        self.store = store
        self.clock = clock
        self.log = log
        self.creds = CredentialCache()
        self.sys_path = "%s/Systems/%s" % (R.ROOT, conf["system_id"])
        self.chassis_path = "%s/Chassis/%s" % (R.ROOT, conf["chassis_id"])
        self.manager_path = "%s/Managers/%s" % (R.ROOT, conf["manager_id"])
        self._faults = [dict(conf["faults"])] if conf.get("faults") else []
        self._fault_lock = threading.Lock()
        # A write's If-Match check and the write itself are one step: without it, parallel PATCHes carrying the
        # same ETag all passed the check (the DMTF protocol validator's SEC_ACCOUNTS_SUPPORT_ETAGS sends four)
        self._write_lock = threading.Lock()
        self.last_error = None
        self.store.seed_accounts(self.name, conf["users"])
        SystemsMixin.__init__(self)
        UpdateMixin.__init__(self)
        EventsMixin.__init__(self)
        self._routes = self._make_routes()

    # ------------------------------------------------------------------ dispatch
    def _make_routes(self):
        """(pattern, {method: (handler, privilege)}): privilege None needs no authentication."""
        table = self.system_routes() + self.account_routes() + self.update_routes() + self.event_routes()
        table += self.metadata_routes()
        table.append((re.escape(R.FAULTS), {"GET": (self.get_faults, "ConfigureManager"),
                                            "POST": (self.post_faults, "ConfigureManager"),
                                            "DELETE": (self.delete_faults, "ConfigureManager")}))
        return [(re.compile(pattern + r"$"), methods) for pattern, methods in table]

    def sample_ids(self, group):
        """Ids of the members a route parameter can take (the privilege map reads one of each)."""
        ids = {"nic": lambda: [n["id"] for n in self.conf["nics"]], "cpu": self._cpus, "dimm": self._dimms,
               "entry": lambda: [e["EventId"] for e in self.event_log], "fw": lambda: list(self.firmware_versions()),
               "tid": lambda: [t["id"] for t in self.store.tasks(self.name)],
               "subid": lambda: list(self.store.subscriptions(self.name))}
        return ids[group]() if group in ids else []

    def allowed(self, methods):
        names = set(methods)
        if "GET" in names:
            names.add("HEAD")
        return [m for m in HTTP_METHODS if m in names]

    def _route(self, path):
        for pattern, methods in self._routes:
            match = pattern.match(path)
            if match:
                return match, methods
        raise R.missing(path)

    def handle(self, method, path, headers, body=b""):
        """Answer one request: ``headers`` is any mapping, ``body`` the raw bytes."""
        headers = {str(k).lower(): v for k, v in dict(headers or {}).items()}
        path, _, query = path.split("#", 1)[0].partition("?")
        path = urllib.parse.unquote(path)
        if len(path) > 1:
            path = path.rstrip("/")
        method = method.upper()
        who = None
        allow = None
        try:
            if not path.startswith(R.FAULTS):
                self._inject_fault(path)
            if headers.get("odata-version", "4.0").strip() != "4.0":
                raise Fail(412, "HeaderInvalid", "The OData-Version %s is not supported; this service speaks 4.0."
                           % headers["odata-version"], "Send OData-Version: 4.0 or no OData-Version header.",
                           args=["OData-Version: %s" % headers["odata-version"]])
            if method == "POST" and path.endswith("/Members"):
                path = path[:-len("/Members")]  # a POST to a collection's Members is a POST to the collection
            match, methods = self._route(path)
            allow = self.allowed(methods)
            if method not in HTTP_METHODS:
                raise Fail(501, "OperationNotAllowed",
                           "The method %s is not implemented by this service." % method,
                           "Use one of %s." % ", ".join(allow), args=[method])
            entry = methods.get("GET" if method == "HEAD" else method)
            privilege = entry[1] if entry else "Login"
            if privilege is not None or (entry is None and any(p for _, p in methods.values())):
                who = self._authenticate(headers)
            elif headers.get("x-auth-token") or headers.get("authorization"):
                try:  # open resources and session login do not care for stale credentials a client still sends
                    who = self._authenticate(headers, optional=True)
                except Fail:
                    who = None
            if entry is None:
                raise Fail(405, "OperationNotAllowed", "The %s method is not allowed on %s." % (method, path),
                           "Use one of %s." % ", ".join(allow), headers={"Allow": ", ".join(allow)})
            if privilege is not None:
                self.require(who, privilege)
            self._check_query(query)
            data = None
            multipart = (headers.get("content-type") or "").lower().startswith("multipart/form-data")
            if method in ("POST", "PATCH", "PUT") and not (multipart and method == "POST"):
                data = self._json(body, headers, required=method != "POST" or body.strip() != b"")
            writes = method in ("PATCH", "PUT", "DELETE")
            with self._write_lock if writes else contextlib.nullcontext():
                if writes and headers.get("if-match") and "GET" in methods:
                    self._check_if_match(headers["if-match"], methods["GET"][0], match)
                response = entry[0](who=who, data=data if data is not None else {}, headers=headers, raw=body,
                                    **match.groupdict())
        except Fail as exc:
            response = exc.response()
        except BackendError as exc:
            self.last_error = str(exc)
            response = Fail(500, "InternalError", "The power backend failed: %s" % exc,
                            "Check the msa-bmc service log and the node's container.").response()
        self._decorate(method, headers, response, allow)
        if self.log:
            self.log("%s %s %s %s user=%s" % (self.name, method, path, response.status, who.username if who else "-"))
        return response

    def _decorate(self, method, headers, response, allow):
        response.headers.setdefault("OData-Version", "4.0")
        if method not in ("GET", "HEAD") or response.status != 200:
            return
        if allow:
            response.headers.setdefault("Allow", ", ".join(allow))
        body = response.body
        if isinstance(body, dict) and "@odata.id" in body:
            tag = R.etag(body)
            body["@odata.etag"] = tag
            response.headers.setdefault("ETag", tag)
            schema = R.schema_of(body)
            if schema:
                response.headers.setdefault("Link", "<%s%s.json>; rel=describedby" % (R.SCHEMAS, schema))
            if headers.get("if-none-match") in (tag, "*"):
                response.status, response.body = 304, None

    def _check_query(self, query):
        for key, _ in urllib.parse.parse_qsl(query, keep_blank_values=True):
            if key.startswith("$"):
                raise Fail(501, "QueryNotSupported", "Querying is not supported by the implementation (%s)." % key,
                           "Remove the query parameters and resubmit the request if the operation failed.")

    def _check_if_match(self, wanted, get, match):
        current = get(who=None, data=None, headers={}, **match.groupdict()).body
        tags = [t.strip() for t in wanted.split(",")]
        if "*" not in tags and R.etag(current) not in tags:
            raise Fail(412, "PreconditionFailed", "The ETag supplied did not match the ETag required to change "
                       "this resource.", "Try the operation again using the appropriate ETag.")

    def _json(self, body, headers, required=True):
        if not body.strip():
            if required:
                raise Fail(400, "MalformedJSON", "The request body is empty; a JSON object was expected.",
                           "Ensure that the request body is valid JSON and resubmit the request.")
            return {}
        ctype = (headers.get("content-type") or "application/json").split(";")[0].strip().lower()
        if ctype not in ("application/json", "application/x-www-form-urlencoded", ""):
            raise Fail(415, "UnsupportedMediaType", "The media type %s is not supported; send application/json."
                       % ctype, "Resubmit the request with Content-Type: application/json.", args=[ctype])
        try:
            data = json.loads(body.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            raise Fail(400, "MalformedJSON", "The request body submitted was malformed JSON and could not be "
                       "parsed by the receiving service.", "Ensure that the request body is valid JSON.") from None
        if not isinstance(data, dict):
            raise Fail(400, "MalformedJSON", "The request body must be a JSON object.")
        return data

    # ------------------------------------------------------------------ faults
    def _inject_fault(self, path):
        with self._fault_lock:
            fault = next((f for f in self._faults if path.startswith(f["path"])), None)
            if fault is None:
                return
            fault["count"] -= 1
            if fault["count"] <= 0:
                self._faults.remove(fault)
        if fault["delay"]:
            time.sleep(fault["delay"])
        if fault["status"]:
            raise Fail(fault["status"], "ServiceTemporarilyUnavailable",
                       "The service is temporarily unavailable (injected fault).",
                       "Wait for the indicated retry duration and retry the operation.",
                       headers={"Retry-After": "1"}, args=["1"])

    def get_faults(self, **_):
        with self._fault_lock:
            return Response(200, {"Faults": [dict(f) for f in self._faults]})

    def post_faults(self, data, **_):
        try:
            fault = validate_fault(data, "fault")
        except ConfigError as exc:
            raise Fail(400, "PropertyValueIncorrect", str(exc)) from None
        with self._fault_lock:
            self._faults.append(fault)
            return Response(201, {"Faults": [dict(f) for f in self._faults]}, {"Location": R.FAULTS})

    def delete_faults(self, **_):
        with self._fault_lock:
            self._faults = []
        return Response(204)

    # ------------------------------------------------------------------ authentication
    def _unauthorized(self, message="The request requires a valid X-Auth-Token session or basic authentication."):
        return Fail(401, "NoValidSession", message,
                    "Establish a session (POST %s) or send valid basic authentication credentials." % R.SESSIONS,
                    headers={"WWW-Authenticate": 'Basic realm="%s"' % self.name})

    def check_password(self, username, password):
        """The enabled, unlocked account these credentials name, or None."""
        account = self.store.account(self.name, "username", username)
        if account is None or not account["enabled"] or account["locked"]:
            return None
        if not self.creds.check(username, password, account["password_hash"]):
            return None
        return account

    def _authenticate(self, headers, optional=False):
        token = headers.get("x-auth-token")
        if token:
            digest = hashlib.sha256(token.encode()).hexdigest()
            session = self.store.session_by_token(self.name, digest)
            now = self.clock()
            if session is None:
                raise self._unauthorized("The session token is not valid (unknown, logged out or expired).")
            if now - session["last_used"] > self._session_timeout():
                self.store.delete_session(self.name, session["id"])
                raise self._unauthorized("The session has expired after %d seconds without use."
                                         % self._session_timeout())
            if now - session["last_used"] >= 1.0:  # one write a second at most, not one per request
                self.store.touch_session(self.name, session["id"], now)
            return Principal(session["username"], session["role"], session)
        auth = headers.get("authorization") or ""
        if auth[:6].lower() == "basic ":
            try:
                username, _, password = base64.b64decode(auth[6:].strip()).decode("utf-8").partition(":")
            except (binascii.Error, UnicodeDecodeError):
                raise self._unauthorized("The basic authentication header is malformed.") from None
            account = self.check_password(username, password)
            if account is None:
                raise self._unauthorized("The user name or password is not correct.")
            return Principal(account["username"], account["role"])
        if optional:
            return None
        raise self._unauthorized()

    def require(self, who, privilege):
        """``privilege`` is one name or a tuple of alternatives (the privilege map's OR of privilege sets)."""
        wanted = privilege if isinstance(privilege, tuple) else (privilege,)
        if who is None or not set(wanted) & set(who.privileges):
            raise R.forbidden()
        if privilege != "ConfigureSelf" and self._must_change_password(who):
            raise Fail(403, "PasswordChangeRequired", "The password provided for this account must be changed "
                       "before access is granted.", "Change the password for this account using a PATCH to the "
                       "Password property at the URI provided.", args=[self._account_uri(who.username)])
        return who
