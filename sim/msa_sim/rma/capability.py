# SPDX-License-Identifier: GPL-3.0-or-later
"""Capabilities the NAM/GCE manager signs and a board checks: what one job may touch on one board, until when.

A capability is ``<base64url JSON>.<hex HMAC-SHA256>`` under the key the manager and the boards share
(``device_key_file``). Its JSON names the board (``device``), the kind (``nam``: an allocation's address range;
``gce``: a communicator), the allocation or communicator with its creation time (so a capability of a freed and
re-made allocation is a different identity), the owner and job, and ``exp``. The board trusts nothing else of the
caller: offsets and lengths are checked against the range the capability carries.
"""
from __future__ import annotations

import base64
import hmac
import json
import os
import secrets
import time

KINDS = ("nam", "gce")
MAX_LEN = 4096


class CapabilityError(Exception):
    """A capability the board refuses; the message says why (never which key)."""


def load_key(path, create=False):
    """The shared key (at least 32 bytes); ``create`` makes one (mode 0600) when the file does not exist."""
    try:
        with open(path, "rb") as fh:
            key = fh.read().strip()
    except FileNotFoundError:
        if not create:
            raise CapabilityError("device key file %s does not exist" % path) from None
        key = secrets.token_hex(32).encode()
        fd = os.open(path + ".tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(key + b"\n")
        os.replace(path + ".tmp", path)
    if len(key) < 32:
        raise CapabilityError("device key file %s holds %d bytes; at least 32 are needed" % (path, len(key)))
    return key


def sign(key, claims, ttl):
    """A capability for ``claims`` (a dict with ``kind`` and ``device``) valid ``ttl`` seconds."""
    if claims.get("kind") not in KINDS:
        raise ValueError("kind %r is not one of %s" % (claims.get("kind"), ", ".join(KINDS)))
    body = dict(claims, exp=int(time.time()) + int(ttl))
    payload = base64.urlsafe_b64encode(json.dumps(body, sort_keys=True).encode()).decode().rstrip("=")
    return payload + "." + hmac.new(key, payload.encode(), "sha256").hexdigest()


def verify(key, token, device, kind, now=None):
    """The claims of ``token`` when it is signed with ``key``, unexpired, for board ``device`` and of ``kind``."""
    if not isinstance(token, str) or len(token) > MAX_LEN or token.count(".") != 1:
        raise CapabilityError("the capability is not <payload>.<signature>")
    payload, sig = token.split(".")
    if not hmac.compare_digest(hmac.new(key, payload.encode(), "sha256").hexdigest(), sig):
        raise CapabilityError("the capability's signature does not verify (not issued by this system's manager)")
    try:
        claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    except ValueError:
        raise CapabilityError("the capability's payload is not JSON") from None
    if not isinstance(claims, dict):
        raise CapabilityError("the capability's payload is not an object")
    if claims.get("exp", 0) < (time.time() if now is None else now):
        raise CapabilityError("the capability expired at %s" % claims.get("exp"))
    if claims.get("device") != device:
        raise CapabilityError("the capability is for board %r, this is %r" % (claims.get("device"), device))
    if claims.get("kind") != kind:
        raise CapabilityError("the capability is for the %s, not the %s" % (claims.get("kind"), kind))
    return claims
