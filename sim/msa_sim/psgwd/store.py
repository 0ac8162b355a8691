# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

"""The agent's record of the psgwd it started (SQLite, WAL), so a restarted agent can still stop them."""

import json
import os
import sqlite3
import threading
import time

SCHEMA_VERSION = 1


class DaemonStore:
    def __init__(self, path):
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        self.lock = threading.Lock()
        self.db = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=30)
        self.db.row_factory = sqlite3.Row
        self.db.execute("PRAGMA journal_mode=WAL")
        with self.lock:
            self.db.execute("BEGIN IMMEDIATE")
            try:
                self.db.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
                self.db.execute("CREATE TABLE IF NOT EXISTS daemons (job TEXT PRIMARY KEY, pid INTEGER NOT NULL, "
                                "port INTEGER NOT NULL, listen TEXT NOT NULL, stats_file TEXT NOT NULL, "
                                "started REAL NOT NULL)")
                # node pairs whose packets this gateway forwards for the job (msa_sim.psgwd.forward)
                self.db.execute("CREATE TABLE IF NOT EXISTS forwards (job TEXT PRIMARY KEY, pairs TEXT NOT NULL)")
                if self.db.execute("SELECT version FROM schema_version").fetchone() is None:
                    self.db.execute("INSERT INTO schema_version VALUES (?)", (SCHEMA_VERSION,))
                self.db.execute("COMMIT")
            except BaseException:
                self.db.execute("ROLLBACK")
                raise

    def add(self, job, pid, port, listen, stats_file):
        with self.lock:
            self.db.execute("INSERT OR REPLACE INTO daemons VALUES (?,?,?,?,?,?)",
                            (str(job), int(pid), int(port), json.dumps(listen), stats_file, time.time()))

    def get(self, job):
        with self.lock:
            row = self.db.execute("SELECT * FROM daemons WHERE job=?", (str(job),)).fetchone()
        return _record(row) if row else None

    def all(self):
        with self.lock:
            rows = self.db.execute("SELECT * FROM daemons ORDER BY started").fetchall()
        return [_record(r) for r in rows]

    def remove(self, job):
        with self.lock:
            return self.db.execute("DELETE FROM daemons WHERE job=?", (str(job),)).rowcount > 0

    def set_pairs(self, job, pairs):
        with self.lock:
            self.db.execute("INSERT OR REPLACE INTO forwards VALUES (?,?)", (str(job), json.dumps(list(pairs))))

    def pairs(self):
        """``{job: [(cluster address, booster address), ...]}`` of every job with forwarding open."""
        with self.lock:
            rows = self.db.execute("SELECT job, pairs FROM forwards").fetchall()
        return {r["job"]: [tuple(p) for p in json.loads(r["pairs"])] for r in rows}

    def remove_pairs(self, job):
        with self.lock:
            return self.db.execute("DELETE FROM forwards WHERE job=?", (str(job),)).rowcount > 0

    def close(self):
        self.db.close()


def _record(row):
    return {"job": row["job"], "pid": row["pid"], "port": row["port"], "listen": json.loads(row["listen"]),
            "stats_file": row["stats_file"], "started": row["started"]}
