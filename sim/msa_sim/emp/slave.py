# SPDX-License-Identifier: GPL-3.0-or-later
"""EMP slave agent: `python3 -m msa_sim.emp.slave [-c /etc/extoll/slave.conf]`.

Learns its neighbours with a hello frame on every ``ext<port>`` link (raw Ethernet, ethertype 0x88B5,
like LLDP), reports GUID and port table to the master, installs the routing table and network state the
master answers with.
"""
from __future__ import annotations

import argparse
import json
import select
import socket
import sys
import threading
import time

from ansible_collections.msa.hpc.plugins.module_utils._rest import RestClient, RestError

from . import config, iproute

ETHERTYPE = 0x88B5
MAGIC = b"EMPHELLO"
PACKET_OUTGOING = 4


class Hello:
    """Sends a hello on every port each interval and keeps the neighbour heard last on each port."""

    def __init__(self, guid, prefix="ext", interval=1.0):
        self.guid = guid
        self.prefix = prefix
        self.interval = interval
        self.hold = 3 * interval
        self.neighbours = {}  # port → (peer guid, peer port, time heard)
        self.sockets = {}     # port → socket
        self.ifindex = {}     # port → index of the interface its socket is bound to
        self.stop = threading.Event()
        self.lock = threading.Lock()

    def _sync_sockets(self):
        """One socket per ext<port>, bound to the interface's current index: a link re-cabled under the same
        name (the neighbour was power-cycled) is a new interface, and a socket bound to the old one hears nothing."""
        present = {port: (name, iproute.ifindex(name)) for port, name in iproute.ports(self.prefix).items()}
        for port in list(self.sockets):
            if port not in present or present[port][1] != self.ifindex.get(port):
                self.sockets.pop(port).close()
                self.ifindex.pop(port, None)
                with self.lock:
                    self.neighbours.pop(port, None)
        for port, (name, index) in present.items():
            if port not in self.sockets and index is not None:
                try:
                    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETHERTYPE))
                    sock.bind((name, ETHERTYPE))
                    sock.setblocking(False)
                except OSError:
                    continue
                self.sockets[port] = sock
                self.ifindex[port] = index

    def _send(self):
        for port, sock in list(self.sockets.items()):
            name = "%s%d" % (self.prefix, port)
            try:
                with open("/sys/class/net/%s/address" % name) as handle:
                    mac = bytes.fromhex(handle.read().strip().replace(":", ""))
                payload = MAGIC + json.dumps({"guid": "0x%x" % self.guid, "port": port}).encode()
                sock.send(b"\xff" * 6 + mac + ETHERTYPE.to_bytes(2, "big") + payload)
            except OSError:
                pass  # link down: the neighbour expires

    def _receive(self, timeout):
        socks = {s: p for p, s in self.sockets.items()}
        readable, _, _ = select.select(list(socks), [], [], timeout) if socks else ([], [], time.sleep(timeout))
        for sock in readable:
            try:
                frame, addr = sock.recvfrom(2048)
            except OSError:
                continue
            if addr[2] == PACKET_OUTGOING or frame[14:14 + len(MAGIC)] != MAGIC:
                continue
            try:
                info = json.loads(frame[14 + len(MAGIC):].decode())
                peer = int(info["guid"], 0)
            except (ValueError, KeyError, TypeError):
                continue
            if peer != self.guid:
                with self.lock:
                    self.neighbours[socks[sock]] = (peer, int(info["port"]), time.monotonic())

    def run(self):
        next_send = 0.0
        while not self.stop.is_set():
            now = time.monotonic()
            if now >= next_send:
                self._sync_sockets()
                self._send()
                next_send = now + self.interval
            self._receive(max(0.01, min(self.interval / 4, next_send - time.monotonic())))

    def table(self):
        now = time.monotonic()
        out = {}
        for port, name in iproute.ports(self.prefix).items():
            state = iproute.operstate(name)
            with self.lock:
                heard = self.neighbours.get(port)
            if state == "up" and heard and now - heard[2] <= self.hold:
                out[port] = {"state": "up", "peer_guid": "0x%x" % heard[0], "peer_port": heard[1]}
            else:
                out[port] = {"state": "down" if state != "up" else "no-peer"}
        return out


class Slave:
    def __init__(self, conf):
        self.conf = conf
        self.guid = int(conf["guid"], 0)
        self.prefix = conf["interface_prefix"]
        self.hello = Hello(self.guid, self.prefix, float(conf["hello_interval"]))
        self.forwarding = iproute.Forwarding(conf["extoll_cidr"], conf["route_table"], conf["rule_priority"],
                                             self.prefix)
        self.token = config.read_token(conf["token_file"])
        self.version = 0
        self.routes = None
        self.network = "down"
        self.address = None

    def report_body(self):
        return {"guid": "0x%x" % self.guid, "node_id": self.conf["node_id"] or None,
                "address": self.conf["address"] or None, "ports": self.hello.table(),
                "counters": {name: iproute.counters(name) for name in iproute.ports(self.prefix).values()},
                "routes_version": self.version, "network": self.network}

    def post(self, body):
        """Report to the master and return its reply; the report loop itself is the retry (a report is a state)."""
        reply = RestClient(self.conf["master"], token=self.token, ca_path=self.conf.get("ca_file") or None, timeout=5,
                           retries=0).post("slaves/report", body)
        if not isinstance(reply, dict):
            raise RestError("the EMP master at %s answered a report with %r, not a JSON object"
                            % (self.conf["master"], reply))
        return reply

    def apply(self, reply):
        if reply.get("address") and reply["address"] != self.address:
            self.forwarding.prepare(reply["address"])
            self.address = reply["address"]
        if "routes" in reply:
            self.routes = reply["routes"]
            self.version = int(reply.get("routes_version") or 0)
        if self.routes is not None:
            # Every cycle, not only on a new version: a neighbour's restart deletes the routes through its links
            # and the kernel does not bring them back when the link returns.
            self.forwarding.install(self.routes, self.address)
        network = reply.get("network", "down")
        self.forwarding.set_network(network == "up" and self.version > 0)
        self.network = network if self.version > 0 else "down"

    def run(self):
        threading.Thread(target=self.hello.run, daemon=True).start()
        interval = float(self.conf["report_interval"])
        while True:
            try:
                self.apply(self.post(self.report_body()))
            except (OSError, RestError, ValueError, iproute.IpError) as exc:
                print("emp-slave: %s" % exc, file=sys.stderr, flush=True)
            time.sleep(interval)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="emp-slave", description=__doc__.split("\n")[0])
    parser.add_argument("-c", "--config", default="/etc/extoll/slave.conf")
    args = parser.parse_args(argv)
    try:
        conf = config.load(args.config, config.SLAVE_DEFAULTS)
        if not conf["guid"]:
            raise ValueError("%s: guid is required" % args.config)
        slave = Slave(conf)
    except (OSError, ValueError) as exc:
        print("emp-slave: %s" % exc, file=sys.stderr)
        return 1
    slave.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
