# SPDX-License-Identifier: GPL-3.0-or-later
"""Routing benchmark: tables plus deadlock-freedom proof for 3-D tori, per engine, and OpenSM as a peer.

Every (size, engine) runs in a fresh child process so its peak RSS is its own. Sizes: MSA_BENCH_ROUTING_SIZES
(default 8,12,16,32). At 12^3 OpenSM routes the same torus (K^3 switches with one HCA each) under ibsim, and the
bench prints the ratio of our tables-plus-proof time to OpenSM's routing time (from "building routing with" to
"tables configured" in its log). Without the Debian packages opensm, ibsim-utils and libumad2sim0
(scripts/setup.sh installs them) that comparison says so and is skipped by name.
"""
from __future__ import annotations

import datetime
import itertools
import json
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import _bench_paths  # noqa: E402  (the checkout's collection)
from ansible_collections.msa.hpc.plugins.module_utils.extoll import plan as P
from ansible_collections.msa.hpc.plugins.module_utils.extoll import routing as R
from ansible_collections.msa.hpc.plugins.module_utils.extoll import topology as T

ENGINES = ("DimensionOrder", "ShortestPath", "UpDown")
# OpenSM's engine for each of ours (dor is OpenSM's dimension order; torus-2QoS adds its datelines)
OPENSM_PEERS = {"DimensionOrder": ("dor", "torus-2QoS"), "ShortestPath": ("minhop",), "UpDown": ("updn",)}
UMAD2SIM = "/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so"
CHILD_TIMEOUT = int(os.environ.get("MSA_BENCH_ROUTING_TIMEOUT", "1800"))


def one(k, engine):
    """Child: tables and proof of one engine on a k^3 torus; JSON figures on stdout."""
    fab = R.Fabric.from_topology(T.generate("torus", [k, k, k]))
    timing = {}

    def compute_fn(f, name):
        start = time.perf_counter()
        port = R.compute(f, name)
        timing["tables"] = time.perf_counter() - start
        return port

    start = time.perf_counter()
    try:
        port, cert = P.plan(fab, engine, compute_fn=compute_fn)
        outcome = {"acyclic": cert["acyclic"], "scheme": cert["scheme"], "vcs": cert["virtual_channels"],
                   "max_hops": cert["max_hops"], "algorithm": cert["algorithm"]}
    except R.RoutingError as exc:
        outcome = {"refused": str(exc)[:200]}
    total = time.perf_counter() - start
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    print(json.dumps(dict(outcome, nodes=fab.n, tables=timing.get("tables", 0.0), total=total, rss_gib=rss)))


def run_child(k, engine):
    try:
        out = subprocess.run([sys.executable, os.path.abspath(__file__), "--one", str(k), engine],
                             capture_output=True, text=True, timeout=CHILD_TIMEOUT, check=True)
    except subprocess.TimeoutExpired:
        return {"error": "did not finish within %d s (MSA_BENCH_ROUTING_TIMEOUT)" % CHILD_TIMEOUT}
    except subprocess.CalledProcessError as exc:
        return {"error": (exc.stderr or "").strip().splitlines()[-1:] or ["exit %d" % exc.returncode]}
    return json.loads(out.stdout.strip().splitlines()[-1])


# -- OpenSM under ibsim ------------------------------------------------------------------------------------
def switch_guid(c, k):
    return 0x10000 + (c[0] * k + c[1]) * k + c[2] + 1


def ibsim_net(k):
    """ibsim net file of a k^3 torus (switchguid=/caguid= set the GUIDs): one 7-port switch per node (port 1: its HCA; ports 2d+2 / 2d+3: minus /
    plus neighbour in dimension d), HCAs first so OpenSM binds to the first HCA."""
    coords = list(itertools.product(range(k), repeat=3))
    lines = []
    for c in coords:
        lines += ["caguid=0x%x" % (0x200000 + switch_guid(c, k)), 'Hca 1 "H-%016x"' % (0x200000 + switch_guid(c, k)),
                  '[1] "S-%016x"[1]' % switch_guid(c, k), ""]
    for c in coords:
        lines += ["switchguid=0x%x" % switch_guid(c, k), 'Switch 7 "S-%016x"' % switch_guid(c, k),
                  '[1] "H-%016x"[1]' % (0x200000 + switch_guid(c, k))]
        for d in range(3):
            for step, port, peer_port in ((-1, 2 + 2 * d, 3 + 2 * d), (1, 3 + 2 * d, 2 + 2 * d)):
                n = list(c)
                n[d] = (n[d] + step) % k
                lines.append('[%d] "S-%016x"[%d]' % (port, switch_guid(tuple(n), k), peer_port))
        lines.append("")
    return "\n".join(lines) + "\n"


def torus_2qos_conf(k):
    """torus-2QoS.conf: the torus size and the seed switch's links in every direction (radix 4 needs both)."""
    seed = switch_guid((0, 0, 0), k)
    lines = ["torus %d %d %d" % (k, k, k)]
    for d, axis in enumerate("xyz"):
        for sign, step in (("p", 1), ("m", -1)):
            other = [0, 0, 0]
            other[d] = step % k
            lines.append("%s%s_link 0x%x 0x%x" % (axis, sign, seed, switch_guid(tuple(other), k)))
    return "\n".join(lines) + "\n"


def _stamp(line):
    m = re.match(r"^\w{3} +\d+ (\d+):(\d+):(\d+) (\d+) ", line)
    return None if not m else int(m.group(1)) * 3600 + int(m.group(2)) * 60 + int(m.group(3)) + int(m.group(4)) / 1e6


def opensm_missing():
    missing = [b for b in ("opensm", "ibsim") if shutil.which(b) is None]
    if not os.path.exists(UMAD2SIM):
        missing.append(UMAD2SIM)
    return missing


def opensm_time(k, engine, workdir):
    """Seconds OpenSM takes to route with ``engine`` (log: "building routing with '<engine>'" → "<engine> tables
    configured"); raises RuntimeError when it did not route with that engine."""
    log = os.path.join(workdir, "opensm-%s.log" % engine)
    cmd = ["opensm", "-o", "-e", "-f", log, "-D", "0x07", "-R", engine]
    if engine == "updn":
        cmd += ["-a", os.path.join(workdir, "roots")]
    if engine == "torus-2QoS":
        cmd += ["-Q", "--torus_config", os.path.join(workdir, "torus-2QoS.conf")]
    env = dict(os.environ, LD_PRELOAD=UMAD2SIM)
    subprocess.run(cmd, env=env, cwd=workdir, capture_output=True, timeout=600, check=False)
    with open(log, encoding="utf-8", errors="replace") as handle:
        lines = handle.read().splitlines()
    begin = end = None
    used = None
    for line in lines:
        m = re.search(r"building routing with '([^']+)'", line)
        if m:
            used, begin = m.group(1), _stamp(line)
        if used and re.search(r"%s tables configured" % re.escape(used), line):
            end = _stamp(line)
    if used != engine or begin is None or end is None:
        raise RuntimeError("OpenSM did not route with %s (it used %s; see %s)" % (engine, used, log))
    return (end - begin) % 86400


def opensm_side_by_side(k, ours):
    missing = opensm_missing()
    if missing:
        _bench_paths.skip("bench_routing:opensm", "OpenSM at %d^3: %s not installed (scripts/setup.sh installs opensm, "
                          "ibsim-utils, libumad2sim0)" % (k, ", ".join(missing)))
        return
    workdir = tempfile.mkdtemp(prefix="bench-opensm-")
    with open(os.path.join(workdir, "net"), "w", encoding="utf-8") as handle:
        handle.write(ibsim_net(k))
    with open(os.path.join(workdir, "roots"), "w", encoding="utf-8") as handle:
        handle.write("0x%016x\n" % switch_guid((0, 0, 0), k))
    with open(os.path.join(workdir, "torus-2QoS.conf"), "w", encoding="utf-8") as handle:
        handle.write(torus_2qos_conf(k))
    nodes = k ** 3
    sim = subprocess.Popen(["ibsim", "-s", "-n", "-N", str(2 * nodes + 64), "-S", str(nodes + 16),
                            "-P", str(16 * nodes + 256), "net"], cwd=workdir, stdin=subprocess.DEVNULL,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        time.sleep(2 + nodes / 1000)
        if sim.poll() is not None:
            print("OpenSM at %d^3: SKIPPED - ibsim exited with %s on the %d-switch net file" % (k, sim.returncode, nodes))
            return
        print("OpenSM 3.3 under ibsim, same %d^3 torus (%d switches, one HCA each); ratio = ours / OpenSM" % (k, nodes))
        for engine, peers in OPENSM_PEERS.items():
            mine = ours.get(engine) or {}
            for peer in peers:
                try:
                    theirs = opensm_time(k, peer, workdir)
                except (RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
                    print("  %-15s vs %-11s SKIPPED - %s" % (engine, peer, exc))
                    continue
                if "total" in mine:
                    print("  %-15s %8.3f s (tables+proof) vs opensm -R %-11s %8.3f s (tables)  ratio %6.2f"
                          % (engine, mine["total"], peer, theirs, mine["total"] / max(theirs, 1e-6)))
    finally:
        os.killpg(sim.pid, signal.SIGTERM)
        sim.wait()


def main():
    sizes = [int(s) for s in os.environ.get("MSA_BENCH_ROUTING_SIZES", "8,12,16,32").split(",") if s]
    print("3-D torus: routing tables plus deadlock-freedom proof per engine (EXTOLL model: 4 VCs per link)")
    print("each row a fresh process on this machine (%s, load %.1f); peak RSS is that process's"
          % (datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), os.getloadavg()[0]))
    print("%-6s %6s %-15s %9s %9s %9s %-9s %4s %5s" % ("torus", "nodes", "engine", "tables s", "total s",
                                                       "RSS GiB", "scheme", "VCs", "hops"))
    for k in sizes:
        results = {}
        for engine in ENGINES:
            res = results[engine] = run_child(k, engine)
            if "error" in res or "refused" in res:
                print("%-6s %6d %-15s %s" % ("%d^3" % k, k ** 3, engine, res.get("error") or res["refused"]))
                continue
            print("%-6s %6d %-15s %9.2f %9.2f %9.2f %-9s %4d %5d" % (
                "%d^3" % k, res["nodes"], engine, res["tables"], res["total"], res["rss_gib"],
                res["scheme"] if res["algorithm"] == engine else "->" + res["algorithm"], res["vcs"],
                res["max_hops"]))
            sys.stdout.flush()
        if k == 12:
            opensm_side_by_side(k, results)
        sys.stdout.flush()


if __name__ == "__main__":
    if sys.argv[1:2] == ["--one"]:
        one(int(sys.argv[2]), sys.argv[3])
    else:
        main()
