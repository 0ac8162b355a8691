# SPDX-License-Identifier: GPL-3.0-or-later
"""SQLite state of the BMCs: boot override and power per system, sessions (tokens as SHA-256), accounts,
firmware versions, update tasks and event subscriptions."""
from __future__ import annotations

import json
import threading

from msa_sim.sqlite import open_versioned

SCHEMA_VERSION = 2
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
    session_timeout INTEGER,
    health TEXT NOT NULL DEFAULT 'OK',
    settings TEXT NOT NULL DEFAULT '{}');
CREATE TABLE IF NOT EXISTS sessions (
    bmc TEXT NOT NULL, id TEXT NOT NULL, token_sha256 TEXT NOT NULL UNIQUE, username TEXT NOT NULL,
    role TEXT NOT NULL, created REAL NOT NULL, last_used REAL NOT NULL, PRIMARY KEY (bmc, id));
CREATE TABLE IF NOT EXISTS accounts (
    bmc TEXT NOT NULL, id TEXT NOT NULL, username TEXT NOT NULL, password_hash TEXT NOT NULL, role TEXT NOT NULL,
    enabled INTEGER NOT NULL DEFAULT 1, locked INTEGER NOT NULL DEFAULT 0,
    password_change_required INTEGER NOT NULL DEFAULT 0, seeded_hash TEXT,
    PRIMARY KEY (bmc, id), UNIQUE (bmc, username));
CREATE TABLE IF NOT EXISTS firmware (
    bmc TEXT NOT NULL, component TEXT NOT NULL, version TEXT NOT NULL, updated REAL, image_sha256 TEXT,
    PRIMARY KEY (bmc, component));
CREATE TABLE IF NOT EXISTS tasks (
    bmc TEXT NOT NULL, id TEXT NOT NULL, name TEXT NOT NULL, state TEXT NOT NULL, status TEXT NOT NULL,
    percent INTEGER NOT NULL DEFAULT 0, start REAL NOT NULL, end_time REAL, messages TEXT NOT NULL DEFAULT '[]',
    payload TEXT NOT NULL DEFAULT '{}', PRIMARY KEY (bmc, id));
CREATE TABLE IF NOT EXISTS subscriptions (
    bmc TEXT NOT NULL, id TEXT NOT NULL, body TEXT NOT NULL, PRIMARY KEY (bmc, id));
"""
ACCOUNT_COLUMNS = ("id", "username", "password_hash", "role", "enabled", "locked", "password_change_required",
                   "seeded_hash")
TASK_COLUMNS = ("id", "name", "state", "status", "percent", "start", "end_time", "messages", "payload")
SYSTEM_COLUMNS = ("boot_enabled", "boot_target", "boot_mode", "last_power", "last_reset", "last_boot_target",
                  "boots", "session_timeout", "health", "settings")
SESSION_COLUMNS = ("id", "token_sha256", "username", "role", "created", "last_used")


def _add_health_and_settings(db):
    """Version 1 had no health or settings column (its new tables come from SCHEMA)."""
    db.execute("ALTER TABLE systems ADD COLUMN health TEXT NOT NULL DEFAULT 'OK'")
    db.execute("ALTER TABLE systems ADD COLUMN settings TEXT NOT NULL DEFAULT '{}'")


class Store:
    def __init__(self, path):
        # synchronous=NORMAL is WAL-safe: a crash loses at most the last commits
        self._db = open_versioned(path, SCHEMA, SCHEMA_VERSION, {1: _add_health_and_settings}, synchronous="normal")
        self._lock = threading.RLock()

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


    # ------------------------------------------------------------------ accounts
    def accounts(self, bmc):
        with self._lock:
            rows = self._db.execute("SELECT %s FROM accounts WHERE bmc = ? ORDER BY CAST(id AS INTEGER), id"
                                    % ", ".join(ACCOUNT_COLUMNS), (bmc,)).fetchall()
        return [dict(zip(ACCOUNT_COLUMNS, r)) for r in rows]

    def account(self, bmc, key, value):
        return next((a for a in self.accounts(bmc) if a[key] == value), None)

    def seed_accounts(self, bmc, users, force=False):
        """Configured accounts: added when missing, password and role reset when the configuration changed them."""
        with self.transaction() as db:
            for user in users:
                row = db.execute("SELECT id, seeded_hash FROM accounts WHERE bmc = ? AND username = ?",
                                 (bmc, user["username"])).fetchone()
                if row is None:
                    db.execute("INSERT INTO accounts(bmc, id, username, password_hash, role, seeded_hash) "
                               "VALUES (?, ?, ?, ?, ?, ?)", (bmc, self._next_account_id(db, bmc), user["username"],
                                                             user["password_hash"], user["role"],
                                                             user["password_hash"] + "|" + user["role"]))
                elif force or row[1] != user["password_hash"] + "|" + user["role"]:
                    db.execute("UPDATE accounts SET password_hash = ?, role = ?, seeded_hash = ?, enabled = 1, "
                               "locked = 0, password_change_required = 0 "
                               "WHERE bmc = ? AND id = ?", (user["password_hash"], user["role"],
                                                            user["password_hash"] + "|" + user["role"], bmc, row[0]))

    @staticmethod
    def _next_account_id(db, bmc):
        ids = [int(r[0]) for r in db.execute("SELECT id FROM accounts WHERE bmc = ?", (bmc,)) if r[0].isdigit()]
        return str(max(ids, default=0) + 1)

    def add_account(self, bmc, account, limit):
        """Insert an account; return its Id, None when the name is taken, False when ``limit`` accounts exist."""
        with self.transaction() as db:
            if db.execute("SELECT 1 FROM accounts WHERE bmc = ? AND username = ?",
                          (bmc, account["username"])).fetchone():
                return None
            if db.execute("SELECT COUNT(*) FROM accounts WHERE bmc = ?", (bmc,)).fetchone()[0] >= limit:
                return False
            account = dict(account, id=self._next_account_id(db, bmc))
            db.execute("INSERT INTO accounts(bmc, %s) VALUES (?%s)" % (", ".join(ACCOUNT_COLUMNS),
                                                                     ", ?" * len(ACCOUNT_COLUMNS)),
                       (bmc,) + tuple(account.get(c) for c in ACCOUNT_COLUMNS))
        return account["id"]

    def update_account(self, bmc, aid, **values):
        unknown = set(values) - set(ACCOUNT_COLUMNS[1:])
        if unknown:
            raise KeyError("unknown account columns %s" % sorted(unknown))
        with self.transaction() as db:
            if "username" in values and db.execute("SELECT 1 FROM accounts WHERE bmc = ? AND username = ? AND "
                                                   "id != ?", (bmc, values["username"], aid)).fetchone():
                return False
            db.execute("UPDATE accounts SET %s WHERE bmc = ? AND id = ?" % ", ".join("%s = ?" % k for k in values),
                       tuple(values.values()) + (bmc, aid))
        return True

    def delete_account(self, bmc, aid):
        with self.transaction() as db:
            row = db.execute("SELECT username FROM accounts WHERE bmc = ? AND id = ?", (bmc, aid)).fetchone()
            db.execute("DELETE FROM accounts WHERE bmc = ? AND id = ?", (bmc, aid))
            if row:  # a removed account's sessions end with it
                db.execute("DELETE FROM sessions WHERE bmc = ? AND username = ?", (bmc, row[0]))

    # ------------------------------------------------------------------ firmware and tasks
    def firmware(self, bmc):
        with self._lock:
            rows = self._db.execute("SELECT component, version, updated, image_sha256 FROM firmware WHERE bmc = ?",
                                    (bmc,)).fetchall()
        return {r[0]: {"version": r[1], "updated": r[2], "image_sha256": r[3]} for r in rows}

    def set_firmware(self, bmc, component, version, updated, image_sha256):
        with self.transaction() as db:
            db.execute("INSERT OR REPLACE INTO firmware VALUES (?, ?, ?, ?, ?)",
                       (bmc, component, version, updated, image_sha256))

    def tasks(self, bmc):
        with self._lock:
            rows = self._db.execute("SELECT %s FROM tasks WHERE bmc = ? ORDER BY start, id" % ", ".join(TASK_COLUMNS),
                                    (bmc,)).fetchall()
        return [dict(zip(TASK_COLUMNS, r)) for r in rows]

    def put_task(self, bmc, task, keep=32):
        """Insert or replace a task; only the newest ``keep`` finished tasks stay."""
        with self.transaction() as db:
            db.execute("INSERT OR REPLACE INTO tasks(bmc, %s) VALUES (?%s)" % (", ".join(TASK_COLUMNS),
                                                                             ", ?" * len(TASK_COLUMNS)),
                       (bmc,) + tuple(task[c] for c in TASK_COLUMNS))
            db.execute("DELETE FROM tasks WHERE bmc = ? AND end_time IS NOT NULL AND id NOT IN (SELECT id FROM "
                       "tasks WHERE bmc = ? ORDER BY start DESC LIMIT ?)", (bmc, bmc, keep))

    # ------------------------------------------------------------------ event subscriptions
    def subscriptions(self, bmc):
        with self._lock:
            rows = self._db.execute("SELECT id, body FROM subscriptions WHERE bmc = ? ORDER BY CAST(id AS INTEGER)",
                                    (bmc,)).fetchall()
        return {r[0]: json.loads(r[1]) for r in rows}

    def add_subscription(self, bmc, body, limit):
        with self.transaction() as db:
            ids = [int(r[0]) for r in db.execute("SELECT id FROM subscriptions WHERE bmc = ?", (bmc,))]
            if len(ids) >= limit:
                return None
            sid = str(max(ids, default=0) + 1)
            db.execute("INSERT INTO subscriptions VALUES (?, ?, ?)", (bmc, sid, json.dumps(dict(body, Id=sid))))
        return sid

    def update_subscription(self, bmc, sid, body):
        with self.transaction() as db:
            db.execute("UPDATE subscriptions SET body = ? WHERE bmc = ? AND id = ?", (json.dumps(body), bmc, sid))

    def delete_subscription(self, bmc, sid):
        with self.transaction() as db:
            return db.execute("DELETE FROM subscriptions WHERE bmc = ? AND id = ?", (bmc, sid)).rowcount > 0


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
