# SPDX-License-Identifier: GPL-3.0-or-later
"""The NAM/GCE manager's database: its schema, the error a refused request raises, the connection and its
transactions, and the selection of rows by job, owner or live jobs."""
from __future__ import annotations

import contextlib
import sqlite3
import threading


SCHEMA_VERSION = 2
KINDS = ("volatile", "nonvolatile")

SCHEMA = """
CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS nam_devices (
    name TEXT PRIMARY KEY, node_id INTEGER, aat_size INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS pools (
    device TEXT NOT NULL REFERENCES nam_devices(name), kind TEXT NOT NULL, base INTEGER NOT NULL,
    capacity INTEGER NOT NULL, reserve INTEGER NOT NULL,
    allocated INTEGER NOT NULL DEFAULT 0, user_allocated INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (device, kind));
CREATE TABLE IF NOT EXISTS free_segments (
    device TEXT NOT NULL, kind TEXT NOT NULL, offset INTEGER NOT NULL, size INTEGER NOT NULL CHECK (size > 0),
    PRIMARY KEY (device, kind, offset));
CREATE INDEX IF NOT EXISTS free_segments_fit ON free_segments (kind, size, device, offset);
CREATE TABLE IF NOT EXISTS allocations (
    id INTEGER PRIMARY KEY AUTOINCREMENT, device TEXT NOT NULL, kind TEXT NOT NULL, offset INTEGER NOT NULL,
    size INTEGER NOT NULL CHECK (size > 0), requested INTEGER NOT NULL, reserved INTEGER NOT NULL,
    job TEXT, owner TEXT NOT NULL, name TEXT UNIQUE, created_by TEXT NOT NULL, created REAL NOT NULL,
    UNIQUE (device, kind, offset));
CREATE INDEX IF NOT EXISTS allocations_job ON allocations (job);
CREATE INDEX IF NOT EXISTS allocations_owner ON allocations (owner);
CREATE TABLE IF NOT EXISTS attachments (
    alloc_id INTEGER NOT NULL REFERENCES allocations(id), device TEXT NOT NULL, aat_index INTEGER NOT NULL,
    node TEXT NOT NULL, vpid INTEGER NOT NULL, attached REAL NOT NULL, job TEXT,
    PRIMARY KEY (device, aat_index), UNIQUE (alloc_id, node, vpid));
CREATE TABLE IF NOT EXISTS gce_devices (name TEXT PRIMARY KEY, node_id INTEGER);
CREATE TABLE IF NOT EXISTS communicators (
    id INTEGER PRIMARY KEY AUTOINCREMENT, comm_id INTEGER NOT NULL UNIQUE, device TEXT NOT NULL,
    name TEXT UNIQUE, job TEXT, owner TEXT NOT NULL, root_node TEXT NOT NULL, root_vpid INTEGER NOT NULL,
    size INTEGER NOT NULL, members TEXT NOT NULL, created REAL NOT NULL);
CREATE INDEX IF NOT EXISTS communicators_job ON communicators (job);
CREATE TABLE IF NOT EXISTS operations (
    comm INTEGER NOT NULL REFERENCES communicators(id), icid INTEGER NOT NULL, op TEXT NOT NULL,
    datatype TEXT NOT NULL, size INTEGER NOT NULL, count INTEGER NOT NULL, started REAL NOT NULL,
    PRIMARY KEY (comm, icid));
CREATE TABLE IF NOT EXISTS job_grants (
    job TEXT PRIMARY KEY, owner TEXT NOT NULL, uid INTEGER, serial TEXT NOT NULL, aat_entries INTEGER NOT NULL,
    communicators INTEGER NOT NULL, issued REAL NOT NULL, expires REAL NOT NULL, revoked REAL);
CREATE TABLE IF NOT EXISTS owners (name TEXT PRIMARY KEY, uid INTEGER NOT NULL, seen REAL NOT NULL);
"""
# After the schema and any upgrade (version 1 has no attachments.job).
INDEXES = "CREATE INDEX IF NOT EXISTS attachments_job ON attachments (job)"


def _upgrade_1(db):
    """Version 1 to 2: the job whose token made an AAT entry (the job grants and owners are new tables)."""
    db.execute("ALTER TABLE attachments ADD COLUMN job TEXT")


class StoreError(Exception):
    """A request the state refuses: HTTP ``status``, error ``code``, a sentence, and details for the answer."""

    def __init__(self, status, code, message, **details):
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.details = details


class StoreBase:
    """The database: opened (WAL, the schema checked), one lock, and ``tx()``, one ``BEGIN IMMEDIATE`` transaction."""

    def __init__(self, path, synchronous="full", granularity=4096):
        self.path = path
        self.granularity = int(granularity)
        self.lock = threading.RLock()
        self.db = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=30)
        self.db.row_factory = sqlite3.Row
        if path != ":memory:":
            self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=%s" % {"full": "FULL", "normal": "NORMAL", "off": "OFF"}[synchronous])
        self.db.execute("PRAGMA foreign_keys=ON")
        with self.tx() as db:
            for stmt in SCHEMA.split(";"):
                if stmt.strip():
                    db.execute(stmt)
            row = db.execute("SELECT version FROM schema_version").fetchone()
            if row is None:
                db.execute("INSERT INTO schema_version VALUES (?)", (SCHEMA_VERSION,))
            elif row[0] == 1:
                _upgrade_1(db)
                db.execute("UPDATE schema_version SET version=?", (SCHEMA_VERSION,))
            elif row[0] != SCHEMA_VERSION:
                raise StoreError(500, "schema", "%s has schema version %s; this manager reads version %d"
                                 % (path, row[0], SCHEMA_VERSION))
            db.execute(INDEXES)

    @contextlib.contextmanager
    def tx(self):
        with self.lock:
            self.db.execute("BEGIN IMMEDIATE")
            try:
                yield self.db
            except BaseException:
                self.db.execute("ROLLBACK")
                raise
            self.db.execute("COMMIT")

    def close(self):
        with self.lock:
            self.db.close()

    def schema_version(self):
        with self.lock:
            return self.db.execute("SELECT version FROM schema_version").fetchone()[0]


def job_selection(job=None, owner=None, live_jobs=None):
    """SQL condition and arguments selecting the rows of ``job``, of ``owner``, or (``live_jobs``) of a job not in
    that list; refused when none is given."""
    where, args = [], []
    if job is not None:
        where.append("job=?")
        args.append(str(job))
    if owner is not None:
        where.append("owner=?")
        args.append(owner)
    if live_jobs is not None:
        live = sorted({str(j) for j in live_jobs})
        where.append("job IS NOT NULL AND job NOT IN (%s)" % ",".join("?" * len(live)) if live
                     else "job IS NOT NULL")
        args.extend(live)
    if not where:
        raise StoreError(400, "invalid", "give a job, an owner or the list of live jobs")
    return " AND ".join(where), args


def owned(record, what, key, user):
    """``record`` (an allocation or communicator; None when ``key`` names none), if ``user`` (None: the administrator)
    may act on it."""
    if record is None:
        raise StoreError(404, "not_found", "%s %s does not exist" % (what, key), id=key)
    if user is not None and record["owner"] != user:
        raise StoreError(403, "not_owner", "%s %s belongs to %s, not to %s" % (what, key, record["owner"], user),
                         id=record["id"])
    return record
