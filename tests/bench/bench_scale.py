# SPDX-License-Identifier: GPL-3.0-or-later
"""Scale benchmark: sim_up, full site.yml deploy and no-change re-run of 16-, 32- and 64-node simulated systems.

Run: ``MSA_BENCH_SCALE=1 .venv/bin/python tests/bench/bench_scale.py [--sizes 16,32,64] [--profile]``.

For each size N (system inventory ``inventories/systems/scale<N>``) in one run, one size after the other:
sim_down (start from nothing), ``playbooks/sim_up.yml`` (timed), ``playbooks/site.yml`` (timed: the deploy),
``playbooks/site.yml`` again with nothing changed (timed: the re-run, whose recap must say changed=0 on every
host: reported, not asserted), then ``playbooks/sim_down.yml`` and ``scripts/check_clean.sh`` before the next
size. It prints progress with timestamps, then a table (nodes x sim_up x deploy x re-run x per-host cost x
machine load) and the growth ratios between consecutive sizes, measured side by side in this one run.
The system is brought down whatever happens (try/finally, SIGINT and SIGTERM included).

``make bench`` runs every tests/bench/bench_*.py: a full run of this one takes 30-60 minutes on a 2-core
machine, so **it is skipped unless MSA_BENCH_SCALE=1** (or ``--sizes`` is given on the command line).
``--strategies linear,mitogen_linear`` measures every size under each Ansible strategy in turn (a fresh system
for each), and prints the ratio between them size by size (mitogen_linear is the bundle's default strategy,
ansible.cfg's, found through its strategy_plugins in the venv). ``--profile`` adds ansible.posix.profile_tasks and prints
the slowest tasks of each deploy and re-run; ``--env VAR=VALUE`` (repeatable) runs every playbook with other
Ansible settings.
Besides wall times it reports CPU seconds (the controller's processes and the system's containers' cgroups),
which depend much less on what else the machine runs, the CPU of each playbook's main process (the strategy's
single thread), and the cores the nodes' own services use at rest (60 s with no playbook, after the re-run).
Each playbook's output goes to a log under ``--logdir`` (default /tmp/msa-bench-scale-<time>/).
"""
from __future__ import annotations

import argparse
import os
import re
import resource
import signal
import subprocess
import sys
import time

import _bench_paths  # noqa: E402  (the checkout's collection; skips only by name)

BUNDLE = _bench_paths.BUNDLE
ANSIBLE_PLAYBOOK = os.path.join(BUNDLE, ".venv", "bin", "ansible-playbook")
RECAP_RE = re.compile(r"^(\S+)\s+:\s+ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)"
                      r"\s+skipped=(\d+)\s+rescued=(\d+)\s+ignored=(\d+)")
# profile_tasks lines: "role : Task name ------------- 12.34s"
PROFILE_RE = re.compile(r"^(.*?)\s+-{3,}\s+(\d+\.\d+)s$")
PLAY_RE = re.compile(r"^PLAY \[(.*)\] \*+")


def stamp():
    return time.strftime("%H:%M:%S")


def say(msg):
    print("[%s] %s" % (stamp(), msg), flush=True)


def load1():
    with open("/proc/loadavg", encoding="ascii") as f:
        return float(f.read().split()[0])


def controller_cpu():
    """CPU seconds of every finished child process (ansible-playbook, its workers, ssh)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def own_cpu(pid):
    """CPU seconds of process `pid` alone, not its children (read from /proc before it is reaped), or None."""
    try:
        with open("/proc/%d/stat" % pid, encoding="ascii") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")   # utime, stime


def nodes_cpu(system):
    """CPU seconds the system's containers have used so far (cgroup v1 cpuacct or v2 cpu.stat), None if unknown.

    Wall times on a shared machine follow its load; CPU seconds are the work a deploy costs, whatever the load.
    """
    ids = subprocess.run(["podman", "ps", "-q", "--no-trunc", "--filter", "label=msa.system=" + system],
                         capture_output=True, text=True, check=False).stdout.split()
    total, found = 0.0, not ids
    for cid in ids:
        for path, scale in (("/sys/fs/cgroup/cpuacct/libpod_parent/libpod-%s/cpuacct.usage" % cid, 1e-9),
                            ("/sys/fs/cgroup/libpod_parent/libpod-%s/cpu.stat" % cid, 1e-6)):
            try:
                with open(path, encoding="ascii") as f:
                    text = f.read()
            except OSError:
                continue
            value = text.split()[0] if path.endswith("usage") else text.split("usage_usec")[1].split()[0]
            total, found = total + int(value) * scale, True
            break
    return total if found else None


class Runner:
    """Runs playbooks in their own process group, so an interrupt can stop them before the tear-down."""

    def __init__(self, logdir, profile, site, extra_env=()):
        self.extra_env = dict(item.split("=", 1) for item in extra_env)
        self.strategy = "mitogen_linear"
        self.logdir = logdir
        self.profile = profile
        self.site = site
        self.child = None
        self.main_cpu = None   # CPU seconds of the last playbook's main process (the strategy's single thread)

    def env(self):
        env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(BUNDLE, "ansible.cfg"), ANSIBLE_FORCE_COLOR="0",
                   ANSIBLE_NOCOLOR="1", PATH=os.path.join(BUNDLE, ".venv", "bin") + os.pathsep + os.environ["PATH"])
        if self.profile:
            env["ANSIBLE_CALLBACKS_ENABLED"] = "ansible.posix.timer,ansible.posix.profile_tasks"
            env["PROFILE_TASKS_TASK_OUTPUT_LIMIT"] = "15"
        env["ANSIBLE_STRATEGY"] = self.strategy
        env.update(self.extra_env)
        return env

    def playbook(self, system, playbook, tag):
        """Run one playbook on `system`; return (seconds, rc, recap {host: counts}, slowest tasks, log path)."""
        log = os.path.join(self.logdir, "%s-%s-%s.log" % (system, self.strategy, tag))
        cmd = [ANSIBLE_PLAYBOOK, "-i", "common.yml", "-i", "inventories/systems/" + system,
               "-i", "inventories/sites/" + self.site, "playbooks/" + playbook]
        start = time.monotonic()
        recap, slowest, in_recap = {}, [], False
        with open(log, "w", encoding="utf-8") as out:
            self.child = subprocess.Popen(cmd, cwd=BUNDLE, env=self.env(), stdout=subprocess.PIPE,
                                          stderr=subprocess.STDOUT, text=True, start_new_session=True)
            try:
                for line in self.child.stdout:
                    out.write(line)
                    line = line.rstrip("\n")
                    match = PLAY_RE.match(line)
                    if match and tag != "sim_down":
                        say("  %s %s: play '%s' (+%.0f s, load %.1f)"
                            % (system, tag, match.group(1), time.monotonic() - start, load1()))
                    if line.startswith("PLAY RECAP"):
                        in_recap = True
                    match = RECAP_RE.match(line) if in_recap else None
                    if match:
                        recap[match.group(1)] = dict(zip(("ok", "changed", "unreachable", "failed", "skipped"),
                                                         map(int, match.groups()[1:6])))
                    match = PROFILE_RE.match(line) if in_recap else None
                    if match:
                        slowest.append((float(match.group(2)), match.group(1).strip()))
                os.waitid(os.P_PID, self.child.pid, os.WEXITED | os.WNOWAIT)   # exited, not yet reaped
                self.main_cpu = own_cpu(self.child.pid)
                rc = self.child.wait()
            finally:
                self.stop()
        return time.monotonic() - start, rc, recap, slowest, log

    def stop(self):
        """Stop a playbook still running (after an interrupt): TERM its process group, then KILL."""
        child, self.child = self.child, None
        if child is None or child.poll() is not None:
            return
        for sig, wait in ((signal.SIGTERM, 20), (signal.SIGKILL, 10)):
            try:
                os.killpg(child.pid, sig)
            except ProcessLookupError:
                return
            try:
                child.wait(wait)
                return
            except subprocess.TimeoutExpired:
                continue


def sums(recap):
    return {key: sum(host[key] for host in recap.values()) for key in ("changed", "failed", "unreachable")}


def tear_down(runner, system):
    """sim_down and the clean check, shielded from a second Ctrl-C."""
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        say("%s: sim_down" % system)
        seconds, rc, _, _, log = runner.playbook(system, "sim_down.yml", "sim_down")
        check = subprocess.run(["bash", os.path.join(BUNDLE, "scripts", "check_clean.sh"), system],
                               cwd=BUNDLE, capture_output=True, text=True, check=False)
        say("%s: sim_down rc=%d in %.0f s; %s" % (system, rc, seconds, (check.stdout + check.stderr).strip()))
        return rc == 0 and check.returncode == 0
    finally:
        signal.signal(signal.SIGINT, old)


def settle(limit=None, most=300, every=5):
    """Wait until the 1-minute load falls to `limit` (default 2 per CPU) or `most` seconds pass; say how long.

    A deploy leaves the nodes' services starting (udocker imports, the Pushers' first samples): a re-run started
    at once measured that start-up too, and at load ~130 mitogen's first connections timed out (scale64).
    """
    limit = limit if limit is not None else 2.0 * (os.cpu_count() or 1)
    start = time.monotonic()
    while load1() > limit and time.monotonic() - start < most:
        time.sleep(every)
    waited = time.monotonic() - start
    if waited >= every:
        say("settled for %.0f s before the re-run: load %.1f (limit %.1f)" % (waited, load1(), limit))
    return waited


REST_WINDOW = 60


def rest_cores(system, window=REST_WINDOW):
    """Cores the system's containers use with no playbook running: the share of the machine a re-run competes with."""
    before = nodes_cpu(system)
    time.sleep(window)
    after = nodes_cpu(system)
    return None if before is None or after is None else (after - before) / window


def measure(runner, size, site_runs):
    system = "scale%d" % size
    row = {"nodes": size, "system": system, "strategy": runner.strategy}
    try:
        tear_down(runner, system)   # from nothing, even after an earlier run that was killed hard
        for step, playbook in [("sim_up", "sim_up.yml")] + [("deploy", "site.yml"), ("rerun", "site.yml")][:site_runs]:
            if step == "rerun":
                settle()
            load_before, cpu_before, nodes_before = load1(), controller_cpu(), nodes_cpu(system)
            say("%s: %s (%s, %s), load %.1f" % (system, step, playbook, runner.strategy, load_before))
            seconds, rc, recap, slowest, log = runner.playbook(system, playbook, step)
            total = sums(recap)
            row[step] = seconds
            row[step + "_ctl_cpu"] = controller_cpu() - cpu_before
            row[step + "_main_cpu"] = runner.main_cpu
            nodes_after = nodes_cpu(system)
            row[step + "_cpu"] = row[step + "_ctl_cpu"]
            if nodes_before is not None and nodes_after is not None:
                row[step + "_node_cpu"] = nodes_after - nodes_before
                row[step + "_cpu"] += row[step + "_node_cpu"]
            row[step + "_load"] = (load_before + load1()) / 2
            row[step + "_changed"] = total["changed"]
            say("%s: %s rc=%d in %.0f s, CPU %.0f s controller (%.0f s in its main process) + %.0f s nodes (%d hosts, "
                "changed=%d failed=%d unreachable=%d), log %s"
                % (system, step, rc, seconds, row[step + "_ctl_cpu"], runner.main_cpu or float("nan"),
                   row.get(step + "_node_cpu", float("nan")), len(recap), total["changed"], total["failed"],
                   total["unreachable"], log))
            if slowest:
                say("%s: %s slowest tasks:" % (system, step))
                for secs, name in sorted(slowest, reverse=True)[:10]:
                    print("      %7.1f s  %s" % (secs, name))
            if rc != 0:
                row["error"] = "%s failed (rc=%d): see %s" % (step, rc, log)
                break
        if "rerun" in row:
            row["rest_cores"] = rest_cores(system)
            if row["rest_cores"] is not None:
                say("%s: at rest the nodes use %.2f cores (their own services, %d s after the re-run)"
                    % (system, row["rest_cores"], REST_WINDOW))
        if "rerun" in row and "error" not in row:   # a failed or unreachable host proves nothing
            row["idempotent"] = row["rerun_changed"] == 0
            say("%s: no-change re-run %s (changed=%d)" % (system, "IDEMPOTENT" if row["idempotent"] else
                                                          "NOT IDEMPOTENT", row["rerun_changed"]))
    finally:
        row["clean"] = tear_down(runner, system)
    return row


STEPS = (("sim_up", "sim_up"), ("deploy", "deploy"), ("rerun", "re-run"), ("deploy_cpu", "deploy CPU"),
         ("rerun_cpu", "re-run CPU"))


def cpu(row, step):
    if step + "_ctl_cpu" not in row:
        return "-"
    return "%.0f+%s" % (row[step + "_ctl_cpu"], "%.0f" % row[step + "_node_cpu"] if step + "_node_cpu" in row else "?")


def table(rows):
    head = ("nodes", "strategy", "sim_up s", "deploy s", "re-run s", "deploy s/host", "re-run s/host", "re-run changed",
            "deploy CPU s ctl+nodes", "re-run CPU s ctl+nodes", "main process CPU s deploy/re-run",
            "nodes at rest (cores)", "load (deploy)", "load (re-run)")
    print("\n" + " | ".join(head))
    print(" | ".join("-" * len(h) for h in head))
    for r in rows:
        def cell(key, per_host=False, fmt="%.0f"):
            if key not in r:
                return "-"
            return ("%.1f" % (r[key] / r["nodes"])) if per_host else fmt % r[key]
        print(" | ".join([str(r["nodes"]), r["strategy"], cell("sim_up"), cell("deploy"), cell("rerun"), cell("deploy", True),
                          cell("rerun", True), cell("rerun_changed", fmt="%d"), cpu(r, "deploy"), cpu(r, "rerun"),
                          "/".join("%.0f" % r[k] if r.get(k) is not None else "-"
                                   for k in ("deploy_main_cpu", "rerun_main_cpu")),
                          cell("rest_cores", fmt="%.2f") if r.get("rest_cores") is not None else "-",
                          cell("deploy_load", fmt="%.1f"),
                          cell("rerun_load", fmt="%.1f")]))
        if "error" in r:
            print("    %d nodes (%s): %s" % (r["nodes"], r["strategy"], r["error"]))
    done = [r for r in rows if "deploy" in r]
    growth = []
    for strategy in dict.fromkeys(r["strategy"] for r in done):
        mine = [r for r in done if r["strategy"] == strategy]
        growth += zip(mine, mine[1:])
    if growth:
        print("\ngrowth between sizes (ratio of times vs ratio of nodes; 1.0 per node ratio = linear):")
        for a, b in growth:
            nodes = b["nodes"] / a["nodes"]
            parts = ["%s %d -> %d nodes (x%.1f):" % (a["strategy"], a["nodes"], b["nodes"], nodes)]
            parts += ["%s x%.2f (%.2f of linear)" % (label, b[key] / a[key], b[key] / a[key] / nodes)
                      for key, label in STEPS if key in a and key in b]
            print("  " + "  ".join(parts))
    base = {r["nodes"]: r for r in done if r["strategy"] == done[0]["strategy"]} if done else {}
    versus = [(base[r["nodes"]], r) for r in done if r["strategy"] != done[0]["strategy"] and r["nodes"] in base]
    if versus:
        print("\nstrategies side by side (time or CPU of the second / the first, same size, this run):")
        for a, b in versus:
            parts = ["%d nodes, %s / %s:" % (a["nodes"], b["strategy"], a["strategy"])]
            parts += ["%s x%.2f" % (label, b[key] / a[key]) for key, label in STEPS[1:] if key in a and key in b]
            print("  " + "  ".join(parts))


def main(argv=None):
    parser = argparse.ArgumentParser(description="sim_up, site.yml deploy and no-change re-run times of the scale<N> systems")
    parser.add_argument("--sizes", help="comma-separated node counts with a scale<N> inventory (default 16,32,64)")
    parser.add_argument("--site", default="example", help="site layer under inventories/sites (default example)")
    parser.add_argument("--no-rerun", action="store_true", help="deploy once only")
    parser.add_argument("--profile", action="store_true", help="print the slowest tasks (ansible.posix.profile_tasks)")
    parser.add_argument("--env", action="append", default=[], metavar="VAR=VALUE",
                        help="extra environment of every playbook (Ansible settings to compare), repeatable")
    parser.add_argument("--strategies", default="mitogen_linear",
                        help="comma-separated Ansible strategies, each measured on a fresh system (default "
                             "mitogen_linear, the bundle's; e.g. linear,mitogen_linear)")
    parser.add_argument("--logdir", default="/tmp/msa-bench-scale-%s" % time.strftime("%Y%m%d-%H%M%S"))
    args = parser.parse_args(argv)
    if args.sizes is None and os.environ.get("MSA_BENCH_SCALE") != "1":
        _bench_paths.skip("bench_scale", "30-60 min: set MSA_BENCH_SCALE=1 or pass --sizes 16,32,64 to run it")
    sizes = [int(s) for s in (args.sizes or "16,32,64").split(",") if s.strip()]
    for size in sizes:
        if not os.path.isfile(os.path.join(BUNDLE, "inventories", "systems", "scale%d" % size, "system.msa.yml")):
            parser.error("--sizes: no inventory inventories/systems/scale%d for size %d" % (size, size))
    strategies = [s.strip() for s in args.strategies.split(",") if s.strip()]
    if not strategies or any(s not in ("linear", "free", "mitogen_linear", "mitogen_free") for s in strategies):
        parser.error("--strategies: %r: each one of linear, free, mitogen_linear, mitogen_free" % args.strategies)
    os.makedirs(args.logdir, exist_ok=True)
    for item in args.env:
        if "=" not in item:
            parser.error("--env: %r is not VAR=VALUE" % item)
    runner = Runner(args.logdir, args.profile, args.site, args.env)

    def terminate(signum, _frame):
        raise KeyboardInterrupt("signal %d" % signum)

    signal.signal(signal.SIGTERM, terminate)
    say("bench_scale: sizes %s, strategies %s, logs in %s, %d CPUs, load %.1f"
        % (sizes, strategies, args.logdir, os.cpu_count(), load1()))
    rows = []
    try:
        for size in sizes:
            for strategy in strategies:
                runner.strategy = strategy
                rows.append(measure(runner, size, 1 if args.no_rerun else 2))
    except KeyboardInterrupt:
        say("interrupted: the system being measured was brought down (see above); sizes after it not run")
        runner.stop()
    table(rows)
    return 0 if rows and all(r.get("clean") and "error" not in r for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
