# SPDX-License-Identifier: GPL-3.0-or-later
"""One small REST client for every API the collection and its node-side tools speak (standard library only).

Every failure of a connection becomes one of two errors: NotDoneError (the request certainly did not reach the
service whole) or OutcomeUnknownError (it may have been processed). Only requests that cannot duplicate are sent
again blindly; a POST or PATCH whose outcome is unknown is re-sent only after the caller's ``lookup`` says it did
not happen.
"""
from __future__ import annotations

import base64
import http.client
import json
import os
import ssl
import time
import urllib.parse

# Statuses worth another try of an idempotent request: a proxy or a service that is (re)starting.
RETRY_STATUSES = frozenset((502, 503, 504))
IDEMPOTENT_METHODS = frozenset(("GET", "HEAD", "PUT", "DELETE", "OPTIONS"))
# Methods sent again when an attempt's outcome is unknown (a timeout or a connection lost after sending).
SAFE_METHODS = frozenset(("GET", "HEAD", "OPTIONS"))
REDIRECTS = frozenset((301, 302, 303, 307, 308))
MAX_REDIRECTS = 5
# Everything a connection can fail with below HTTP: OSError covers socket.timeout/TimeoutError, ConnectionError,
# socket.gaierror and ssl.SSLError; HTTPException covers IncompleteRead, RemoteDisconnected and BadStatusLine.
CONNECTION_FAILURES = (OSError, http.client.HTTPException)
NOT_DONE = "not_done"
UNKNOWN = "unknown"


def send_again():
    """The ``lookup`` of a POST the service itself makes idempotent: "not done", so it is simply sent again."""
    return None


class RestError(Exception):
    """A request that failed for a reason a site administrator can act on."""

    def __init__(self, message, status=None, body=None):
        super().__init__(message)
        self.status = status
        self.body = body


class RestTransportError(RestError):
    """The exchange failed below HTTP (no usable answer); ``outcome`` says whether the service may have acted."""

    outcome = None

    def __init__(self, message, retryable=True, cause=None):
        super().__init__(message)
        self.retryable = retryable
        self.cause = cause


class NotDoneError(RestTransportError):
    """The request certainly did not reach the service whole (refused, no such host, TLS handshake, send failed)."""

    outcome = NOT_DONE


class OutcomeUnknownError(RestTransportError):
    """The request was sent and may have been processed (a timeout, or the connection lost before the answer)."""

    outcome = UNKNOWN


def _reason(exc):
    text = str(exc) or type(exc).__name__
    return text if type(exc).__name__ in text else "%s: %s" % (type(exc).__name__, text)


def tls_context(validate_certs=True, ca_path=None):
    """The TLS context of a client: verification on unless asked otherwise, ``ca_path`` a PEM file or directory."""
    if not validate_certs:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        return context
    try:
        if ca_path and os.path.isdir(ca_path):
            return ssl.create_default_context(capath=ca_path)
        return ssl.create_default_context(cafile=ca_path or None)
    except (OSError, ValueError) as exc:
        raise RestError("ca_path: the CA certificates in %r cannot be read (%s)" % (ca_path, _reason(exc))) from None


class RestClient:
    """JSON over HTTP(S) with basic auth or a token header, timeouts, and retries that cannot duplicate a request.

    ``token_header`` names the header a token travels in (``X-Auth-Token`` for Redfish sessions,
    ``Authorization`` with a ``Bearer`` prefix for the stand-in managers). Each request uses a fresh connection
    (no proxies), so a failure is never that of a stale kept-alive one.
    """

    def __init__(self, base_url, username=None, password=None, token=None, token_header="Authorization",
                 validate_certs=True, ca_path=None, timeout=10, retries=3, backoff=0.5, sleep=time.sleep,
                 retry_statuses=RETRY_STATUSES):
        try:
            parsed = urllib.parse.urlsplit(base_url or "")
            valid = parsed.scheme in ("http", "https") and bool(parsed.hostname) and (parsed.port or 0) >= 0
        except ValueError:   # a port that is not a number
            valid = False
        if not valid:
            raise RestError("endpoint %r is not a URL (expected https://host[:port])" % (base_url,))
        self.base_url = base_url.rstrip("/")
        self.username = username
        self.password = password
        self.token = token
        self.token_header = token_header
        self.validate_certs = validate_certs
        self.ca_path = ca_path
        self.timeout = timeout
        self.retries = max(0, int(retries))
        self.backoff = backoff
        # HTTP statuses worth another try of an idempotent request.
        self.retry_statuses = frozenset(retry_statuses)
        self._sleep = sleep
        self._tls = None

    # ------------------------------------------------------------------ one exchange
    def _connection(self, parts):
        if parts.scheme == "https":
            if self._tls is None:
                self._tls = tls_context(self.validate_certs, self.ca_path)
            return http.client.HTTPSConnection(parts.hostname, parts.port, timeout=self.timeout, context=self._tls)
        if parts.scheme == "http":
            return http.client.HTTPConnection(parts.hostname, parts.port, timeout=self.timeout)
        raise RestError("%s is not an http or https URL" % urllib.parse.urlunsplit(parts))

    def _exchange(self, method, url, data, headers):
        """Send one request on a fresh connection; ``(status, raw body, headers)`` or a RestTransportError."""
        parts = urllib.parse.urlsplit(url)
        target = (parts.path or "/") + ("?" + parts.query if parts.query else "")
        where = "%s %s" % (method, target)
        conn = self._connection(parts)
        try:
            try:
                conn.connect()
            except ssl.SSLCertVerificationError as exc:
                raise NotDoneError("%s: the TLS certificate of %s is not trusted (%s); give the CA with ca_path, or "
                                   "set validate_certs to false" % (where, parts.netloc, exc),
                                   retryable=False, cause=exc) from None
            except CONNECTION_FAILURES as exc:
                raise NotDoneError("%s: cannot connect to %s (%s)" % (where, parts.netloc, _reason(exc)),
                                   cause=exc) from None
            try:
                conn.request(method, target, body=data, headers=headers)
            except ValueError as exc:
                raise RestError("%s: the request cannot be sent: %s" % (where, exc)) from None
            except CONNECTION_FAILURES as exc:
                # The request did not leave whole, so the service cannot have read it.
                raise NotDoneError("%s: sending the request to %s failed (%s)" % (where, parts.netloc, _reason(exc)),
                                   cause=exc) from None
            try:
                resp = conn.getresponse()
                return resp.status, resp.read(), resp.headers
            except CONNECTION_FAILURES as exc:
                raise OutcomeUnknownError("%s: the request was sent to %s but the answer was lost (%s); the service "
                                          "may have carried it out" % (where, parts.netloc, _reason(exc)),
                                          cause=exc) from None
        finally:
            conn.close()

    def _follow(self, method, url, data, headers):
        """One exchange, following redirects within the same origin (credentials never leave it)."""
        origin = urllib.parse.urlsplit(url)[:2]
        for _hop in range(MAX_REDIRECTS + 1):
            status, raw, rheaders = self._exchange(method, url, data, headers)
            location = rheaders.get("Location")
            if status not in REDIRECTS or not location:
                return status, raw, rheaders
            if status not in (307, 308) and method not in ("GET", "HEAD"):
                return status, raw, rheaders
            target = urllib.parse.urljoin(url, location)
            if urllib.parse.urlsplit(target)[:2] != origin:
                return status, raw, rheaders
            url = target
        return status, raw, rheaders

    def _headers(self, extra=None):
        headers = {"Accept": "application/json", "Content-Type": "application/json"}
        if self.token:
            value = self.token
            if self.token_header == "Authorization" and not value.startswith("Bearer "):
                value = "Bearer " + value
            headers[self.token_header] = value
        elif self.username is not None:
            raw = ("%s:%s" % (self.username, self.password or "")).encode()
            headers["Authorization"] = "Basic " + base64.b64encode(raw).decode()
        headers.update(extra or {})
        return headers

    # ------------------------------------------------------------------ the retry policy
    def request(self, method, path, body=None, headers=None, expect=(200, 201, 202, 204), lookup=None):
        """Return ``(status, decoded JSON or text or None, response headers)``; raise RestError otherwise.

        Retries (``retries`` of them, with back-off): any request that was not done; an idempotent one answered
        with a status of ``retry_statuses``; a GET, HEAD or OPTIONS whose outcome is unknown. Any other request
        whose outcome is unknown (or, with a ``lookup``, that a gateway answered 502-504) is sent again only when
        ``lookup()`` returns None ("it did not happen"); what else it returns is the answer, with status
        ``expect[0]`` and no headers. The lookup runs even when no retry is left: then its None raises
        NotDoneError. Without a lookup such a request raises OutcomeUnknownError. ``lookup=send_again`` marks a
        request the service itself makes idempotent: it is retried like a GET.
        """
        method = method.upper()
        url = path if "://" in path else self.base_url + "/" + path.lstrip("/")
        data = json.dumps(body).encode() if body is not None else None
        idempotent = method in IDEMPOTENT_METHODS
        # blind: sent again after a lost answer (a safe method, or send_again); checked: the lookup decides.
        blind = method in SAFE_METHODS or lookup is send_again
        checked = lookup is not None and not blind
        attempt, unknown = 0, None
        while True:
            attempt += 1
            if unknown is not None and checked:
                try:
                    found = lookup()
                except RestError as exc:
                    if isinstance(exc, RestTransportError) and attempt <= self.retries:
                        self._wait(attempt)
                        continue
                    raise OutcomeUnknownError("%s; checking whether it was carried out failed too: %s"
                                              % (unknown, exc), cause=exc) from None
                if found is not None:
                    return expect[0], found, {}
                if attempt > self.retries + 1:   # the check was all that was left: no retry may send it again
                    raise NotDoneError("%s; a check found it was not carried out, and no retry is left" % unknown,
                                       cause=getattr(unknown, "cause", None)) from None
            try:
                status, raw, rheaders = self._follow(method, url, data, self._headers(headers))
            except NotDoneError as exc:
                if exc.retryable and attempt <= self.retries:
                    self._wait(attempt)
                    continue
                if unknown is not None and method not in SAFE_METHODS:   # an earlier attempt may have been done
                    raise OutcomeUnknownError("%s; the last of %d attempts: %s" % (unknown, attempt, exc),
                                              cause=exc) from None
                if not exc.retryable or attempt == 1:
                    raise
                raise NotDoneError("cannot reach %s after %d attempts: %s" % (self.base_url, attempt, exc),
                                   cause=exc.cause) from None
            except OutcomeUnknownError as exc:
                unknown = exc
                # With a lookup, what happened is checked even when no retry is left (it is not sent again then).
                if (blind and attempt <= self.retries) or checked:
                    self._wait(attempt)
                    continue
                raise
            if status in self.retry_statuses and attempt <= self.retries and (idempotent or lookup is not None):
                if checked:
                    unknown = RestError(_describe(method, path, status, _decode(raw, rheaders)), status=status)
                self._wait(attempt)
                continue
            payload = _decode(raw, rheaders)
            if status not in expect:
                raise RestError(_describe(method, path, status, payload), status=status, body=payload)
            if isinstance(payload, _Unreadable):
                raise OutcomeUnknownError("%s %s answered HTTP %s with a body that is not JSON (%r); the service "
                                          "may have carried it out" % (method, path, status, payload.text[:200]))
            return status, payload, dict(rheaders)

    def _wait(self, attempt):
        self._sleep(self.backoff * 2 ** (attempt - 1))

    def get(self, path, **kw):
        return self.request("GET", path, **kw)[1]

    def post(self, path, body=None, **kw):
        return self.request("POST", path, body=body, **kw)[1]

    def patch(self, path, body=None, **kw):
        return self.request("PATCH", path, body=body, **kw)[1]

    def delete(self, path, **kw):
        return self.request("DELETE", path, **kw)[1]


class _Unreadable(dict):
    """A body that claims (or is assumed) to be JSON and is not; reads as ``{"message": text}`` in errors."""

    def __init__(self, text):
        super().__init__(message=text[:500])
        self.text = text


def _decode(raw, headers=None):
    """JSON, or the text of a body that says it is not JSON (``text/plain``, a DOT graph); None when empty."""
    if not raw:
        return None
    text = raw.decode("utf-8", "replace")
    ctype = (headers.get("Content-Type") or "") if headers is not None else ""
    if ctype and "json" not in ctype.lower() and ctype.lower().startswith("text/"):
        return text
    try:
        return json.loads(text)
    except ValueError:
        return _Unreadable(text)


def _describe(method, path, status, payload):
    detail = ""
    if isinstance(payload, dict):
        err = payload.get("error", payload)
        if isinstance(err, dict):
            detail = err.get("message") or err.get("reason") or ""
            info = err.get("@Message.ExtendedInfo")
            if not detail and info:
                detail = "; ".join(i.get("Message", "") for i in info if isinstance(i, dict))
        else:
            detail = str(err)
    elif isinstance(payload, str):
        detail = payload.strip()[:300]
    meaning = {401: "authentication failed (check the credentials)", 403: "permission denied",
               404: "not found"}.get(status, "")
    text = "%s %s answered HTTP %s" % (method, path, status)
    if meaning:
        text += ": " + meaning
    if detail:
        text += ": " + str(detail)
    return text
