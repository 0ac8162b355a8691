# SPDX-License-Identifier: GPL-3.0-or-later
"""BMC stand-in benchmark: Redfish GETs/s with a session token vs basic auth (with and without the credential cache).

Run: ``.venv/bin/python tests/bench/bench_bmc.py [--requests 300 --bmcs 16]``. Starts N BMCs in one process on
127.0.0.1 (file backend, passwords hashed with the production PBKDF2 iteration count), then times sequential GETs of
/redfish/v1/Systems/1 on one BMC over a kept-alive connection, and one power-on across all BMCs through the
client layer (login, reset, wait, logout per BMC), printing figures and ratios measured side by side.
"""
from __future__ import annotations

import argparse
import base64
import http.client
import json
import os
import sys
import tempfile
import time

import _bench_paths  # noqa: E402  (the checkout's collection and stand-ins)

from msa_sim.bmc import auth, config  # noqa: E402
from msa_sim.bmc.api import BmcService  # noqa: E402


def gets(url, headers, count):
    host, port = url.split("//")[1].split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    start = time.perf_counter()
    for _ in range(count):
        conn.request("GET", "/redfish/v1/Systems/1", headers=headers)
        resp = conn.getresponse()
        resp.read()
        assert resp.status == 200, resp.status
    elapsed = time.perf_counter() - start
    conn.close()
    return count / elapsed


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--bmcs", type=int, default=16)
    args = parser.parse_args()
    tmp = tempfile.mkdtemp(prefix="bench_bmc_")
    password = "bench-pw"
    digest = auth.hash_password(password)  # DEFAULT_ITERATIONS, as in production
    conf = config.validate({"database": os.path.join(tmp, "bmc.sqlite"),
                            "backend": {"type": "file", "state_file": os.path.join(tmp, "power.json")},
                            "defaults": {"port": 0, "users": [{"username": "ops", "password_hash": digest,
                                                               "role": "Operator"}]},
                            "bmcs": [{"name": "n%02d" % i} for i in range(args.bmcs)]})
    service = BmcService(conf).start()
    try:
        url = service.url("n00")
        basic = {"Authorization": "Basic " + base64.b64encode(b"ops:" + password.encode()).decode()}
        conn = http.client.HTTPConnection(*url.split("//")[1].split(":"))
        conn.request("POST", "/redfish/v1/SessionService/Sessions",
                     body=json.dumps({"UserName": "ops", "Password": password}),
                     headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        resp.read()
        token = {"X-Auth-Token": resp.getheader("X-Auth-Token")}
        t0 = time.perf_counter()
        auth.verify_password(password, digest)
        pbkdf2_ms = (time.perf_counter() - t0) * 1000
        session_rate = gets(url, token, args.requests)
        basic_rate = gets(url, basic, args.requests)
        conn.request("DELETE", resp.getheader("Location"), headers=token)
        conn.getresponse().read()
        conn.close()
        bmc = service.bmcs["n00"]
        bmc.creds.check = lambda user, pw, encoded: auth.verify_password(pw, encoded)  # no cache
        uncached_rate = gets(url, basic, max(20, args.requests // 10))
        print("one PBKDF2 verification (%d iterations): %.1f ms" % (auth.DEFAULT_ITERATIONS, pbkdf2_ms))
        print("GET Systems/1 with X-Auth-Token      : %7.1f req/s" % session_rate)
        print("GET Systems/1 with basic auth, cached: %7.1f req/s  (%.2fx the session rate)"
              % (basic_rate, basic_rate / session_rate))
        print("GET Systems/1 with basic auth, no cache: %5.1f req/s  (cache speeds basic auth up %.1fx)"
              % (uncached_rate, basic_rate / uncached_rate))
        try:
            from ansible_collections.msa.hpc.plugins.module_utils import _redfish
        except ImportError as exc:
            _bench_paths.skip("bench_bmc:power-on", "the collection's client layer is not importable (%s)" % exc)
            return 0
        start = time.perf_counter()
        for name in service.bmcs:
            result = _redfish.run({"endpoint": service.url(name), "username": "ops", "password": password,
                                   "state": "on", "wait": True, "wait_timeout": 30}, poll=0.05)
            assert result["power_state"] == "On"
        elapsed = time.perf_counter() - start
        print("power on %d nodes one after another (session, reset, wait, logout): %.2f s, %.0f ms per node"
              % (args.bmcs, elapsed, elapsed / args.bmcs * 1000))
        print("sessions left open: %d" % sum(len(service.store.sessions(n)) for n in service.bmcs))
    finally:
        service.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
