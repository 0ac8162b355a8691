# SPDX-License-Identifier: GPL-3.0-or-later
"""The manager's SQL state (SQLite, WAL): NAM pools, free segments, allocations, the AAT and GCE communicators.

Every mutation is one ``BEGIN IMMEDIATE`` ... ``COMMIT`` transaction, so a crash at any moment leaves either
the state before or the state after it: no half-split segment, no allocation without its bytes.

Each NAM board has a volatile and a non-volatile pool; a pool is tiled by its free segments and its
allocations. Allocation takes the smallest free segment that fits (best fit: smallest, then lowest device
name and offset) and splits it; free returns the bytes and merges them with the free neighbours, so no two
free segments of a pool are ever adjacent. Allocations without ``reserved`` count against the pool's
capacity minus its administrator reserve.
"""
from __future__ import annotations

import contextlib
import json
import sqlite3
import threading
import time

from ansible_collections.msa.hpc.plugins.module_utils import _gce as G
from ansible_collections.msa.hpc.plugins.module_utils._nam import format_size

SCHEMA_VERSION = 1
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
    node TEXT NOT NULL, vpid INTEGER NOT NULL, attached REAL NOT NULL,
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
"""


class StoreError(Exception):
    """A request the state refuses: HTTP ``status``, error ``code``, a sentence, and details for the answer."""

    def __init__(self, status, code, message, **details):
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.details = details


class Store:
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
            elif row[0] != SCHEMA_VERSION:
                raise StoreError(500, "schema", "%s has schema version %s; this manager reads version %d"
                                 % (path, row[0], SCHEMA_VERSION))

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

    # ------------------------------------------------------------------ devices

    def sync_devices(self, nam_devices, gce_devices=()):
        """Make the boards of the configuration known: add new ones, grow or shrink pools where that is safe.

        A board that disappeared from the configuration while it still holds allocations, or a pool that
        shrinks below its last allocation, is refused: the manager must not forget memory that is in use.
        """
        with self.tx() as db:
            known = {r["name"] for r in db.execute("SELECT name FROM nam_devices")}
            wanted = {d["name"] for d in nam_devices}
            for gone in sorted(known - wanted):
                n = db.execute("SELECT count(*) FROM allocations WHERE device=?", (gone,)).fetchone()[0]
                if n:
                    raise StoreError(500, "config", "NAM device %s holds %d allocations but is no longer in the "
                                     "configuration; free them or put the device back" % (gone, n))
                db.execute("DELETE FROM free_segments WHERE device=?", (gone,))
                db.execute("DELETE FROM pools WHERE device=?", (gone,))
                db.execute("DELETE FROM nam_devices WHERE name=?", (gone,))
            for dev in nam_devices:
                db.execute("INSERT INTO nam_devices (name, node_id, aat_size) VALUES (?,?,?) ON CONFLICT(name) "
                           "DO UPDATE SET node_id=excluded.node_id, aat_size=excluded.aat_size",
                           (dev["name"], dev.get("node_id"), int(dev["aat_size"])))
                used = db.execute("SELECT count(*), max(aat_index) FROM attachments WHERE device=?",
                                  (dev["name"],)).fetchone()
                if used[1] is not None and used[1] >= int(dev["aat_size"]):
                    raise StoreError(500, "config", "NAM device %s has AAT entry %d in use; aat_size %d is too small"
                                     % (dev["name"], used[1], dev["aat_size"]))
                base = 0
                for kind, key in (("volatile", "capacity"), ("nonvolatile", "nonvolatile_capacity")):
                    capacity = int(dev.get(key) or 0)
                    reserve = int(capacity * float(dev.get("reserve_percent", 0)) / 100)
                    reserve -= reserve % self.granularity
                    self._resize_pool(db, dev["name"], kind, base, capacity, reserve)
                    base += capacity
            db.execute("DELETE FROM gce_devices")
            for dev in gce_devices:
                db.execute("INSERT INTO gce_devices VALUES (?,?)", (dev["name"], dev.get("node_id")))
            orphans = db.execute("SELECT count(*) FROM communicators WHERE device NOT IN "
                                 "(SELECT name FROM gce_devices)").fetchone()[0]
            if orphans:
                raise StoreError(500, "config", "%d GCE communicators live on GCE devices that are no longer in the "
                                 "configuration" % orphans)

    def _resize_pool(self, db, device, kind, base, capacity, reserve):
        row = db.execute("SELECT capacity FROM pools WHERE device=? AND kind=?", (device, kind)).fetchone()
        old = row["capacity"] if row else 0
        if row is None:
            db.execute("INSERT INTO pools (device, kind, base, capacity, reserve) VALUES (?,?,?,?,?)",
                       (device, kind, base, capacity, reserve))
        if capacity > old:
            self._release(db, device, kind, old, capacity - old)
        elif capacity < old:
            tail = db.execute("SELECT offset, size FROM free_segments WHERE device=? AND kind=? AND offset<=? "
                              "AND offset+size=?", (device, kind, capacity, old)).fetchone()
            if tail is None:
                size = format_size(capacity)
                raise StoreError(500, "config", "the %s pool of NAM device %s cannot shrink from %s to %s: memory "
                                 "above %s is allocated" % (kind, device, format_size(old), size, size))
            if tail["offset"] == capacity:
                db.execute("DELETE FROM free_segments WHERE device=? AND kind=? AND offset=?", (device, kind, capacity))
            else:
                db.execute("UPDATE free_segments SET size=? WHERE device=? AND kind=? AND offset=?",
                           (capacity - tail["offset"], device, kind, tail["offset"]))
        db.execute("UPDATE pools SET base=?, capacity=?, reserve=? WHERE device=? AND kind=?",
                   (base, capacity, reserve, device, kind))

    def nam_devices(self):
        with self.lock:
            devices = [dict(r) for r in self.db.execute("SELECT * FROM nam_devices ORDER BY name")]
            for dev in devices:
                dev["aat_used"] = self.db.execute("SELECT count(*) FROM attachments WHERE device=?",
                                                  (dev["name"],)).fetchone()[0]
                dev["pools"] = {}
                for p in self.db.execute("SELECT * FROM pools WHERE device=? ORDER BY kind DESC", (dev["name"],)):
                    stats = self.db.execute("SELECT count(*), coalesce(sum(size),0), coalesce(max(size),0) "
                                            "FROM free_segments WHERE device=? AND kind=?",
                                            (dev["name"], p["kind"])).fetchone()
                    dev["pools"][p["kind"]] = {
                        "base": p["base"], "capacity": p["capacity"], "allocated": p["allocated"],
                        "free": stats[1], "largest_free": stats[2], "free_segments": stats[0],
                        "admin_reserve": p["reserve"],
                        "user_available": max(0, min(stats[1], p["capacity"] - p["reserve"] - p["user_allocated"]))}
            return devices

    def free_segments(self, device=None):
        with self.lock:
            sql = "SELECT device, kind, offset, size FROM free_segments"
            args = ()
            if device is not None:
                sql, args = sql + " WHERE device=?", (device,)
            return [dict(r) for r in self.db.execute(sql + " ORDER BY device, kind, offset", args)]

    # ------------------------------------------------------------------ NAM allocations

    def round_up(self, size):
        return -(-int(size) // self.granularity) * self.granularity

    def allocate(self, size, volatile=True, owner="root", job=None, name=None, device=None, reserved=False,
                 created_by=None):
        kind = "volatile" if volatile else "nonvolatile"
        need = self.round_up(size)
        with self.tx() as db:
            known = db.execute("SELECT 1 FROM nam_devices WHERE name=?", (device,)).fetchone()
            if device is not None and known is None:
                raise StoreError(400, "invalid", "device %r is not a NAM device of this manager" % (device,))
            if name is not None:
                other = db.execute("SELECT id FROM allocations WHERE name=?", (name,)).fetchone()
                if other is not None:
                    raise StoreError(409, "name_taken", "an allocation called %r exists already (id %d)"
                                     % (name, other["id"]), id=other["id"])
            where, args = "f.kind=? AND f.size>=?", [kind, need]
            if device is not None:
                where += " AND f.device=?"
                args.append(device)
            if not reserved:
                where += " AND p.user_allocated + ? <= p.capacity - p.reserve"
                args.append(need)
            seg = db.execute("SELECT f.device, f.offset, f.size FROM free_segments f JOIN pools p "
                             "ON p.device=f.device AND p.kind=f.kind WHERE " + where +
                             " ORDER BY f.size, f.device, f.offset LIMIT 1", args).fetchone()
            if seg is None:
                raise self._no_space(db, kind, need, device, reserved)
            if seg["size"] == need:
                db.execute("DELETE FROM free_segments WHERE device=? AND kind=? AND offset=?",
                           (seg["device"], kind, seg["offset"]))
            else:
                db.execute("UPDATE free_segments SET offset=?, size=? WHERE device=? AND kind=? AND offset=?",
                           (seg["offset"] + need, seg["size"] - need, seg["device"], kind, seg["offset"]))
            cur = db.execute("INSERT INTO allocations (device, kind, offset, size, requested, reserved, job, owner, "
                             "name, created_by, created) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                             (seg["device"], kind, seg["offset"], need, int(size), int(bool(reserved)), job, owner,
                              name, created_by or owner, time.time()))
            db.execute("UPDATE pools SET allocated=allocated+?, user_allocated=user_allocated+? "
                       "WHERE device=? AND kind=?", (need, 0 if reserved else need, seg["device"], kind))
            return self._allocation(db, cur.lastrowid)

    def _no_space(self, db, kind, need, device, reserved):
        where, args = "kind=?", [kind]
        if device is not None:
            where += " AND device=?"
            args.append(device)
        largest = db.execute("SELECT device, size FROM free_segments WHERE " + where +
                             " ORDER BY size DESC LIMIT 1", args).fetchone()
        total = db.execute("SELECT coalesce(sum(size),0) FROM free_segments WHERE " + where, args).fetchone()[0]
        pools = db.execute("SELECT * FROM pools WHERE capacity > 0 AND " + where, args).fetchall()
        user_left = max([p["capacity"] - p["reserve"] - p["user_allocated"] for p in pools] or [0])
        place = "NAM device %s" % device if device else "any NAM device"
        message = "no contiguous free segment of %s (%d bytes) in the %s memory of %s: " % (
            format_size(need), need, kind, place)
        if largest is None:
            message += "nothing is free"
        else:
            message += "the largest free segment is %s (%d bytes, on %s), %s free in total" % (
                format_size(largest["size"]), largest["size"], largest["device"], format_size(total))
            if not reserved and largest["size"] >= need:
                message += "; only %s may still be allocated outside the administrator reserve" % (
                    format_size(max(0, user_left)))
        return StoreError(409, "no_space", message, requested=need, largest_free=largest["size"] if largest else 0,
                          free=total, user_available=max(0, user_left))

    def _allocation(self, db, alloc_id):
        row = db.execute("SELECT a.*, p.base, d.node_id FROM allocations a JOIN pools p ON p.device=a.device AND "
                         "p.kind=a.kind JOIN nam_devices d ON d.name=a.device WHERE a.id=?", (alloc_id,)).fetchone()
        if row is None:
            return None
        out = _alloc_record(row)
        out["attachments"] = [{"node": r["node"], "vpid": r["vpid"], "aat_index": r["aat_index"],
                               "attached": r["attached"]}
                              for r in db.execute("SELECT * FROM attachments WHERE alloc_id=? ORDER BY aat_index",
                                                  (alloc_id,))]
        return out

    def get(self, alloc_id):
        with self.lock:
            return self._allocation(self.db, int(alloc_id))

    def _owned(self, db, alloc_id, user):
        alloc = self._allocation(db, int(alloc_id))
        if alloc is None:
            raise StoreError(404, "not_found", "NAM allocation %s does not exist" % (alloc_id,), id=alloc_id)
        if user is not None and alloc["owner"] != user:
            raise StoreError(403, "not_owner", "NAM allocation %s belongs to %s, not to %s"
                             % (alloc_id, alloc["owner"], user), id=alloc["id"])
        return alloc

    def allocations(self, job=None, owner=None, name=None, device=None, limit=None):
        where, args = [], []
        for col, val in (("a.job", job), ("a.owner", owner), ("a.name", name), ("a.device", device)):
            if val is not None:
                where.append(col + "=?")
                args.append(val)
        sql = ("SELECT a.*, p.base, d.node_id FROM allocations a JOIN pools p ON p.device=a.device AND p.kind=a.kind "
               "JOIN nam_devices d ON d.name=a.device")
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY a.id"
        if limit:
            sql += " LIMIT %d" % int(limit)
        with self.lock:
            rows = [_alloc_record(r) for r in self.db.execute(sql, args)]
            if len(rows) <= 100:
                att_sql = "SELECT * FROM attachments WHERE alloc_id IN (%s) ORDER BY aat_index" % ",".join(
                    str(r["id"]) for r in rows)
            else:
                att_sql = "SELECT * FROM attachments ORDER BY aat_index"
            attached = {}
            for r in self.db.execute(att_sql) if rows else ():
                attached.setdefault(r["alloc_id"], []).append(
                    {"node": r["node"], "vpid": r["vpid"], "aat_index": r["aat_index"], "attached": r["attached"]})
        for r in rows:
            r["attachments"] = attached.get(r["id"], [])
        return rows

    def free(self, alloc_id, user=None):
        """Free one allocation (its AAT entries go with it); ``user`` not None must own it."""
        with self.tx() as db:
            alloc = self._owned(db, alloc_id, user)
            self._free(db, alloc)
            return alloc

    def _free(self, db, alloc):
        db.execute("DELETE FROM attachments WHERE alloc_id=?", (alloc["id"],))
        db.execute("DELETE FROM allocations WHERE id=?", (alloc["id"],))
        kind = "volatile" if alloc["volatile"] else "nonvolatile"
        self._release(db, alloc["device"], kind, alloc["offset"], alloc["size"])
        db.execute("UPDATE pools SET allocated=allocated-?, user_allocated=user_allocated-? WHERE device=? AND kind=?",
                   (alloc["size"], 0 if alloc["reserved"] else alloc["size"], alloc["device"], kind))

    @staticmethod
    def _release(db, device, kind, offset, size):
        """Return [offset, offset+size) to the free table, merged with the free segments on either side."""
        left = db.execute("SELECT offset, size FROM free_segments WHERE device=? AND kind=? AND offset<? "
                          "ORDER BY offset DESC LIMIT 1", (device, kind, offset)).fetchone()
        right = db.execute("SELECT offset, size FROM free_segments WHERE device=? AND kind=? AND offset=?",
                           (device, kind, offset + size)).fetchone()
        if left is not None and left["offset"] + left["size"] > offset:
            raise StoreError(500, "corrupt", "free segment %d+%d of %s/%s overlaps the freed %d+%d"
                             % (left["offset"], left["size"], device, kind, offset, size))
        if right is not None:
            db.execute("DELETE FROM free_segments WHERE device=? AND kind=? AND offset=?",
                       (device, kind, right["offset"]))
            size += right["size"]
        if left is not None and left["offset"] + left["size"] == offset:
            db.execute("UPDATE free_segments SET size=? WHERE device=? AND kind=? AND offset=?",
                       (left["size"] + size, device, kind, left["offset"]))
        else:
            db.execute("INSERT INTO free_segments VALUES (?,?,?,?)", (device, kind, offset, size))

    def free_where(self, job=None, owner=None, live_jobs=None, user=None, dry_run=False):
        """Free every allocation of ``job``, of ``owner``, or (``live_jobs``) of a job not in that list."""
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
        with self.tx() as db:
            ids = [r[0] for r in db.execute("SELECT id FROM allocations WHERE " + " AND ".join(where) + " ORDER BY id",
                                            args)]
            allocs = [self._allocation(db, i) for i in ids]
            if user is not None:
                foreign = [a["id"] for a in allocs if a["owner"] != user]
                if foreign:
                    raise StoreError(403, "not_owner", "allocations %s are not owned by %s"
                                     % (", ".join(map(str, foreign)), user), ids=foreign)
            if not dry_run:
                for alloc in allocs:
                    self._free(db, alloc)
            return allocs

    def end_job(self, job, user=None):
        """A job ended: free its volatile allocations; keep its non-volatile ones for their owner (no job any more),
        so the owner's next job finds their data. ``(freed, kept)``."""
        with self.tx() as db:
            allocs = [self._allocation(db, r[0]) for r in db.execute(
                "SELECT id FROM allocations WHERE job=? ORDER BY id", (str(job),)).fetchall()]
            if user is not None:
                foreign = [a["id"] for a in allocs if a["owner"] != user]
                if foreign:
                    raise StoreError(403, "not_owner", "allocations %s are not owned by %s"
                                     % (", ".join(map(str, foreign)), user), ids=foreign)
            freed = [a for a in allocs if a["volatile"]]
            kept = [a for a in allocs if not a["volatile"]]
            for alloc in freed:
                self._free(db, alloc)
            for alloc in kept:
                db.execute("DELETE FROM attachments WHERE alloc_id=?", (alloc["id"],))
                db.execute("UPDATE allocations SET job=NULL WHERE id=?", (alloc["id"],))
            return freed, kept

    def attach(self, alloc_id, node, vpid, user=None):
        """Enter (node, vpid) in the AAT of the allocation's board; ``(attachment, created)``."""
        with self.tx() as db:
            alloc = self._owned(db, alloc_id, user)
            row = db.execute("SELECT * FROM attachments WHERE alloc_id=? AND node=? AND vpid=?",
                             (alloc["id"], node, vpid)).fetchone()
            if row is not None:
                return _attachment(alloc, row), False
            aat_size = db.execute("SELECT aat_size FROM nam_devices WHERE name=?", (alloc["device"],)).fetchone()[0]
            used = [r[0] for r in db.execute("SELECT aat_index FROM attachments WHERE device=? ORDER BY aat_index",
                                             (alloc["device"],))]
            if len(used) >= aat_size:
                raise StoreError(409, "aat_full", "the attached-allocation table (AAT) of NAM device %s is full "
                                 "(%d of %d entries in use); detach a process first" % (alloc["device"], len(used),
                                                                                       aat_size),
                                 device=alloc["device"], aat_size=aat_size)
            index = next(i for i, u in enumerate(used + [None]) if u != i)
            db.execute("INSERT INTO attachments VALUES (?,?,?,?,?,?)",
                       (alloc["id"], alloc["device"], index, node, int(vpid), time.time()))
            row = db.execute("SELECT * FROM attachments WHERE device=? AND aat_index=?",
                             (alloc["device"], index)).fetchone()
            return _attachment(alloc, row), True

    def detach(self, alloc_id, node, vpid, user=None):
        with self.tx() as db:
            alloc = self._owned(db, alloc_id, user)
            return db.execute("DELETE FROM attachments WHERE alloc_id=? AND node=? AND vpid=?",
                              (alloc["id"], node, int(vpid))).rowcount > 0

    # ------------------------------------------------------------------ consistency

    def merge_adjacent(self):
        """The seed's de-fragmentation pass: combine adjacent free segments (none exist if every commit held)."""
        merged = 0
        with self.tx() as db:
            prev = None
            for seg in db.execute("SELECT * FROM free_segments ORDER BY device, kind, offset").fetchall():
                if prev and (prev["device"], prev["kind"]) == (seg["device"], seg["kind"]) and \
                        prev["offset"] + prev["size"] == seg["offset"]:
                    db.execute("DELETE FROM free_segments WHERE device=? AND kind=? AND offset=?",
                               (seg["device"], seg["kind"], seg["offset"]))
                    prev = dict(prev, size=prev["size"] + seg["size"])
                    db.execute("UPDATE free_segments SET size=? WHERE device=? AND kind=? AND offset=?",
                               (prev["size"], prev["device"], prev["kind"], prev["offset"]))
                    merged += 1
                else:
                    prev = dict(seg)
        return merged

    def check(self):
        """Every invariant of the state, as a list of problems (empty when sound)."""
        problems = []
        with self.lock:
            db = self.db
            for pool in db.execute("SELECT * FROM pools").fetchall():
                dev, kind, cap = pool["device"], pool["kind"], pool["capacity"]
                pieces = [("free", r["offset"], r["size"]) for r in db.execute(
                    "SELECT offset, size FROM free_segments WHERE device=? AND kind=?", (dev, kind))]
                allocs = db.execute("SELECT offset, size, reserved FROM allocations WHERE device=? AND kind=?",
                                    (dev, kind)).fetchall()
                pieces += [("used", r["offset"], r["size"]) for r in allocs]
                pieces.sort(key=lambda p: p[1])
                pos, prev = 0, None
                for state, off, size in pieces:
                    if off != pos:
                        problems.append("%s/%s: %s at %d, expected %d (%s)" % (
                            dev, kind, state, off, pos, "gap" if off > pos else "overlap"))
                    if state == "free" and prev == "free":
                        problems.append("%s/%s: adjacent free segments at %d" % (dev, kind, off))
                    pos, prev = max(pos, off + size), state
                if pos != cap:
                    problems.append("%s/%s: pieces end at %d, capacity is %d" % (dev, kind, pos, cap))
                allocated = sum(r["size"] for r in allocs)
                user_allocated = sum(r["size"] for r in allocs if not r["reserved"])
                if (allocated, user_allocated) != (pool["allocated"], pool["user_allocated"]):
                    problems.append("%s/%s: counters %d/%d, allocations sum to %d/%d" % (
                        dev, kind, pool["allocated"], pool["user_allocated"], allocated, user_allocated))
                if user_allocated > cap - pool["reserve"]:
                    problems.append("%s/%s: %d bytes allocated outside the reserve, only %d allowed" % (
                        dev, kind, user_allocated, cap - pool["reserve"]))
            for dev in db.execute("SELECT name, aat_size FROM nam_devices").fetchall():
                bad = db.execute("SELECT count(*) FROM attachments WHERE device=? AND (aat_index<0 OR aat_index>=?)",
                                 (dev["name"], dev["aat_size"])).fetchone()[0]
                if bad:
                    problems.append("%s: %d AAT entries outside the table" % (dev["name"], bad))
            if db.execute("SELECT count(*) FROM communicators").fetchone()[0] > G.MAX_COMMUNICATORS:
                problems.append("more than %d GCE communicators" % G.MAX_COMMUNICATORS)
        return problems

    # ------------------------------------------------------------------ GCE communicators

    def create_communicator(self, members, root, owner, name=None, job=None):
        """Create a communicator, or return ``G.Fallback`` details when the GCE cannot hold it."""
        with self.tx() as db:
            devices = [r["name"] for r in db.execute("SELECT name FROM gce_devices ORDER BY name")]
            if not devices:
                return None, G.Fallback("gce_devices", "no GCE device is configured; use software collectives")
            if name is not None:
                other = db.execute("SELECT id FROM communicators WHERE name=?", (name,)).fetchone()
                if other is not None:
                    raise StoreError(409, "name_taken", "a communicator called %r exists already (id %d)"
                                     % (name, other["id"]), id=other["id"])
            in_use = db.execute("SELECT count(*) FROM communicators").fetchone()[0]
            try:
                G.check_communicator_size(len(members), in_use)
            except G.Fallback as fb:
                return None, fb
            used = [r[0] for r in db.execute("SELECT comm_id FROM communicators ORDER BY comm_id")]
            comm_id = next(i for i, u in enumerate(used + [None]) if u != i)
            load = {d: 0 for d in devices}
            for r in db.execute("SELECT device, count(*) FROM communicators GROUP BY device"):
                load[r[0]] = r[1]
            device = min(devices, key=lambda d: (load[d], d))
            cur = db.execute("INSERT INTO communicators (comm_id, device, name, job, owner, root_node, root_vpid, "
                             "size, members, created) VALUES (?,?,?,?,?,?,?,?,?,?)",
                             (comm_id, device, name, job, owner, root[0], root[1], len(members),
                              json.dumps([list(m) for m in members]), time.time()))
            return self._communicator(db, cur.lastrowid), None

    def _communicator(self, db, comm_pk):
        row = db.execute("SELECT c.*, g.node_id FROM communicators c JOIN gce_devices g ON g.name=c.device "
                         "WHERE c.id=?", (comm_pk,)).fetchone()
        if row is None:
            return None
        ops = [dict(r) for r in db.execute("SELECT icid, op, datatype, size, count, started FROM operations "
                                           "WHERE comm=? ORDER BY icid", (comm_pk,))]
        return {"id": row["id"], "comm_id": row["comm_id"], "device": row["device"], "node_id": row["node_id"],
                "name": row["name"], "job": row["job"], "owner": row["owner"],
                "root": {"node": row["root_node"], "vpid": row["root_vpid"]}, "size": row["size"],
                "members": [{"node": n, "vpid": v} for n, v in json.loads(row["members"])],
                "created": row["created"], "operations": ops,
                "operations_left": G.MAX_OPERATIONS_PER_COMMUNICATOR - len(ops)}

    def communicator(self, comm_pk):
        with self.lock:
            return self._communicator(self.db, int(comm_pk))

    def communicators(self, name=None, job=None, owner=None):
        where, args = [], []
        for col, val in (("name", name), ("job", job), ("owner", owner)):
            if val is not None:
                where.append(col + "=?")
                args.append(val)
        with self.lock:
            ids = [r[0] for r in self.db.execute("SELECT id FROM communicators" +
                                                 (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY id",
                                                 args)]
            return [self._communicator(self.db, i) for i in ids]

    def _owned_comm(self, db, comm_pk, user):
        comm = self._communicator(db, int(comm_pk))
        if comm is None:
            raise StoreError(404, "not_found", "GCE communicator %s does not exist" % (comm_pk,), id=comm_pk)
        if user is not None and comm["owner"] != user:
            raise StoreError(403, "not_owner", "GCE communicator %s belongs to %s, not to %s"
                             % (comm_pk, comm["owner"], user), id=comm["id"])
        return comm

    def release_communicator(self, comm_pk, user=None):
        with self.tx() as db:
            comm = self._owned_comm(db, comm_pk, user)
            db.execute("DELETE FROM operations WHERE comm=?", (comm["id"],))
            db.execute("DELETE FROM communicators WHERE id=?", (comm["id"],))
            return comm

    def release_where(self, job=None, owner=None, live_jobs=None, user=None, dry_run=False):
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
        with self.tx() as db:
            comms = [self._communicator(db, r[0]) for r in db.execute(
                "SELECT id FROM communicators WHERE " + " AND ".join(where) + " ORDER BY id", args)]
            if user is not None and any(c["owner"] != user for c in comms):
                raise StoreError(403, "not_owner", "communicators %s are not owned by %s" % (
                    ", ".join(str(c["id"]) for c in comms if c["owner"] != user), user))
            if not dry_run:
                for comm in comms:
                    db.execute("DELETE FROM operations WHERE comm=?", (comm["id"],))
                    db.execute("DELETE FROM communicators WHERE id=?", (comm["id"],))
            return comms

    def start_operation(self, comm_pk, op, datatype, size, user=None):
        """Give a collective operation an ICID, or return ``G.Fallback`` when the GCE cannot run it."""
        with self.tx() as db:
            comm = self._owned_comm(db, comm_pk, user)
            try:
                count = G.check_operation(op, datatype, size, len(comm["operations"]))
            except G.Fallback as fb:
                return None, fb
            except ValueError as exc:
                raise StoreError(400, "invalid", str(exc)) from None
            used = [o["icid"] for o in comm["operations"]]
            icid = next(i for i, u in enumerate(used + [None]) if u != i)
            db.execute("INSERT INTO operations VALUES (?,?,?,?,?,?,?)",
                       (comm["id"], icid, op, datatype, int(size), count, time.time()))
            return {"comm": comm["id"], "comm_id": comm["comm_id"], "icid": icid, "op": op, "datatype": datatype,
                    "size": int(size), "count": count}, None

    def finish_operation(self, comm_pk, icid, user=None):
        with self.tx() as db:
            comm = self._owned_comm(db, comm_pk, user)
            return db.execute("DELETE FROM operations WHERE comm=? AND icid=?", (comm["id"], int(icid))).rowcount > 0

    def gce_usage(self):
        with self.lock:
            in_use = self.db.execute("SELECT count(*) FROM communicators").fetchone()[0]
            devices = [dict(r) for r in self.db.execute("SELECT * FROM gce_devices ORDER BY name")]
            for dev in devices:
                dev["communicators"] = self.db.execute("SELECT count(*) FROM communicators WHERE device=?",
                                                       (dev["name"],)).fetchone()[0]
            return in_use, devices


def _alloc_record(row):
    return {"id": row["id"], "name": row["name"], "device": row["device"], "node_id": row["node_id"],
            "volatile": row["kind"] == "volatile", "offset": row["offset"], "address": row["base"] + row["offset"],
            "size": row["size"], "requested": row["requested"], "reserved": bool(row["reserved"]),
            "job": row["job"], "owner": row["owner"], "created_by": row["created_by"], "created": row["created"]}


def _attachment(alloc, row):
    """What libNAM needs to build its RMA operations: board, address range, AAT entry and the process."""
    return {"allocation": alloc["id"], "device": alloc["device"], "node_id": alloc["node_id"],
            "address": alloc["address"], "size": alloc["size"], "aat_index": row["aat_index"],
            "node": row["node"], "vpid": row["vpid"], "attached": row["attached"]}
