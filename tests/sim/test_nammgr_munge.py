# SPDX-License-Identifier: GPL-3.0-or-later
"""The munge handover of a job's token (msa_sim.nammgr.munge) with unmunge and squeue replaced by recorded answers:
only a valid credential of the job's own uid, for a running job holding NAM or GCE, earns the token."""
from __future__ import annotations

import subprocess

import pytest

from msa_sim.nammgr import munge

GOOD = ("STATUS:          Success (0)\nENCODE_HOST:     esb01 (10.32.0.40)\nUID:             optuser (5105)\n"
        "GID:             optuser (5105)\nLENGTH:          8\n\njob=1234\n")


def fake(unmunge_out=GOOD, unmunge_rc=0, squeue_out="5105|optuser|RUNNING|nam:1\n", squeue_rc=0):
    calls = []

    def run(argv, **kw):
        calls.append(argv)
        if argv[0] == "unmunge":
            return subprocess.CompletedProcess(argv, unmunge_rc, unmunge_out.encode(), b"unmunge: error\n")
        return subprocess.CompletedProcess(argv, squeue_rc, squeue_out.encode(), b"slurm_load_jobs error\n")
    run.calls = calls
    return run


def test_a_running_job_of_the_credentials_uid_with_nam_gets_its_owner_and_id():
    run = fake()
    assert munge.owner_and_job("MUNGE:abc:", run) == ("optuser", "1234")
    assert run.calls[1] == ["squeue", "--noheader", "--jobs=1234", "--format=%U|%u|%T|%W"]


@pytest.mark.parametrize("kw, status, says", [
    ({"unmunge_out": "STATUS:          Replayed credential (17)\n\n", "unmunge_rc": 17}, 401, "Replayed"),
    ({"unmunge_out": GOOD.replace("job=1234", "job=12;34")}, 400, "job=<numeric id>"),
    ({"squeue_out": "5106|other|RUNNING|nam:1\n"}, 403, "does not belong to uid 5105"),
    ({"squeue_out": "5105|optuser|PENDING|nam:1\n"}, 403, "is not running"),
    ({"squeue_out": "5105|optuser|RUNNING|(null)\n"}, 403, "neither NAM nor GCE"),
    ({"squeue_out": "", "squeue_rc": 1}, 403, "not a job Slurm knows"),
])
def test_everything_else_is_refused_with_the_reason(kw, status, says):
    with pytest.raises(munge.MungeError) as err:
        munge.owner_and_job("MUNGE:abc:", fake(**kw))
    assert err.value.status == status and says in str(err.value)


def test_a_hetjob_needs_every_component_to_be_the_uids():
    run = fake(squeue_out="5105|optuser|RUNNING|gce:1\n5106|other|RUNNING|\n")
    with pytest.raises(munge.MungeError, match="does not belong"):
        munge.owner_and_job("MUNGE:abc:", run)
    assert munge.owner_and_job("MUNGE:x:", fake(squeue_out="5105|optuser|RUNNING|gce:1\n5105|optuser|RUNNING|\n")) \
        == ("optuser", "1234")


def test_what_is_not_a_credential_never_reaches_unmunge():
    run = fake()
    with pytest.raises(munge.MungeError, match="not a munge credential"):
        munge.owner_and_job({"MUNGE": 1}, run)
    assert not run.calls
