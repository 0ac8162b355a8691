# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

"""kill -9 of the NAM manager in the middle of a burst of allocations loses nothing that was answered with 2xx."""

import base64
import http.client
import json
import signal
import threading
import time

import pytest

from msa_sim.nammgr import testing
from msa_sim.nammgr.store import Store

CONF = """
[manager]
state_dir = {state}
users_file = {users}
aat_size = 8
admin_reserve_percent = 10
[nam:nam01]
capacity = 256M
nonvolatile_capacity = 64M
[nam:nam02]
capacity = 128M
"""


class Service:
    def __init__(self, tmp_path):
        self.tmp = tmp_path
        self.conf = testing.write_config(tmp_path, CONF, {"slurm": ("admin", "pw")})
        self.proc = None
        self.port = None

    def start(self):
        try:
            self.proc, self.port = testing.spawn(self.conf, self.tmp / "ready", open(self.tmp / "manager.log", "ab"))
        except RuntimeError as exc:
            pytest.fail("%s: %s" % (exc, (self.tmp / "manager.log").read_text()[-2000:]))

    def stop(self, sig=signal.SIGTERM):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(timeout=10)

    def request(self, method, path, body=None, conn=None):
        own = conn is None
        conn = conn or http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        auth = "Basic " + base64.b64encode(b"slurm:pw").decode()
        conn.request(method, path, body=json.dumps(body) if body is not None else None,
                     headers={"Authorization": auth, "Content-Type": "application/json"})
        resp = conn.getresponse()
        payload = json.loads(resp.read())
        if own:
            conn.close()
        return resp.status, payload


@pytest.fixture
def service(tmp_path):
    svc = Service(tmp_path)
    yield svc
    svc.stop(signal.SIGKILL)


def burst(svc, acked, freed, attempted, stop):
    """Allocate (and now and then free) as fast as one client can, recording every 2xx answer.

    A free whose answer never came (the kill hit it) may or may not have happened: ``attempted`` keeps it.
    """
    conn = http.client.HTTPConnection("127.0.0.1", svc.port, timeout=10)
    i = 0
    try:
        while not stop.is_set():
            i += 1
            if i % 5 == 0 and acked:
                victim = sorted(set(acked) - attempted)[0]
                attempted.add(victim)
                status, _ = svc.request("DELETE", "/nam/allocations/%d" % victim, conn=conn)
                if status == 200:
                    freed.add(victim)
                continue
            body = {"size": (i % 7 + 1) * 4096 * 3, "volatile": i % 3 != 0, "job": str(i % 11),
                    "reserved": i % 13 == 0}
            status, payload = svc.request("POST", "/nam/allocations", body, conn=conn)
            if status == 201:
                acked[payload["id"]] = payload
            elif status == 409:
                stop.set()
    except (OSError, http.client.HTTPException, ValueError):
        pass   # the manager was killed under us
    finally:
        conn.close()


def test_kill_9_mid_burst_loses_no_acknowledged_allocation(service):
    acked, freed, attempted = {}, set(), set()
    for round_no in range(3):
        service.start()
        stop = threading.Event()
        seen = len(acked)
        worker = threading.Thread(target=burst, args=(service, acked, freed, attempted, stop))
        worker.start()
        deadline = time.monotonic() + 20
        while len(acked) < seen + 100 and worker.is_alive() and time.monotonic() < deadline:
            time.sleep(0.005)
        service.stop(signal.SIGKILL)          # no clean shutdown: the process dies between two requests or in one
        worker.join(timeout=15)
        assert len(acked) >= seen + 100, "round %d: the burst did not get going" % round_no

        service.start()
        status, body = service.request("GET", "/nam/allocations")
        live = {a["id"]: a for a in body["allocations"]}
        for alloc_id, answered in acked.items():
            if alloc_id in freed:
                assert alloc_id not in live, "allocation %d was freed with 200 but came back" % alloc_id
                continue
            if alloc_id in attempted and alloc_id not in live:
                continue                       # its free was committed, the answer was lost with the process
            assert alloc_id in live, "allocation %d was acknowledged but is lost" % alloc_id
            got = live[alloc_id]
            assert (got["device"], got["offset"], got["size"], got["volatile"]) == \
                (answered["device"], answered["offset"], answered["size"], answered["volatile"])
        assert service.request("GET", "/nam/admin/check")[1] == {"ok": True, "problems": []}
        service.stop()

    store = Store(str(service.tmp / "state" / "nam-manager.db"), synchronous="normal")
    try:
        assert store.check() == []
        assert store.merge_adjacent() == 0          # no segment was left unmerged by a half-done free
    finally:
        store.close()
