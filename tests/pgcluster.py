# SPDX-License-Identifier: GPL-3.0-or-later
"""A throw-away PostgreSQL cluster on 127.0.0.1 (Debian's postgresql binaries, no init system), shared by the DCDB
store test and tests/bench/bench_dcdb.py. As root (CI) the cluster runs as the postgres user: initdb refuses root.
"""
from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import socket
import subprocess
import tempfile

SYSTEM_PYTHON = "/usr/bin/python3"


def pg_bin(name):
    found = shutil.which(name)
    if found:
        return found
    for version in ("17", "16", "15", "14", "13"):
        path = "/usr/lib/postgresql/%s/bin/%s" % (version, name)
        if os.access(path, os.X_OK):
            return path
    return None


def missing():
    """What this host lacks to run a cluster and the store's driver, or None."""
    if not (pg_bin("initdb") and pg_bin("pg_ctl")):
        return "no PostgreSQL server binaries (initdb, pg_ctl: Debian package postgresql)"
    if not os.access(SYSTEM_PYTHON, os.X_OK) or subprocess.run([SYSTEM_PYTHON, "-c", "import psycopg2"],
                                                               capture_output=True).returncode:
        return "no psycopg2 for %s (Debian package python3-psycopg2)" % SYSTEM_PYTHON
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root and there is no postgres user to run the server (Debian package postgresql)"
    return None


@contextlib.contextmanager
def cluster(settings=("fsync=off",)):
    """Yield the DSN of a fresh cluster (trust authentication on 127.0.0.1, user dcdb); removed afterwards."""
    workdir = tempfile.mkdtemp(prefix="dcdb-pg.")
    as_postgres = []
    if os.geteuid() == 0:
        entry = pwd.getpwnam("postgres")
        os.chown(workdir, entry.pw_uid, entry.pw_gid)
        as_postgres = ["runuser", "-u", "postgres", "--"]
    data = os.path.join(workdir, "data")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    options = "-p %d -k %s -c listen_addresses=127.0.0.1 %s" % (port, workdir,
                                                                 " ".join("-c " + s for s in settings))
    try:
        subprocess.run(as_postgres + [pg_bin("initdb"), "-D", data, "-A", "trust", "-U", "dcdb", "--no-sync"],
                       check=True, capture_output=True)
        subprocess.run(as_postgres + [pg_bin("pg_ctl"), "-D", data, "-w", "-l", os.path.join(workdir, "log"), "-o",
                                      options, "start"], check=True, capture_output=True)
        yield "host=127.0.0.1 port=%d dbname=postgres user=dcdb" % port
    finally:
        subprocess.run(as_postgres + [pg_bin("pg_ctl"), "-D", data, "-m", "immediate", "stop"], capture_output=True)
        shutil.rmtree(workdir, ignore_errors=True)
