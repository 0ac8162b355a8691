"""A NAM/GCE manager for tests and benchmarks on 127.0.0.1: its configuration and users written into a folder, then
served in this process (a thread) or as a process of its own (for kill -9 and load)."""
from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import threading
import time

from msa_sim.nammgr import config
from msa_sim.nammgr.__main__ import open_store
from msa_sim.nammgr.api import Manager, Server
from msa_sim.nammgr.auth import Authenticator, hash_password

SOURCES = pathlib.Path(__file__).resolve().parents[3]   # the bundle: sim/ and collections/ below it


def write_config(directory, conf, users, **values):
    """Write ``users`` ({name: (role, password)}) and ``conf`` (manager.conf text with ``{state}``, ``{users}`` and
    any of ``values``) into ``directory``; return the path of manager.conf."""
    directory = pathlib.Path(directory)
    users_file = directory / "users.conf"
    users_file.write_text("".join("%s:%s:%s\n" % (name, role, hash_password(password, iterations=1000))
                                  for name, (role, password) in users.items()))
    path = directory / "manager.conf"
    path.write_text(conf.format(state=directory / "state", users=users_file, **values))
    return path


class InProcess:
    """The manager's API served by a thread of this process on a free port, over plain HTTP."""

    def __init__(self, conf_path):
        cfg = config.load(str(conf_path))
        self.store = open_store(cfg)
        auth = Authenticator(cfg.users_file, os.path.join(cfg.state_dir, "token.key"), cfg.token_ttl)
        self.manager = Manager(self.store, auth, job_token_ttl=cfg.job_token_ttl)
        self.server = Server(("127.0.0.1", 0), self.manager)
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        self.url = "http://127.0.0.1:%d" % self.server.server_address[1]

    def stop(self):
        self.server.shutdown()
        self.server.server_close()
        self.store.close()


def spawn(conf_path, ready, stderr=None, extra_args=(), timeout=20):
    """``python -m msa_sim.nammgr serve`` on a free port, over plain HTTP: ``(process, port)`` once it is ready.
    RuntimeError (with the process ended) when it exits or is not ready within ``timeout`` seconds."""
    ready = pathlib.Path(ready)
    if ready.exists():
        ready.unlink()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(SOURCES / "sim"), str(SOURCES / "collections")]))
    proc = subprocess.Popen([sys.executable, "-m", "msa_sim.nammgr", "serve", "--insecure-no-tls", "--config",
                             str(conf_path), "--port", "0", "--ready-file", str(ready)] + list(extra_args),
                            env=env, stdout=subprocess.DEVNULL, stderr=stderr)
    deadline = time.monotonic() + timeout
    while not ready.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            raise RuntimeError("the NAM manager did not start (exit %s)" % proc.returncode)
        time.sleep(0.02)
    return proc, int(ready.read_text().strip().rsplit(":", 1)[1])
