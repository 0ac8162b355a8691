# SPDX-License-Identifier: GPL-3.0-or-later
"""A tree of files installed in one pass (module msa.hpc.file_tree): each file written only when its content, mode
or owner differs, atomically (a temporary file beside it, renamed over it); missing directories made; named paths
removed. One module call for a whole tree, where a ``copy`` loop costs one round trip per file on every run.

Nothing here imports Ansible: the module passes the decoded files in and gets a result dict back."""
from __future__ import annotations

import grp
import hashlib
import os
import pwd
import stat
import tempfile


class TreeError(Exception):
    """A bad request (a path outside the tree, an unknown owner), named with the field and value."""


def octal_mode(value, field):
    """The mode an option gives as an octal string (``"0644"``); TreeError naming the option otherwise."""
    try:
        return int(value, 8)
    except (TypeError, ValueError):
        raise TreeError("%s: %r is not an octal mode" % (field, value)) from None


def owner_ids(owner, group):
    """(uid, gid) of the user and group names; -1 for a name not given. TreeError names an unknown one."""
    try:
        uid = pwd.getpwnam(owner).pw_uid if owner else -1
    except KeyError:
        raise TreeError("owner: no user %r on this host" % owner) from None
    try:
        gid = grp.getgrnam(group).gr_gid if group else -1
    except KeyError:
        raise TreeError("group: no group %r on this host" % group) from None
    return uid, gid


def _inside(dest, rel, field):
    """``dest/rel`` for a relative path that stays inside ``dest`` (no absolute path, no ``..``, no empty part)."""
    parts = rel.split("/")
    if not rel or rel.startswith("/") or any(p in ("", ".", "..") for p in parts):
        raise TreeError("%s: %r is not a plain relative path inside %s" % (field, rel, dest))
    return os.path.join(dest, *parts)


def file_state(path):
    """(sha256, mode, uid, gid) of a regular file, or None when there is none (a directory there is an error)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(st.st_mode):
        raise TreeError("%s exists and is not a regular file" % path)
    with open(path, "rb") as handle:
        digest = hashlib.sha256(handle.read()).hexdigest()
    return digest, stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid


def stage_file(path, data, mode, uid, gid):
    """A temporary file beside ``path`` holding ``data`` with its mode and owner, flushed to disk: its name. Renamed
    over ``path`` (``os.replace``) it installs the file atomically; on any failure nothing is left behind."""
    fd, tmp = tempfile.mkstemp(prefix=".%s." % os.path.basename(path), dir=os.path.dirname(path))
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            os.fchmod(handle.fileno(), mode)
            if uid != -1 or gid != -1:
                os.fchown(handle.fileno(), uid, gid)
            handle.flush()
            os.fsync(handle.fileno())
    except BaseException:
        os.unlink(tmp)
        raise
    return tmp


def _write(path, data, mode, uid, gid):
    tmp = stage_file(path, data, mode, uid, gid)
    try:
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def make_dirs(path, mode, uid, gid, made, check_mode):
    """Make the missing directories down to ``path`` (each with ``mode`` and owner), listing them in ``made``."""
    missing = []
    while path and not os.path.isdir(path):
        if os.path.lexists(path):
            raise TreeError("%s exists and is not a directory" % path)
        missing.append(path)
        path = os.path.dirname(path)
    for directory in reversed(missing):
        made.append(directory)
        if not check_mode:
            os.mkdir(directory, mode)
            os.chmod(directory, mode)
            if uid != -1 or gid != -1:
                os.chown(directory, uid, gid)


def install(dest, files, mode=0o644, dir_mode=0o755, owner=None, group=None, empty=(), absent=(), check_mode=False):
    """Install ``files`` ({relative path: bytes}) under ``dest``, create the ``empty`` files (absolute paths) with no
    content, and remove the ``absent`` paths (absolute; a directory there is refused). Returns {changed, written,
    made, removed, diff}; ``written`` names files under ``dest`` relative to it, others by their absolute path."""
    if not os.path.isabs(dest):
        raise TreeError("dest: %r is not an absolute path" % dest)
    uid, gid = owner_ids(owner, group)
    result = {"written": [], "made": [], "removed": []}
    wanted = {_inside(dest, rel, "files"): (rel, data) for rel, data in files.items()}
    for path in empty:
        if not os.path.isabs(path) or ".." in path.split("/"):
            raise TreeError("empty: %r is not an absolute path" % path)
        wanted.setdefault(os.path.normpath(path), (os.path.normpath(path), b""))
    for path in sorted(wanted):
        rel, data = wanted[path]
        want = (hashlib.sha256(data).hexdigest(), mode, uid, gid)
        have = file_state(path) if os.path.isdir(os.path.dirname(path)) else None
        if have is not None and all(w == -1 or w == h for w, h in zip(want, have)):
            continue
        make_dirs(os.path.dirname(path), dir_mode, uid, gid, result["made"], check_mode)
        result["written"].append(rel)
        if not check_mode:
            _write(path, data, mode, uid, gid)
    for path in absent:
        if not os.path.isabs(path):
            raise TreeError("absent: %r is not an absolute path" % path)
        if os.path.isdir(path) and not os.path.islink(path):
            raise TreeError("absent: %s is a directory (only files are removed)" % path)
        if os.path.lexists(path):
            result["removed"].append(path)
            if not check_mode:
                os.unlink(path)
    result["changed"] = bool(result["written"] or result["made"] or result["removed"])
    result["diff"] = {
        "before": "".join("%s\n" % p for p in result["removed"]),
        "after": "".join("%s\n" % os.path.join(dest, p) for p in result["written"]),
        "before_header": "%s (removed)" % dest, "after_header": "%s (written)" % dest}
    return result
