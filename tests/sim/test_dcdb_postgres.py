# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

"""The Collect Agent's PostgreSQL store against a throw-away PostgreSQL cluster on 127.0.0.1.

The store runs under the node image's interpreter (/usr/bin/python3 with Debian's python3-psycopg2), as in production;
the test's own interpreter only starts the server (tests/pgcluster.py) and checks the answers. scripts/setup.sh
installs Debian's postgresql and python3-psycopg2, so a host without them fails here, naming what is missing,
instead of skipping.
"""

import json
import os
import subprocess

import pytest

from tests import pgcluster

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


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
    missing = pgcluster.missing()
    assert missing is None, missing + " (scripts/setup.sh installs postgresql and python3-psycopg2)"
    with pgcluster.cluster() as dsn:
        yield dsn


def test_postgres_store_keeps_readings_jobs_and_energy_like_sqlite(postgres):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.join(ROOT, "sim"), os.path.join(ROOT, "collections")]))
    proc = subprocess.run([pgcluster.SYSTEM_PYTHON, "-c", SCRIPT, postgres], capture_output=True, text=True, env=env,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    S = 10 ** 9
    assert sorted(result["new"]) == ["/msa/cm/n1/g/s", "/msa/cm/n1/slurm/jobid"]
    assert result["count"] == 101 and result["raw"] == 100  # the repeated readings were ignored
    assert len(result["buckets"]) == 10 and result["buckets"][0] == [0, 4.5] and result["buckets"][-1][1] == 94.5
    assert result["job"] == [5 * S, 9 * S, {"/msa/cm/n1": 15.0}]
    assert result["jobs"] == [{"jobid": "7", "nodes": 1, "start": 5 * S, "end": 9 * S}]
