# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

"""The Collect Agent's PostgreSQL store against a throw-away PostgreSQL server on 127.0.0.1 (skipped without one).

The store runs under the node image's interpreter (/usr/bin/python3 with Debian's python3-psycopg2), as in production;
the test's own interpreter only starts the server and checks the answers.
"""

import json
import os
import pwd
import shutil
import socket
import subprocess
import tempfile

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SYSTEM_PYTHON = "/usr/bin/python3"


def _pg_bin(name):
    found = shutil.which(name)
    if found:
        return found
    for version in ("17", "16", "15", "14", "13"):
        path = "/usr/lib/postgresql/%s/bin/%s" % (version, name)
        if os.access(path, os.X_OK):
            return path
    return None


def _why_skip():
    if not (_pg_bin("initdb") and _pg_bin("pg_ctl")):
        return "no PostgreSQL server binaries (initdb, pg_ctl)"
    if not os.access(SYSTEM_PYTHON, os.X_OK) or subprocess.run([SYSTEM_PYTHON, "-c", "import psycopg2"],
                                                               capture_output=True).returncode:
        return "no psycopg2 for %s (Debian package python3-psycopg2)" % SYSTEM_PYTHON
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root and there is no postgres user to run the server"
    return None


pytestmark = pytest.mark.skipif(_why_skip() is not None, reason=_why_skip() or "")

SCRIPT = r"""
import json, sys
from msa_sim.dcdb.store import PostgresStore
S = 10 ** 9
store = PostgresStore(sys.argv[1])
rows = [("/msa/cm/n1/g/s", i * S, float(i)) for i in range(100)]
new = store.add(rows + [("/msa/cm/n1/slurm/jobid", 5 * S, 7)], jobs=[("7", "/msa/cm/n1", 5 * S), ("7", "/msa/cm/n1", 9 * S)],
                energy=[("7", "/msa/cm/n1", 12.5)])
store.add(rows[:10], energy=[("7", "/msa/cm/n1", 2.5)])
again = PostgresStore(sys.argv[1])  # a second agent start reads the same schema and sensors
job = again.job("7")
print(json.dumps({"new": new, "count": again.count(), "raw": len(again.query("/msa/cm/n1/g/s", 0, 99 * S)),
                  "buckets": again.query("/msa/cm/n1/g/s", 0, 99 * S, max_points=10), "topics": again.topics(),
                  "job": [job["start"], job["end"], job["energy_j"]], "jobs": again.jobs()}))
"""


@pytest.fixture
def postgres():
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
    subprocess.run(as_postgres + [_pg_bin("initdb"), "-D", data, "-A", "trust", "-U", "dcdb", "--no-sync"],
                   check=True, capture_output=True)
    subprocess.run(as_postgres + [_pg_bin("pg_ctl"), "-D", data, "-w", "-l", os.path.join(workdir, "log"), "-o",
                                  "-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off" % (port, workdir),
                                  "start"], check=True, capture_output=True)
    try:
        yield "host=127.0.0.1 port=%d dbname=postgres user=dcdb" % port
    finally:
        subprocess.run(as_postgres + [_pg_bin("pg_ctl"), "-D", data, "-m", "immediate", "stop"], capture_output=True)
        shutil.rmtree(workdir, ignore_errors=True)


def test_postgres_store_keeps_readings_jobs_and_energy_like_sqlite(postgres):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.join(ROOT, "sim"), os.path.join(ROOT, "collections")]))
    proc = subprocess.run([SYSTEM_PYTHON, "-c", SCRIPT, postgres], capture_output=True, text=True, env=env,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    S = 10 ** 9
    assert sorted(result["new"]) == ["/msa/cm/n1/g/s", "/msa/cm/n1/slurm/jobid"]
    assert result["count"] == 101 and result["raw"] == 100  # the repeated readings were ignored
    assert len(result["buckets"]) == 10 and result["buckets"][0] == [0, 4.5] and result["buckets"][-1][1] == 94.5
    assert result["job"] == [5 * S, 9 * S, {"/msa/cm/n1": 15.0}]
    assert result["jobs"] == [{"jobid": "7", "nodes": 1, "start": 5 * S, "end": 9 * S}]
