# SPDX-License-Identifier: GPL-3.0-or-later
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Slurm's HealthCheckProgram for an MSA node: run the node's checks, drain on a failure, resume what it drained.

slurmd runs the program (msa-hpc-healthcheck, role msa.hpc.slurm_healthcheck) as root on the node every
HealthCheckInterval seconds. The checks come from the node's configuration file, generated from the inventory for
each module: munge works, the file systems are mounted and answer (a statfs() in a child process, bounded in time,
so a dead network mount cannot hang the program), the listed services (the DCDB Pusher, ...) are active, the
EXTOLL fabric manager sees every cabled link of the node up, the gateway agent reports both its fabrics up. A failing
check drains the node with a reason that starts with REASON_PREFIX and names the check; a passing run resumes the
node only when that prefix shows the drain was this program's own, so an operator's drain is never undone.

A central service that does not answer at all is not a fault of the node: when the fabric manager cannot be
reached, the EXTOLL check is unknown, and the node is neither drained nor resumed for it (the manager's own
monitoring reports the outage; the links keep their routes meanwhile). The NAM/GCE manager is not a node check
either: while it is down, the controller's health timer holds the NAM and GCE licences (module_utils/node/nam_hooks), so
NAM and GCE jobs wait and every other job runs.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time

from ansible_collections.msa.hpc.plugins.module_utils.slurm import nodes as N

REASON_PREFIX = "msa-health: "
# Slurm keeps a node's reason in full, but sinfo and operators read the first line: keep it short and readable.
REASON_MAX = 200
DEFAULT_CONFIG = "/etc/msa-hpc/healthcheck.json"
# slurmd runs the program with almost no environment (no PATH): every command by its absolute path.
COMMANDS = {"munge": "/usr/bin/munge", "unmunge": "/usr/bin/unmunge", "systemctl": "/usr/bin/systemctl",
            "scontrol": "/usr/bin/scontrol", "sinfo": "/usr/bin/sinfo", "stat": "/usr/bin/stat"}
# Seconds a mounted file system has to answer a statfs() (config "mount_timeout"): a dead server's mount drains the
# node instead of hanging the program.
MOUNT_TIMEOUT = 10


class CheckFailed(Exception):
    """A check that failed; the message says what was seen (it becomes the drain reason)."""


class CheckUnknown(Exception):
    """A check that could not tell: the central service it asks did not answer. The node is left as it is."""


def _run(argv, stdin=None, timeout=20):
    argv = [COMMANDS.get(argv[0], argv[0])] + list(argv[1:])
    try:
        return subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise CheckFailed("%s: %s" % (os.path.basename(argv[0]), exc)) from exc


def printable(text, limit=REASON_MAX):
    """``text`` as one line of printable characters at most ``limit`` long (it comes from services and the
    network, and becomes a Slurm node reason that root sets)."""
    line = " ".join("".join(c if c.isprintable() else " " for c in str(text)).split())
    return line if len(line) <= limit else line[:limit - 1] + "…"


# ---------------------------------------------------------------------------------------------------- checks
def check_munge(run=_run):
    cred = run(["munge", "--no-input"])
    if cred.returncode != 0:
        raise CheckFailed("munge cannot encode a credential (%s)" % (cred.stderr.strip() or cred.returncode))
    dec = run(["unmunge"], stdin=cred.stdout)
    if dec.returncode != 0:
        raise CheckFailed("unmunge refused the node's own credential (%s)" % (dec.stderr.strip() or dec.returncode))


def mounted_filesystems(text):
    """/proc/self/mountinfo -> {mount point: file system type of the mount on top} (octal escapes decoded)."""
    mounts = {}
    for line in text.splitlines():
        head, sep, tail = line.partition(" - ")
        fields = head.split()
        if not sep or len(fields) < 5 or not tail.split():
            continue
        point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[4])
        mounts[point] = tail.split()[0]
    return mounts


def _read_mountinfo():
    with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as fh:
        return fh.read()


def bounded_runs(argvs, timeout):
    """Run every argv at once, each in a child of its own; [(returncode, stderr) or None for one that did not end
    within ``timeout`` seconds of the start]. A child still running then is killed and not waited for: a process
    stuck on a dead network file system may not die at once, and this program must not wait with it. (The children
    write a line or two to stderr at most, well below a pipe's buffer, so none blocks on it before it ends.)"""
    deadline = time.monotonic() + timeout
    children = [subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                 start_new_session=True) for argv in argvs]
    while any(child.poll() is None for child in children) and time.monotonic() < deadline:
        time.sleep(0.02)
    results = []
    for child in children:
        if child.poll() is None:
            child.kill()
            results.append(None)
        else:
            results.append((child.returncode, child.stderr.read().decode("utf-8", "replace")))
        child.stderr.close()
    return results


def mount_problems(paths, timeout=MOUNT_TIMEOUT, runs=bounded_runs, mountinfo=_read_mountinfo):
    """What is wrong with each of ``paths``: a statfs() in a child process (it triggers an automount and asks the
    file system's server) that must answer within ``timeout`` seconds, then /proc/self/mountinfo, which must show a
    file system other than an automount's autofs on the path. [] when all are mounted and answer."""
    results = runs([[COMMANDS["stat"], "--file-system", "--format=%T", "--", p] for p in paths], timeout)
    mounted = mounted_filesystems(mountinfo())
    problems = []
    for path, result in zip(paths, results):
        if result is None:
            problems.append("%s: no answer within %g s" % (path, timeout))
        elif result[0] != 0:
            problems.append("%s: %s" % (path, printable(result[1].strip().rsplit(": ", 1)[-1] or result[0], 60)))
        elif mounted.get(path, "autofs") == "autofs":
            problems.append("%s: not mounted" % path)
    return problems


def check_mounts(paths, probe=mount_problems):
    problems = probe(paths)
    if problems:
        raise CheckFailed("mount %s" % "; ".join(problems))


def check_services(units, run=_run):
    down = []
    for unit in units:
        state = run(["systemctl", "is-active", unit]).stdout.strip() or "unknown"
        if state != "active":
            down.append("%s %s" % (unit, state))
    if down:
        raise CheckFailed("service not active: %s" % ", ".join(down))


def _int(value, what):
    if isinstance(value, bool) or not isinstance(value, int):
        raise CheckFailed("the fabric manager answered %s %r, not a number" % (what, value))
    return value


def ask_service(client, path, what):
    """``client.get(path)``; a service that does not answer at all (refused, unreachable, timed out) makes the check
    unknown, not failed. An untrusted certificate or an HTTP error is an answer, and is raised as it is."""
    from ansible_collections.msa.hpc.plugins.module_utils._rest import RestTransportError  # imported late, as in client()
    try:
        return client.get(path)
    except RestTransportError as exc:
        if exc.retryable:
            raise CheckUnknown("%s does not answer: %s" % (what, exc)) from None
        raise


def _peer_down(client, peer_id):
    """The fabric manager says node ``peer_id`` itself is not up (powered off, gone), or no longer sees it at all
    (404: absent from the fabric it discovered): its links are down with it. Any other answer: not known to be."""
    from ansible_collections.msa.hpc.plugins.module_utils._rest import RestError  # as in client(): imported late
    try:
        peer = ask_service(client, "nodes/%d" % peer_id, "the fabric manager")
    except RestError as exc:  # CheckUnknown (no answer at all) is no RestError: it leaves the check unknown
        return exc.status == 404
    return isinstance(peer, dict) and peer.get("state") not in (None, "up")


def check_extoll(client, node_id):
    """The fabric manager's own view of this node: present and alive, every cabled port's link up, except a link
    whose far end the manager reports down as a node (a powered-off neighbour is that node's fault, not this one's:
    its own check, or its BMC, says so; EXTOLL routes around it)."""
    node = ask_service(client, "nodes/%d" % node_id, "the fabric manager")
    if not isinstance(node, dict) or node.get("state") != "up":
        state = node.get("state") if isinstance(node, dict) else node
        raise CheckFailed("EXTOLL node %d is %s per the fabric manager" % (node_id, printable(state, 40)))
    links = ask_service(client, "nodes/%d/link" % node_id, "the fabric manager")
    if not isinstance(links, list):
        raise CheckFailed("the fabric manager answered no link list for node %d" % node_id)
    down = []
    for link in links:
        peer = link.get("expected_peer") if isinstance(link, dict) else None
        if peer is None or link.get("state") == "up":
            continue    # an uncabled port, or a link that is up
        port, peer_id, peer_port = (_int(link.get("port"), "port"), _int(peer.get("id"), "peer id"),
                                    _int(peer.get("port"), "peer port"))
        if not _peer_down(client, peer_id):
            down.append("port %d to node %d port %d" % (port, peer_id, peer_port))
    if down:
        raise CheckFailed("EXTOLL link down per the fabric manager: %s" % ", ".join(down))


def check_gateway(client):
    """The gateway agent answers and reports each of its (two) fabrics' links up."""
    health = client.get("v1/health")
    fabrics = health.get("fabrics") if isinstance(health, dict) else None
    if not isinstance(fabrics, dict):
        raise CheckFailed("gateway agent answered no fabric states: %s" % printable(json.dumps(health), 80))
    down = sorted("%s (%s)" % (name, printable(state.get("reason", "down") if isinstance(state, dict) else "down", 60))
                  for name, state in fabrics.items() if not (isinstance(state, dict) and state.get("up") is True))
    if down:
        raise CheckFailed("gateway fabric down: %s" % ", ".join(down))
    if len(fabrics) < 2:
        raise CheckFailed("gateway agent reports %d fabric(s), a gateway bridges two" % len(fabrics))
    if health.get("ok") is not True:
        raise CheckFailed("gateway agent reports not ok")


# ---------------------------------------------------------------------------------------------------- decision
def run_checks(checks):
    """[(name, callable)] -> ([(name, detail)] of the failed ones, [(name, detail)] of the unknown ones), each check
    run even when an earlier one failed."""
    failed, unknown = [], []
    for name, func in checks:
        try:
            func()
        except CheckFailed as exc:
            failed.append((name, str(exc)))
        except CheckUnknown as exc:
            unknown.append((name, str(exc)))
        except Exception as exc:  # a check that cannot run (TLS, a bad answer) is a failed check, said so
            failed.append((name, "%s: %s" % (type(exc).__name__, exc)))
    return failed, unknown


def decide(state, reason, failed, unknown=()):
    """What to do with a node in Slurm ``state`` with drain ``reason``, given the failed and the unknown checks.

    Returns ("drain", reason), ("resume", None) or (None, None). A node drained by someone else stays as it is;
    a node this program drained is drained again when the failure changed (so the reason stays true) and resumed
    when every check passes. An unknown check drains nothing and resumes nothing: the node stays as it is."""
    ours = (reason or "").startswith(REASON_PREFIX)
    drained = "DRAIN" in (state or "").upper()
    if failed:
        text = printable(REASON_PREFIX + "; ".join("%s: %s" % f for f in failed))
        if drained and (not ours or reason == text):
            return None, None
        return "drain", text
    if drained and ours and not unknown:
        return "resume", None
    return None, None


def node_state(node, run=_run):
    """(state, reason) of ``node`` from ``sinfo --json`` (22.05's scontrol has no --json; sinfo lists every node)."""
    out = run(["sinfo", "--json", "--nodes", node])
    if out.returncode != 0:
        raise CheckFailed("sinfo --nodes %s: %s" % (node, out.stderr.strip() or out.returncode))
    try:
        record = N.find(N.load_nodes(out.stdout, "sinfo --nodes %s --json" % node), node)
    except N.NodeRecordError as exc:
        raise CheckFailed(str(exc)) from None
    if record is None:
        raise CheckFailed("sinfo --nodes %s: no record of the node in its answer" % node)
    base, flags = N.state(record)
    return "+".join([base.upper()] + flags), record.get("reason") or ""


def apply(node, action, reason, run=_run):
    if action == "drain":
        argv = ["scontrol", "update", "nodename=" + node, "state=drain", "reason=" + reason]
    elif action == "resume":
        argv = ["scontrol", "update", "nodename=" + node, "state=resume"]
    else:
        return
    out = run(argv)
    if out.returncode != 0:
        raise CheckFailed("scontrol update nodename=%s state=%s: %s" % (node, action, out.stderr.strip()))


# ---------------------------------------------------------------------------------------------------- wiring
def checks_from_config(config, clients, run=_run, probe=None):
    """The node's checks from its configuration; ``clients`` maps "extoll" and "gateway" to their REST clients,
    ``probe`` checks the mounts (default mount_problems with the configuration's mount_timeout)."""
    if probe is None:
        def probe(paths):
            return mount_problems(paths, config.get("mount_timeout", MOUNT_TIMEOUT))
    checks = [("munge", lambda: check_munge(run=run))]
    if config.get("mounts"):
        checks.append(("mounts", lambda: check_mounts(config["mounts"], probe)))
    if config.get("services"):
        checks.append(("services", lambda: check_services(config["services"], run=run)))
    if "extoll" in clients:
        checks.append(("extoll", lambda: check_extoll(clients["extoll"], config["extoll"]["node_id"])))
    if "gateway" in clients:
        checks.append(("gateway", lambda: check_gateway(clients["gateway"])))
    return checks


def validate_config(config):
    """Refuse a configuration file whose fields a root process would misuse; name the field and the value."""
    if not isinstance(config, dict):
        raise ValueError("the configuration is not a JSON object")
    node = config.get("node")
    if not isinstance(node, str) or not node or not all(c.isalnum() or c in "-_." for c in node):
        raise ValueError("node: %r is not a Slurm node name" % (node,))
    for key in ("mounts", "services"):
        value = config.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise ValueError("%s: %r is not a list of names" % (key, value))
    if any(not m.startswith("/") for m in config.get("mounts", [])):
        raise ValueError("mounts: %r holds a path that is not absolute" % (config["mounts"],))
    if any(s.startswith("-") for s in config.get("services", [])):
        raise ValueError("services: %r holds a name that starts with '-'" % (config["services"],))
    timeout = config.get("mount_timeout", MOUNT_TIMEOUT)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout <= 60:
        raise ValueError("mount_timeout: %r is not a number of seconds above 0 and at most 60" % (timeout,))
    apis = {}
    for key in ("extoll", "gateway"):
        if config.get(key) is not None:
            apis[key] = config[key]
    for key, spec in apis.items():
        if not isinstance(spec, dict) or not isinstance(spec.get("url"), str):
            raise ValueError("%s: %r has no url" % (key, spec))
    extoll = config.get("extoll")
    if extoll is not None and (isinstance(extoll.get("node_id"), bool) or not isinstance(extoll.get("node_id"), int)):
        raise ValueError("extoll.node_id: %r is not a number" % (extoll.get("node_id"),))
    return apis


def default_client(spec):
    from ansible_collections.msa.hpc.plugins.module_utils._rest import RestClient
    token = None
    if spec.get("token_file"):
        with open(spec["token_file"], encoding="utf-8") as fh:
            token = fh.read().strip()
    return RestClient(spec["url"], token=token, ca_path=spec.get("ca") or None, timeout=float(spec.get("timeout", 10)),
                      retries=1)


def main(argv=None, make_client=default_client, run=_run, probe=None, err=sys.stderr):
    """HealthCheckProgram entry point: msa-hpc-healthcheck [--validate] [CONFIG]. Exits 0 unless the program itself
    cannot run (slurmd logs a non-zero exit; the node's state is what the checks decided). ``--validate`` only reads
    and checks the configuration file (the role's ``validate:`` before it installs one)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    only_validate = argv[:1] == ["--validate"]
    argv = argv[1:] if only_validate else argv
    path = argv[0] if argv else DEFAULT_CONFIG
    try:
        with open(path, encoding="utf-8") as fh:
            config = json.load(fh)
        apis = validate_config(config)
        if only_validate:
            return 0
        clients = {}
        for name, spec in apis.items():
            try:
                clients[name] = make_client(spec)
            except Exception as exc:  # a token file or CA that cannot be read is this check's failure
                clients[name] = _Broken("%s: %s" % (type(exc).__name__, exc))
        failed, unknown = run_checks(checks_from_config(config, clients, run, probe))
        state, reason = node_state(config["node"], run)
        action, text = decide(state, reason, failed, unknown)
        apply(config["node"], action, text, run)
    except (OSError, ValueError, CheckFailed) as exc:
        err.write("msa-hpc-healthcheck: %s: %s\n" % (path, exc))
        return 1
    for name, detail in failed:
        err.write("msa-hpc-healthcheck: %s: %s\n" % (name, detail))
    for name, detail in unknown:
        err.write("msa-hpc-healthcheck: %s: unknown, the node is left as it is: %s\n" % (name, detail))
    if action:
        err.write("msa-hpc-healthcheck: %s %s%s\n" % (action, config["node"], (": " + text) if text else ""))
    return 0


class _Broken:
    """The client of an API whose settings could not be read: every call fails with why."""

    def __init__(self, why):
        self.why = why

    def get(self, _path):
        raise CheckFailed("client not usable: %s" % self.why)
