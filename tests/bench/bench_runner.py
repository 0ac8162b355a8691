# SPDX-License-Identifier: GPL-3.0-or-later
"""site.yml on a converged system through ansible-runner in the execution environment container (as AWX runs it,
scripts/runner.sh) against the same no-change site.yml by plain ansible-playbook, side by side in one run.

Run: ``MSA_BENCH_SYSTEM=dev4 .venv/bin/python tests/bench/bench_runner.py [--repeat 1]`` after ``make ee`` and
``make sim-up site SYSTEM=dev4``. Without MSA_BENCH_SYSTEM (or ``--system``) it says so and does nothing, so
``make bench`` passes on a machine with no system up. Each run's wall time and its recap's changed count are printed;
the two kinds alternate so that the machine's load falls on both. Goal: runner in the EE <= 1.3x plain.
"""
from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import time

import _bench_paths  # noqa: E402  (the checkout's collection, stand-ins and tests)

BUNDLE = _bench_paths.BUNDLE
BIN = os.path.dirname(sys.executable)


def recap_changed(text):
    """Sum of changed= and failed=/unreachable= over the PLAY RECAP lines of a run's output."""
    tail = re.sub(r"\x1b\[[0-9;]*m", "", text[text.rfind("PLAY RECAP"):])  # colour codes would hide a count
    changed = sum(int(n) for n in re.findall(r"\bchanged=(\d+)", tail))
    bad = sum(int(n) for n in re.findall(r"\b(?:failed|unreachable)=(\d+)", tail))
    return changed, bad


def run(kind, system, log, tags):
    env = dict(os.environ, MSA_RUNNER_TAGS=tags or "", ANSIBLE_CONFIG=os.path.join(BUNDLE, "ansible.cfg"),
               ANSIBLE_NOCOLOR="1", PATH=BIN + os.pathsep + os.environ.get("PATH", ""))
    if kind == "plain":
        cmd = [os.path.join(BIN, "ansible-playbook"), "-i", "common.yml", "-i", "inventories/systems/" + system,
               "-i", "inventories/sites/example", "playbooks/site.yml"]
        cmd += ["--tags", tags] if tags else []
    else:
        cmd = ["bash", "scripts/runner.sh", system, "playbooks/site.yml"]
    start = time.monotonic()
    proc = subprocess.run(cmd, cwd=BUNDLE, env=env, capture_output=True, text=True)
    wall = time.monotonic() - start
    with open(log, "a") as handle:
        handle.write("==== %s rc=%d %.1f s\n%s\n%s\n" % (kind, proc.returncode, wall, proc.stdout, proc.stderr))
    changed, bad = recap_changed(proc.stdout)
    if proc.returncode or bad:
        raise SystemExit("%s run failed (rc=%d): see %s" % (kind, proc.returncode, log))
    return wall, changed


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--system", default=os.environ.get("MSA_BENCH_SYSTEM"))
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--tags", default="", help="only the plays of these tags (both kinds of run)")
    parser.add_argument("--log", default=os.path.join(BUNDLE, ".cache", "bench_runner.log"))
    args = parser.parse_args()
    if not args.system:
        _bench_paths.skip("bench_runner", "no system: set MSA_BENCH_SYSTEM=<system> (after make ee) or run make bench-system")
    os.makedirs(os.path.dirname(args.log), exist_ok=True)
    times = {"plain": [], "runner": []}
    print("== no-change site.yml%s on %s: plain ansible-playbook vs ansible-runner in the EE container (log %s)"
          % (" --tags " + args.tags if args.tags else "", args.system, args.log), flush=True)
    for i in range(args.repeat):
        for kind in ("plain", "runner"):
            wall, changed = run(kind, args.system, args.log, args.tags)
            times[kind].append(wall)
            print("  run %d %-7s %7.1f s  changed=%d" % (i + 1, kind, wall, changed), flush=True)
    plain, runner = statistics.median(times["plain"]), statistics.median(times["runner"])
    print("median: plain ansible-playbook %.1f s   ansible-runner in EE %.1f s   ratio %.2f (goal <= 1.3)"
          % (plain, runner, runner / plain))


if __name__ == "__main__":
    main()
