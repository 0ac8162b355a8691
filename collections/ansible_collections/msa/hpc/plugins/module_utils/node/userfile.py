# SPDX-License-Identifier: GPL-3.0-or-later
"""A job's own files written by the Slurm controller's hooks: only as the job's user, only in its home or workdir."""
from __future__ import annotations

import os
import pwd
import subprocess
import sys

from ansible_collections.msa.hpc.plugins.module_utils.slurm import jobs as S
from ansible_collections.msa.hpc.plugins.module_utils._jobopts import JobOptionError, check_path

# The hooks run as SlurmUser. A job's routing file and error file belong to the job's user, so they are written by
# this helper, which SlurmUser may run as root through one sudo rule with no other rights: it takes the job id,
# reads the job from slurmctld itself (user, uid, gid, working directory), refuses a path outside the user's home
# and the job's working directory, and drops to the user's uid, gid and groups before it touches anything.
USER_FILE_HELPER = "/usr/lib/msa-hpc/bin/msa-hpc-userfile"
ACTIONS = ("check", "write", "secret", "append", "remove")
EXIT_USAGE, EXIT_REFUSED, EXIT_FAILED = 2, 3, 4
# The helper acts only for jobs of ordinary accounts: a job of root (or of a system account) would let SlurmUser
# write as that account through it. The bound is the site's UID_MIN (/etc/login.defs), 1000 when it sets none.
LOGIN_DEFS = "/etc/login.defs"
DEFAULT_UID_MIN = 1000


class UserFileError(Exception):
    """A path the job may not name, or a write that failed; the message names the path and why."""


# --- which paths a job may name ----------------------------------------------------------------------------------

def home_of(uid, user):
    """The home directory of the job's account, checked to be that account (name and uid agree)."""
    try:
        pw = pwd.getpwuid(uid)
    except KeyError:
        raise UserFileError("uid %d of job user %r has no account on the controller" % (uid, user)) from None
    if pw.pw_name != user:
        raise UserFileError("uid %d is account %r, not the job's user %r" % (uid, pw.pw_name, user))
    return pw.pw_dir


def resolve(name, workdir, key="gw_file"):
    """A file name from the job (absolute, or relative to its working directory) → a normalised absolute path."""
    try:
        check_path(name, key)
    except JobOptionError as exc:
        raise UserFileError(str(exc)) from None
    path = name if name.startswith("/") else os.path.join(workdir, name)
    return os.path.normpath(path)


def _under(path, root):
    root = os.path.normpath(root)
    return root != "/" and (path == root or path.startswith(root.rstrip("/") + "/"))


def check_lexically(path, roots, key="gw_file"):
    """``path`` (normalised, absolute) lies strictly inside one of ``roots``; no ``..`` anywhere."""
    if not path.startswith("/") or ".." in path.split("/"):
        raise UserFileError("%s: %r is not a normalised absolute path" % (key, path))
    if not any(_under(os.path.dirname(path), r) for r in roots if r):
        raise UserFileError("%s: %r is outside the job user's home and the job's working directory (%s)"
                            % (key, path, ", ".join(r for r in roots if r)))
    return path


def check_resolved(path, roots, key="gw_file"):
    """After symlinks: the directory of ``path`` still lies inside one of the (resolved) roots, and ``path`` itself
    is not a symbolic link. Run with the job user's identity, so what it can see is what the user can see."""
    parent = os.path.realpath(os.path.dirname(path))
    if not any(_under(parent, os.path.realpath(r)) for r in roots if r):
        raise UserFileError("%s: %r leads to %s through a symbolic link, outside the job user's home and the job's "
                            "working directory" % (key, path, parent))
    if os.path.islink(path):
        raise UserFileError("%s: %r is a symbolic link" % (key, path))
    return parent


# --- acting as the user ------------------------------------------------------------------------------------------

def perform(action, path, data, roots, key="gw_file"):
    """``write`` (atomically; ``secret``: the same, readable by the user only), ``append`` or ``remove`` ``path``
    with the current identity, never through a link; ``check`` only says whether it could (the prolog asks before it
    takes any gateway)."""
    check_lexically(path, roots, key)
    parent = check_resolved(path, roots, key)
    if action == "check":
        return
    name = os.path.basename(path)
    try:
        dirfd = os.open(parent, os.O_RDONLY | os.O_DIRECTORY)
    except OSError as exc:
        raise UserFileError("%s: cannot open directory %s: %s" % (key, parent, exc.strerror)) from None
    try:
        if action in ("write", "secret"):
            tmp = ".%s.tmp%d" % (name, os.getpid())
            mode = 0o600 if action == "secret" else 0o644
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode, dir_fd=dirfd)
            try:
                with os.fdopen(fd, "wb") as fh:
                    fh.write(data)
                os.replace(tmp, name, src_dir_fd=dirfd, dst_dir_fd=dirfd)
            except BaseException:
                try:
                    os.unlink(tmp, dir_fd=dirfd)
                except OSError:
                    pass
                raise
        elif action == "append":
            fd = os.open(name, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o644, dir_fd=dirfd)
            with os.fdopen(fd, "ab") as fh:
                fh.write(data)
        elif action == "remove":
            try:
                os.unlink(name, dir_fd=dirfd)
            except FileNotFoundError:
                pass
        else:
            raise UserFileError("action %r is not one of %s" % (action, ", ".join(ACTIONS)))
    except OSError as exc:
        raise UserFileError("%s: cannot %s %s: %s" % (key, action, path, exc.strerror or exc)) from None
    finally:
        os.close(dirfd)


def drop_privileges(uid, gid, user):
    """Become the job's user for good: its groups, gid, then uid (in a child: there is no way back)."""
    os.setgroups(os.getgrouplist(user, gid))
    os.setgid(gid)
    os.setuid(uid)
    if os.geteuid() != uid or os.getegid() != gid:
        raise UserFileError("could not become uid %d gid %d" % (uid, gid))


def as_user(job, func):
    """Run ``func()`` in a child that has dropped to the job's identity; raise UserFileError with its message."""
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - needs root; exercised on the controller by verify_security.yml
        os.close(rfd)
        code = 0
        try:
            drop_privileges(job["uid"], job["gid"], job["user"])
            func()
        except BaseException as exc:  # noqa: BLE001 - the child reports every failure as one line
            os.write(wfd, str(exc).encode("utf-8", "replace")[:2000])
            code = 1
        finally:
            os._exit(code)
    os.close(wfd)
    with os.fdopen(rfd, "rb") as fh:
        why = fh.read().decode("utf-8", "replace")
    status = os.waitpid(pid, 0)[1]
    if os.waitstatus_to_exitcode(status) != 0:
        raise UserFileError(why or "writing as uid %d failed" % job["uid"])


def job_record(leader):
    """A checked job record as ``user_file`` takes it: with the user's home (None when the account does not match,
    so that only the working directory is allowed and the helper, reading the job again, refuses the rest)."""
    try:
        home = home_of(leader["uid"], leader["user"])
    except UserFileError:
        home = None
    return dict(leader, home=home)


def append_error(job, tag, message, helper=USER_FILE_HELPER):
    """One line ``<tag>: <message>`` in ``JOB-<id>-<tag>.err`` in the job's working directory, as the job's user.

    Returns why the line could not be written (for the hook's own log), or None."""
    path = os.path.join(job["workdir"], "JOB-%s-%s.err" % (job["job_id"], tag))
    try:
        user_file(job, "append", path, ("%s: %s\n" % (tag, message)).encode("utf-8"), helper, key="error_file")
    except (OSError, UserFileError) as exc:
        return "cannot write %s: %s" % (path, exc)
    return None


def uid_min(path=LOGIN_DEFS):
    """The site's lowest uid of an ordinary account: ``UID_MIN`` of login.defs, else DEFAULT_UID_MIN."""
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                words = line.split()
                if len(words) >= 2 and words[0] == "UID_MIN" and words[1].isdigit():
                    return int(words[1])
    except OSError:
        pass
    return DEFAULT_UID_MIN


def check_uid(job, minimum):
    """Refuse a job of root or of a system account (uid below ``minimum``)."""
    if job["uid"] == 0 or job["uid"] < minimum:
        raise UserFileError("job %s runs as %s (uid %d): the helper acts only for accounts from uid %d (UID_MIN), "
                            "never for root or a system account" % (job["job_id"], job["user"], job["uid"], minimum))


def roots_of(job):
    return [home_of(job["uid"], job["user"]), job["workdir"]]


def act_for_job(job, action, path, data=b"", key="gw_file"):
    """What the helper does once it knows the job: check, become the user, act."""
    roots = roots_of(job)
    check_lexically(path, roots, key)
    if os.geteuid() == 0:
        return as_user(job, lambda: perform(action, path, data, roots, key))
    if os.geteuid() != job["uid"]:
        raise UserFileError("%s: cannot write %s as uid %d while running as uid %d" % (key, path, job["uid"],
                                                                                       os.geteuid()))
    return perform(action, path, data, roots, key)


def user_file(job, action, path, data=b"", helper=USER_FILE_HELPER, key="gw_file", run=subprocess.run):
    """From a hook: ``action`` on ``path`` as the job's user — directly when the hook is root (or the user itself),
    else through the helper with sudo (which reads the job again from slurmctld; the hook's word is not trusted)."""
    roots = [job.get("home"), job["workdir"]]
    check_lexically(path, roots, key)
    if os.geteuid() == 0 or os.geteuid() == job["uid"]:
        return act_for_job(job, action, path, data, key)
    argv = ["sudo", "-n", helper, action, job["job_id"], path, key]
    try:
        proc = run(argv, input=data, capture_output=True, timeout=60, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        raise UserFileError("cannot run %s: %s" % (helper, exc)) from None
    if proc.returncode != 0:
        why = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        raise UserFileError(why[-1] if why else "%s %s %s: exit %d" % (helper, action, path, proc.returncode))
    return None


def helper_main(argv=None, stdin=None, err=None, squeue="squeue", read_job=S.read_job, min_uid=None):
    """``msa-hpc-userfile check|write|append|remove JOBID PATH [KEY]`` (data on stdin), run as root by sudo; a job
    of root or of a system account (uid below ``min_uid``, the site's UID_MIN) is refused."""
    argv = sys.argv[1:] if argv is None else argv
    err = err or sys.stderr
    if len(argv) not in (3, 4) or argv[0] not in ACTIONS:
        err.write("usage: msa-hpc-userfile check|write|append|remove JOBID ABSOLUTE-PATH [OPTION-NAME]\n")
        return EXIT_USAGE
    action, job_id, path = argv[:3]
    key = argv[3] if len(argv) == 4 and argv[3] in ("gw_file", "error_file") else "gw_file"
    try:
        records = read_job(job_id, squeue)
        job = next((r for r in records if r["job_id"] == S.check_job_id(job_id)), None)
        if job is None:
            raise UserFileError("job %s is not in slurmctld's answer" % job_id)
        check_uid(job, uid_min() if min_uid is None else min_uid)
        if os.path.normpath(path) != path:
            raise UserFileError("%s: %r is not a normalised absolute path" % (key, path))
        data = b"" if action in ("check", "remove") else (stdin or sys.stdin.buffer).read()
        act_for_job(job, action, path, data, key)
    except S.JobRecordError as exc:
        err.write("msa-hpc-userfile: %s\n" % exc)
        return EXIT_REFUSED
    except UserFileError as exc:
        err.write("msa-hpc-userfile: job %s: %s\n" % (job_id, exc))
        return EXIT_REFUSED
    except OSError as exc:
        err.write("msa-hpc-userfile: job %s: %s\n" % (job_id, exc))
        return EXIT_FAILED
    return 0
