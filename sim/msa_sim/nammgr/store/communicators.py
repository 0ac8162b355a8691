# SPDX-License-Identifier: GPL-3.0-or-later
"""GCE communicators: their creation on the least loaded GCE board, release, and the collective operations each
runs."""
from __future__ import annotations

import json
import time

from ansible_collections.msa.hpc.plugins.module_utils import _gce as G

from .base import StoreError, job_selection, owned


class Communicators:
    """GCE communicators and their operations (a part of Store: uses its ``tx``, ``lock`` and ``db``)."""

    def create_communicator(self, members, root, owner, name=None, job=None, limit_job=None):
        """Create a communicator, or return ``G.Fallback`` details when the GCE cannot hold it. With ``limit_job`` (a
        job's token creates it), the job's communicators are bounded by its grant."""
        with self.tx() as db:
            devices = [r["name"] for r in db.execute("SELECT name FROM gce_devices ORDER BY name")]
            if not devices:
                return None, G.Fallback("gce_devices", "no GCE device is configured; use software collectives")
            if name is not None:
                other = db.execute("SELECT id FROM communicators WHERE name=?", (name,)).fetchone()
                if other is not None:
                    raise StoreError(409, "name_taken", "a communicator called %r exists already (id %d)"
                                     % (name, other["id"]), id=other["id"])
            if limit_job is not None:
                held = db.execute("SELECT count(*) FROM communicators WHERE job=?", (str(limit_job),)).fetchone()[0]
                self.check_grant(db, str(limit_job), "GCE communicators", held, "communicators")
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
        return owned(self._communicator(db, int(comm_pk)), "GCE communicator", comm_pk, user)

    def release_communicator(self, comm_pk, user=None):
        with self.tx() as db:
            comm = self._owned_comm(db, comm_pk, user)
            db.execute("DELETE FROM operations WHERE comm=?", (comm["id"],))
            db.execute("DELETE FROM communicators WHERE id=?", (comm["id"],))
            return comm

    def release_where(self, job=None, owner=None, live_jobs=None, user=None, dry_run=False, min_age=0):
        where, args = job_selection(job, owner, live_jobs)
        if min_age:  # a communicator younger than this may belong to a job that started after live_jobs was listed
            where, args = where + " AND created < ?", args + [time.time() - min_age]
        with self.tx() as db:
            comms = [self._communicator(db, r[0]) for r in db.execute(
                "SELECT id FROM communicators WHERE " + where + " ORDER BY id", args)]
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
