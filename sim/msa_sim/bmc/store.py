# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

"""SQLite state of the BMCs: boot override and last seen power per system, sessions (tokens kept as SHA-256)."""

import os
import sqlite3
import threading

SCHEMA_VERSION = 1
SCHEMA = """
CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS systems (
    bmc TEXT PRIMARY KEY,
    boot_enabled TEXT NOT NULL DEFAULT 'Disabled',
    boot_target TEXT NOT NULL DEFAULT 'None',
    boot_mode TEXT NOT NULL DEFAULT 'UEFI',
    last_power TEXT,
    last_reset REAL,
    last_boot_target TEXT,
    boots INTEGER NOT NULL DEFAULT 0,
    session_timeout INTEGER);
CREATE TABLE IF NOT EXISTS sessions (
    bmc TEXT NOT NULL, id TEXT NOT NULL, token_sha256 TEXT NOT NULL UNIQUE, username TEXT NOT NULL,
    role TEXT NOT NULL, created REAL NOT NULL, last_used REAL NOT NULL, PRIMARY KEY (bmc, id));
"""
SYSTEM_COLUMNS = ("boot_enabled", "boot_target", "boot_mode", "last_power", "last_reset", "last_boot_target",
                  "boots", "session_timeout")
SESSION_COLUMNS = ("id", "token_sha256", "username", "role", "created", "last_used")


class Store:
    def __init__(self, path):
        if path != ":memory:":
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._lock = threading.RLock()
        with self._lock:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")  # WAL-safe; a crash loses at most the last commits
            self._db.executescript(SCHEMA)
            row = self._db.execute("SELECT version FROM schema_version").fetchone()
            if row is None:
                self._db.execute("INSERT INTO schema_version VALUES (?)", (SCHEMA_VERSION,))
            elif row[0] != SCHEMA_VERSION:
                raise RuntimeError("state database %s has schema %s, expected %s" % (path, row[0], SCHEMA_VERSION))

    def close(self):
        with self._lock:
            self._db.close()

    def transaction(self):
        return _Transaction(self)

    def system(self, bmc):
        query = "SELECT %s FROM systems WHERE bmc = ?" % ", ".join(SYSTEM_COLUMNS)
        with self._lock:
            row = self._db.execute(query, (bmc,)).fetchone()
            if row is None:
                with self.transaction() as db:
                    db.execute("INSERT OR IGNORE INTO systems(bmc) VALUES (?)", (bmc,))
                row = self._db.execute(query, (bmc,)).fetchone()
        return dict(zip(SYSTEM_COLUMNS, row))

    def update_system(self, bmc, **values):
        unknown = set(values) - set(SYSTEM_COLUMNS)
        if unknown:
            raise KeyError("unknown system columns %s" % sorted(unknown))
        with self.transaction() as db:
            db.execute("INSERT OR IGNORE INTO systems(bmc) VALUES (?)", (bmc,))
            db.execute("UPDATE systems SET %s WHERE bmc = ?" % ", ".join("%s = ?" % k for k in values),
                       tuple(values.values()) + (bmc,))

    def sessions(self, bmc):
        with self._lock:
            rows = self._db.execute("SELECT %s FROM sessions WHERE bmc = ? ORDER BY created, id"
                                    % ", ".join(SESSION_COLUMNS), (bmc,)).fetchall()
        return [dict(zip(SESSION_COLUMNS, r)) for r in rows]

    def add_session(self, bmc, session, limit):
        """Insert unless the BMC already holds ``limit`` sessions; return whether it was added."""
        with self.transaction() as db:
            count = db.execute("SELECT COUNT(*) FROM sessions WHERE bmc = ?", (bmc,)).fetchone()[0]
            if count >= limit:
                return False
            db.execute("INSERT INTO sessions(bmc, %s) VALUES (?, ?, ?, ?, ?, ?, ?)" % ", ".join(SESSION_COLUMNS),
                       (bmc,) + tuple(session[c] for c in SESSION_COLUMNS))
        return True

    def session_by_token(self, bmc, token_sha256):
        with self._lock:
            row = self._db.execute("SELECT %s FROM sessions WHERE bmc = ? AND token_sha256 = ?"
                                   % ", ".join(SESSION_COLUMNS), (bmc, token_sha256)).fetchone()
        return dict(zip(SESSION_COLUMNS, row)) if row else None

    def touch_session(self, bmc, sid, when):
        with self.transaction() as db:
            db.execute("UPDATE sessions SET last_used = ? WHERE bmc = ? AND id = ?", (when, bmc, sid))

    def delete_session(self, bmc, sid):
        with self.transaction() as db:
            return db.execute("DELETE FROM sessions WHERE bmc = ? AND id = ?", (bmc, sid)).rowcount > 0

    def expire_sessions(self, bmc, older_than):
        with self.transaction() as db:
            return db.execute("DELETE FROM sessions WHERE bmc = ? AND last_used < ?", (bmc, older_than)).rowcount


class _Transaction:
    def __init__(self, store):
        self.store = store

    def __enter__(self):
        self.store._lock.acquire()
        self.store._db.execute("BEGIN IMMEDIATE")
        return self.store._db

    def __exit__(self, exc_type, exc, tb):
        try:
            self.store._db.execute("ROLLBACK" if exc_type else "COMMIT")
        finally:
            self.store._lock.release()
        return False
