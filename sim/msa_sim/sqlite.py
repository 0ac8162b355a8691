"""The stand-ins' SQLite state files: one way to open a file in WAL mode with its schema and a schema version that is
set on a new file, upgraded from an older one, or refused."""
from __future__ import annotations

import os
import sqlite3


def open_versioned(path, schema, version, upgrades=None, synchronous=None):
    """An autocommit connection, usable from any thread (the caller serialises), to the state at ``path`` with
    ``schema`` applied (it holds a one-row ``schema_version`` table). ``upgrades`` maps an older version to a
    function that brings the connection to ``version``; any other stored version is refused (RuntimeError)."""
    if path != ":memory:":
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    if synchronous:
        db.execute("PRAGMA synchronous=%s" % {"normal": "NORMAL", "full": "FULL"}[synchronous])
    db.executescript(schema)
    row = db.execute("SELECT version FROM schema_version").fetchone()
    if row is None:
        db.execute("INSERT INTO schema_version VALUES (?)", (version,))
    elif row[0] in (upgrades or {}):
        upgrades[row[0]](db)
        db.execute("UPDATE schema_version SET version = ?", (version,))
    elif row[0] != version:
        db.close()
        raise RuntimeError("state database %s has schema %s, expected %s" % (path, row[0], version))
    return db
