# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

"""Power backends behind the BMCs: podman containers (the simulated nodes) or a JSON state file (tests)."""

import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time


class BackendError(RuntimeError):
    """The backend could not read or change a node's power."""


class PodmanBackend:
    """A node is a systemd container: running means powered on.

    Graceful shutdown is ``podman stop -t N``: podman sends the image's stop signal (SIGRTMIN+3 for systemd
    containers, which makes systemd shut down cleanly) and kills after N seconds.
    """

    def __init__(self, podman="podman", graceful_timeout=30, command_timeout=90, run=subprocess.run,
                 post_power_on=(), carry_paths=()):
        self.podman = podman
        self.graceful_timeout = graceful_timeout
        self.command_timeout = command_timeout
        self._run = run
        # the harness re-applies what a new container lacks (EXTOLL veth links) after every start; one at a time
        self.post_power_on = list(post_power_on)
        self._hook_lock = threading.Lock()
        # files the provisioner gave the node (its overlay token, the overlay client's CA and settings): a node made
        # anew from an image gets them from the old container, as a real provisioner hands them over at every boot
        self.carry_paths = list(carry_paths)

    def _podman(self, *args, timeout=None):
        cmd = [self.podman] + [str(a) for a in args]
        try:
            proc = self._run(cmd, capture_output=True, text=True, timeout=timeout or self.command_timeout)
        except FileNotFoundError:
            raise BackendError("%s is not installed" % self.podman) from None
        except subprocess.TimeoutExpired:
            raise BackendError("'%s' did not finish in %ss" % (" ".join(cmd), timeout or self.command_timeout)) from None
        if proc.returncode != 0:
            raise BackendError("'%s' failed (%d): %s" % (" ".join(cmd), proc.returncode,
                                                         (proc.stderr or proc.stdout).strip()[:300]))
        return proc.stdout.strip()

    def is_on(self, container):
        return self._podman("inspect", "-f", "{{.State.Running}}", container) == "true"

    def power_on(self, container, image=None):
        """Start the node; with ``image`` (a one-time HTTP boot of that image), recreate it from the image first."""
        if image:
            self.recreate(container, image)
        self._podman("start", container)
        if self.post_power_on:
            self._post_power_on(container)

    def _post_power_on(self, container):
        cmd = [arg.replace("{container}", container) for arg in self.post_power_on]
        with self._hook_lock:
            try:
                proc = self._run(cmd, capture_output=True, text=True, timeout=self.command_timeout)
            except (OSError, subprocess.TimeoutExpired) as exc:
                raise BackendError("%s is on, but its post-power-on hook '%s' failed: %s"
                                   % (container, " ".join(cmd), exc)) from None
        if proc.returncode != 0:
            raise BackendError("%s is on, but its post-power-on hook '%s' failed (%d): %s" % (
                container, " ".join(cmd), proc.returncode, (proc.stderr or proc.stdout).strip()[:300]))

    def recreate(self, container, image):
        """Make ``container`` (powered off) anew from ``image``, with the settings the old one was created with
        (create_args) and its volumes, so the node's persistent state (host keys, spool, identity) stays.

        The new container is created under a temporary name first; only then is the old one renamed away, the new
        one given its name, and the old one removed. When a step fails, the old container is back under its name.
        """
        if not isinstance(image, str) or not IMAGE_REFERENCE.fullmatch(image):
            raise BackendError("image: %r is not an image reference: %s is not recreated" % (image, container))
        old = self.inspect(container)
        if (old.get("State") or {}).get("Running"):
            raise BackendError("%s is running: a node is recreated from a new image only when it is off" % container)
        args = create_args(old)
        staged, previous = container + REIMAGE_SUFFIX, container + PREVIOUS_SUFFIX
        self._podman("rm", "--force", "--ignore", staged)  # a leftover of an attempt that was cut short
        try:
            self._podman("create", "--name", staged, *args, image)
            self._carry(container, staged)
        except BackendError:
            self._podman_quiet("rm", "--force", "--ignore", staged)
            raise
        self._podman("rename", container, previous)
        try:
            self._podman("rename", staged, container)
        except BackendError:
            self._podman_quiet("rename", previous, container)
            self._podman_quiet("rm", "--force", "--ignore", staged)
            raise
        self._podman("rm", "--force", previous)

    def _carry(self, old, new):
        """Copy each of carry_paths the old container has into the new (created, not started) one, with the
        directories above it (0755) that a new image may lack."""
        if not self.carry_paths:
            return
        work = tempfile.mkdtemp(prefix="msa-bmc-carry-")
        try:
            tree = os.path.join(work, "root")
            carried = False
            for path in self.carry_paths:
                local = tree + path
                os.makedirs(os.path.dirname(local), mode=0o755, exist_ok=True)
                try:
                    self._podman("cp", "%s:%s" % (old, path), local)
                except BackendError:
                    continue  # the old node never had that file: nothing to carry
                carried = True
            if carried:
                for directory, _dirs, _files in os.walk(tree):
                    os.chmod(directory, 0o755)
                self._podman("cp", tree + "/.", "%s:/" % new)
        finally:
            shutil.rmtree(work, ignore_errors=True)

    def inspect(self, container):
        try:
            found = json.loads(self._podman("container", "inspect", container))
        except ValueError as exc:
            raise BackendError("podman container inspect %s printed no JSON: %s" % (container, exc)) from None
        if not isinstance(found, list) or len(found) != 1 or not isinstance(found[0], dict):
            raise BackendError("podman container inspect %s: not one container" % container)
        return found[0]

    def _podman_quiet(self, *args):
        """An undo step: its failure must not hide the error being reported."""
        try:
            self._podman(*args)
        except BackendError:
            pass

    def force_off(self, container):
        self._podman("stop", "-t", "0", container)

    def graceful_shutdown(self, container):
        timeout = int(self.graceful_timeout)
        self._podman("stop", "-t", timeout, container, timeout=timeout + self.command_timeout)


# the BMC checks the image against its allow-list; the backend still refuses what podman could read as an option
IMAGE_REFERENCE = re.compile(r"[a-z0-9][a-z0-9._/-]{0,254}(:[A-Za-z0-9_][A-Za-z0-9._-]{0,127})?")
REIMAGE_SUFFIX = ".reimage"
PREVIOUS_SUFFIX = ".previous"
# podman create options kept as the node was created with them (roles/sim_system), read from the command line
# podman recorded (Config.CreateCommand): inspect shows no interface name, --no-hosts or --dns none, and its
# Config.Labels mix in the old image's labels, which must not outlive the image. Flags without a value: FLAGS.
KEPT_OPTIONS = ("--network", "--net", "--dns", "--no-hosts", "--systemd", "--label", "-l")
FLAGS = ("--no-hosts",)


def create_args(old):
    """``podman create`` options giving a new container the old one's hostname, privileges, systemd mode, networks
    (addresses, interface names), DNS, hosts file, labels and volumes (named volumes and bind mounts)."""
    config, host = old.get("Config") or {}, old.get("HostConfig") or {}
    args = ["--hostname", config.get("Hostname") or old["Name"]]
    if host.get("Privileged"):
        args.append("--privileged")
    args += kept_options(config.get("CreateCommand") or [], old.get("ImageName"))
    for mount in old.get("Mounts") or []:
        if mount.get("Type") not in ("volume", "bind"):
            continue  # tmpfs of systemd mode: a new container gets its own
        source = mount.get("Name") if mount["Type"] == "volume" else mount.get("Source")
        if not source or not mount.get("Destination"):
            raise BackendError("%s: mount %r names no source or destination" % (old["Name"], mount))
        args += ["--volume", "%s:%s%s" % (source, mount["Destination"], "" if mount.get("RW", True) else ":ro")]
    return args


def kept_options(command, image=None):
    """The KEPT_OPTIONS of a recorded command line up to its image, each as ``--option=value``, in their order."""
    kept, words = [], list(command)
    for i, word in enumerate(words):
        if image and word == image:
            break  # what follows is the container's command
        name, eq, value = word.partition("=")
        if name not in KEPT_OPTIONS:
            continue
        if not eq:
            value = "true" if name in FLAGS else (words[i + 1] if i + 1 < len(words) else "")
        kept.append("%s=%s" % ("--label" if name == "-l" else name, value))
    return kept


class FileBackend:
    """Power states in one JSON file, ``{"<container>": "On" | "Off"}``; unknown containers are Off.

    ``graceful_delay`` makes graceful shutdowns take that long, so tests see PoweringOff.
    """

    def __init__(self, path, graceful_delay=0.0, sleep=time.sleep):
        self.path = path
        self.graceful_delay = graceful_delay
        self._sleep = sleep
        self._lock = threading.Lock()

    def _read(self):
        try:
            with open(self.path, encoding="utf-8") as handle:
                data = json.load(handle)
        except FileNotFoundError:
            return {}
        except ValueError as exc:
            raise BackendError("power state file %s is not JSON: %s" % (self.path, exc)) from None
        return data if isinstance(data, dict) else {}

    def _write(self, container, state):
        with self._lock:
            data = self._read()
            data[container] = state
            directory = os.path.dirname(os.path.abspath(self.path))
            os.makedirs(directory, exist_ok=True)
            tmp = "%s.%d.tmp" % (self.path, os.getpid())
            with open(tmp, "w", encoding="utf-8") as handle:
                json.dump(data, handle, indent=1, sort_keys=True)
            os.replace(tmp, self.path)

    def is_on(self, container):
        with self._lock:
            return self._read().get(container) == "On"

    def power_on(self, container, image=None):  # image: the file backend has no images; the BMC notes the boot
        self._write(container, "On")

    def force_off(self, container):
        self._write(container, "Off")

    def graceful_shutdown(self, container):
        if self.graceful_delay:
            self._sleep(self.graceful_delay)
        self._write(container, "Off")


def make_backend(conf):
    if conf["type"] == "file":
        return FileBackend(conf["state_file"], graceful_delay=conf["graceful_delay"])
    return PodmanBackend(conf["podman"], graceful_timeout=conf["graceful_timeout"],
                         command_timeout=conf["command_timeout"], post_power_on=conf.get("post_power_on") or (),
                         carry_paths=conf.get("carry_paths") or ())
