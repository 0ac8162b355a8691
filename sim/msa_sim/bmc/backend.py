# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

"""Power backends behind the BMCs: podman containers (the simulated nodes) or a JSON state file (tests)."""

import json
import os
import subprocess
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
                 post_power_on=()):
        self.podman = podman
        self.graceful_timeout = graceful_timeout
        self.command_timeout = command_timeout
        self._run = run
        # the harness re-applies what a new container lacks (EXTOLL veth links) after every start; one at a time
        self.post_power_on = list(post_power_on)
        self._hook_lock = threading.Lock()

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

    def power_on(self, container):
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

    def force_off(self, container):
        self._podman("stop", "-t", "0", container)

    def graceful_shutdown(self, container):
        timeout = int(self.graceful_timeout)
        self._podman("stop", "-t", timeout, container, timeout=timeout + self.command_timeout)


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

    def power_on(self, container):
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
                         command_timeout=conf["command_timeout"], post_power_on=conf.get("post_power_on") or ())
