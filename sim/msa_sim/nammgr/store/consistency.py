# SPDX-License-Identifier: GPL-3.0-or-later
"""The state's invariants: the de-fragmentation pass and the check that every pool is tiled exactly."""
from __future__ import annotations

from ansible_collections.msa.hpc.plugins.module_utils import _gce as G


class Consistency:
    """Consistency of the pools, AATs and communicators (a part of Store: uses its ``tx``, ``lock`` and ``db``)."""

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
