# SPDX-License-Identifier: GPL-3.0-or-later
"""The memory of a NAM board: a volatile pool (a file on tmpfs: lost at power-off) and a non-volatile pool (a file
under the state directory), addressed as the manager's allocations are (the non-volatile pool follows the volatile
one), with every access bounded by the allocation's range.

Scrubbing: the board remembers, per pool, which allocation (id and creation time, from the capability) last used
each range and how far into it that allocation wrote. The first access of another allocation to an overlapping
range zeroes what the earlier ones wrote before anything is read or written, so memory freed by one job reads as
zeros to the next, whoever it belongs to. Data stays readable only to the same allocation: a non-volatile
allocation the manager keeps across jobs (same id, same creation time) finds its bytes again.
"""
from __future__ import annotations

import os
import sqlite3
import threading

# The written extent of an allocation is recorded in steps of this many bytes, before the write lands: a crash
# between the two never leaves written bytes outside the recorded extent (so the next owner's scrub covers them).
EXTENT_STEP = 64 << 20
ZERO_CHUNK = 1 << 20
SCHEMA_VERSION = 1


class AccessError(Exception):
    """An access outside the allocation or the board; ``field`` and ``value`` name what was wrong."""

    def __init__(self, message, field=None, value=None, status=400):
        super().__init__(message)
        self.field = field
        self.value = value
        self.status = status


class Memory:
    def __init__(self, state_dir, volatile_dir, capacity, nonvolatile_capacity):
        self.capacity = int(capacity)
        self.nonvolatile_capacity = int(nonvolatile_capacity)
        self.lock = threading.Lock()
        os.makedirs(state_dir, mode=0o700, exist_ok=True)
        os.makedirs(volatile_dir, mode=0o700, exist_ok=True)
        self.files = {}
        for kind, directory, size in (("volatile", volatile_dir, self.capacity),
                                      ("nonvolatile", state_dir, self.nonvolatile_capacity)):
            fd = os.open(os.path.join(directory, "%s.pool" % kind), os.O_RDWR | os.O_CREAT, 0o600)
            if os.fstat(fd).st_size != size:
                os.ftruncate(fd, size)          # sparse: untouched memory costs nothing and reads zeros
            self.files[kind] = fd
        self.db = sqlite3.connect(os.path.join(state_dir, "identities.db"), isolation_level=None,
                                  check_same_thread=False)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
        self.db.execute("CREATE TABLE IF NOT EXISTS identities (kind TEXT NOT NULL, alloc INTEGER NOT NULL, "
                        "created REAL NOT NULL, start INTEGER NOT NULL, size INTEGER NOT NULL, "
                        "written INTEGER NOT NULL, retired INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (kind, alloc, created))")
        if self.db.execute("SELECT count(*) FROM schema_version").fetchone()[0] == 0:
            self.db.execute("INSERT INTO schema_version VALUES (?)", (SCHEMA_VERSION,))
        self.known = {}     # (kind, alloc, created) -> recorded written extent

    def close(self):
        with self.lock:
            for fd in self.files.values():
                os.fsync(fd)
                os.close(fd)
            self.files = {}
            self.db.close()

    # ------------------------------------------------------------------ ranges

    def _pool(self, claims):
        """(kind, start within the pool file, size) of the capability's allocation, checked against the board."""
        try:
            address, size, created = int(claims["address"]), int(claims["size"]), float(claims["created"])
            alloc = int(claims["alloc"])
        except (KeyError, TypeError, ValueError):
            raise AccessError("the capability lacks the allocation's address, size, id or creation time",
                              status=403) from None
        kind = "volatile" if claims.get("volatile", True) else "nonvolatile"
        base, end = (0, self.capacity) if kind == "volatile" else (self.capacity, self.capacity +
                                                                   self.nonvolatile_capacity)
        if size <= 0 or address < base or address + size > end:
            raise AccessError("allocation %d at address %d (+%d) is outside the %s memory of this board" % (
                alloc, address, size, kind), "address", address, status=403)
        return kind, alloc, created, address - base, size

    @staticmethod
    def check_range(offset, length, size, what="length"):
        for field, value in (("offset", offset), (what, length)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise AccessError("%s %r is not a non-negative integer" % (field, value), field, value)
        if offset + length > size:
            raise AccessError("offset %d + %s %d is beyond the allocation's %d bytes" % (offset, what, length, size),
                              "offset" if offset >= size else what, offset if offset >= size else length)

    def _claim(self, kind, alloc, created, start, size, upto):
        """Make (kind, alloc, created) the identity of [start, start+size), scrubbing others' writes first; record
        that it may have written up to ``upto`` bytes into its range. Called under the lock."""
        ident = (kind, alloc, created)
        recorded = self.known.get(ident)
        if recorded is None:
            row = self.db.execute("SELECT written, retired FROM identities WHERE kind=? AND alloc=? AND created=?",
                                  ident).fetchone()
            if row is not None and row[1]:
                raise AccessError("allocation %d was freed: its range belongs to a newer allocation" % alloc,
                                  "alloc", alloc, status=410)
            if row is None:
                self.db.execute("BEGIN IMMEDIATE")
                try:
                    for old in self.db.execute(
                            "SELECT alloc, created, start, written FROM identities WHERE kind=? AND start<? AND "
                            "start+size>? AND retired=0", (kind, start + size, start)).fetchall():
                        self._zero(kind, old[2], old[3])
                        # kept as a tombstone: the old capability (still signed, maybe unexpired) is refused
                        self.db.execute("UPDATE identities SET retired=1, written=0 WHERE kind=? AND alloc=? AND "
                                        "created=?", (kind, old[0], old[1]))
                        self.known.pop((kind, old[0], old[1]), None)
                    self.db.execute("INSERT INTO identities VALUES (?,?,?,?,?,0,0)", ident + (start, size))
                    self.db.execute("COMMIT")
                except BaseException:
                    self.db.execute("ROLLBACK")
                    raise
                recorded = 0
            else:
                recorded = row[0]
            self.known[ident] = recorded
        if upto > recorded:
            recorded = min(size, -(-upto // EXTENT_STEP) * EXTENT_STEP)
            self.db.execute("UPDATE identities SET written=? WHERE kind=? AND alloc=? AND created=?",
                            (recorded,) + ident)
            self.known[ident] = recorded

    def _zero(self, kind, start, length):
        fd, zeros = self.files[kind], bytes(ZERO_CHUNK)
        pos = 0
        while pos < length:
            n = min(ZERO_CHUNK, length - pos)
            os.pwrite(fd, zeros[:n], start + pos)
            pos += n
        os.fsync(fd)

    # ------------------------------------------------------------------ access

    def put(self, claims, offset, data):
        kind, alloc, created, start, size = self._pool(claims)
        self.check_range(offset, len(data), size)
        with self.lock:     # I/O under the lock: a scrub by the next allocation never meets a late write
            self._claim(kind, alloc, created, start, size, offset + len(data))
            fd = self.files[kind]
            view, pos = memoryview(data), 0
            while pos < len(view):
                pos += os.pwrite(fd, view[pos:], start + offset + pos)
        return len(data)

    def get(self, claims, offset, length):
        kind, alloc, created, start, size = self._pool(claims)
        self.check_range(offset, length, size)
        with self.lock:
            self._claim(kind, alloc, created, start, size, 0)
            fd = self.files[kind]
            out = bytearray()
            while len(out) < length:
                chunk = os.pread(fd, length - len(out), start + offset + len(out))
                if not chunk:
                    out.extend(bytes(length - len(out)))
                    break
                out.extend(chunk)
        return bytes(out)

    def retire(self, claims):
        """The manager freed the allocation: scrub what it wrote now and refuse its capability from here on."""
        kind, alloc, created, start, size = self._pool(claims)
        with self.lock:
            row = self.db.execute("SELECT written, retired FROM identities WHERE kind=? AND alloc=? AND created=?",
                                  (kind, alloc, created)).fetchone()
            if row is not None and row[1]:
                return 0
            written = row[0] if row else 0
            self._zero(kind, start, written)
            self.db.execute("INSERT INTO identities VALUES (?,?,?,?,?,0,1) ON CONFLICT(kind, alloc, created) "
                            "DO UPDATE SET retired=1, written=0", (kind, alloc, created, start, size))
            self.known.pop((kind, alloc, created), None)
            return written

    def sync(self, claims):
        """Make the allocation's writes durable (non-volatile memory); a no-op for volatile memory."""
        kind = self._pool(claims)[0]
        if kind == "nonvolatile":
            os.fsync(self.files[kind])
