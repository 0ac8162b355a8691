# SPDX-License-Identifier: GPL-3.0-or-later
"""SQLite state of the EMP master: slaves and their reports, routing tables by version, settings, log."""
from __future__ import annotations

import json
import threading

from msa_sim.sqlite import open_versioned
import time

SCHEMA_VERSION = 1
SCHEMA = """
CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS kv (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS slaves (
    guid INTEGER PRIMARY KEY, node_id INTEGER, address TEXT, ports TEXT NOT NULL DEFAULT '{}',
    counters TEXT NOT NULL DEFAULT '{}', installed_version INTEGER NOT NULL DEFAULT 0,
    network TEXT NOT NULL DEFAULT 'down', last_seen REAL NOT NULL);
CREATE TABLE IF NOT EXISTS routes (
    version INTEGER NOT NULL, guid INTEGER NOT NULL, entries TEXT NOT NULL, PRIMARY KEY (version, guid));
CREATE TABLE IF NOT EXISTS log (id INTEGER PRIMARY KEY AUTOINCREMENT, ts REAL NOT NULL, level TEXT, message TEXT);
"""


class Store:
    def __init__(self, path):
        self._db = open_versioned(path, SCHEMA, SCHEMA_VERSION)
        self._lock = threading.RLock()

    def _tx(self, statements):
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                for sql, args in statements:
                    self._db.execute(sql, args)
                self._db.execute("COMMIT")
            except Exception:
                self._db.execute("ROLLBACK")
                raise

    def get(self, key, default=None):
        with self._lock:
            row = self._db.execute("SELECT value FROM kv WHERE key = ?", (key,)).fetchone()
        return json.loads(row[0]) if row else default

    def set(self, **values):
        self._tx([("INSERT INTO kv(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                   (k, json.dumps(v))) for k, v in values.items()])

    def log(self, message, level="info"):
        self._tx([("INSERT INTO log(ts, level, message) VALUES (?, ?, ?)", (time.time(), level, message))])

    def log_lines(self, limit=500):
        with self._lock:
            rows = self._db.execute("SELECT ts, level, message FROM log ORDER BY id DESC LIMIT ?", (limit,)).fetchall()
        return [("%s %-5s %s" % (time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(ts)), level, msg))
                for ts, level, msg in reversed(rows)]

    def upsert_slave(self, guid, node_id, address, ports, counters, installed_version, network, now=None):
        self._tx([("INSERT INTO slaves(guid, node_id, address, ports, counters, installed_version, network, last_seen)"
                   " VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(guid) DO UPDATE SET node_id = excluded.node_id,"
                   " address = excluded.address, ports = excluded.ports, counters = excluded.counters,"
                   " installed_version = excluded.installed_version, network = excluded.network,"
                   " last_seen = excluded.last_seen",
                   (guid, node_id, address, json.dumps(ports), json.dumps(counters), installed_version, network,
                    now if now is not None else time.time()))])

    def slaves(self):
        with self._lock:
            rows = self._db.execute("SELECT guid, node_id, address, ports, counters, installed_version, network,"
                                    " last_seen FROM slaves ORDER BY guid").fetchall()
        return [{"guid": r[0], "node_id": r[1], "address": r[2], "ports": json.loads(r[3]),
                 "counters": json.loads(r[4]), "installed_version": r[5], "network": r[6], "last_seen": r[7]}
                for r in rows]

    def save_routes(self, version, per_guid):
        statements = [("DELETE FROM routes WHERE version < ?", (version - 1,))]
        statements += [("INSERT OR REPLACE INTO routes(version, guid, entries) VALUES (?, ?, ?)",
                        (version, guid, json.dumps(entries))) for guid, entries in per_guid.items()]
        self._tx(statements)

    def routes_for(self, version, guid):
        with self._lock:
            row = self._db.execute("SELECT entries FROM routes WHERE version = ? AND guid = ?",
                                   (version, guid)).fetchone()
        return json.loads(row[0]) if row else None

    def close(self):
        with self._lock:
            self._db.close()
