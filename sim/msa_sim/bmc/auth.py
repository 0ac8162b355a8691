# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

"""PBKDF2 password hashes for BMC accounts (Django-style and passlib-style encodings) and a verified-credential cache."""

import base64
import hashlib
import hmac
import os
import secrets
import threading

DEFAULT_ITERATIONS = 100000
ALGORITHMS = {"pbkdf2_sha256": "sha256", "pbkdf2_sha512": "sha512"}


class HashError(ValueError):
    """A password hash this service cannot read."""


def hash_password(password, iterations=DEFAULT_ITERATIONS, salt=None, algorithm="pbkdf2_sha256"):
    """``pbkdf2_sha256$<iterations>$<salt>$<base64 digest>`` (the Django encoding)."""
    if algorithm not in ALGORITHMS:
        raise HashError("algorithm %r is not one of %s" % (algorithm, ", ".join(sorted(ALGORITHMS))))
    salt = salt or secrets.token_hex(8)
    if "$" in salt:
        raise HashError("salt %r must not contain '$'" % (salt,))
    digest = hashlib.pbkdf2_hmac(ALGORITHMS[algorithm], password.encode(), salt.encode(), int(iterations))
    return "%s$%d$%s$%s" % (algorithm, int(iterations), salt, base64.b64encode(digest).decode())


def _ab64decode(text):
    """passlib's "adapted base64": '.' for '+', no padding."""
    text = text.replace(".", "+")
    return base64.b64decode(text + "=" * (-len(text) % 4))


def parse_hash(encoded):
    """Return (hash name, iterations, salt bytes, digest bytes) of a Django or passlib PBKDF2 hash."""
    try:
        if encoded.startswith("$pbkdf2"):
            # passlib: $pbkdf2-sha256$<rounds>$<ab64 salt>$<ab64 digest>
            _, scheme, rounds, salt, digest = encoded.split("$")
            name = "sha1" if scheme == "pbkdf2" else scheme.split("-", 1)[1]
            return name, int(rounds), _ab64decode(salt), _ab64decode(digest)
        algorithm, rounds, salt, digest = encoded.split("$")
        return ALGORITHMS[algorithm], int(rounds), salt.encode(), base64.b64decode(digest)
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise HashError("not a PBKDF2 hash (expected pbkdf2_sha256$<iterations>$<salt>$<base64 digest> "
                        "or $pbkdf2-sha256$..., as `python3 -m msa_sim.bmc hash-password` prints)") from None


def verify_password(password, encoded):
    name, rounds, salt, digest = parse_hash(encoded)
    candidate = hashlib.pbkdf2_hmac(name, password.encode(), salt, rounds)
    return hmac.compare_digest(candidate, digest)


class CredentialCache:
    """Remembers credentials that verified once, so basic auth does not cost a PBKDF2 run per request.

    Only a keyed digest of the password is kept, with a key that lives in this process alone.
    """

    def __init__(self):
        self._key = os.urandom(32)
        self._seen = {}
        self._lock = threading.Lock()

    def _digest(self, username, password, encoded):
        return hmac.new(self._key, ("%s\0%s\0%s" % (username, password, encoded)).encode(), "sha256").digest()

    def check(self, username, password, encoded):
        token = self._digest(username, password, encoded)
        with self._lock:
            if self._seen.get(username) == token:
                return True
        if not verify_password(password, encoded):
            return False
        with self._lock:
            self._seen[username] = token
        return True
