# SPDX-License-Identifier: GPL-3.0-or-later
"""One small REST client for every API the collection speaks (managers, BMCs, REST gateways)."""
from __future__ import annotations

import base64
import json
import socket
import time
import urllib.error
import urllib.request

from ansible.module_utils.urls import open_url

RETRY_STATUSES = frozenset((500, 502, 503, 504))


class RestError(Exception):
    """A request that failed for a reason a site administrator can act on."""

    def __init__(self, message, status=None, body=None):
        super().__init__(message)
        self.status = status
        self.body = body


class RestClient:
    """JSON over HTTP(S) with basic auth or a token header, timeouts and retries with back-off.

    ``token_header`` names the header a token travels in (``X-Auth-Token`` for Redfish sessions,
    ``Authorization`` with a ``Bearer`` prefix for the stand-in managers).
    """

    def __init__(self, base_url, username=None, password=None, token=None, token_header="Authorization",
                 validate_certs=True, ca_path=None, timeout=10, retries=3, backoff=0.5, sleep=time.sleep,
                 retry_statuses=RETRY_STATUSES):
        if not base_url or "://" not in base_url:
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
        # HTTP statuses worth another try (a service that answers 500 for a request it refused wants fewer).
        self.retry_statuses = frozenset(retry_statuses)
        self._sleep = sleep
        # Plain HTTP needs none of open_url's TLS set-up, which costs ~80 ms a call; no proxies either way.
        self._plain = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def _open(self, url, method, data, headers):
        if url.startswith("http://"):
            req = urllib.request.Request(url, data=data, headers=headers, method=method)
            return self._plain.open(req, timeout=self.timeout)
        return open_url(url, method=method, data=data, headers=headers, validate_certs=self.validate_certs,
                        ca_path=self.ca_path, timeout=self.timeout, follow_redirects="all", use_proxy=False)

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

    def request(self, method, path, body=None, headers=None, expect=(200, 201, 202, 204)):
        """Return ``(status, decoded JSON or None, response headers)``; raise RestError otherwise."""
        url = path if "://" in path else self.base_url + "/" + path.lstrip("/")
        data = json.dumps(body).encode() if body is not None else None
        attempt = 0
        while True:
            attempt += 1
            try:
                resp = self._open(url, method, data, self._headers(headers))
                status, raw, rheaders = resp.getcode(), resp.read(), dict(resp.headers)
            except urllib.error.HTTPError as exc:
                status, raw, rheaders = exc.code, exc.read() if exc.fp else b"", dict(exc.headers or {})
            except (urllib.error.URLError, socket.timeout, ConnectionError, OSError) as exc:
                reason = getattr(exc, "reason", exc)
                if attempt <= self.retries:
                    self._sleep(self.backoff * 2 ** (attempt - 1))
                    continue
                raise RestError("cannot reach %s after %d attempts: %s" % (self.base_url, attempt, reason))
            if status in self.retry_statuses and attempt <= self.retries:
                self._sleep(self.backoff * 2 ** (attempt - 1))
                continue
            payload = _decode(raw)
            if status not in expect:
                raise RestError(_describe(method, path, status, payload), status=status, body=payload)
            return status, payload, rheaders

    def get(self, path, **kw):
        return self.request("GET", path, **kw)[1]

    def post(self, path, body=None, **kw):
        return self.request("POST", path, body=body, **kw)[1]

    def patch(self, path, body=None, **kw):
        return self.request("PATCH", path, body=body, **kw)[1]

    def delete(self, path, **kw):
        return self.request("DELETE", path, **kw)[1]


def _decode(raw):
    if not raw:
        return None
    try:
        return json.loads(raw.decode("utf-8", "replace"))
    except ValueError:
        return {"message": raw.decode("utf-8", "replace")[:500]}


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
    meaning = {401: "authentication failed (check the credentials)", 403: "permission denied",
               404: "not found"}.get(status, "")
    text = "%s %s answered HTTP %s" % (method, path, status)
    if meaning:
        text += ": " + meaning
    if detail:
        text += ": " + str(detail)
    return text
