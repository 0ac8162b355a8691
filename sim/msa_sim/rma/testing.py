# SPDX-License-Identifier: GPL-3.0-or-later
"""A NAM/GCE manager with one NAM board and one GCE board, each a real process over TLS on 127.0.0.1, for the
tests and the benchmarks (tests/sim/test_nam_gce_datapath.py, tests/bench/bench_nam_data.py)."""
from __future__ import annotations

import base64
import http.client
import json
import os
import signal
import subprocess
import sys
import time

from ansible_collections.msa.hpc.plugins.module_utils._rest import tls_context
from msa_sim.bmc.testing import make_tls
from msa_sim.nammgr.auth import hash_password
from msa_sim.rma.capability import load_key

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
MANAGER_CONF = """
[manager]
listen = 127.0.0.1
state_dir = {state}
users_file = {users}
granularity = 4K
admin_reserve_percent = 0
synchronous = normal
tls_cert = {cert}
tls_key = {key}
device_key_file = {device_key}
device_ca_path = {ca}
[nam:nam01]
node_id = 129
capacity = {capacity}
nonvolatile_capacity = {capacity}
data_url = https://127.0.0.1:{nam_port}
[gce:gce01]
node_id = 130
data_url = https://127.0.0.1:{gce_port}
"""


class Process:
    def __init__(self, name, argv, workdir):
        self.name, self.workdir = name, workdir
        ready = os.path.join(workdir, name + ".ready")
        self.log = os.path.join(workdir, name + ".log")
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.join(ROOT, "sim"), os.path.join(ROOT, "collections")]))
        with open(self.log, "ab") as log:
            command = [sys.executable, "-m"] + argv + ["--ready-file", ready, "--log-level", "WARNING"]
            self.proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=log)
        deadline = time.monotonic() + 30
        while not os.path.exists(ready):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                with open(self.log, encoding="utf-8") as fh:
                    raise RuntimeError("%s did not start: %s" % (name, fh.read()[-2000:]))
            time.sleep(0.02)
        with open(ready, encoding="utf-8") as fh:
            self.port = int(fh.read().strip().rsplit(":", 1)[1])

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class System:
    """``nam``, ``gce`` (board processes), ``manager``; ``admin(method, path, body)`` calls the manager as slurm."""

    def __init__(self, workdir, capacity="64M"):
        self.workdir = workdir
        self.ca, pair = make_tls(workdir)
        self.device_key = os.path.join(workdir, "device.key")
        load_key(self.device_key, create=True)
        tls = ["--tls-cert", pair["cert"], "--tls-key", pair["key"], "--key-file", self.device_key,
               "--listen", "127.0.0.1", "--port", "0"]
        self.nam_state = os.path.join(workdir, "nam-state")
        self.nam_volatile = os.path.join(workdir, "nam-volatile")
        self.procs = []
        try:
            self.nam = self._start("nam01", ["msa_sim.rma", "serve", "--kind", "nam", "--device", "nam01",
                                             "--state-dir", self.nam_state, "--volatile-dir", self.nam_volatile,
                                             "--capacity", capacity, "--nonvolatile-capacity", capacity] + tls)
            self.gce = self._start("gce01", ["msa_sim.rma", "serve", "--kind", "gce", "--device", "gce01",
                                             "--state-dir", os.path.join(workdir, "gce-state")] + tls)
            users = os.path.join(workdir, "users.conf")
            with open(users, "w", encoding="utf-8") as fh:
                fh.write("slurm:admin:%s\n" % hash_password("pw", iterations=1000))
            conf = os.path.join(workdir, "manager.conf")
            with open(conf, "w", encoding="utf-8") as fh:
                fh.write(MANAGER_CONF.format(state=os.path.join(workdir, "mgr-state"), users=users,
                                             cert=pair["cert"], key=pair["key"], device_key=self.device_key,
                                             ca=self.ca, capacity=capacity, nam_port=self.nam.port,
                                             gce_port=self.gce.port))
            os.makedirs(os.path.join(workdir, "mgr-state"), exist_ok=True)
            self.manager = self._start("manager", ["msa_sim.nammgr", "serve", "--config", conf, "--port", "0"])
        except BaseException:
            self.stop()
            raise
        self.url = "https://127.0.0.1:%d" % self.manager.port

    def _start(self, name, argv):
        proc = Process(name, argv, self.workdir)
        self.procs.append(proc)
        return proc

    def admin(self, method, path, body=None, expect=(200, 201)):
        conn = http.client.HTTPSConnection("127.0.0.1", self.manager.port, timeout=30,
                                           context=tls_context(ca_path=self.ca))
        try:
            conn.request(method, path, body=json.dumps(body) if body is not None else None,
                         headers={"Authorization": "Basic " + base64.b64encode(b"slurm:pw").decode(),
                                  "Content-Type": "application/json"})
            resp = conn.getresponse()
            payload = json.loads(resp.read() or b"{}")
        finally:
            conn.close()
        if resp.status not in expect:
            raise AssertionError("%s %s: %d %s" % (method, path, resp.status, payload))
        return payload

    def job(self, owner, job_id, aat_entries=16, communicators=4):
        """A job's token, as the NAM prolog gets it for the job (with what Slurm granted it)."""
        return self.admin("POST", "/auth/job-token", {"owner": owner, "job": str(job_id), "aat_entries": aat_entries,
                                                      "communicators": communicators})["token"]

    def allocate(self, owner, job_id, size, volatile=True, name=None):
        """What the NAM prolog allocates for a job (named ``slurm-<job>`` unless the job names it)."""
        body = {"size": size, "owner": owner, "job": str(job_id), "volatile": volatile,
                "name": name or "slurm-%s" % job_id}
        return self.admin("POST", "/nam/allocations", body)

    def end_job(self, job_id):
        """What the NAM epilog asks: free the job's volatile allocations, keep its non-volatile ones."""
        return self.admin("DELETE", "/nam/jobs/%s?keep=nonvolatile" % job_id)

    def stop(self):
        for proc in reversed(self.procs):
            proc.stop()
