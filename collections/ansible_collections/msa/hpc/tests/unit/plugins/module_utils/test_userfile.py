# SPDX-License-Identifier: GPL-3.0-or-later
"""The hooks write a job's files only inside its user's home or working directory, never through a link, and (as
root) only after becoming the job's user."""
from __future__ import annotations

import io
import os
import pathlib
import pwd
import shutil
import tempfile

import pytest

from ansible_collections.msa.hpc.plugins.module_utils.node import userfile as U

ME = pwd.getpwuid(os.getuid())


def job(workdir, uid=None, user=None, job_id="42"):
    uid = ME.pw_uid if uid is None else uid
    return {"job_id": job_id, "user": user or pwd.getpwuid(uid).pw_name, "uid": uid,
            "gid": pwd.getpwuid(uid).pw_gid, "workdir": str(workdir)}


@pytest.mark.parametrize("name, expected", [
    ("route.txt", "/w/route.txt"), ("sub/route.txt", "/w/sub/route.txt"), ("/w/./x", "/w/x"), ("/h/r", "/h/r"),
])
def test_job_file_names_resolve_against_the_working_directory(name, expected):
    assert U.resolve(name, "/w") == expected


@pytest.mark.parametrize("name, message", [
    ("../etc/passwd", "climbs out of its directory"), ("/w/a/../../etc/x", "climbs out"),
    ("~root/.ssh/authorized_keys", "does not name a file"), ("a\x00b", "not a usable file name"),
])
def test_names_that_climb_or_cheat_are_refused_before_anything_is_done(name, message):
    with pytest.raises(U.UserFileError, match=message):
        U.resolve(name, "/w")


@pytest.mark.parametrize("path, ok", [
    ("/home/alice/route", True), ("/home/alice/deep/er/route", True), ("/scratch/job42/route", True),
    ("/etc/cron.d/evil", False), ("/home/bob/route", False), ("/home/alice2/route", False), ("/home/route", False),
    ("/scratch/route", False), ("/tmp/route", False), ("/home/alice", False),
])
def test_only_the_users_home_and_the_jobs_working_directory_are_allowed(path, ok):
    roots = ["/home/alice", "/scratch/job42"]
    if ok:
        assert U.check_lexically(path, roots) == path
    else:
        with pytest.raises(U.UserFileError, match="gw_file: %r is outside the job user's home" % path):
            U.check_lexically(path, roots)


def test_the_root_directory_is_never_a_home_or_working_directory():
    with pytest.raises(U.UserFileError, match="outside"):
        U.check_lexically("/etc/x", ["/", None])


def test_a_symbolic_link_out_of_the_working_directory_is_refused(tmp_path):
    work, other = tmp_path / "work", tmp_path / "other"
    work.mkdir()
    other.mkdir()
    (work / "escape").symlink_to(other)
    with pytest.raises(U.UserFileError, match="through a symbolic link, outside"):
        U.perform("write", str(work / "escape" / "route"), b"x", [str(work)])
    assert not (other / "route").exists()
    (work / "route").symlink_to(other / "target")
    for action in ("write", "append"):
        with pytest.raises(U.UserFileError, match="is a symbolic link"):
            U.perform(action, str(work / "route"), b"x", [str(work)])
    assert not (other / "target").exists()


def test_write_is_atomic_append_appends_and_remove_is_idempotent(tmp_path):
    path = str(tmp_path / "route")
    U.perform("write", path, b"a\n", [str(tmp_path)])
    U.perform("write", path, b"b\n", [str(tmp_path)])
    U.perform("append", path, b"c\n", [str(tmp_path)])
    assert open(path, "rb").read() == b"b\nc\n" and oct(os.stat(path).st_mode & 0o777) == "0o644"
    assert [p.name for p in tmp_path.iterdir()] == ["route"]  # no temporary file left
    U.perform("remove", path, b"", [str(tmp_path)])
    U.perform("remove", path, b"", [str(tmp_path)])
    assert not os.path.exists(path)


def test_the_account_must_match_the_jobs_user():
    with pytest.raises(U.UserFileError, match="uid %d is account %r, not the job's user 'mallory'"
                       % (ME.pw_uid, ME.pw_name)):
        U.home_of(ME.pw_uid, "mallory")


@pytest.fixture
def open_dir():
    """A directory every user may traverse (pytest's own tmp tree is root's alone, mode 0700)."""
    base = tempfile.mkdtemp(prefix="msa-userfile-", dir="/tmp")
    os.chmod(base, 0o755)
    yield pathlib.Path(base)
    shutil.rmtree(base)


def test_as_root_the_file_is_written_as_the_jobs_user_and_nowhere_it_cannot_write(open_dir):
    nobody = pwd.getpwnam("nobody")
    work = open_dir / "work"
    work.mkdir()
    record = job(work, uid=nobody.pw_uid)
    if os.geteuid() != 0:  # not root: another user's file cannot be written at all
        with pytest.raises(U.UserFileError, match="while running as uid"):
            U.act_for_job(record, "write", str(work / "route"), b"x")
        return
    os.chown(work, nobody.pw_uid, nobody.pw_gid)
    U.act_for_job(record, "write", str(work / "route"), b"x\n")
    st = os.stat(work / "route")
    assert (st.st_uid, st.st_gid) == (nobody.pw_uid, nobody.pw_gid)
    root_owned = work / "sub"
    root_owned.mkdir()
    os.chown(root_owned, 0, 0)
    with pytest.raises(U.UserFileError, match="cannot write .*Permission denied"):
        U.act_for_job(record, "write", str(root_owned / "route"), b"x")
    assert not (root_owned / "route").exists()


def test_the_helper_reads_the_job_itself_and_refuses_paths_outside_it(open_dir):
    tmp_path = open_dir
    work = tmp_path / "work"
    work.mkdir()
    # the helper never acts for root's jobs: as root, the job is nobody's
    record = job(work, uid=pwd.getpwnam("nobody").pw_uid if os.geteuid() == 0 else None)
    os.chown(work, record["uid"], record["gid"])
    seen = []

    def read_job(job_id, scontrol):
        seen.append(job_id)
        return [record]

    err = io.StringIO()
    lowest = 1  # the test's own account may have a uid below 1000: the uid bound has its own test below
    code = U.helper_main(["write", "42", str(tmp_path / "elsewhere")], stdin=io.BytesIO(b"x"), err=err,
                         read_job=read_job, min_uid=lowest)
    assert code == U.EXIT_REFUSED and seen == ["42"]
    assert "gw_file: %r is outside the job user's home" % str(tmp_path / "elsewhere") in err.getvalue()
    assert not (tmp_path / "elsewhere").exists()
    code = U.helper_main(["write", "42", str(work / "route")], stdin=io.BytesIO(b"ok\n"), err=err,
                         read_job=read_job, min_uid=lowest)
    assert code == 0 and (work / "route").read_bytes() == b"ok\n"
    err = io.StringIO()
    assert U.helper_main(["write", "42", str(work / "a/../route")], stdin=io.BytesIO(b""), err=err,
                         read_job=read_job, min_uid=lowest) == U.EXIT_REFUSED and "not a normalised" in err.getvalue()


@pytest.mark.parametrize("uid,minimum", [(0, 1000), (0, 0), (999, 1000), (1, 500)])
def test_the_helper_refuses_jobs_of_root_and_of_system_accounts(tmp_path, uid, minimum):
    work = tmp_path / "work"
    work.mkdir()
    record = dict(job(work), uid=uid, user="acct%d" % uid)
    err = io.StringIO()
    code = U.helper_main(["write", "42", str(work / "route")], stdin=io.BytesIO(b"x"), err=err,
                         read_job=lambda job_id, squeue: [record], min_uid=minimum)
    assert code == U.EXIT_REFUSED and not (work / "route").exists()
    assert ("job 42 runs as acct%d (uid %d): the helper acts only for accounts from uid %d (UID_MIN), never for "
            "root" % (uid, uid, minimum)) in err.getvalue()


def test_uid_min_comes_from_login_defs_else_1000(tmp_path):
    defs = tmp_path / "login.defs"
    defs.write_text("# UID_MIN 5\nUID_MIN\t\t\t 2000\nUID_MAX 60000\n")
    assert U.uid_min(str(defs)) == 2000
    defs.write_text("UID_MAX 60000\n")
    assert U.uid_min(str(defs)) == 1000
    assert U.uid_min(str(tmp_path / "missing")) == 1000


@pytest.mark.parametrize("argv", [[], ["chmod", "1", "/x"], ["write", "1"], ["write", "1", "/x", "k", "extra"]])
def test_the_helper_refuses_other_arguments(argv):
    err = io.StringIO()
    assert U.helper_main(argv, err=err, read_job=lambda *a: []) == U.EXIT_USAGE and "usage" in err.getvalue()


def test_the_helper_refuses_a_job_id_that_is_not_one():
    err = io.StringIO()
    code = U.helper_main(["write", "42;id", "/x"], stdin=io.BytesIO(b""), err=err,
                         read_job=lambda job_id, scontrol: U.S.read_job(job_id, "/bin/false"))
    assert code == U.EXIT_REFUSED and "SLURM_JOB_ID: '42;id' is not a Slurm job id" in err.getvalue()
