# SPDX-License-Identifier: GPL-3.0-or-later
"""Submission with the MSA options of sbatch (SPANK plugin spank_msa.so + job_submit.lua) against plain sbatch,
on a live simulated system, side by side in one run.

Run: ``MSA_BENCH_SYSTEM=dev2 .venv/bin/python tests/bench/bench_submit_options.py [--count 100]`` after
``make sim-up site SYSTEM=dev2``. Without MSA_BENCH_SYSTEM (or ``--system``) it says so and does nothing, so
``make bench`` passes on a machine with no system up. An unprivileged user submits on the controller, in a login
shell, ``count`` held jobs with options (``--gw_num=1 --network-attached-memory=1G --global-collective-engine`` on
ESB, so every translation runs) interleaved with ``count`` held jobs without; each sbatch is timed on the node
(``date +%s.%N`` around it), so SSH costs nothing. The jobs are held (they never run) and cancelled at the end.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys

import _bench_paths  # noqa: E402  (the checkout's collection, stand-ins and tests)

from bench_containers import say, ssh, summary, timings  # noqa: E402
import bench_containers  # noqa: E402
from tests.helpers import ansible_inventory  # noqa: E402

USER, UID = "benchopt", 5107   # a uid of its own: verify_useropts creates 5105 on the same nodes
PLAIN = "sbatch --hold -J bench-opts -p esb -N 1 -t 1 --wrap true"
OPTIONS = ("sbatch --hold -J bench-opts -p esb -N 1 -t 1 --gw_num=1 --network-attached-memory=1G "
           "--global-collective-engine --wrap true")


def main():
    parser = argparse.ArgumentParser(description="sbatch with the MSA options against plain sbatch")
    parser.add_argument("--system", default=os.environ.get("MSA_BENCH_SYSTEM"))
    parser.add_argument("--count", type=int, default=100)
    args = parser.parse_args()
    if not args.system:
        _bench_paths.skip("bench_submit_options", "no system: set MSA_BENCH_SYSTEM=<system> or run make bench-system")
    inv = ansible_inventory("-i", "common.yml", "-i", "inventories/systems/%s" % args.system,
                            "-i", "inventories/sites/example", "--list")
    hostvars = inv["_meta"]["hostvars"]
    bench_containers.KNOWN_HOSTS = os.path.join(_bench_paths.BUNDLE, ".cache", args.system, "known_hosts")
    controller = hostvars[inv["msa_management"]["hosts"][0]]["ansible_host"]
    say("system %s: controller %s, %d submissions each way, interleaved" % (args.system, controller, args.count))
    ssh(controller, "id %s >/dev/null 2>&1 || useradd -m -u %d %s\n" % (USER, UID, USER))
    try:
        out = ssh(controller, "cd /\n" + "".join(
            "printf 'plain '; t su - %s -c '%s'\nprintf 'opts '; t su - %s -c '%s'\n"
            % (USER, PLAIN, USER, OPTIONS) for _ in range(args.count)), timeout=3600)
        plain, opts = timings(out, "plain"), timings(out, "opts")
        check = ssh(controller, "squeue -h -u %s -o '%%L|%%k' | sort | uniq -c\n" % USER)
    finally:
        ssh(controller, "scancel -u %s; true\n" % USER)
    say("sbatch without options: %s" % summary(plain))
    say("sbatch with options:    %s" % summary(opts))
    say("queued (count, time limit|comment): %s" % " / ".join(check.split("\n")).strip())
    print()
    print("figures (%s, load %s)" % (args.system, open("/proc/loadavg", encoding="ascii").read().split()[0]))
    print("  sbatch plain          %7.3f s (median of %d)" % (statistics.median(plain), len(plain)))
    print("  sbatch with options   %7.3f s (median of %d)" % (statistics.median(opts), len(opts)))
    print("  ratio options/plain   %7.2f  (goal <= 1.2)" % (statistics.median(opts) / statistics.median(plain)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
