# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

"""The gateway pool as a global resource: job-exclusive allocation of gateway nodes, kept in SQLite."""

import json
import os
import re
import sqlite3
import time

from ansible_collections.msa.hpc.plugins.module_utils._gw_paths import PathError, parse_nodes

try:
    import yaml
except ImportError:  # pragma: no cover - JSON pool files still work without PyYAML
    yaml = None

DEFAULT_DB = "/var/lib/msa-gw/pool.db"
DEFAULT_POOL_FILE = "/etc/msa-gw/pool.yml"
DEFAULT_AGENT_PORT = 7433
SCHEMA_VERSION = 1
SELECTIONS = ("lru", "round_robin")
GATEWAY_STATES = ("up", "down", "drain")
# reason of a gateway that refresh_health marked down; only those come back up by themselves when they answer
UNREACHABLE_REASON = "unreachable"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS gateways (
    name TEXT PRIMARY KEY,
    seq INTEGER NOT NULL,
    route_address TEXT NOT NULL,
    addresses TEXT NOT NULL,
    agent TEXT NOT NULL,
    state TEXT NOT NULL DEFAULT 'up' CHECK (state IN ('up', 'down', 'drain')),
    reason TEXT NOT NULL DEFAULT '',
    present INTEGER NOT NULL DEFAULT 1,
    last_used INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS jobs (
    job_id TEXT PRIMARY KEY,
    count INTEGER NOT NULL,
    created REAL NOT NULL,
    info TEXT NOT NULL DEFAULT '{}'
);
CREATE TABLE IF NOT EXISTS allocations (
    gateway TEXT PRIMARY KEY REFERENCES gateways(name),
    job_id TEXT NOT NULL REFERENCES jobs(job_id),
    port INTEGER
);
CREATE INDEX IF NOT EXISTS allocations_job ON allocations(job_id);
"""


class PoolError(Exception):
    """A pool request that cannot be served; ``code`` tells a caller what to do about it.

    ``invalid``: bad input; ``too_small``: more gateways than the pool has (never satisfiable, reject the job);
    ``busy``: not enough free gateways now (wait, requeue or hold — never lose the job);
    ``conflict``: the job already holds a different allocation; ``unknown``: no such gateway.
    """

    code = "invalid"

    def __init__(self, message, code=None, **details):
        super().__init__(message)
        if code:
            self.code = code
        self.details = details


class GatewaysBusy(PoolError):
    code = "busy"


class PoolTooSmall(PoolError):
    code = "too_small"


class Gateway:
    """One gateway node: its name, its address on each fabric, the one written into routing files, its agent."""

    def __init__(self, name, addresses, route_address, agent, seq=0):
        self.name = name
        self.addresses = dict(addresses)
        self.route_address = route_address
        self.agent = agent
        self.seq = seq

    def as_dict(self):
        return {"name": self.name, "addresses": dict(self.addresses), "route_address": self.route_address,
                "agent": self.agent}


def _read_structured(path):
    with open(path, "r", encoding="utf-8") as fh:
        text = fh.read()
    if path.endswith(".json") or text.lstrip().startswith("{"):
        try:
            return json.loads(text)
        except ValueError as exc:
            raise PoolError("pool file %s is not valid JSON: %s" % (path, exc))
    if yaml is None:
        raise PoolError("pool file %s is YAML but PyYAML (python3-yaml) is not installed" % path)
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise PoolError("pool file %s is not valid YAML: %s" % (path, exc))


def parse_pool(data, source="pool"):
    """Validate a pool description (the dict form of pool.yml) and return ``(gateways, settings)``.

    ``settings``: ``route_fabric`` (the fabric whose address goes in routing files), ``port`` (psgwd port,
    0 = the daemon picks one), ``agent_port``, ``agent_scheme`` (https, the default, or http: how the agents
    are reached unless an entry names its ``agent`` URL), ``selection`` (lru / round_robin), ``strategy`` (default
    routing strategy), ``license`` (Slurm license that carries the gateway count), ``route_prefix``
    (default routing file name ``<prefix>-<job id>``), ``cluster_partitions`` (partitions on the cluster
    side of the gateways; every other partition is the booster side), ``plugin_dirs`` and ``nodes`` (each compute
    node's fabric addresses: with them the prolog has each gateway forward exactly the job's node pairs).
    """
    if not isinstance(data, dict) or not isinstance(data.get("gateways"), list):
        raise PoolError("%s: expected a mapping with a 'gateways' list" % source)
    route_fabric = data.get("route_fabric")
    agent_port = data.get("agent_port", DEFAULT_AGENT_PORT)
    port = data.get("port", 0)
    agent_scheme = data.get("agent_scheme", "https")
    if agent_scheme not in ("https", "http"):
        raise PoolError("%s: agent_scheme is %r, expected https or http" % (source, agent_scheme))
    for key, value in (("agent_port", agent_port), ("port", port)):
        if not isinstance(value, int) or not 0 <= value < 65536:
            raise PoolError("%s: %s is %r, expected a port number" % (source, key, value))
    gateways, names = [], set()
    for i, entry in enumerate(data["gateways"]):
        where = "%s: gateways[%d]" % (source, i)
        if not isinstance(entry, dict) or not entry.get("name"):
            raise PoolError("%s: expected a mapping with a 'name'" % where)
        name = str(entry["name"])
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", name):
            raise PoolError("%s: name %r is not a host name" % (where, name))
        if name in names:
            raise PoolError("%s: gateway %r is listed twice" % (where, name))
        names.add(name)
        addresses = entry.get("addresses") or {}
        if not isinstance(addresses, dict) or not addresses:
            raise PoolError("%s (%s): 'addresses' must map each fabric to the gateway's address on it" % (where, name))
        addresses = {str(k): str(v) for k, v in addresses.items()}
        fabric = entry.get("route_fabric", route_fabric) or sorted(addresses)[0]
        if fabric not in addresses:
            raise PoolError("%s (%s): route_fabric %r is not one of its fabrics %s"
                            % (where, name, fabric, ", ".join(sorted(addresses))))
        agent = entry.get("agent") or "%s://%s:%d" % (agent_scheme, entry.get("management", name), agent_port)
        gateways.append(Gateway(name, addresses, addresses[fabric], str(agent), seq=i))
    selection = data.get("selection", "lru")
    if selection not in SELECTIONS:
        raise PoolError("%s: selection is %r, expected one of %s" % (source, selection, ", ".join(SELECTIONS)))
    cluster_partitions = data.get("cluster_partitions", ["cm", "cluster"])
    if not isinstance(cluster_partitions, list) or not all(isinstance(p, str) for p in cluster_partitions):
        raise PoolError("%s: cluster_partitions is %r, expected a list of partition names"
                        % (source, cluster_partitions))
    try:
        nodes = parse_nodes(data.get("nodes"), source)
    except PathError as exc:
        raise PoolError(str(exc)) from None
    settings = {"route_fabric": route_fabric, "port": port, "agent_port": agent_port, "agent_scheme": agent_scheme,
                "selection": selection,
                "strategy": str(data.get("strategy", "balance")), "license": str(data.get("license", "gateway")),
                "route_prefix": str(data.get("route_prefix", "psgw-route")),
                "cluster_partitions": cluster_partitions, "plugin_dirs": list(data.get("plugin_dirs") or []),
                "nodes": nodes}
    return gateways, settings


def load_pool_file(path):
    """Read pool.yml / pool.json as written from the inventory."""
    if not os.path.exists(path):
        raise PoolError("pool file %s does not exist (the gateway role writes it from the inventory)" % path)
    return parse_pool(_read_structured(path), source=path)


class GatewayPool:
    """Gateways and their job-exclusive allocations in one SQLite database (one transaction per change).

    The database lives on the file system both controllers mount (beside StateSaveLocation), so it keeps SQLite's
    rollback journal: WAL needs a shared-memory index that only the processes of one host share, and SQLite says it
    does not work over a network file system."""

    def __init__(self, db_path=DEFAULT_DB, timeout=30.0):
        self.db_path = db_path
        directory = os.path.dirname(os.path.abspath(db_path))
        if not os.path.isdir(directory):
            os.makedirs(directory, mode=0o755, exist_ok=True)
        self._db = sqlite3.connect(db_path, timeout=timeout, isolation_level=None)
        self._db.row_factory = sqlite3.Row
        self._db.execute("PRAGMA journal_mode=DELETE")
        self._db.execute("PRAGMA foreign_keys=ON")
        self._db.execute("PRAGMA busy_timeout=%d" % int(timeout * 1000))
        with self._tx():
            for stmt in _SCHEMA.split(";"):
                if stmt.strip():
                    self._db.execute(stmt)
            row = self._db.execute("SELECT version FROM schema_version").fetchone()
            if row is None:
                self._db.execute("INSERT INTO schema_version VALUES (?)", (SCHEMA_VERSION,))
            elif row[0] > SCHEMA_VERSION:
                raise PoolError("pool database %s has schema %d, newer than this code (%d)"
                                % (db_path, row[0], SCHEMA_VERSION))

    def close(self):
        self._db.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # ------------------------------------------------------------------ transactions

    class _Tx:
        def __init__(self, db, rollback=False):
            self.db, self.rollback = db, rollback

        def __enter__(self):
            self.db.execute("BEGIN IMMEDIATE")
            return self.db

        def __exit__(self, exc_type, exc, tb):
            self.db.execute("ROLLBACK" if exc_type or self.rollback else "COMMIT")
            return False

    def _tx(self, dry_run=False):
        """A write transaction; ``dry_run`` computes everything and rolls back (check mode)."""
        return self._Tx(self._db, rollback=dry_run)

    def _tick(self, db):
        row = db.execute("SELECT value FROM meta WHERE key='tick'").fetchone()
        tick = int(row[0]) + 1 if row else 1
        db.execute("INSERT OR REPLACE INTO meta VALUES ('tick', ?)", (str(tick),))
        return tick

    # ------------------------------------------------------------------ pool contents

    def sync(self, gateways, dry_run=False):
        """Make the pool match ``gateways`` (from pool.yml); gateways no longer listed stop being allocatable."""
        changed = []
        with self._tx(dry_run) as db:
            known = {r["name"]: r for r in db.execute("SELECT * FROM gateways")}
            for gw in gateways:
                addresses = json.dumps(gw.addresses, sort_keys=True)
                row = known.pop(gw.name, None)
                if row is None:
                    db.execute("INSERT INTO gateways (name, seq, route_address, addresses, agent) VALUES (?,?,?,?,?)",
                               (gw.name, gw.seq, gw.route_address, addresses, gw.agent))
                    changed.append(gw.name)
                elif (row["seq"], row["route_address"], row["addresses"], row["agent"], row["present"]) != \
                        (gw.seq, gw.route_address, addresses, gw.agent, 1):
                    db.execute("UPDATE gateways SET seq=?, route_address=?, addresses=?, agent=?, present=1 "
                               "WHERE name=?", (gw.seq, gw.route_address, addresses, gw.agent, gw.name))
                    changed.append(gw.name)
            for name, row in known.items():
                if row["present"]:
                    db.execute("UPDATE gateways SET present=0 WHERE name=?", (name,))
                    changed.append(name)
        return changed

    def gateways(self):
        """Every gateway of the pool with its state and the job holding it (None when free)."""
        rows = self._db.execute(
            "SELECT g.*, a.job_id, a.port FROM gateways g LEFT JOIN allocations a ON a.gateway = g.name "
            "WHERE g.present = 1 OR a.job_id IS NOT NULL ORDER BY g.seq, g.name").fetchall()
        return [_gateway_row(r) for r in rows]

    def counts(self):
        """``{total, up, free, allocated}``: free counts only gateways that are up and not allocated."""
        gws = [g for g in self.gateways() if g["present"]]
        return {"total": len(gws), "up": sum(g["state"] == "up" for g in gws),
                "free": sum(g["state"] == "up" and g["job_id"] is None for g in gws),
                "allocated": sum(g["job_id"] is not None for g in gws)}

    def set_state(self, names, state, reason="", dry_run=False):
        """Mark gateways up, down or drain (down/drain: never allocated again until up; current jobs keep them)."""
        if state not in GATEWAY_STATES:
            raise PoolError("gateway state %r is not one of %s" % (state, ", ".join(GATEWAY_STATES)))
        changed = []
        with self._tx(dry_run) as db:
            for name in names:
                row = db.execute("SELECT state, reason FROM gateways WHERE name=?", (name,)).fetchone()
                if row is None:
                    raise PoolError("gateway %r is not in the pool" % (name,), code="unknown")
                new_reason = "" if state == "up" else str(reason or "")
                if (row["state"], row["reason"]) != (state, new_reason):
                    db.execute("UPDATE gateways SET state=?, reason=? WHERE name=?", (state, new_reason, name))
                    changed.append(name)
        return changed

    def refresh_health(self, probe, dry_run=False):
        """Probe the idle gateways and follow what answers: ``probe(gateway_row)`` returns None when the gateway
        is healthy, else a sentence saying why not.

        A free gateway that is ``up`` and fails its probe is marked ``down`` with a reason starting
        ``UNREACHABLE_REASON``, so no job is given it; a gateway marked down that way comes back ``up`` as soon
        as it answers again. Gateways an operator marked down or drained (another reason) and gateways a job
        holds are not touched. Return ``{"down": [names], "up": [names]}`` of the gateways whose state changed.
        """
        rows = [g for g in self.gateways() if g["present"] and g["job_id"] is None
                and (g["state"] == "up" or (g["state"] == "down" and g["reason"].startswith(UNREACHABLE_REASON)))]
        verdicts = {g["name"]: probe(g) for g in rows}
        changed = {"down": [], "up": []}
        with self._tx(dry_run) as db:
            for g in rows:
                problem = verdicts[g["name"]]
                # the state may have moved while we probed (a job took it, an operator marked it): re-read it
                row = db.execute("SELECT g.state, g.reason, a.job_id FROM gateways g LEFT JOIN allocations a "
                                 "ON a.gateway = g.name WHERE g.name=?", (g["name"],)).fetchone()
                if (row is None or row["job_id"] is not None
                        or (row["state"], row["reason"]) != (g["state"], g["reason"])):
                    continue
                if problem and g["state"] == "up":
                    db.execute("UPDATE gateways SET state='down', reason=? WHERE name=?",
                               ("%s: %s" % (UNREACHABLE_REASON, problem), g["name"]))
                    changed["down"].append(g["name"])
                elif not problem and g["state"] == "down":
                    db.execute("UPDATE gateways SET state='up', reason='' WHERE name=?", (g["name"],))
                    changed["up"].append(g["name"])
        return changed

    def unavailable(self):
        """Names of the gateways of the pool that no job holds and none may be given (down or drained)."""
        return [g["name"] for g in self.gateways() if g["present"] and g["job_id"] is None and g["state"] != "up"]

    # ------------------------------------------------------------------ allocations

    def allocation(self, job_id):
        """The job's allocation ``{job_id, count, gateways: [...], info}``, or None."""
        job = self._db.execute("SELECT * FROM jobs WHERE job_id=?", (str(job_id),)).fetchone()
        if job is None:
            return None
        rows = self._db.execute(
            "SELECT g.*, a.job_id, a.port FROM allocations a JOIN gateways g ON g.name = a.gateway "
            "WHERE a.job_id=? ORDER BY g.seq, g.name", (str(job_id),)).fetchall()
        return {"job_id": job["job_id"], "count": job["count"], "created": job["created"],
                "info": json.loads(job["info"]), "gateways": [_gateway_row(r) for r in rows]}

    def jobs(self):
        return [self.allocation(r[0]) for r in self._db.execute("SELECT job_id FROM jobs ORDER BY created, job_id")]

    def allocate(self, job_id, count, selection="lru", info=None, dry_run=False):
        """Give ``count`` free gateways to ``job_id``, all or nothing; return ``(allocation, changed)``.

        A job that already holds ``count`` gateways gets the same ones back (idempotent). Raise PoolTooSmall
        when the pool has fewer than ``count`` gateways at all, GatewaysBusy when fewer are free now.
        """
        job_id = str(job_id or "").strip()
        if not job_id:
            raise PoolError("job_id is empty")
        if not isinstance(count, int) or isinstance(count, bool) or count < 1:
            raise PoolError("count %r is not a positive number of gateways" % (count,))
        if selection not in SELECTIONS:
            raise PoolError("selection %r is not one of %s" % (selection, ", ".join(SELECTIONS)))
        with self._tx(dry_run) as db:
            job = db.execute("SELECT count FROM jobs WHERE job_id=?", (job_id,)).fetchone()
            if job is not None:
                if job["count"] != count:
                    raise PoolError("job %s already holds %d gateways, not %d: release it first"
                                    % (job_id, job["count"], count), code="conflict")
                if info:
                    db.execute("UPDATE jobs SET info=? WHERE job_id=?", (json.dumps(info, sort_keys=True), job_id))
                changed = False
            else:
                total = db.execute("SELECT COUNT(*) FROM gateways WHERE present=1").fetchone()[0]
                if count > total:
                    raise PoolTooSmall("job %s asks for %d gateways but the pool has only %d"
                                       % (job_id, count, total), requested=count, total=total)
                free = db.execute(
                    "SELECT g.name, g.seq, g.last_used FROM gateways g LEFT JOIN allocations a ON a.gateway=g.name "
                    "WHERE g.present=1 AND g.state='up' AND a.job_id IS NULL").fetchall()
                if count > len(free):
                    raise GatewaysBusy("job %s asks for %d gateways but only %d of %d are free now"
                                       % (job_id, count, len(free), total), requested=count, free=len(free),
                                       total=total)
                chosen = self._choose(db, free, count, selection)
                db.execute("INSERT INTO jobs (job_id, count, created, info) VALUES (?,?,?,?)",
                           (job_id, count, time.time(), json.dumps(info or {}, sort_keys=True)))
                for name in chosen:
                    db.execute("INSERT INTO allocations (gateway, job_id) VALUES (?, ?)", (name, job_id))
                changed = True
            result = self._allocation_in(db, job_id)
        return result, changed

    def _choose(self, db, free, count, selection):
        if selection == "lru":
            order = sorted(free, key=lambda r: (r["last_used"], r["seq"], r["name"]))
        else:
            row = db.execute("SELECT value FROM meta WHERE key='rr_cursor'").fetchone()
            cursor = int(row[0]) if row else -1
            order = sorted(free, key=lambda r: (r["seq"] <= cursor, r["seq"], r["name"]))
            db.execute("INSERT OR REPLACE INTO meta VALUES ('rr_cursor', ?)", (str(order[count - 1]["seq"]),))
        chosen = [r["name"] for r in order[:count]]
        tick = self._tick(db)
        for name in chosen:
            db.execute("UPDATE gateways SET last_used=? WHERE name=?", (tick, name))
        return chosen

    def _allocation_in(self, db, job_id):
        job = db.execute("SELECT * FROM jobs WHERE job_id=?", (job_id,)).fetchone()
        rows = db.execute(
            "SELECT g.*, a.job_id, a.port FROM allocations a JOIN gateways g ON g.name = a.gateway "
            "WHERE a.job_id=? ORDER BY g.seq, g.name", (job_id,)).fetchall()
        return {"job_id": job["job_id"], "count": job["count"], "created": job["created"],
                "info": json.loads(job["info"]), "gateways": [_gateway_row(r) for r in rows]}

    def set_port(self, job_id, gateway, port):
        """Record the port the job's psgwd listens on at ``gateway`` (reported by the agent)."""
        with self._tx() as db:
            cur = db.execute("UPDATE allocations SET port=? WHERE job_id=? AND gateway=?",
                             (int(port), str(job_id), gateway))
            if cur.rowcount != 1:
                raise PoolError("gateway %r is not allocated to job %s" % (gateway, job_id), code="unknown")

    def update_info(self, job_id, **info):
        with self._tx() as db:
            row = db.execute("SELECT info FROM jobs WHERE job_id=?", (str(job_id),)).fetchone()
            if row is None:
                raise PoolError("job %s holds no gateways" % (job_id,), code="unknown")
            merged = dict(json.loads(row["info"]), **info)
            db.execute("UPDATE jobs SET info=? WHERE job_id=?", (json.dumps(merged, sort_keys=True), str(job_id)))

    def release(self, job_id, dry_run=False):
        """Free the job's gateways; return the allocation that was released, or None (releasing twice is fine)."""
        job_id = str(job_id)
        with self._tx(dry_run) as db:
            if db.execute("SELECT 1 FROM jobs WHERE job_id=?", (job_id,)).fetchone() is None:
                return None
            released = self._allocation_in(db, job_id)
            tick = self._tick(db)
            db.execute("UPDATE gateways SET last_used=? WHERE name IN "
                       "(SELECT gateway FROM allocations WHERE job_id=?)", (tick, job_id))
            db.execute("DELETE FROM allocations WHERE job_id=?", (job_id,))
            db.execute("DELETE FROM jobs WHERE job_id=?", (job_id,))
        return released


def _gateway_row(r):
    keys = r.keys()
    return {"name": r["name"], "route_address": r["route_address"], "addresses": json.loads(r["addresses"]),
            "agent": r["agent"], "state": r["state"], "reason": r["reason"], "present": bool(r["present"]),
            "job_id": r["job_id"] if "job_id" in keys else None, "port": r["port"] if "port" in keys else None}


def endpoints(allocation, default_port=0):
    """``addr:port`` endpoints of an allocation for the routing file; raise when a port is still unknown."""
    out = []
    for gw in allocation["gateways"]:
        port = gw["port"] or default_port
        if not port:
            raise PoolError("gateway %s of job %s has no psgwd port yet (start the daemon first or set a fixed "
                            "'port' in the pool file)" % (gw["name"], allocation["job_id"]))
        host = gw["route_address"]
        out.append(("[%s]:%d" if ":" in host else "%s:%d") % (host, port))
    return out
