# SPDX-License-Identifier: GPL-3.0-or-later
"""NAM and GCE boards of the configuration, the pools of each NAM board and their free segments."""
from __future__ import annotations

from ansible_collections.msa.hpc.plugins.module_utils._nam import format_size

from .base import StoreError


class Devices:
    """The boards and pools (a part of Store: uses its ``tx``, ``lock``, ``db`` and ``granularity``)."""

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
            release(db, device, kind, old, capacity - old)
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


def release(db, device, kind, offset, size):
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
