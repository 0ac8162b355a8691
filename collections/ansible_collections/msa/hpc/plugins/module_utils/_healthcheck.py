# SPDX-License-Identifier: GPL-3.0-or-later
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Slurm's HealthCheckProgram for an MSA node: run the node's checks, drain on a failure, resume what it drained.

slurmd runs the program as root on the node every HealthCheckInterval seconds. The checks a node runs come from
its configuration file (generated from the inventory for each module): munge works, the file systems are mounted,
the listed services (the DCDB Pusher, …) are active, the EXTOLL fabric manager sees every link of the node, the
gateway agent reports both its fabrics up, the NAM/GCE manager answers. A failing check drains the node with a
reason that starts with REASON_PREFIX and names the check; a passing run resumes the node only when that prefix
shows the drain was this program's own, so an operator's drain is never undone.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

REASON_PREFIX = "msa-health: "
# Slurm keeps a node's reason to 255 bytes or so; a long one is cut where a person can still read it.
REASON_MAX = 200


class CheckFailed(Exception):
    """A check that failed; the message says what was seen (it becomes the drain reason)."""


def _run(argv, stdin=None, timeout=20):
    try:
        return subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise CheckFailed("%s: %s" % (argv[0], exc)) from exc


def check_munge(_config, run=_run):
    cred = run(["munge", "--no-input"])
    if cred.returncode != 0:
        raise CheckFailed("munge cannot encode a credential (%s)" % (cred.stderr.strip() or cred.returncode))
    dec = run(["unmunge"], stdin=cred.stdout)
    if dec.returncode != 0:
        raise CheckFailed("unmunge refused the node's own credential (%s)" % (dec.stderr.strip() or dec.returncode))


def check_mounts(paths, ismount=os.path.ismount):
    missing = [p for p in paths if not ismount(p)]
    if missing:
        raise CheckFailed("not mounted: %s" % ", ".join(missing))


def check_services(units, run=_run):
    down = []
    for unit in units:
        state = run(["systemctl", "is-active", unit]).stdout.strip() or "unknown"
        if state != "active":
            down.append("%s %s" % (unit, state))
    if down:
        raise CheckFailed("service not active: %s" % ", ".join(down))


def check_extoll(config, client, node):
    """The fabric manager's own view: no missing link touches this node, and the node is in the fabric."""
    missing = client.get("network/missinglinks")
    mine = [link for link in missing or [] if node in _link_nodes(link)]
    if mine:
        raise CheckFailed("EXTOLL link down per the fabric manager: %s" % ", ".join(_link_text(link) for link in mine))
    nodes = client.get("network/missingnodes") or []
    if any(node == (n.get("name") if isinstance(n, dict) else n) for n in nodes):
        raise CheckFailed("EXTOLL node %s missing per the fabric manager" % node)


def _link_nodes(link):
    if isinstance(link, dict):
        return {str(link.get(k)) for k in ("a", "b", "from", "to", "node_a", "node_b") if link.get(k) is not None}
    if isinstance(link, (list, tuple)):
        return {str(x).split(":")[0] for x in link}
    return {part.split(":")[0] for part in str(link).replace("<->", "-").split("-")}


def _link_text(link):
    if isinstance(link, dict):
        ends = sorted(_link_nodes(link))
        return "-".join(ends)
    if isinstance(link, (list, tuple)):
        return "-".join(str(x) for x in link)
    return str(link)


def check_gateway(client):
    """The gateway agent reports its daemon and both fabrics: each must be up."""
    health = client.get("v1/health")
    if not health.get("ok"):
        raise CheckFailed("gateway agent reports not ok: %s" % health.get("reason", health))
    fabrics = health.get("fabrics") or {}
    down = sorted(name for name, state in fabrics.items() if not _up(state))
    if len(fabrics) < 2 or down:
        raise CheckFailed("gateway fabric down: %s" % (", ".join(down) or "fewer than two fabrics reported"))


def _up(state):
    if isinstance(state, dict):
        return bool(state.get("up", state.get("ok")))
    return state in (True, "up", "UP")


def check_manager(client, name):
    try:
        client.get("health")
    except Exception as exc:  # the client's own errors: not reachable, TLS, refused
        raise CheckFailed("%s manager not reachable: %s" % (name, exc)) from exc


def run_checks(checks):
    """[(name, callable)] → [(name, detail)] of the failed ones, each check run even when an earlier one failed."""
    failed = []
    for name, func in checks:
        try:
            func()
        except CheckFailed as exc:
            failed.append((name, str(exc)))
        except Exception as exc:  # a check that cannot run is a failed check, said as such
            failed.append((name, "check could not run: %s: %s" % (type(exc).__name__, exc)))
    return failed


def decide(state, reason, failed):
    """What to do with a node in Slurm `state` with drain `reason`, given the failed checks.

    Returns ("drain", reason), ("resume", None) or (None, None). A node drained by someone else stays as it is;
    a node this program drained is re-drained when the failure changed (the reason stays true) and resumed when
    every check passes."""
    ours = (reason or "").startswith(REASON_PREFIX)
    drained = "DRAIN" in (state or "").upper()
    if failed:
        text = REASON_PREFIX + "; ".join("%s: %s" % f for f in failed)
        text = text if len(text) <= REASON_MAX else text[:REASON_MAX - 1] + "…"
        if drained and not ours:
            return None, None
        if drained and reason == text:
            return None, None
        return "drain", text
    if drained and ours:
        return "resume", None
    return None, None


def node_state(node, run=_run):
    """(state, reason) of `node` from ``scontrol --oneliner show node``."""
    out = run(["scontrol", "--oneliner", "show", "node", node])
    if out.returncode != 0:
        raise CheckFailed("scontrol show node %s: %s" % (node, out.stderr.strip()))
    fields = {}
    text = out.stdout.strip()
    # Reason= runs to the end of its value, which may hold spaces: it is followed by a key of its own.
    head, _, tail = text.partition(" Reason=")
    for item in head.split():
        key, _, value = item.partition("=")
        fields[key] = value
    reason = tail.split(" Comment=")[0].rsplit(" [", 1)[0] if tail else ""
    return fields.get("State", ""), reason


def apply(node, action, reason, run=_run):
    if action == "drain":
        argv = ["scontrol", "update", "nodename=" + node, "state=drain", "reason=" + reason]
    elif action == "resume":
        argv = ["scontrol", "update", "nodename=" + node, "state=resume"]
    else:
        return
    out = run(argv)
    if out.returncode != 0:
        raise CheckFailed("%s: %s" % (" ".join(argv[:3]), out.stderr.strip()))


def checks_from_config(config, clients, run=_run):
    """The node's checks from its configuration file; `clients` maps a service name to its REST client."""
    node = config["node"]
    checks = [("munge", lambda: check_munge(config, run=run))]
    if config.get("mounts"):
        checks.append(("mounts", lambda: check_mounts(config["mounts"])))
    if config.get("services"):
        checks.append(("services", lambda: check_services(config["services"], run=run)))
    if "extoll" in clients:
        checks.append(("extoll", lambda: check_extoll(config, clients["extoll"], node)))
    if "gateway" in clients:
        checks.append(("gateway", lambda: check_gateway(clients["gateway"])))
    for name in ("nam", "gce"):
        if name in clients:
            checks.append((name, lambda n=name: check_manager(clients[n], n.upper())))
    return checks


def main(argv=None, make_client=None, run=_run):
    """HealthCheckProgram entry point: msa-hpc-healthcheck [CONFIG]. Exit 0 unless the program itself cannot run."""
    argv = sys.argv[1:] if argv is None else argv
    path = argv[0] if argv else "/etc/msa-hpc/healthcheck.json"
    try:
        with open(path, encoding="utf-8") as fh:
            config = json.load(fh)
        if make_client is None:
            from ansible_collections.msa.hpc.plugins.module_utils._rest import RestClient

            def make_client(spec):
                token = None
                if spec.get("token_file"):
                    with open(spec["token_file"], encoding="utf-8") as fh:
                        token = fh.read().strip()
                return RestClient(spec["url"], token=token, ca_path=spec.get("ca"), timeout=10)
        clients = {name: make_client(spec) for name, spec in (config.get("apis") or {}).items()}
        failed = run_checks(checks_from_config(config, clients, run))
        state, reason = node_state(config["node"], run)
        action, text = decide(state, reason, failed)
        apply(config["node"], action, text, run)
    except (OSError, ValueError, KeyError, CheckFailed) as exc:
        sys.stderr.write("msa-hpc-healthcheck: %s\n" % exc)
        return 1
    for name, detail in failed:
        sys.stderr.write("msa-hpc-healthcheck: %s: %s\n" % (name, detail))
    if action:
        sys.stderr.write("msa-hpc-healthcheck: %s %s%s\n" % (action, config["node"], (": " + text) if text else ""))
    return 0
