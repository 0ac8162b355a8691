# SPDX-License-Identifier: GPL-3.0-or-later
"""EXTOLL forwarding state of one node with iproute2: address, per-port routes in a table, the start/stop rule."""
from __future__ import annotations

import ipaddress
import json
import os
import subprocess

DUMMY = "extoll0"


class IpError(RuntimeError):
    pass


def ip(*args, input_text=None, check=True):
    proc = subprocess.run(["ip"] + list(args), input=input_text, capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise IpError("ip %s: %s" % (" ".join(args), proc.stderr.strip() or proc.stdout.strip()))
    return proc.stdout


def ip_json(*args):
    out = ip("-j", *args)
    return json.loads(out) if out.strip() else []


def sysctl(path, value):
    with open(os.path.join("/proc/sys", path.replace(".", "/")), "w") as handle:
        handle.write(str(value))


def ports(prefix="ext"):
    """EXTOLL port number → interface name for every ``<prefix><n>`` interface of this namespace."""
    out = {}
    for name in os.listdir("/sys/class/net"):
        if name.startswith(prefix) and name[len(prefix):].isdigit():
            out[int(name[len(prefix):])] = name
    return out


def operstate(name):
    try:
        with open("/sys/class/net/%s/operstate" % name) as handle:
            return handle.read().strip()
    except OSError:
        return "absent"


def ifindex(name):
    """The interface's index (None when it is gone): a re-created interface has a new one."""
    try:
        with open("/sys/class/net/%s/ifindex" % name) as handle:
            return int(handle.read())
    except (OSError, ValueError):
        return None


def counters(name):
    base = "/sys/class/net/%s/statistics/" % name
    out = {}
    for key in ("rx_packets", "tx_packets", "rx_bytes", "tx_bytes", "rx_dropped", "tx_dropped"):
        try:
            with open(base + key) as handle:
                out[key] = int(handle.read())
        except (OSError, ValueError):
            pass
    return out


class Forwarding:
    """Install a node's EXTOLL state: its /32 on a dummy interface (or lo), IP forwarding, a ``prohibit`` route for
    the whole EXTOLL CIDR in the main table (traffic is refused until the network starts), the routing
    table (``<dst>/32 via <neighbour> dev ext<port> onlink`` in table ``table``) and, while the network is
    up, a rule sending EXTOLL destinations to that table."""

    def __init__(self, cidr, table=44, priority=1000, prefix="ext"):
        self.cidr = str(ipaddress.ip_network(cidr))
        self.table = str(table)
        self.priority = str(priority)
        self.prefix = prefix

    def address_device(self):
        """The interface that holds the node's EXTOLL address, as the EXTOLL driver's netdev does on a real node:
        ``extoll0``, a dummy interface where the kernel has the dummy driver, else one end of a veth pair (its peer
        ``extoll0p`` up beside it), else ``lo``. Not on ``lo`` where avoidable: programs that choose their
        interfaces by address skip loopback ones (Open MPI's tcp transport with btl_tcp_if_include, msa.hpc.mpi)."""
        if os.path.exists("/sys/class/net/" + DUMMY):
            return DUMMY
        for kind in (("type", "dummy"), ("type", "veth", "peer", "name", DUMMY + "p")):
            ip("link", "add", DUMMY, *kind, check=False)
            if os.path.exists("/sys/class/net/" + DUMMY):
                if kind[1] == "veth":
                    ip("link", "set", DUMMY + "p", "up")
                return DUMMY
        return "lo"

    def prepare(self, address):
        dev = self.address_device()
        ip("addr", "replace", "%s/32" % address, "dev", dev)
        net = ipaddress.ip_network(self.cidr)
        for other in ip_json("-4", "addr", "show", "dev", dev):
            for info in other.get("addr_info", []):
                local = info.get("local")
                if local != address and local and ipaddress.ip_address(local) in net:
                    ip("addr", "del", "%s/%s" % (local, info["prefixlen"]), "dev", dev, check=False)
        ip("link", "set", dev, "up")
        ip("route", "replace", "prohibit", self.cidr)
        sysctl("net.ipv4.ip_forward", 1)
        # routes may be asymmetric (up*/down*): a strict reverse-path filter would drop forwarded packets
        for name in ["all", "default"] + list(ports(self.prefix).values()):
            try:
                sysctl("net.ipv4.conf.%s.rp_filter" % name, 0)
            except OSError:
                pass

    def installed(self):
        proc = subprocess.run(["ip", "-j", "-4", "route", "show", "table", self.table], capture_output=True, text=True)
        if proc.returncode != 0:  # "FIB table does not exist" until the first route goes in
            return {}
        routes = json.loads(proc.stdout) if proc.stdout.strip() else []
        return {r["dst"]: r for r in routes if r.get("dst") and r.get("dst") != "default"}

    def install(self, entries, src=None):
        """Replace the table with ``[{dst, port, via}]``; returns the number of commands run. ``src`` (this
        node's EXTOLL address) is the source of packets the node sends itself, ICMP errors included."""
        # Links are raised by whoever cables them (the harness, an operator); a link that is down stays down
        # and routes through it are left out until it is back (the kernel refuses a nexthop on a down link).
        names = ports(self.prefix)
        wanted = {}
        for entry in entries:
            dev = names.get(int(entry["port"]), "%s%d" % (self.prefix, int(entry["port"])))
            if operstate(dev) in ("up", "unknown"):
                wanted[entry["dst"]] = (dev, entry["via"])
        batch = []
        current = self.installed()
        for dst, (dev, via) in sorted(wanted.items()):
            have = current.get(dst)
            if have and have.get("dev") == dev and have.get("gateway") == via and have.get("prefsrc") == src:
                continue
            batch.append("route replace %s/32 via %s dev %s onlink%s table %s"
                         % (dst, via, dev, " src %s" % src if src else "", self.table))
        for dst in sorted(set(current) - set(wanted)):
            batch.append("route del %s table %s" % (dst, self.table))
        if batch:
            ip("-force", "-batch", "-", input_text="\n".join(batch) + "\n")
        return len(batch)

    def rule_present(self):
        return any(str(r.get("priority")) == self.priority and r.get("table") == self.table
                   for r in ip_json("-4", "rule", "show"))

    def set_network(self, up):
        present = self.rule_present()
        if up and not present:
            ip("rule", "add", "to", self.cidr, "lookup", self.table, "priority", self.priority)
        elif not up and present:
            ip("rule", "del", "priority", self.priority)
        return up != present
