# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

"""msa.hpc.bcrypt_hash: a hash bcrypt itself verifies, the same for the same password and seed, and clear refusals."""

import bcrypt
import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.msa.hpc.plugins.filter.bcrypt_hash import bcrypt_hash, bcrypt_salt

SEED = "Zq3r8tYw0pLkMn4VbXc2"


def test_the_hash_verifies_with_bcrypt_and_is_stable():
    first = bcrypt_hash("s3cret-password", SEED)
    assert first.startswith("$2b$10$") and len(first) == 60
    assert bcrypt.checkpw(b"s3cret-password", first.encode())
    assert not bcrypt.checkpw(b"s3cret-passworD", first.encode())
    assert bcrypt_hash("s3cret-password", SEED) == first


def test_another_seed_or_password_gives_another_hash():
    assert bcrypt_hash("pw-one-two-three", SEED) != bcrypt_hash("pw-one-two-three", SEED + "x")
    assert bcrypt_hash("pw-one-two-three", SEED) != bcrypt_hash("pw-one-two-four", SEED)


def test_the_salt_is_bcrypts_own_alphabet_and_length():
    salt = bcrypt_salt(SEED, 12)
    assert salt.startswith(b"$2b$12$") and len(salt) == 29
    assert set(salt[7:]) <= set(b"./ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")


@pytest.mark.parametrize("password, seed, rounds, says", [
    ("", SEED, 10, "non-empty string"),
    ("pw", "short", 10, "at least 16 characters"),
    ("pw", SEED, 3, "between 4 and 31"),
    ("x" * 73, SEED, 10, "at most 72 bytes"),
])
def test_bad_input_is_refused_by_name(password, seed, rounds, says):
    with pytest.raises(AnsibleFilterError, match=says):
        bcrypt_hash(password, seed, rounds)
