# SPDX-License-Identifier: GPL-3.0-or-later
"""msa-container: run a command as the calling user inside an image of the node's udocker image store."""
from __future__ import annotations

import argparse
import base64
import fcntl
import glob
import hashlib
import http.client
import json
import os
import grp
import pwd
import re
import ssl
import struct
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request

CONFIG = "/etc/msa-container.json"
# Exit status of the wrapper's own failures (docker and podman use 125 the same way), so they are not mistaken
# for the status of the command run in the container.
EXIT_WRAPPER = 125
ENGINES = ("F1", "P1", "P2")
# What a command needs from the host besides the declared accelerators: udocker's own system directories with
# /dev narrowed to the usual pseudo devices, so an undeclared device file of the node stays outside.
BASE_VOLUMES = ("/proc", "/sys", "/etc/resolv.conf", "/etc/host.conf", "/dev/null", "/dev/zero", "/dev/full",
                "/dev/random", "/dev/urandom", "/dev/tty", "/dev/pts", "/dev/ptmx", "/dev/shm")
_IMAGE = re.compile(r"^[a-z0-9][a-z0-9._/-]{0,127}(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?$")
DEFAULTS = {"udocker": "/usr/local/bin/udocker", "engine": "F1", "repo_dir": "/var/lib/udocker",
            "devices": [], "libraries": [], "volumes": [],
            # the image store (https only): the CA its certificate is verified against (empty: the system's CAs)
            # and the root-only file of its account ("user:password", HTTP Basic)
            "store_ca": "", "store_credentials": "",
            # the store's URL (empty: no store) and what --sync imports from it: "all" or a list of name:tag
            "store_url": "", "store_images": "all"}
# A line of the store's SHA256SUMS and the image a tarball's name gives: <name>_<tag>.tar[.gz] or .tgz.
_INDEX_LINE = re.compile(r"^([0-9a-f]{64})  (\S+)$")
_TARBALL = re.compile(r"^(.+)_([A-Za-z0-9][A-Za-z0-9.-]*)\.(tar|tar\.gz|tgz)$")
MAX_INDEX = 1 << 20


class WrapperError(Exception):
    """A failure of the wrapper itself (bad image name, image not imported, udocker refused)."""


def load_config(path=CONFIG):
    """The node's settings written by the msa.hpc.udocker role, over the defaults."""
    conf = dict(DEFAULTS)
    try:
        with open(path, encoding="utf-8") as handle:
            conf.update(json.load(handle))
    except FileNotFoundError:
        pass
    except ValueError as exc:
        raise WrapperError("%s is not valid JSON: %s" % (path, exc))
    return conf


def split_image(image):
    """``(repository, tag)`` of ``name[:tag]``; the tag defaults to ``latest``."""
    if not _IMAGE.match(image or "") or ".." in image or "//" in image:
        raise WrapperError("image %r is not a name[:tag] (lower-case letters, digits, '._/-')" % (image,))
    repo, _sep, tag = image.partition(":")
    return repo, tag or "latest"


def marker_path(conf, repo, tag):
    """Where the import records the sha256 of the tarball an image came from."""
    return os.path.join(conf["repo_dir"], "imported", "%s_%s.sha256" % (repo.replace("/", "_"), tag))


def image_id(conf, repo, tag):
    """The imported image's identity (its tarball's sha256), or None when it is not in the node's repository."""
    if not os.path.isdir(os.path.join(conf["repo_dir"], "repos", repo, tag)):
        return None
    try:
        with open(marker_path(conf, repo, tag), encoding="ascii") as handle:
            return handle.read().strip() or "unknown"
    except OSError:
        return "unknown"


def available_images(conf):
    """Every ``repo:tag`` imported into the node's shared repository."""
    root = os.path.join(conf["repo_dir"], "repos")
    out = []
    for dirpath, _dirs, files in os.walk(root):
        if "TAG" in files:
            rel = os.path.relpath(dirpath, root)
            repo, _sep, tag = rel.rpartition("/")
            out.append("%s:%s" % (repo, tag))
    return sorted(out)


def container_name(repo, tag, ident, engine):
    """A container per user, image content and engine: a re-imported image or another engine gets a new one."""
    base = "msa_%s_%s_%s_%s" % (repo, tag, (ident or "unknown")[:12], engine)
    return re.sub(r"[^A-Za-z0-9_-]", "_", base)


def volumes(conf, home, cwd, exists=os.path.exists):
    """Host paths bound into the container: base pseudo devices, declared accelerators and driver libraries
    that exist on this node, site volumes, the user's home and the working directory."""
    paths = [p for p in BASE_VOLUMES if exists(p)]
    paths += [p for p in conf.get("devices", []) if exists(p)]
    for pattern in conf.get("libraries", []):
        paths += sorted(glob.glob(pattern)) if any(c in pattern for c in "*?[") else (
            [pattern] if exists(pattern) else [])
    paths += [v for v in conf.get("volumes", []) if exists(v.split(":", 1)[0])]
    for path in (home, cwd):
        if path and path != "/" and exists(path):
            paths.append(path)
    seen, out = set(), []
    for path in paths:
        if path not in seen:
            seen.add(path)
            out.append(path)
    return out


def run_argv(conf, name, command, home, cwd, exists=os.path.exists):
    """The udocker command line that runs ``command`` in container ``name`` as the calling user."""
    argv = [conf["udocker"], "--quiet", "run", "--nobanner", "--nosysdirs", "--hostenv", "--containerauth",
            "--user=%d:%d" % (os.getuid(), os.getgid())]
    argv += ["--volume=%s" % v for v in volumes(conf, home, cwd, exists)]
    if cwd and cwd != "/" and exists(cwd):
        argv.append("--workdir=%s" % cwd)
    return argv + [name] + list(command)


def udocker_env(conf, engine):
    """The environment udocker runs in: the node's engine and never its first-run download."""
    env = dict(os.environ)
    env.update(UDOCKER_TARBALL="", UDOCKER_DEFAULT_EXECUTION_MODE=engine)
    return env


def elf_interpreter(path):
    """The program interpreter (PT_INTERP) of a 64-bit little-endian ELF executable, or None."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(64)
            if len(head) < 64 or head[:4] != b"\x7fELF" or head[4] != 2 or head[5] != 1:
                return None
            phoff, = struct.unpack_from("<Q", head, 32)
            phentsize, phnum = struct.unpack_from("<HH", head, 54)
            for index in range(phnum):
                handle.seek(phoff + index * phentsize)
                p_type, _flags, offset, _vaddr, _paddr, size = struct.unpack("<IIQQQQ", handle.read(40))
                if p_type == 3:
                    handle.seek(offset)
                    return handle.read(size).rstrip(b"\0").decode("ascii", "replace") or None
    except OSError:
        return None
    return None


def container_loader(root):
    """The ELF loader the image's programs ask for (udocker's F engines need it; without it udocker looks
    for patchelf, which Debian nodes do not have)."""
    for rel in ("usr/bin/bash", "bin/bash", "usr/bin/dash", "bin/sh", "usr/bin/env"):
        path = os.path.realpath(os.path.join(root, rel))
        if path.startswith(os.path.realpath(root) + os.sep) and os.path.isfile(path):
            loader = elf_interpreter(path)
            if loader:
                return loader
    return None


def add_account(root, uid, gid):
    """Give the calling user (and group) an entry in the container's own passwd/group (its copy is the user's),
    so names resolve in every engine; udocker's --hostauth does not reach through Debian's fakechroot."""
    try:
        user = pwd.getpwuid(uid)
        shell = "/bin/bash" if os.path.exists(os.path.join(root, "bin/bash")) else "/bin/sh"
        lines = {"passwd": "%s:x:%d:%d:%s:%s:%s" % (user.pw_name, uid, gid, user.pw_gecos, user.pw_dir, shell)}
    except KeyError:
        lines = {}
    try:
        lines["group"] = "%s:x:%d:" % (grp.getgrgid(gid).gr_name, gid)
    except KeyError:
        pass
    for name, line in lines.items():
        path = os.path.join(root, "etc", name)
        try:
            with open(path, encoding="utf-8") as handle:
                known = [entry.split(":")[2] for entry in handle.read().splitlines() if entry.count(":") >= 2]
        except OSError:
            continue
        if str(uid if name == "passwd" else gid) not in known:
            with open(path, "a", encoding="utf-8") as handle:
                handle.write(line + "\n")


def _udocker(conf, env, *args):
    proc = subprocess.run([conf["udocker"], "--quiet"] + list(args), env=env, capture_output=True, text=True,
                          check=False)
    if proc.returncode != 0:
        raise WrapperError("udocker %s failed (exit %d): %s" % (args[0], proc.returncode,
                                                                (proc.stderr or proc.stdout).strip()[-500:]))
    return proc.stdout


def ensure_container(conf, env, image, name, engine):
    """Create the user's container for the image once (under a lock: tasks of one job start together)."""
    top = os.environ.get("UDOCKER_DIR") or os.path.join(os.path.expanduser("~"), ".udocker")
    containers = os.environ.get("UDOCKER_CONTAINERS") or os.path.join(top, "containers")
    os.makedirs(containers, mode=0o700, exist_ok=True)
    with open(os.path.join(top, ".msa-container.lock"), "w", encoding="ascii") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if os.path.exists(os.path.join(containers, name)):
            return False
        _udocker(conf, env, "create", "--name=%s" % name, image)
        directory = os.path.realpath(os.path.join(containers, name))
        loader = container_loader(os.path.join(directory, "ROOT"))
        if loader:
            with open(os.path.join(directory, "ld.so.path"), "w", encoding="ascii") as handle:
                handle.write(loader + "\n")
        add_account(os.path.join(directory, "ROOT"), os.getuid(), os.getgid())
        _udocker(conf, env, "setup", "--execmode=%s" % engine, name)
        return True


def sha256_of(path):
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def import_image(conf, source, image, sha256, dry_run=False):
    """Import a tarball (a path or an https URL of the site's image store) as ``image`` into the shared repository.

    Nothing is fetched when the image is there from a tarball with this sha256. Returns ``unchanged``,
    ``imported`` or, with dry_run, ``would import``.
    """
    repo, tag = split_image(image)
    if image_id(conf, repo, tag) == sha256:
        return "unchanged"
    if dry_run:
        return "would import"
    env = udocker_env(conf, conf["engine"])
    os.makedirs(os.path.dirname(marker_path(conf, repo, tag)), mode=0o755, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=conf["repo_dir"]) as tmp:
        path = os.path.join(tmp, os.path.basename(source.split("?", 1)[0]) or "image.tar")
        if re.match(r"^[a-z][a-z0-9+.-]*://", source, re.I):
            _download(conf, source, path)
        else:
            os.link(source, path) if os.stat(source).st_dev == os.stat(tmp).st_dev else _copy(source, path)
        got = sha256_of(path)
        if got != sha256:
            raise WrapperError("%s has sha256 %s, the store lists %s" % (source, got, sha256))
        if image_id(conf, repo, tag) is not None:
            _udocker(conf, env, "--allow-root", "rmi", image)
        _udocker(conf, env, "--allow-root", "import", "--mv", path, image)
    with open(marker_path(conf, repo, tag), "w", encoding="ascii") as handle:
        handle.write(sha256 + "\n")
    os.chmod(marker_path(conf, repo, tag), 0o644)
    return "imported"


def parse_index(text, wanted="all"):
    """The store's images from its SHA256SUMS: [(image, file, sha256)] of the lines naming a tarball
    ``<name>_<tag>.tar[.gz]`` (others are skipped), narrowed to ``wanted`` ("all" or a list of name:tag)."""
    if wanted != "all" and not (isinstance(wanted, list) and all(isinstance(w, str) for w in wanted)):
        raise WrapperError("store_images: %r is neither \"all\" nor a list of name:tag" % (wanted,))
    images = []
    for line in text.splitlines():
        found = _INDEX_LINE.match(line)
        parts = _TARBALL.match(found.group(2)) if found and "/" not in found.group(2) else None
        if parts:
            image = "%s:%s" % (parts.group(1), parts.group(2))
            if wanted == "all" or image in wanted:
                images.append((image, found.group(2), found.group(1)))
    return images


def sync(conf, dry_run=False):
    """Import every image of the store's index (or those of store_images) that the node lacks or has from another
    tarball: {image: "imported" | "unchanged" | "would import"}. The first failure stops it, naming the image."""
    url = (conf.get("store_url") or "").rstrip("/")
    if not url:
        raise WrapperError("store_url is not set in %s: this node has no image store to sync from"
                           % os.environ.get("MSA_CONTAINER_CONFIG", CONFIG))
    request = store_request(conf, url + "/SHA256SUMS")
    try:
        context = ssl.create_default_context(cafile=conf.get("store_ca") or None)
        with urllib.request.urlopen(request, timeout=60, context=context) as answer:
            text = answer.read(MAX_INDEX + 1)
    except urllib.error.HTTPError as exc:
        raise WrapperError("%s/SHA256SUMS: the image store answered HTTP %s %s" % (url, exc.code, exc.reason)) from None
    except (OSError, http.client.HTTPException, ValueError) as exc:
        raise WrapperError("reading %s/SHA256SUMS failed (%s: %s); nothing was imported"
                           % (url, type(exc).__name__, exc)) from None
    if len(text) > MAX_INDEX:
        raise WrapperError("%s/SHA256SUMS is larger than %d bytes" % (url, MAX_INDEX))
    done = {}
    for image, name, sha256 in parse_index(text.decode("utf-8", "replace"), conf.get("store_images", "all")):
        try:
            done[image] = import_image(conf, url + "/" + name, image, sha256, dry_run)
        except WrapperError as exc:
            raise WrapperError("%s: %s (before it: %s)" % (image, exc, json.dumps(done, sort_keys=True))) from None
    return done


def store_request(conf, source):
    """The request for ``source`` of the image store: https only, with the store's account when one is configured."""
    if not source.lower().startswith("https://"):
        raise WrapperError("%s: the image store is reached over https only" % source)
    request = urllib.request.Request(source)
    if conf.get("store_credentials"):
        try:
            with open(conf["store_credentials"], "rb") as handle:
                account = handle.read().strip()
        except OSError as exc:
            raise WrapperError("the image store's credentials %s cannot be read: %s"
                               % (conf["store_credentials"], exc.strerror or exc)) from None
        request.add_header("Authorization", "Basic " + base64.b64encode(account).decode("ascii"))
    return request


def _download(conf, source, path):
    """Fetch an https URL of the site's image store to ``path``, the store's certificate verified against the
    configured CA; every failure of the transfer is a WrapperError."""
    request = store_request(conf, source)
    try:
        context = ssl.create_default_context(cafile=conf.get("store_ca") or None)
        with urllib.request.urlopen(request, timeout=60, context=context) as answer, open(path, "wb") as out:
            for block in iter(lambda: answer.read(1 << 20), b""):
                out.write(block)
            if getattr(answer, "length", None):   # read(amt) ends quietly where a connection closed early
                raise http.client.IncompleteRead(b"", answer.length)
    except urllib.error.HTTPError as exc:
        raise WrapperError("%s: the image store answered HTTP %s %s" % (source, exc.code, exc.reason)) from None
    except (OSError, http.client.HTTPException, ValueError) as exc:
        # refused, timed out, reset, cut short (IncompleteRead), certificate not trusted, not a URL: nothing imported
        raise WrapperError("downloading %s failed (%s: %s); nothing was imported, try again"
                           % (source, type(exc).__name__, exc)) from None


def _copy(source, path):
    with open(source, "rb") as src, open(path, "wb") as dst:
        for block in iter(lambda: src.read(1 << 20), b""):
            dst.write(block)


def parse_args(argv):
    parser = argparse.ArgumentParser(
        prog="msa-container", description="Run COMMAND as you inside IMAGE (an image of this node's store).",
        epilog="The exit status is COMMAND's; %d means the wrapper itself failed." % EXIT_WRAPPER)
    parser.add_argument("--engine", choices=ENGINES, help="udocker execution mode (default: the node's)")
    parser.add_argument("--images", action="store_true", help="list the images of this node and exit")
    parser.add_argument("--import", dest="import_spec", nargs=3, metavar=("IMAGE", "TARBALL_OR_URL", "SHA256"),
                        help="(root) import a tarball of the image store as IMAGE unless it is there already")
    parser.add_argument("--sync", action="store_true",
                        help="(root) import the image store's images this node lacks (its store_url, store_images); "
                             "prints {image: imported|unchanged} as JSON")
    parser.add_argument("--dry-run", action="store_true", help="with --import or --sync: only say what would be done")
    parser.add_argument("image", nargs="?", metavar="IMAGE")
    parser.add_argument("command", nargs=argparse.REMAINDER, metavar="-- COMMAND")
    args = parser.parse_args(argv)
    if args.command and args.command[0] == "--":
        args.command = args.command[1:]
    if not (args.images or args.import_spec or args.sync):
        if not args.image:
            parser.error("IMAGE is required")
        if not args.command:
            parser.error("COMMAND is required (msa-container IMAGE -- COMMAND ...)")
    return args


def main(argv=None):
    try:
        args = parse_args(sys.argv[1:] if argv is None else argv)
        conf = load_config(os.environ.get("MSA_CONTAINER_CONFIG", CONFIG))
        if args.images:
            print("\n".join(available_images(conf)))
            return 0
        if args.sync:
            print(json.dumps(sync(conf, args.dry_run), sort_keys=True))
            return 0
        if args.import_spec:
            image, source, sha256 = args.import_spec
            print(import_image(conf, source, image, sha256.lower(), args.dry_run))
            return 0
        engine = args.engine or conf["engine"]
        repo, tag = split_image(args.image)
        ident = image_id(conf, repo, tag)
        if ident is None:
            raise WrapperError("image %s:%s is not imported on %s (available: %s)" % (
                repo, tag, os.uname().nodename, ", ".join(available_images(conf)) or "none"))
        name = container_name(repo, tag, ident, engine)
        env = udocker_env(conf, engine)
        ensure_container(conf, env, "%s:%s" % (repo, tag), name, engine)
        argv = run_argv(conf, name, args.command, os.path.expanduser("~"), os.getcwd())
        sys.stdout.flush()
        os.execve(argv[0], argv, env)
    except WrapperError as exc:
        print("msa-container: %s" % exc, file=sys.stderr)
        return EXIT_WRAPPER
    except OSError as exc:
        print("msa-container: %s" % exc, file=sys.stderr)
        return EXIT_WRAPPER
    return EXIT_WRAPPER


if __name__ == "__main__":
    sys.exit(main())
