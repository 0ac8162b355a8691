# SPDX-License-Identifier: GPL-3.0-or-later
"""MPI latency and bandwidth inside a module and across modules through the gateways, measured side by side in one run.

Run: ``MSA_BENCH_SYSTEM=dev2 .venv/bin/python tests/bench/bench_mpi.py`` after ``make sim-up site SYSTEM=dev2``.
Without MSA_BENCH_SYSTEM (or ``--system``) it says so and does nothing, so ``make bench`` passes on a machine with no
system up. An unprivileged user submits on the controller, with ``sbatch --wait``, five jobs one after the other;
each runs tests/bench/_mpi_pingpong.py under ``srun --mpi=pmix`` (Open MPI, mpi4py): a pingpong of --small bytes
(latency: half the median round trip) and of --big bytes (bandwidth: bytes moved both ways over the time) between

  cm      the first two CM nodes (InfiniBand)
  esb     the first two ESB nodes (EXTOLL torus)
  gw1     a heterogeneous job, one CM and one ESB node, --gw_num=1: through one gateway
  gw1x2   two CM and two ESB nodes, --gw_num=1: two pairs at once, both through the one gateway
  gw2     two CM and two ESB nodes, --gw_num=2: two pairs at once, paired so that each goes through its own gateway
          when the nodes' routes (from the job's routing file) allow; otherwise it says which gateway each used

and prints each figure, the ratios cross-module / intra-module, and the two-gateway aggregate against one gateway.
The defaults (300 round trips of 8 B, 5 of 4 MiB, after a warm-up) keep a run near five minutes on this shared
machine (with 2000 and 20, the one-gateway job alone ran over two minutes at a load of 60).
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import sys

import _bench_paths  # (the checkout's collection, stand-ins and tests)

import bench_containers  # noqa: E402
from bench_containers import say, ssh  # noqa: E402

USER, UID = "benchmpi", 5141
HOME = "/home/%s" % USER
PROGRAM = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_mpi_pingpong.py")


def job_script(name, comps, step, gw_num=0):
    """A batch script: comps = [(partition, [nodes], tasks)], one hetjob component each."""
    lines = ["#!/bin/bash"]
    for i, (part, nodes, tasks) in enumerate(comps):
        if i:
            lines.append("#SBATCH hetjob")
        opts = "-p %s -w %s -N %d -n %d -t 5" % (part, ",".join(nodes), len(nodes), tasks)
        if i == 0:
            opts = "-J bench-mpi-%s -o %s/bench-mpi-%%j.out %s%s" % (name, HOME, opts,
                                                                     " --gw_num=%d" % gw_num if gw_num else "")
        lines.append("#SBATCH " + opts)
    het = " --het-group=%s" % ",".join(str(i) for i in range(len(comps))) if len(comps) > 1 else ""
    lines.append("srun --mpi=pmix%s python3 %s/_mpi_pingpong.py %s" % (het, HOME, step))
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--system", default=os.environ.get("MSA_BENCH_SYSTEM"))
    ap.add_argument("--small", type=int, default=8)
    ap.add_argument("--iters", type=int, default=300)
    ap.add_argument("--big", type=int, default=4 << 20)
    ap.add_argument("--big-iters", type=int, default=5)
    args = ap.parse_args()
    if not args.system:
        _bench_paths.skip("bench_mpi", "no system: set MSA_BENCH_SYSTEM=<system> or run make bench-system")
    inv = bench_containers.system_inventory(args.system)
    hostvars = inv["_meta"]["hostvars"]
    controller = inv["msa_management"]["hosts"][0]
    cm, esb = sorted(inv["cm"]["hosts"])[:2], sorted(inv["esb"]["hosts"])[:2]
    fabrics = hostvars[controller]["msa_fabrics"]
    extoll_net = next(f["cidr"] for f in fabrics.values() if f.get("kind") == "extoll")
    gateways = {hostvars[g]["msa_addresses"][name]: g for g in inv["msa_mpi_gateway"]["hosts"]
                for name, f in fabrics.items() if f.get("kind") == "infiniband" and name in hostvars[g]["msa_addresses"]}

    def addr(host):
        return hostvars[host]["ansible_host"]

    with open(PROGRAM, encoding="utf-8") as fh:
        program = fh.read()
    say("system %s: %s submits on %s; pairs %s, %s and across them" % (args.system, USER, controller, cm, esb))
    for host in [controller] + cm + esb:
        ssh(addr(host), "id %s >/dev/null 2>&1 || useradd -m -u %d -s /bin/bash %s\n"
                        "cat > %s/_mpi_pingpong.py <<'PROGRAM_EOF'\n%sPROGRAM_EOF\n"
                        "chown %s %s/_mpi_pingpong.py\n" % (USER, UID, USER, HOME, program, USER, HOME))
    sizes = "--small %d --iters %d --big %d --big-iters %d" % (args.small, args.iters, args.big, args.big_iters)
    pick = "--fabric-net %s %s" % (extoll_net, sizes)
    jobs = [
        ("cm", [("cm", cm, 2)], "--pairs 0:1 " + sizes, 0),
        ("esb", [("esb", esb, 2)], "--pairs 0:1 " + sizes, 0),
        ("gw1", [("cm", cm[:1], 1), ("esb", esb[:1], 1)], "--pick 0:1 " + pick, 1),
        ("gw1x2", [("cm", cm, 2), ("esb", esb, 2)], "--pick 0,1:2,3 " + pick, 1),
        ("gw2", [("cm", cm, 2), ("esb", esb, 2)], "--pick 0,1:2,3 " + pick, 2),
    ]
    results = {}
    for name, comps, step, gw_num in jobs:
        script = job_script(name, comps, step, gw_num)
        out = ssh(addr(controller), "cd %s\ncat > bench-mpi-%s.sh <<'SCRIPT_EOF'\n%s"
                  "SCRIPT_EOF\nchown %s bench-mpi-%s.sh\nsu - %s -c 'sbatch --parsable --wait bench-mpi-%s.sh' || true\n"
                  % (HOME, name, script, USER, name, USER, name), timeout=300)
        job = out.strip().splitlines()[-1].split("+")[0] if out.strip() else "?"
        batch = comps[0][1][0]
        text = ssh(addr(batch), "cat %s/bench-mpi-%s.out 2>/dev/null || true\n" % (HOME, shlex.quote(job)))
        lines = [line for line in text.splitlines() if line.startswith("RESULT ")]
        if not lines:
            raise RuntimeError("job %s (%s) printed no result:\n%s" % (job, name, text[-2000:]))
        results[name] = json.loads(lines[0][len("RESULT "):])
        results[name]["job"] = job
        for p in results[name]["pairs"]:
            say("%s: job %s %s <-> %s latency %.1f us, bandwidth %.1f MiB/s" % (
                name, job, p["hosts"][0], p["hosts"][1], p["latency_us"], p["bandwidth_mib_s"]))

    def pairs(name):
        return results[name]["pairs"]

    def fig(name, key):
        return pairs(name)[0][key]

    def aggregate(name):
        return sum(p["bandwidth_mib_s"] for p in pairs(name))

    print("MPI pingpong (Open MPI + mpi4py, srun --mpi=pmix), %d B latency (median of %d round trips / 2) and "
          "%d MiB bandwidth (%d round trips)" % (args.small, args.iters, args.big >> 20, args.big_iters))
    for name in ("cm", "esb", "gw1", "gw1x2", "gw2"):
        for p in pairs(name):
            via = p.get("via")
            print("  %-6s job %-5s %-6s <-> %-6s latency %8.1f us  bandwidth %8.1f MiB/s  %s%s" % (
                name, results[name]["job"], p["hosts"][0], p["hosts"][1], p["latency_us"], p["bandwidth_mib_s"],
                "intact" if p["intact"] else "CORRUPTED",
                "  via %s" % gateways.get(via, via) if via else ""))
    print("ratio latency   gw1/cm %.2f, gw1/esb %.2f" % (fig("gw1", "latency_us") / fig("cm", "latency_us"),
                                                        fig("gw1", "latency_us") / fig("esb", "latency_us")))
    print("ratio bandwidth gw1/cm %.2f, gw1/esb %.2f" % (
        fig("gw1", "bandwidth_mib_s") / fig("cm", "bandwidth_mib_s"),
        fig("gw1", "bandwidth_mib_s") / fig("esb", "bandwidth_mib_s")))
    spread = results["gw2"].get("spread")
    print("two pairs at once: one gateway %.1f MiB/s, two gateways %.1f MiB/s (ratio %.2f); gw2's pairs %s" % (
        aggregate("gw1x2"), aggregate("gw2"), aggregate("gw2") / aggregate("gw1x2"),
        "each through its own gateway" if spread else "could not be spread over both gateways (routes: %s)"
        % ", ".join(str(gateways.get(p.get("via"), p.get("via"))) for p in pairs("gw2"))))
    print("all nodes are containers on one host (%d CPUs, load %.1f): fabric links are veth pairs, a gateway forwards "
          "in its kernel (nftables)" % (os.cpu_count(), os.getloadavg()[0]))
    return 0 if all(p["intact"] for r in results.values() for p in r["pairs"]) else 1


if __name__ == "__main__":
    sys.exit(main())
