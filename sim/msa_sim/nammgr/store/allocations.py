# SPDX-License-Identifier: GPL-3.0-or-later
"""NAM allocations: best-fit allocation from the free segments, free, the end of a job, and the attached-allocation
table (AAT) entries of the processes that use an allocation."""
from __future__ import annotations

import time

from ansible_collections.msa.hpc.plugins.module_utils._nam import format_size

from .base import StoreError, job_selection, owned
from .devices import release


class Allocations:
    """NAM allocations and their AAT entries (a part of Store: uses its ``tx``, ``lock``, ``db``, ``granularity``)."""

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
            if kind == "nonvolatile" and not reserved:
                self.check_nonvolatile_quota(db, owner, need)
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
        out = self._record(row)
        out["attachments"] = [{"node": r["node"], "vpid": r["vpid"], "aat_index": r["aat_index"],
                               "attached": r["attached"]}
                              for r in db.execute("SELECT * FROM attachments WHERE alloc_id=? ORDER BY aat_index",
                                                  (alloc_id,))]
        return out

    def _record(self, row):
        out = _alloc_record(row)
        out["expires"] = None if out["volatile"] else self.nv_expires(out["created"])
        return out

    def get(self, alloc_id):
        with self.lock:
            return self._allocation(self.db, int(alloc_id))

    def _owned(self, db, alloc_id, user):
        return owned(self._allocation(db, int(alloc_id)), "NAM allocation", alloc_id, user)

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
            rows = [self._record(r) for r in self.db.execute(sql, args)]
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
        release(db, alloc["device"], kind, alloc["offset"], alloc["size"])
        db.execute("UPDATE pools SET allocated=allocated-?, user_allocated=user_allocated-? WHERE device=? AND kind=?",
                   (alloc["size"], 0 if alloc["reserved"] else alloc["size"], alloc["device"], kind))

    def free_where(self, job=None, owner=None, live_jobs=None, user=None, dry_run=False):
        """Free every allocation of ``job``, of ``owner``, or (``live_jobs``) of a job not in that list."""
        where, args = job_selection(job, owner, live_jobs)
        with self.tx() as db:
            ids = [r[0] for r in db.execute("SELECT id FROM allocations WHERE " + where + " ORDER BY id", args)]
            allocs = [self._allocation(db, i) for i in ids]
            _refuse_foreign(allocs, user)
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
            _refuse_foreign(allocs, user)
            freed = [a for a in allocs if a["volatile"]]
            kept = [a for a in allocs if not a["volatile"]]
            for alloc in freed:
                self._free(db, alloc)
            for alloc in kept:
                db.execute("DELETE FROM attachments WHERE alloc_id=?", (alloc["id"],))
                db.execute("UPDATE allocations SET job=NULL WHERE id=?", (alloc["id"],))
            return freed, kept

    def attach(self, alloc_id, node, vpid, user=None, job=None):
        """Enter (node, vpid) in the AAT of the allocation's board; ``(attachment, created)``. With ``job`` (a job's
        token attaches), the entry counts against the AAT entries Slurm granted that job."""
        with self.tx() as db:
            alloc = self._owned(db, alloc_id, user)
            row = db.execute("SELECT * FROM attachments WHERE alloc_id=? AND node=? AND vpid=?",
                             (alloc["id"], node, vpid)).fetchone()
            if row is not None:
                return _attachment(alloc, row), False
            if job is not None:
                used = db.execute("SELECT count(*) FROM attachments WHERE job=?", (str(job),)).fetchone()[0]
                self.check_grant(db, str(job), "AAT entries", used, "aat_entries")
            aat_size = db.execute("SELECT aat_size FROM nam_devices WHERE name=?", (alloc["device"],)).fetchone()[0]
            used = [r[0] for r in db.execute("SELECT aat_index FROM attachments WHERE device=? ORDER BY aat_index",
                                             (alloc["device"],))]
            if len(used) >= aat_size:
                raise StoreError(409, "aat_full", "the attached-allocation table (AAT) of NAM device %s is full "
                                 "(%d of %d entries in use); detach a process first" % (alloc["device"], len(used),
                                                                                       aat_size),
                                 device=alloc["device"], aat_size=aat_size)
            index = next(i for i, u in enumerate(used + [None]) if u != i)
            db.execute("INSERT INTO attachments (alloc_id, device, aat_index, node, vpid, attached, job) "
                       "VALUES (?,?,?,?,?,?,?)", (alloc["id"], alloc["device"], index, node, int(vpid), time.time(),
                                                  None if job is None else str(job)))
            row = db.execute("SELECT * FROM attachments WHERE device=? AND aat_index=?",
                             (alloc["device"], index)).fetchone()
            return _attachment(alloc, row), True

    def detach(self, alloc_id, node, vpid, user=None):
        with self.tx() as db:
            alloc = self._owned(db, alloc_id, user)
            return db.execute("DELETE FROM attachments WHERE alloc_id=? AND node=? AND vpid=?",
                              (alloc["id"], node, int(vpid))).rowcount > 0


def _refuse_foreign(allocs, user):
    """Refuse a request of ``user`` (None: the administrator) that would touch another owner's allocations."""
    if user is not None:
        foreign = [a["id"] for a in allocs if a["owner"] != user]
        if foreign:
            raise StoreError(403, "not_owner", "allocations %s are not owned by %s"
                             % (", ".join(map(str, foreign)), user), ids=foreign)


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
