# SPDX-License-Identifier: GPL-3.0-or-later
"""The manager's SQL state (SQLite, WAL): NAM pools, free segments, allocations, the AAT and GCE communicators.

Every mutation is one ``BEGIN IMMEDIATE`` ... ``COMMIT`` transaction, so a crash at any moment leaves either
the state before or the state after it: no half-split segment, no allocation without its bytes.

Each NAM board has a volatile and a non-volatile pool; a pool is tiled by its free segments and its
allocations. Allocation takes the smallest free segment that fits (best fit: smallest, then lowest device
name and offset) and splits it; free returns the bytes and merges them with the free neighbours, so no two
free segments of a pool are ever adjacent. Allocations without ``reserved`` count against the pool's
capacity minus its administrator reserve.

One module per concern: base (schema, connection, transactions), devices (boards, pools, free segments),
allocations (NAM allocations, AAT), consistency (invariants), communicators (GCE), grants (what Slurm granted
each job, the end of its tokens, the non-volatile quota and expiry, the maintenance sweep).
"""
from __future__ import annotations

from .allocations import Allocations
from .base import KINDS, SCHEMA_VERSION, StoreBase, StoreError
from .communicators import Communicators
from .consistency import Consistency
from .devices import Devices
from .grants import Grants

__all__ = ["KINDS", "SCHEMA_VERSION", "Store", "StoreError"]


class Store(Devices, Allocations, Consistency, Communicators, Grants, StoreBase):
    """The manager's state in one SQLite file: ``Store(path, synchronous="full", granularity=4096)``."""
