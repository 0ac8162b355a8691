# SPDX-License-Identifier: GPL-3.0-or-later
"""Users of the manager (/etc/nam-manager/users.conf: ``name:role:pbkdf2 hash``) and signed bearer tokens.

A line of users.conf reads ``alice:user:pbkdf2_sha256$200000$<salt>$<base64 digest>``; roles are ``user``
(may touch only what it owns) and ``admin`` (may touch everything, allocate from the administrator reserve
and free orphans). ``python3 -m msa_sim.nammgr hash-password`` prints a hash. The file is re-read when it
changes, so removing a user also revokes that user's tokens.

A job's token (``job.``) carries its owner, job, the serial of the job's grant and its expiry; it is valid only while
the manager's grant for the job with that serial is (``job_check``: the epilog revokes it when the job ends). An
owner's token (``owner.``, from a munge credential of the Slurm user) may only list its owner's allocations and free
the non-volatile ones no job holds.
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import os
import secrets
import threading
import time

ROLES = ("user", "admin")
DEFAULT_ITERATIONS = 200000
HASHES = {"pbkdf2_sha256": "sha256", "pbkdf2_sha512": "sha512"}
JOB_DOMAIN = b"msa-nam-job-token\0"
OWNER_DOMAIN = b"msa-nam-owner-token\0"


class AuthError(ValueError):
    """A users file or a hash that cannot be read."""


class Principal:
    """A user or administrator of users.conf, or (``job`` set) a Slurm job acting for its user, or (``owner_only``) a
    Slurm user reaching its own allocations: role ``user``. ``expires``: when a token's principal stops acting."""

    __slots__ = ("name", "role", "job", "owner_only", "expires")

    def __init__(self, name, role, job=None, owner_only=False, expires=None):
        self.name = name
        self.role = role
        self.job = job
        self.owner_only = owner_only
        self.expires = expires

    @property
    def admin(self):
        return self.role == "admin"


def hash_password(password, iterations=DEFAULT_ITERATIONS, salt=None, algorithm="pbkdf2_sha256"):
    salt = salt or secrets.token_hex(12)
    digest = hashlib.pbkdf2_hmac(HASHES[algorithm], password.encode(), salt.encode(), int(iterations))
    return "%s$%d$%s$%s" % (algorithm, int(iterations), salt, base64.b64encode(digest).decode())


def verify_password(password, encoded):
    try:
        algorithm, rounds, salt, digest = encoded.split("$")
        name, rounds, digest = HASHES[algorithm], int(rounds), base64.b64decode(digest)
    except (ValueError, KeyError) as exc:
        raise AuthError("not a pbkdf2_sha256$<iterations>$<salt>$<digest> hash (%s)" % exc.__class__.__name__) from None
    return hmac.compare_digest(hashlib.pbkdf2_hmac(name, password.encode(), salt.encode(), rounds), digest)


def parse_users(text, path="users.conf"):
    users = {}
    for lineno, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split(":", 2)
        if len(parts) != 3 or not parts[0]:
            raise AuthError("%s line %d: expected name:role:hash" % (path, lineno))
        name, role, encoded = parts
        if role not in ROLES:
            raise AuthError("%s line %d: role %r of %s is not one of %s" % (path, lineno, role, name, ", ".join(ROLES)))
        if encoded.split("$", 1)[0] not in HASHES:
            raise AuthError("%s line %d: the hash of %s is not pbkdf2_sha256$<iterations>$<salt>$<digest>"
                            % (path, lineno, name))
        users[name] = (role, encoded)
    return users


class Authenticator:
    """Basic auth against users.conf (verified passwords are cached as a keyed digest) and HMAC bearer tokens."""

    def __init__(self, users_file, secret_file, token_ttl=3600):
        self.users_file = users_file
        self.token_ttl = token_ttl
        # (owner, job, serial) -> whether the job's grant is live; the manager sets it (store.job_token_valid).
        # Unset, no job token is accepted.
        self.job_check = None
        self.lock = threading.Lock()
        self._users, self._mtime, self._verified = {}, None, {}
        self.secret = self._load_secret(secret_file)
        self._reload()

    @staticmethod
    def _load_secret(path):
        try:
            with open(path, "rb") as fh:
                secret = fh.read()
            if len(secret) >= 32:
                return secret
        except FileNotFoundError:
            pass
        secret = secrets.token_bytes(32)
        fd = os.open(path + ".tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(secret)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(path + ".tmp", path)
        return secret

    def _reload(self):
        try:
            mtime = os.stat(self.users_file).st_mtime_ns
        except FileNotFoundError:
            raise AuthError("users file %s does not exist" % self.users_file) from None
        if mtime == self._mtime:
            return
        with open(self.users_file, "r", encoding="utf-8") as fh:
            users = parse_users(fh.read(), self.users_file)
        with self.lock:
            self._users, self._mtime, self._verified = users, mtime, {}

    def users(self):
        self._reload()
        return self._users

    def basic(self, name, password):
        entry = self.users().get(name)
        if entry is None:
            return None
        role, encoded = entry
        key = hmac.new(self.secret, ("%s\0%s\0%s" % (name, encoded, password)).encode(), "sha256").digest()
        with self.lock:
            known = self._verified.get(name) == key
        if not known:
            if not verify_password(password, encoded):
                return None
            with self.lock:
                self._verified[name] = key
        return Principal(name, role)

    def issue(self, principal, ttl=None):
        expires = int(time.time()) + int(ttl or self.token_ttl)
        payload = base64.urlsafe_b64encode(("%s|%s|%d" % (principal.name, principal.role, expires)).encode())
        sig = hmac.new(self.secret, payload, "sha256").hexdigest()
        return payload.decode().rstrip("=") + "." + sig, expires

    def _sign(self, domain, prefix, fields, expires):
        payload = base64.urlsafe_b64encode("|".join(map(str, list(fields) + [int(expires)])).encode())
        # signed in a domain of its own, so no token of one kind (whatever its user's name) reads as another
        sig = hmac.new(self.secret, domain + payload, "sha256").hexdigest()
        return prefix + payload.decode().rstrip("=") + "." + sig

    def _verify(self, domain, token, nfields):
        """The fields (the last one the expiry, as int) of a well-signed, unexpired token, else None."""
        payload, _, sig = token.partition(".")
        raw = payload.encode() + b"=" * (-len(payload) % 4)
        if not sig or not hmac.compare_digest(hmac.new(self.secret, domain + raw, "sha256").hexdigest(), sig):
            return None
        try:
            fields = base64.urlsafe_b64decode(raw).decode().split("|")
            expires = int(fields[-1])
        except (ValueError, IndexError):
            return None
        if len(fields) != nfields or expires < time.time():
            return None
        return fields[:-1] + [expires]

    def issue_job(self, owner, job, serial, expires):
        """A token for job ``job`` of Slurm user ``owner`` (who need not be in users.conf) under the job's grant
        ``serial``, until ``expires``: the job's code reaches the owner's own allocations and communicators with it,
        nothing else (api.JOB_ROUTES), and only while the grant is live."""
        return self._sign(JOB_DOMAIN, "job.", (owner, job, serial), expires), int(expires)

    def _job_bearer(self, token):
        fields = self._verify(JOB_DOMAIN, token[4:], 4)
        if fields is None or self.job_check is None:
            return None
        owner, job, serial, expires = fields
        if not self.job_check(owner, job, serial):
            return None
        return Principal(owner, "user", job=job, expires=expires)

    def issue_owner(self, owner, ttl=None):
        """A token for Slurm user ``owner`` (proved by munge) to list and free its own non-volatile allocations."""
        expires = int(time.time()) + int(ttl or self.token_ttl)
        return self._sign(OWNER_DOMAIN, "owner.", (owner,), expires), expires

    def _owner_bearer(self, token):
        fields = self._verify(OWNER_DOMAIN, token[6:], 2)
        return None if fields is None else Principal(fields[0], "user", owner_only=True, expires=fields[1])

    def bearer(self, token):
        if token.startswith("job."):
            return self._job_bearer(token)
        if token.startswith("owner."):
            return self._owner_bearer(token)
        payload, _, sig = token.partition(".")
        if not sig:
            return None
        raw = payload.encode() + b"=" * (-len(payload) % 4)
        if not hmac.compare_digest(hmac.new(self.secret, raw, "sha256").hexdigest(), sig):
            return None
        try:
            name, role, expires = base64.urlsafe_b64decode(raw).decode().rsplit("|", 2)
            expires = int(expires)
        except ValueError:
            return None
        entry = self.users().get(name)
        if expires < time.time() or entry is None or entry[0] != role:
            return None
        return Principal(name, role)
