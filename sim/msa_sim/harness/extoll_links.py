# SPDX-License-Identifier: GPL-3.0-or-later
"""EXTOLL cables of the simulation: one veth pair ``ext<port>`` per .td link between two node containers' netns.

``python3 -m msa_sim.harness.extoll_links ensure --system dev --td FILE --map 0x128=esb01 ...`` makes every
missing link (and raises every link that is administratively down), leaves correct ones alone and prints what it
did as JSON. It runs on the container host as root; a BMC stand-in calls it again after it restarts a container
(a new container has a new network namespace, and the veth ends in the old one are gone). ``remove`` deletes the
links. A NODE of ``--map`` is a container (``<system>-<NODE>``) or ``pid:N`` (a process whose netns is used).
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys

from ansible_collections.msa.hpc.plugins.module_utils.extoll import topology as T

PREFIX = "ext"


class LinkError(RuntimeError):
    pass


def run(args, input_text=None, check=True):
    proc = subprocess.run([str(a) for a in args], input=input_text, capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise LinkError("%s: %s" % (" ".join(str(a) for a in args), (proc.stderr or proc.stdout).strip()))
    return proc


class Namespaces:
    """Network namespaces of the nodes, by the PID of a process inside each (0: the node is not running)."""

    def __init__(self, system, nodes, podman="podman"):
        self.system = system
        self.nodes = nodes  # node name → "container" or "pid:N"
        self.podman = podman
        self._pids = None

    def container(self, node):
        return "%s-%s" % (self.system, node) if self.system else node

    def pids(self):
        if self._pids is None:
            pids, containers = {}, {}
            for node, target in self.nodes.items():
                if str(target).startswith("pid:"):
                    pids[node] = int(str(target)[4:])
                else:
                    containers[self.container(target)] = node
            if containers:
                proc = run([self.podman, "inspect", "--type", "container", "--format", "{{.Name}} {{.State.Pid}}"]
                           + sorted(containers), check=False)
                for line in proc.stdout.splitlines():
                    name, _, pid = line.strip().rpartition(" ")
                    if name.lstrip("/") in containers:
                        pids[containers[name.lstrip("/")]] = int(pid or 0)
                unknown = sorted(set(containers) - {c for c in containers if containers[c] in pids})
                if unknown:
                    raise LinkError("no such container: %s (%s)" % (", ".join(unknown), proc.stderr.strip()))
            self._pids = pids
        return self._pids

    def ip(self, node, *args, check=True, input_text=None):
        return run(["nsenter", "--target", self.pids()[node], "--net", "ip"] + list(args),
                   check=check, input_text=input_text)

    def links(self, node):
        """``ext<port>`` interfaces of a node: name → {ifindex, peer (ifindex of the other end), up, kind}."""
        out = {}
        for link in json.loads(self.ip(node, "-j", "-d", "link", "show").stdout or "[]"):
            name = link.get("ifname", "").split("@", 1)[0]
            if name.startswith(PREFIX) and name[len(PREFIX):].isdigit():
                out[name] = {"ifindex": link.get("ifindex"), "peer": link.get("link_index"),
                             "up": "UP" in (link.get("flags") or []),
                             "kind": (link.get("linkinfo") or {}).get("info_kind")}
        return out

    def sysctl(self, node, key, value):
        """Set a per-netns sysctl when it differs; True when it was changed."""
        path = "/proc/sys/" + key.replace(".", "/")
        current = run(["nsenter", "--target", self.pids()[node], "--net", "cat", path]).stdout.strip()
        if current == str(value):
            return False
        run(["nsenter", "--target", self.pids()[node], "--net", "sh", "-c", 'echo "$1" > "$2"', "sh", value, path])
        return True


def plan(topo, guid_to_node):
    """The links of the .td as ``(node_a, ext<pa>, node_b, ext<pb>, text)`` with node names from the map."""
    names = {}
    for nid, node in topo.nodes.items():
        if node.guid not in guid_to_node:
            raise LinkError("--map has no node for GUID 0x%x (node id %d of the topology)" % (node.guid, nid))
        names[nid] = guid_to_node[node.guid]
    return [(names[a], "%s%d" % (PREFIX, pa), names[b], "%s%d" % (PREFIX, pb), T.format_link((a, pa, b, pb)))
            for a, pa, b, pb in topo.links]


def ensure(ns, links, icmp_ratelimit=None):
    """Make every link exist, paired with its peer and up. Returns the JSON report."""
    report = {"created": [], "raised": [], "removed": [], "present": 0, "skipped": [], "sysctl": []}
    pids = ns.pids()
    running = {node for node, pid in pids.items() if pid}
    current = {node: ns.links(node) for node in sorted(running)}
    for a, ea, b, eb, text in links:
        if a not in running or b not in running:
            report["skipped"].append({"link": text, "reason": "node %s is not running"
                                      % (a if a not in running else b)})
            continue
        have_a, have_b = current[a].get(ea), current[b].get(eb)
        paired = (have_a and have_b and have_a["kind"] == have_b["kind"] == "veth"
                  and have_a["peer"] == have_b["ifindex"] and have_b["peer"] == have_a["ifindex"])
        if not paired:
            for node, name, have in ((a, ea, have_a), (b, eb, have_b)):
                if have:  # a stale or miswired end: deleting a veth end deletes its peer too
                    ns.ip(node, "link", "del", name, check=False)
                    report["removed"].append("%s:%s" % (node, name))
            ns.ip(a, "link", "add", "name", ea, "type", "veth", "peer", "name", eb, "netns", pids[b])
            ns.ip(a, "link", "set", ea, "up")
            ns.ip(b, "link", "set", eb, "up")
            report["created"].append(text)
            continue
        report["present"] += 1
        for node, name, have in ((a, ea, have_a), (b, eb, have_b)):
            if not have["up"]:
                ns.ip(node, "link", "set", name, "up")
                report["raised"].append("%s:%s" % (node, name))
    if icmp_ratelimit is not None:
        for node in sorted(running):
            if ns.sysctl(node, "net.ipv4.icmp_ratelimit", icmp_ratelimit):
                report["sysctl"].append("%s:net.ipv4.icmp_ratelimit=%s" % (node, icmp_ratelimit))
    report["changed"] = bool(report["created"] or report["raised"] or report["removed"] or report["sysctl"])
    return report


def remove(ns, links):
    report = {"removed": [], "changed": False}
    running = {node for node, pid in ns.pids().items() if pid}
    for a, ea, b, eb, text in links:
        for node, name in ((a, ea), (b, eb)):
            if node in running and ns.ip(node, "link", "del", name, check=False).returncode == 0:
                report["removed"].append(text)
                break
    report["changed"] = bool(report["removed"])
    return report


def parse_map(items):
    out = {}
    for item in items:
        guid, sep, node = item.partition("=")
        if not sep or not node:
            raise LinkError("--map %r: expected GUID=NODE" % item)
        try:
            out[int(guid, 0)] = node
        except ValueError:
            raise LinkError("--map %r: GUID %r is not an integer" % (item, guid))
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(prog="extoll-links", description=__doc__.split("\n")[0])
    parser.add_argument("action", choices=("ensure", "remove"))
    parser.add_argument("--system", default="", help="container name prefix: container of NODE is SYSTEM-NODE")
    parser.add_argument("--td", required=True, help="topology definition whose links are the cables")
    parser.add_argument("--map", action="append", default=[], metavar="GUID=NODE",
                        help="node (container suffix, or pid:N) of a GUID; once per node of the .td")
    parser.add_argument("--icmp-ratelimit", default="0",
                        help="net.ipv4.icmp_ratelimit set in each node (0: traces get every TTL-exceeded answer; "
                             "'keep' leaves it alone)")
    parser.add_argument("--podman", default="podman")
    args = parser.parse_args(argv)
    try:
        topo = T.load_td(args.td)
        guid_to_node = parse_map(args.map)
        links = plan(topo, guid_to_node)
        nodes = {node: node for node in guid_to_node.values()}
        ns = Namespaces(args.system, nodes, args.podman)
        if args.action == "ensure":
            report = ensure(ns, links, None if args.icmp_ratelimit == "keep" else args.icmp_ratelimit)
        else:
            report = remove(ns, links)
    except (LinkError, T.TopologyError, OSError, ValueError) as exc:
        print(json.dumps({"failed": True, "msg": str(exc)}))
        print("extoll-links: %s" % exc, file=sys.stderr)
        return 1
    print(json.dumps(report, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
