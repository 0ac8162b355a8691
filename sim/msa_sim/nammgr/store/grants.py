# SPDX-License-Identifier: GPL-3.0-or-later
"""What Slurm granted each job (recorded by the prolog with the job's token) and the end of it: a job's token is
valid only while its grant is (not revoked, not expired); a job's AAT entries and GCE communicators are bounded by
the grant; the sweep of the maintenance timer revokes the grants and frees the allocations of jobs Slurm no longer
runs, and frees the non-volatile allocations past the site's expiry."""
from __future__ import annotations

import secrets
import time

from ansible_collections.msa.hpc.plugins.module_utils._nam import format_size

from .base import StoreError

# Revoked or expired grants are kept this long (a late call of the job's code is told its job ended), then dropped.
GRANT_RETENTION = 86400


class Grants:
    """Job grants, owners' uids and the non-volatile policy (a part of Store: uses its ``tx``, ``lock``, ``db``)."""

    nv_quota_bytes = 0      # per owner, 0: no limit
    nv_quota_count = 0      # per owner, 0: no limit
    nv_lifetime = 0         # seconds a non-volatile allocation lives from its creation, 0: for ever

    def configure_nonvolatile(self, quota_bytes=0, quota_count=0, lifetime=0):
        self.nv_quota_bytes, self.nv_quota_count, self.nv_lifetime = int(quota_bytes), int(quota_count), int(lifetime)

    def nv_expires(self, created):
        return created + self.nv_lifetime if self.nv_lifetime else None

    # ------------------------------------------------------------------ grants

    def grant_job(self, job, owner, aat_entries, communicators, expires, uid=None):
        """Record what Slurm granted ``job`` of ``owner``; the grant's serial (carried by the job's tokens).

        A live grant of the same job and owner is updated and keeps its serial (a prolog run again); a revoked or
        expired one, or another owner's, is replaced by a new serial, so no token of the earlier run works again."""
        now = time.time()
        with self.tx() as db:
            row = db.execute("SELECT * FROM job_grants WHERE job=?", (str(job),)).fetchone()
            if row is not None and row["owner"] == owner and row["revoked"] is None and row["expires"] >= now:
                serial = row["serial"]
            else:
                serial = secrets.token_hex(8)
            db.execute("INSERT INTO job_grants (job, owner, uid, serial, aat_entries, communicators, issued, expires, "
                       "revoked) VALUES (?,?,?,?,?,?,?,?,NULL) ON CONFLICT(job) DO UPDATE SET owner=excluded.owner, "
                       "uid=excluded.uid, serial=excluded.serial, aat_entries=excluded.aat_entries, "
                       "communicators=excluded.communicators, issued=excluded.issued, expires=excluded.expires, "
                       "revoked=NULL", (str(job), owner, uid, serial, int(aat_entries), int(communicators), now,
                                        float(expires)))
            if uid is not None:
                db.execute("INSERT INTO owners (name, uid, seen) VALUES (?,?,?) ON CONFLICT(name) DO UPDATE SET "
                           "uid=excluded.uid, seen=excluded.seen", (owner, int(uid), now))
            return self._grant(db, job)

    @staticmethod
    def _grant(db, job):
        row = db.execute("SELECT * FROM job_grants WHERE job=?", (str(job),)).fetchone()
        return dict(row) if row is not None else None

    def job_grant(self, job):
        with self.lock:
            return self._grant(self.db, job)

    def job_token_valid(self, owner, job, serial):
        """Whether a token of ``job`` for ``owner`` with grant ``serial`` may still act."""
        grant = self.job_grant(job)
        return (grant is not None and grant["owner"] == owner and grant["serial"] == serial
                and grant["revoked"] is None and grant["expires"] >= time.time())

    def owner_uid(self, owner):
        """The uid Slurm's job records gave ``owner`` (learnt when its jobs were granted), or None."""
        with self.lock:
            row = self.db.execute("SELECT uid FROM owners WHERE name=?", (owner,)).fetchone()
            return row[0] if row else None

    def revoke_job(self, job):
        """The job ended: its tokens stop working and the AAT entries its processes made are removed.
        ``{"job", "revoked": bool (False: it was not live), "detached": n}``; idempotent."""
        with self.tx() as db:
            return self._revoke(db, str(job), time.time())

    @staticmethod
    def _revoke(db, job, now):
        revoked = db.execute("UPDATE job_grants SET revoked=? WHERE job=? AND revoked IS NULL", (now, job)).rowcount
        detached = db.execute("DELETE FROM attachments WHERE job=?", (job,)).rowcount
        return {"job": job, "revoked": revoked > 0, "detached": detached}

    def check_grant(self, db, job, what, used, limit_key):
        """Refuse one more ``what`` for ``job`` when it holds ``used`` already and its grant allows no more."""
        grant = self._grant(db, job)
        limit = grant[limit_key] if grant is not None and grant["revoked"] is None else 0
        if used + 1 > limit:
            raise StoreError(403, "beyond_grant", "job %s may hold %d %s (%s=%d, from what Slurm granted it) and holds "
                             "%d already: one more is refused" % (job, limit, what, limit_key, limit, used),
                             job=job, limit=limit_key, value=limit, used=used)

    # ------------------------------------------------------------------ non-volatile quota and expiry

    def check_nonvolatile_quota(self, db, owner, need):
        """Refuse a non-volatile allocation of ``need`` bytes that would take ``owner`` over the site's quota."""
        count, total = db.execute("SELECT count(*), coalesce(sum(size),0) FROM allocations WHERE owner=? AND "
                                  "kind='nonvolatile' AND reserved=0", (owner,)).fetchone()
        if self.nv_quota_count and count + 1 > self.nv_quota_count:
            raise StoreError(409, "quota", "owner %s holds %d non-volatile allocations; nonvolatile_quota_count=%d "
                             "allows no more (free one first)" % (owner, count, self.nv_quota_count),
                             owner=owner, limit="nonvolatile_quota_count", value=self.nv_quota_count, used=count)
        if self.nv_quota_bytes and total + need > self.nv_quota_bytes:
            raise StoreError(409, "quota", "owner %s holds %s of non-volatile NAM; nonvolatile_quota=%s (%d bytes) "
                             "leaves %s, %s (%d bytes) asked" % (
                                 owner, format_size(total), format_size(self.nv_quota_bytes), self.nv_quota_bytes,
                                 format_size(max(0, self.nv_quota_bytes - total)), format_size(need), need),
                             owner=owner, limit="nonvolatile_quota", value=self.nv_quota_bytes, used=total)

    # ------------------------------------------------------------------ the maintenance sweep

    def sweep(self, live_jobs, min_age=0, dry_run=False, now=None):
        """One run of the maintenance timer, in one transaction. For every job not in ``live_jobs`` (and older than
        ``min_age`` seconds, so a job that started after the caller listed the live jobs is left alone): its grant is
        revoked (with its AAT entries), its volatile allocations are freed, its non-volatile ones kept for their owner.
        Non-volatile allocations of no live job past their expiry are freed. Old grants are dropped.
        ``{"freed": [allocations], "kept": [...], "expired": [...], "revoked": [jobs]}``."""
        now = time.time() if now is None else now
        live = sorted({str(j) for j in live_jobs})
        marks = ",".join("?" * len(live))
        not_live = "job IS NOT NULL" + (" AND job NOT IN (%s)" % marks if live else "")
        with self.tx() as db:
            allocs = [self._allocation(db, r[0]) for r in db.execute(
                "SELECT id FROM allocations WHERE %s AND created < ? ORDER BY id" % not_live,
                live + [now - min_age]).fetchall()]
            freed = [a for a in allocs if a["volatile"]]
            kept = [a for a in allocs if not a["volatile"]]
            expired = []
            if self.nv_lifetime:
                expired = [self._allocation(db, r[0]) for r in db.execute(
                    "SELECT id FROM allocations WHERE kind='nonvolatile' AND created + ? < ? AND (job IS NULL OR %s) "
                    "ORDER BY id" % not_live, [self.nv_lifetime, now] + live).fetchall()]
            jobs = [r[0] for r in db.execute("SELECT job FROM job_grants WHERE revoked IS NULL AND issued < ? AND "
                                             "%s ORDER BY job" % not_live, [now - min_age] + live).fetchall()]
            if dry_run:  # nothing written yet: the transaction commits nothing
                return {"freed": freed, "kept": kept, "expired": expired, "revoked": jobs}
            for job in jobs:
                self._revoke(db, job, now)
            for alloc in freed + expired:
                self._free(db, alloc)
            for alloc in kept:
                if alloc["id"] in {a["id"] for a in expired}:
                    continue
                db.execute("DELETE FROM attachments WHERE alloc_id=?", (alloc["id"],))
                db.execute("UPDATE allocations SET job=NULL WHERE id=?", (alloc["id"],))
            db.execute("DELETE FROM job_grants WHERE coalesce(revoked, expires) < ?", (now - GRANT_RETENTION,))
            return {"freed": freed, "kept": [a for a in kept if a not in expired], "expired": expired,
                    "revoked": jobs}
