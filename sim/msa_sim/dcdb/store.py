# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

"""Storage of the Collect Agent: sensors, readings, the job table and job energy, in SQLite or PostgreSQL.

Both back-ends share one schema (``readings`` keyed by (sensor, ts): the index every query walks) and one interface:
``add`` (a batch in one transaction), ``topics``, ``query`` (averaged into at most ``max_points`` buckets),
``job``/``jobs``, ``add_job_energy``, ``count``. SQLite runs in WAL mode with one writer connection and one reader
connection per thread; PostgreSQL is for systems whose readings outgrow one machine's disk or write rate.
"""

import io
import os
import sqlite3
import threading

try:
    import psycopg2
except ImportError:  # pragma: no cover - only a PostgreSQL deployment needs python3-psycopg2
    psycopg2 = None

SCHEMA_VERSION = 1


class StoreError(RuntimeError):
    """The store cannot be opened or used; the message says what to fix."""


class SqlStore:
    """Shared SQL of both back-ends; subclasses provide connections, the placeholder and the dialect's bits."""

    ph = "?"
    least, greatest = "MIN", "MAX"

    def __init__(self):
        self._ids = {}
        self._new = []
        self._write_lock = threading.RLock()

    # subclasses: _writer() -> connection, _reader() -> connection, _begin(conn), _commit(conn), _rollback(conn)
    def _sql(self, text):
        return text.replace("?", self.ph)

    def _schema(self):
        return [
            "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)",
            "CREATE TABLE IF NOT EXISTS sensors (id %s, topic TEXT NOT NULL UNIQUE)" % self.id_column,
            "CREATE TABLE IF NOT EXISTS readings (sensor INTEGER NOT NULL, ts BIGINT NOT NULL, value %s NOT NULL, "
            "PRIMARY KEY (sensor, ts))%s" % (self.real, self.readings_suffix),
            "CREATE TABLE IF NOT EXISTS job_nodes (jobid TEXT NOT NULL, node TEXT NOT NULL, first_ts BIGINT NOT NULL, "
            "last_ts BIGINT NOT NULL, PRIMARY KEY (jobid, node))",
            "CREATE TABLE IF NOT EXISTS job_energy (jobid TEXT NOT NULL, node TEXT NOT NULL, joules %s NOT NULL, "
            "PRIMARY KEY (jobid, node))" % self.real,
        ]

    def _init_schema(self):
        conn = self._writer()
        with self._write_lock:
            cur = conn.cursor()
            self._begin(conn)
            try:
                for statement in self._schema():
                    cur.execute(statement)
                cur.execute("SELECT version FROM schema_version")
                row = cur.fetchone()
                if row is None:
                    cur.execute(self._sql("INSERT INTO schema_version VALUES (?)"), (SCHEMA_VERSION,))
                elif row[0] != SCHEMA_VERSION:
                    raise StoreError("store has schema version %s, this Collect Agent needs %s" % (row[0],
                                                                                               SCHEMA_VERSION))
                self._commit(conn)
            except Exception:
                self._rollback(conn)
                raise
            cur.execute("SELECT id, topic FROM sensors")
            self._ids = {topic: sid for sid, topic in cur.fetchall()}

    def _sensor_ids(self, cur, topics):
        """Ids of the topics, making the unknown ones in one statement per 500 (not two round trips each)."""
        unknown = [t for t in dict.fromkeys(topics) if t not in self._ids]
        for i in range(0, len(unknown), 500):
            chunk = unknown[i:i + 500]
            cur.executemany(self._sql("INSERT INTO sensors (topic) VALUES (?) ON CONFLICT (topic) DO NOTHING"),
                            [(t,) for t in chunk])
            cur.execute(self._sql("SELECT id, topic FROM sensors WHERE topic IN (%s)" % ", ".join("?" * len(chunk))),
                        chunk)
            for sid, topic in cur.fetchall():
                self._ids[topic] = sid
            self._new.extend(chunk)
        return self._ids

    def add(self, readings, jobs=(), energy=()):
        """Like add_series, for flat readings [(topic, ts, value)]."""
        series = {}
        for topic, ts, value in readings:
            series.setdefault(topic, []).append((ts, value))
        return self.add_series(list(series.items()), jobs, energy)

    def add_series(self, series, jobs=(), energy=()):
        """One transaction: readings as [(topic, [(ts, value), ...])], job sightings [(jobid, node, ts)] and energy
        [(jobid, node, joules to add)]. Duplicate (sensor, ts) readings are ignored. Returns the new sensor topics."""
        conn = self._writer()
        with self._write_lock:
            self._new = []
            cur = conn.cursor()
            self._begin(conn)
            try:
                ids = self._sensor_ids(cur, [topic for topic, _ in series])
                rows = []
                for topic, readings in series:
                    sid = ids[topic]
                    rows.extend([(sid, ts, value) for ts, value in readings])
                self._insert_readings(cur, rows)
                if jobs:
                    spans = {}
                    for jobid, node, ts in jobs:
                        lo, hi = spans.get((jobid, node), (ts, ts))
                        spans[(jobid, node)] = (min(lo, ts), max(hi, ts))
                    cur.executemany(self._sql(
                        "INSERT INTO job_nodes (jobid, node, first_ts, last_ts) VALUES (?, ?, ?, ?) "
                        "ON CONFLICT (jobid, node) DO UPDATE SET first_ts = %s(job_nodes.first_ts, excluded.first_ts), "
                        "last_ts = %s(job_nodes.last_ts, excluded.last_ts)" % (self.least, self.greatest)),
                        [(str(j), n, lo, hi) for (j, n), (lo, hi) in spans.items()])
                if energy:
                    cur.executemany(self._sql(
                        "INSERT INTO job_energy (jobid, node, joules) VALUES (?, ?, ?) ON CONFLICT (jobid, node) "
                        "DO UPDATE SET joules = job_energy.joules + excluded.joules"),
                        [(str(j), n, float(e)) for j, n, e in energy])
                self._commit(conn)
            except Exception:
                self._rollback(conn)
                for topic in self._new:
                    self._ids.pop(topic, None)
                raise
            return list(self._new)

    def _insert_readings(self, cur, rows):
        cur.executemany(self._sql("INSERT INTO readings (sensor, ts, value) VALUES (?, ?, ?) ON CONFLICT DO NOTHING"),
                        rows)

    def topics(self):
        cur = self._reader().cursor()
        cur.execute("SELECT topic FROM sensors ORDER BY topic")
        return [row[0] for row in cur.fetchall()]

    def count(self, topic=None):
        cur = self._reader().cursor()
        if topic is None:
            cur.execute("SELECT COUNT(*) FROM readings")
        else:
            cur.execute(self._sql("SELECT COUNT(*) FROM readings JOIN sensors ON sensors.id = readings.sensor "
                                  "WHERE sensors.topic = ?"), (topic,))
        return cur.fetchone()[0]

    def query(self, topic, t0, t1, max_points=None):
        """Readings of ``topic`` with t0 <= ts <= t1 (ns), oldest first; when there are more than ``max_points``,
        averages over equal time buckets aligned on t0 (timestamp = bucket start), as Grafana expects."""
        sid = self._ids.get(topic)
        cur = self._reader().cursor()
        if sid is None:
            cur.execute(self._sql("SELECT id FROM sensors WHERE topic = ?"), (topic,))
            row = cur.fetchone()
            if row is None:
                return []
            sid = row[0]
        t0, t1 = int(t0), int(t1)
        if max_points:
            cur.execute(self._sql("SELECT COUNT(*) FROM readings WHERE sensor = ? AND ts BETWEEN ? AND ?"),
                        (sid, t0, t1))
            if cur.fetchone()[0] > max_points:
                bucket = max(1, -(-(t1 - t0 + 1) // int(max_points)))
                cur.execute(self._sql("SELECT (ts - ?) / ? AS b, AVG(value) FROM readings WHERE sensor = ? AND ts "
                                      "BETWEEN ? AND ? GROUP BY b ORDER BY b"), (t0, bucket, sid, t0, t1))
                return [(t0 + int(b) * bucket, v) for b, v in cur.fetchall()]
        cur.execute(self._sql("SELECT ts, value FROM readings WHERE sensor = ? AND ts BETWEEN ? AND ? ORDER BY ts"),
                    (sid, t0, t1))
        return cur.fetchall()

    def last(self, topic):
        cur = self._reader().cursor()
        cur.execute(self._sql("SELECT ts, value FROM readings JOIN sensors ON sensors.id = readings.sensor "
                              "WHERE sensors.topic = ? ORDER BY ts DESC LIMIT 1"), (topic,))
        return cur.fetchone()

    def job(self, jobid):
        """``{jobid, nodes: {node: (first_ts, last_ts)}, start, end, energy_j}`` or None if never seen."""
        cur = self._reader().cursor()
        cur.execute(self._sql("SELECT node, first_ts, last_ts FROM job_nodes WHERE jobid = ? ORDER BY node"),
                    (str(jobid),))
        rows = cur.fetchall()
        if not rows:
            return None
        cur.execute(self._sql("SELECT node, joules FROM job_energy WHERE jobid = ?"), (str(jobid),))
        energy = {node: joules for node, joules in cur.fetchall()}
        return {"jobid": str(jobid), "nodes": {n: (a, b) for n, a, b in rows},
                "start": min(r[1] for r in rows), "end": max(r[2] for r in rows),
                "energy_j": energy, "source": "pusher"}

    def jobs(self, limit=1000):
        cur = self._reader().cursor()
        cur.execute(self._sql("SELECT jobid, COUNT(*), MIN(first_ts), MAX(last_ts) FROM job_nodes GROUP BY jobid "
                              "ORDER BY MAX(last_ts) DESC LIMIT ?"), (int(limit),))
        return [{"jobid": j, "nodes": n, "start": a, "end": b} for j, n, a, b in cur.fetchall()]


class SqliteStore(SqlStore):
    id_column = "INTEGER PRIMARY KEY"
    real = "REAL"
    readings_suffix = " WITHOUT ROWID"  # the primary key (sensor, ts) is the table: one B-tree, no extra index

    def __init__(self, path):
        super().__init__()
        self.path = path
        if path != ":memory:":
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        self._local = threading.local()
        try:
            self._wconn = self._open()
        except sqlite3.Error as exc:
            raise StoreError("cannot open SQLite store %s: %s" % (path, exc))
        self._init_schema()

    def _open(self):
        conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=30)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        return conn

    def _writer(self):
        return self._wconn

    def _reader(self):
        if self.path == ":memory:":
            return self._wconn
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._local.conn = self._open()
        return conn

    def _begin(self, conn):
        conn.execute("BEGIN IMMEDIATE")

    def _commit(self, conn):
        conn.execute("COMMIT")

    def _rollback(self, conn):
        conn.execute("ROLLBACK")

    def close(self):
        self._wconn.close()


class PostgresStore(SqlStore):
    ph = "%s"
    least, greatest = "LEAST", "GREATEST"
    id_column = "SERIAL PRIMARY KEY"
    real = "DOUBLE PRECISION"
    readings_suffix = ""

    def __init__(self, dsn, password=None):
        if psycopg2 is None:
            raise StoreError("storage backend postgresql needs psycopg2 (Debian package python3-psycopg2)")
        super().__init__()
        self._dsn = dsn
        self._password = password
        self._local = threading.local()
        self._staged = False  # the writer connection's temporary table readings_in exists
        self._wconn = self._open()
        self._init_schema()

    def _open(self):
        try:
            conn = psycopg2.connect(self._dsn, password=self._password) if self._password else psycopg2.connect(
                self._dsn)
        except psycopg2.Error as exc:
            raise StoreError("cannot connect to PostgreSQL (%s): %s" % (self._dsn, str(exc).strip()))
        return conn

    def _writer(self):
        return self._wconn

    def _reader(self):
        conn = getattr(self._local, "conn", None)
        if conn is None or conn.closed:
            conn = self._local.conn = self._open()
            conn.autocommit = True
        return conn

    def _begin(self, conn):
        pass  # psycopg2 opens a transaction with the first statement

    def _commit(self, conn):
        conn.commit()

    def _rollback(self, conn):
        conn.rollback()
        self._staged = False  # a rolled-back first transaction took the temporary table with it

    def _insert_readings(self, cur, rows):
        """COPY into a temporary table, then one INSERT … ON CONFLICT DO NOTHING from it: COPY has no conflict
        clause, and row-by-row VALUES cost the server a parse per page and the client a mogrify per row."""
        if not rows:
            return
        if not self._staged:
            cur.execute("CREATE TEMPORARY TABLE IF NOT EXISTS readings_in (sensor INTEGER, ts BIGINT, "
                        "value DOUBLE PRECISION) ON COMMIT DELETE ROWS")
            self._staged = True
        data = io.StringIO("".join(["%d\t%d\t%r\n" % row for row in rows]))
        cur.copy_expert("COPY readings_in (sensor, ts, value) FROM STDIN", data)
        cur.execute("INSERT INTO readings (sensor, ts, value) SELECT sensor, ts, value FROM readings_in "
                    "ON CONFLICT DO NOTHING")

    def close(self):
        self._wconn.close()


def open_store(section):
    """Build the store from the ``storage`` section of collectagent.conf (an InfoNode or None)."""
    from .info import read_secret
    get = (lambda k, d=None: section.value_of(k, d)) if section is not None else (lambda k, d=None: d)
    backend = get("backend", "sqlite")
    if backend == "sqlite":
        return SqliteStore(get("path", "/var/lib/dcdb/dcdb.sqlite"))
    if backend in ("postgresql", "postgres"):
        password = read_secret(get("passwordFile"), "storage.passwordFile") if get("passwordFile") else None
        return PostgresStore(get("dsn", "dbname=dcdb"), password)
    raise StoreError("storage.backend %r must be sqlite or postgresql" % backend)
