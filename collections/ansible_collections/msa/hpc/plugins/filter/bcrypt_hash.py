# SPDX-License-Identifier: GPL-3.0-or-later
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

"""Filter msa.hpc.bcrypt_hash: a password's bcrypt hash with a salt derived from a stored seed, so the same password
and seed give the same hash on every run (a web config of Prometheus or its exporters then changes only when the
password does)."""

import base64
import hashlib

from ansible.errors import AnsibleFilterError

try:
    import bcrypt
except ImportError:  # pragma: no cover (bcrypt is in the collection's requirements.txt)
    bcrypt = None

# bcrypt's own base64 alphabet, and the standard one it is a permutation of
_STANDARD = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
_BCRYPT = b"./ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"


def bcrypt_salt(seed, rounds=10):
    """The bcrypt salt (``$2b$<rounds>$`` and 22 characters) made from the first 16 bytes of SHA-256(seed)."""
    raw = hashlib.sha256(seed.encode("utf-8")).digest()[:16]
    encoded = base64.b64encode(raw).rstrip(b"=").translate(bytes.maketrans(_STANDARD, _BCRYPT))
    return b"$2b$%02d$" % rounds + encoded


def bcrypt_hash(password, seed, rounds=10):
    """``password``'s bcrypt hash (``$2b$``) with the salt ``seed`` gives (a secret kept beside the password)."""
    if bcrypt is None:
        raise AnsibleFilterError("msa.hpc.bcrypt_hash needs the Python package bcrypt on the control host "
                                 "(the collection's requirements.txt)")
    if not isinstance(password, str) or not password:
        raise AnsibleFilterError("msa.hpc.bcrypt_hash: the password must be a non-empty string")
    if not isinstance(seed, str) or len(seed) < 16:
        raise AnsibleFilterError("msa.hpc.bcrypt_hash: seed must be a string of at least 16 characters (a stored "
                                 "random value), got %d characters" % len(seed or ""))
    if not isinstance(rounds, int) or not 4 <= rounds <= 31:
        raise AnsibleFilterError("msa.hpc.bcrypt_hash: rounds %r must be between 4 and 31" % (rounds,))
    if len(password.encode("utf-8")) > 72:
        raise AnsibleFilterError("msa.hpc.bcrypt_hash: bcrypt reads at most 72 bytes of a password")
    return bcrypt.hashpw(password.encode("utf-8"), bcrypt_salt(seed, rounds)).decode("ascii")


class FilterModule:
    """bcrypt hashes for web configs."""

    def filters(self):
        return {"bcrypt_hash": bcrypt_hash}
