# SPDX-License-Identifier: GPL-3.0-or-later
"""User containers (role msa.hpc.udocker) on a live simulated system: image import, container creation, and a
containerised job step against the same step on the host, measured side by side in one run.

Run: ``MSA_BENCH_SYSTEM=dev .venv/bin/python tests/bench/bench_containers.py [--repeat 5]`` after
``make sim-up site SYSTEM=dev``. Without MSA_BENCH_SYSTEM (or ``--system``) it says so and does nothing, so
``make bench`` passes on a machine with no system up. Timings are taken on the nodes (``date +%s.%N`` around
each command), so SSH costs nothing; medians are printed with the spread. It leaves nothing behind: the
benchmark's image tag, containers and user are removed at the end.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import _bench_paths  # noqa: E402  (the checkout's collection, stand-ins and tests)

BUNDLE = _bench_paths.BUNDLE

from tests.helpers import ansible_inventory  # noqa: E402

IMAGE = "msa-demo:trixie"
USER, UID = "benchctr", 5102
TIMER = r'''
t() { local s e rc; s=$(date +%s.%N); "$@" </dev/null >/dev/null 2>&1; rc=$?; e=$(date +%s.%N);
      awk -v a="$s" -v b="$e" -v rc="$rc" 'BEGIN { printf "%.3f %d\n", b - a, rc }'; }
'''


def say(msg):
    print("[%s] %s" % (time.strftime("%H:%M:%S"), msg), flush=True)


# the system's host keys, recorded by the harness from its containers (role sim_system); set by main()
KNOWN_HOSTS = None


def ssh(address, script, timeout=1800):
    key = os.path.join(BUNDLE, ".cache", "ssh", "id_ed25519")
    proc = subprocess.run(["ssh", "-i", key, "-o", "StrictHostKeyChecking=yes", "-o", "UserKnownHostsFile=%s" % KNOWN_HOSTS,
                           "-o", "LogLevel=ERROR", "-o", "BatchMode=yes", "root@%s" % address, "bash -s"],
                          input=TIMER + script, capture_output=True, text=True, timeout=timeout, check=False)
    if proc.returncode != 0:
        raise RuntimeError("ssh %s failed (%d): %s" % (address, proc.returncode, proc.stderr.strip()[-800:]))
    return proc.stdout


def timings(output, tag):
    """Seconds of every line ``<tag> <seconds> <rc>`` (a failed run is reported, not hidden)."""
    values = []
    for line in output.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0] == tag:
            if parts[2] != "0":
                raise RuntimeError("%s run exited %s" % (tag, parts[2]))
            values.append(float(parts[1]))
    return values


def summary(values):
    return "median %7.3f s  (min %.3f, max %.3f, n=%d)" % (statistics.median(values), min(values), max(values),
                                                          len(values))


def system_inventory(system):
    """The running system's inventory (example site); ssh() then trusts that system's recorded host keys."""
    global KNOWN_HOSTS  # noqa: PLW0603 - one system per run, read by every ssh() call
    KNOWN_HOSTS = os.path.join(BUNDLE, ".cache", system, "known_hosts")
    return ansible_inventory("-i", "common.yml", "-i", "inventories/systems/%s" % system,
                             "-i", "inventories/sites/example", "--list")


def main():
    parser = argparse.ArgumentParser(description="udocker containers on a live simulated system: import, creation, overhead")
    parser.add_argument("--system", default=os.environ.get("MSA_BENCH_SYSTEM"))
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    if not args.system:
        _bench_paths.skip("bench_containers", "no system: set MSA_BENCH_SYSTEM=<system> or run make bench-system")
    inv = system_inventory(args.system)
    hostvars = inv["_meta"]["hostvars"]
    mgmt = hostvars[inv["slurm_controller"]["hosts"][0] if "hosts" in inv.get("slurm_controller", {})
                    else inv["msa_management"]["hosts"][0]]
    esb = inv["esb"]["hosts"][0]
    node = hostvars[esb]
    address, controller = node["ansible_host"], mgmt["ansible_host"]
    say("system %s: ESB node %s, controller %s, %d repetitions" % (args.system, esb, controller, args.repeat))
    # the bench user on the controller (submits) and the node (runs), same uid
    add_user = "id %s >/dev/null 2>&1 || useradd -m -u %d %s\n" % (USER, UID, USER)
    ssh(controller, add_user)
    ssh(address, add_user)
    repo_dir = ssh(address, "python3 -c \"import json; print(json.load(open('/etc/msa-container.json'))"
                            "['repo_dir'])\"").strip()
    sha256 = ssh(address, "cat %s/imported/msa-demo_trixie.sha256" % repo_dir).strip()
    store = inv["msa_storage"]["hosts"][0]
    store_file = "http://%s:%d/msa-demo_trixie.tar.gz" % (hostvars[store]["msa_addresses"]["mgmt"],
                                                            int(os.environ.get("MSA_BENCH_STORE_PORT", "8471")))
    try:
        # 1. image import as the role does it: download from the store, sha256, udocker import (a fresh tag)
        out = ssh(address, "".join(
            "printf 'import '; t msa-container --import bench-import:%d %s %s\n"
            "udocker --quiet --allow-root rmi bench-import:%d >/dev/null 2>&1; rm -f %s/imported/bench-import_%d.sha256\n"
            % (i, store_file, sha256, i, repo_dir, i) for i in range(min(args.repeat, 3))), timeout=3600)
        imports = timings(out, "import")
        say("image import (%s from the store, download + sha256 + udocker import): %s" % (IMAGE, summary(imports)))

        # 2. container creation by the user (udocker create + the wrapper's setup), then removal
        out = ssh(address, "cd /home/%s\n" % USER + "".join(
            "printf 'create '; t su %s -c 'udocker --quiet create --name=bench%d %s'\n"
            "printf 'setup '; t su %s -c 'udocker --quiet setup --execmode=F1 bench%d'\n"
            "su %s -c 'udocker --quiet rm bench%d' >/dev/null 2>&1\n"
            % (USER, i, IMAGE, USER, i, USER, i) for i in range(min(args.repeat, 3))), timeout=3600)
        creates, setups = timings(out, "create"), timings(out, "setup")
        say("container creation (udocker create, %s): %s" % (IMAGE, summary(creates)))
        say("container setup (execmode F1): %s" % summary(setups))

        # 3. the same command on the node: on the host and in the container (container created beforehand)
        out = ssh(address, "cd /home/%s\nsu %s -c 'msa-container %s -- true' >/dev/null 2>&1\n" % (USER, USER, IMAGE)
                  + "".join("printf 'host '; t su %s -c 'true'\nprintf 'ctr '; t su %s -c 'msa-container %s -- true'\n"
                            % (USER, USER, IMAGE) for _ in range(args.repeat)), timeout=3600)
        host, ctr = timings(out, "host"), timings(out, "ctr")
        say("command on the node, host:      %s" % summary(host))
        say("command on the node, container: %s" % summary(ctr))

        # 4. the same job step through Slurm from the controller: srun on the host vs srun msa-container
        out = ssh(controller, "cd /home/%s\n" % USER + "".join(
            "printf 'srun_host '; t su %s -c 'srun -p esb -w %s -N1 -t 5 true'\n"
            "printf 'srun_ctr '; t su %s -c 'srun -p esb -w %s -N1 -t 5 msa-container %s -- true'\n"
            % (USER, esb, USER, esb, IMAGE) for _ in range(args.repeat)), timeout=3600)
        srun_host, srun_ctr = timings(out, "srun_host"), timings(out, "srun_ctr")
        say("job step (srun) on the host:      %s" % summary(srun_host))
        say("job step (srun) in the container: %s" % summary(srun_ctr))
        print()
        print("figures (%s, %s, load %s)" % (args.system, esb, open("/proc/loadavg").read().split()[0]))
        print("  image import             %7.2f s" % statistics.median(imports))
        print("  container creation       %7.2f s  (+ setup %.2f s)" % (statistics.median(creates),
                                                                    statistics.median(setups)))
        print("  run overhead on the node %7.2f s  (host %.3f s, container %.3f s, ratio %.1f)" % (
            statistics.median(ctr) - statistics.median(host), statistics.median(host), statistics.median(ctr),
            statistics.median(ctr) / statistics.median(host)))
        print("  job step overhead        %7.2f s  (srun host %.2f s, srun container %.2f s, ratio %.2f)" % (
            statistics.median(srun_ctr) - statistics.median(srun_host), statistics.median(srun_host),
            statistics.median(srun_ctr), statistics.median(srun_ctr) / statistics.median(srun_host)))
    finally:
        ssh(address, "userdel -r %s >/dev/null 2>&1; true" % USER)
        ssh(controller, "userdel -r %s >/dev/null 2>&1; true" % USER)
    return 0


if __name__ == "__main__":
    sys.exit(main())
