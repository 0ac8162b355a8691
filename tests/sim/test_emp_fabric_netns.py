# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

"""The EMP master and slave agents on a real 3x2 torus of network namespaces joined by veth `ext<port>` links."""

import json
import os
import pathlib
import shutil
import subprocess
import sys
import time

import pytest

from ansible_collections.msa.hpc.plugins.module_utils.extoll import topology as T

REPO = pathlib.Path(__file__).resolve().parents[2]
ENV = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO / "sim"), str(REPO / "collections")]))
PY = sys.executable
MASTER = "http://10.250.0.1:9000"

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("ip"),
                                reason="needs root and iproute2 to build network namespaces")


def sh(*args, check=True):
    proc = subprocess.run(list(args), capture_output=True, text=True, env=ENV)
    if check and proc.returncode:
        raise AssertionError("%s failed: %s%s" % (" ".join(args), proc.stdout, proc.stderr))
    return proc


class Fabric:
    """Namespaces ``emptest-<pid>-n<id>`` (one per EXTOLL node) and ``emptest-<pid>-m`` (management bridge and
    the master), veth pairs ``ext<port>`` for the torus links, ``mgmt0`` towards the bridge."""

    def __init__(self, tmp, topo):
        self.tmp = tmp
        self.topo = topo
        self.tag = "emptest-%d" % (os.getpid() % 100000)
        self.mgmt = self.tag + "-m"
        self.procs = []
        self.namespaces = []

    def ns(self, nid):
        return "%s-n%d" % (self.tag, nid)

    def ctrl(self, *args, check=True):
        proc = sh("ip", "netns", "exec", self.mgmt, PY, "-m", "msa_sim.emp.ctrl", "--endpoint", MASTER,
                  "--token-file", str(self.tmp / "token"), *args, check=check)
        try:
            return json.loads(proc.stdout)
        except ValueError:
            return proc.stdout

    def trace(self, src, dst):
        proc = sh("ip", "netns", "exec", self.ns(src), PY, "-m", "msa_sim.emp.trace", "--timeout", "1",
                  "--max-hops", "8", "10.44.0.%d" % dst, check=False)
        hops = json.loads(proc.stdout)
        return [int(h["address"].rsplit(".", 1)[1]) if h["address"] else None for h in hops], hops[-1]["result"]

    def up(self):
        (self.tmp / "token").write_text("s3cret\n")
        sh("ip", "netns", "add", self.mgmt)
        self.namespaces.append(self.mgmt)
        sh("ip", "-n", self.mgmt, "link", "add", "empbr", "type", "bridge")
        sh("ip", "-n", self.mgmt, "addr", "add", "10.250.0.1/24", "dev", "empbr")
        sh("ip", "-n", self.mgmt, "link", "set", "empbr", "up")
        sh("ip", "-n", self.mgmt, "link", "set", "lo", "up")
        for nid in sorted(self.topo.nodes):
            ns = self.ns(nid)
            sh("ip", "netns", "add", ns)
            self.namespaces.append(ns)
            sh("ip", "-n", ns, "link", "set", "lo", "up")
            sh("ip", "link", "add", "name", "mgmt0", "netns", ns, "type", "veth", "peer", "name", "m%d" % nid,
               "netns", self.mgmt)
            sh("ip", "-n", self.mgmt, "link", "set", "m%d" % nid, "master", "empbr", "up")
            sh("ip", "-n", ns, "addr", "add", "10.250.0.%d/24" % (10 + nid), "dev", "mgmt0")
            sh("ip", "-n", ns, "link", "set", "mgmt0", "up")
            sh("ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv4.icmp_ratelimit=0")
        for a, pa, b, pb in self.topo.links:
            sh("ip", "link", "add", "name", "ext%d" % pa, "netns", self.ns(a), "type", "veth", "peer",
               "name", "ext%d" % pb, "netns", self.ns(b))
            sh("ip", "-n", self.ns(a), "link", "set", "ext%d" % pa, "up")
            sh("ip", "-n", self.ns(b), "link", "set", "ext%d" % pb, "up")
        (self.tmp / "topology.td").write_text(T.to_td(self.topo))
        (self.tmp / "master.conf").write_text(
            "listen_address = 10.250.0.1\nlisten_port = 9000\nstate_dir = %s\ntoken_file = %s\n"
            "topology_file = %s\nextoll_cidr = 10.44.0.0/24\ndiscovery_interval = 0.3\nslave_timeout = 1.5\n"
            % (self.tmp / "state", self.tmp / "token", self.tmp / "topology.td"))
        self.spawn(self.mgmt, "master", self.tmp / "master.conf")
        for nid, node in sorted(self.topo.nodes.items()):
            conf = self.tmp / ("slave%d.conf" % nid)
            conf.write_text("master = %s\nguid = 0x%x\nnode_id = %d\naddress = 10.44.0.%d\n"
                            "extoll_cidr = 10.44.0.0/24\nhello_interval = 0.2\nreport_interval = 0.2\n"
                            "token_file = %s\n" % (MASTER, node.guid, nid, nid, self.tmp / "token"))
            self.spawn(self.ns(nid), "slave", conf)

    def spawn(self, ns, program, conf):
        log = open(self.tmp / ("%s-%s.log" % (program, ns)), "w")
        # the master's API here has its token but no TLS: the daemon serves it only when told so
        insecure = ["--insecure-no-auth"] if program == "master" else []
        self.procs.append(subprocess.Popen(["ip", "netns", "exec", ns, PY, "-m", "msa_sim.emp.%s" % program,
                                            "-c", str(conf)] + insecure, env=ENV, stdout=log,
                                           stderr=subprocess.STDOUT))

    def down(self):
        for proc in self.procs:
            proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
        for ns in self.namespaces:
            sh("ip", "netns", "del", ns, check=False)

    def wait_for(self, what, predicate, timeout=15.0):
        deadline = time.monotonic() + timeout
        value = None
        while time.monotonic() < deadline:
            value = what()
            if predicate(value):
                return value
            time.sleep(0.2)
        raise AssertionError("timed out waiting; last value: %r" % (value,))

    def route(self, tables, topo, src, dst):
        adj = topo.adjacency()
        path = [src]
        while path[-1] != dst and len(path) <= len(adj):
            port = tables[str(path[-1])][str(dst)]
            path.append(adj[path[-1]][port][0])
        return path


@pytest.fixture(scope="module")
def fabric(tmp_path_factory):
    fab = Fabric(tmp_path_factory.mktemp("emp"), T.generate("torus", [3, 2], routing="DimensionOrder"))
    try:
        fab.up()
        fab.wait_for(lambda: fab.ctrl("emp", "discover", check=False),
                     lambda r: isinstance(r, dict) and r["comparison"] and T.matches(r["comparison"]))
        yield fab
    finally:
        fab.down()


def test_discovery_over_hello_frames_matches_the_topology_file(fabric):
    found = fabric.ctrl("emp", "discover")
    assert len(found["nodes"]) == 6 and len(found["links"]) == 12
    assert found["comparison"] == {"missing_nodes": [], "missing_links": [], "unexpected_nodes": [],
                                   "unexpected_links": []}
    td = T.parse_td(fabric.ctrl("emp", "gettd"), "getTD")
    assert T.matches(T.compare(fabric.topo, td))
    assert fabric.ctrl("network", "status")["status"] == "un-configured"


def test_packets_follow_the_computed_dimension_order_route_hop_by_hop(fabric):
    # before the network is started EXTOLL traffic is refused
    hops, result = fabric.trace(1, 6)
    assert result.startswith("refused")
    status = fabric.ctrl("emp", "run", "--mode", "topology", "--wait", "--timeout", "20")
    assert status["state"] == "done" and status["algorithm"] == "DimensionOrder"
    assert status["summary"]["deadlock_free"] and status["summary"]["virtual_channels"] == 2
    assert fabric.ctrl("network", "status")["status"] == "configured"
    assert fabric.trace(1, 6)[1].startswith("refused")  # configured, not started
    fabric.ctrl("network", "start")
    fabric.wait_for(lambda: fabric.trace(1, 6)[1], lambda r: r == "reached")
    tables = fabric.ctrl("emp", "routes")["tables"]
    for src, dst in ((1, 6), (6, 1), (3, 4), (2, 5)):
        expected = fabric.route(tables, fabric.topo, src, dst)
        # each slave installs its table on its own report cycle: wait until this pair's path is complete
        hops, result = fabric.wait_for(lambda: fabric.trace(src, dst), lambda r: r[1] == "reached")
        assert hops == expected[1:], "packet %d->%d went %s, routing table says %s" % (src, dst, hops, expected)
        assert len(expected) - 1 <= 2  # dimension order on a 3x2 torus is minimal
    fabric.ctrl("network", "stop")
    assert fabric.ctrl("network", "status")["status"] == "down"
    fabric.wait_for(lambda: fabric.trace(1, 6)[1], lambda r: (r or "").startswith("refused"))
    fabric.ctrl("network", "start")


def test_a_failed_link_is_reported_and_auto_mode_reroutes_with_updown(fabric):
    fabric.ctrl("network", "start")
    tables = fabric.ctrl("emp", "routes")["tables"]
    path = fabric.route(tables, fabric.topo, 1, 2)
    assert path == [1, 2]
    adj = fabric.topo.adjacency()
    port = [p for p, (peer, _) in adj[1].items() if peer == 2][0]
    sh("ip", "-n", fabric.ns(1), "link", "set", "ext%d" % port, "down")
    try:
        missing = fabric.wait_for(lambda: fabric.ctrl("network", "missinglinks"), lambda r: len(r) == 1)
        assert missing == ["1 %d <-> %d 2" % (port, adj[1][port][1])]
        assert fabric.ctrl("network", "missingnodes") == []
        status = fabric.ctrl("emp", "run", "--mode", "auto", "--wait", "--timeout", "20")
        assert status["state"] == "done" and status["algorithm"] == "UpDown"
        assert status["summary"]["deadlock_free"] and status["summary"]["links"] == 11
        tables = fabric.ctrl("emp", "routes")["tables"]
        found = T.parse_td(fabric.ctrl("emp", "gettd"), "getTD")
        expected = fabric.route(tables, found, 1, 2)
        assert len(expected) == 3  # around the failed link
        hops = fabric.wait_for(lambda: fabric.trace(1, 2), lambda r: r[1] == "reached")[0]
        assert hops == expected[1:]
        for dst in (3, 4, 5, 6):
            assert fabric.trace(1, dst)[1] == "reached"
    finally:
        sh("ip", "-n", fabric.ns(1), "link", "set", "ext%d" % port, "up")


def test_slaves_restore_routes_a_neighbour_restart_took_away(fabric):
    fabric.ctrl("emp", "run", "--mode", "topology", "--wait", "--timeout", "20")
    fabric.ctrl("network", "start")
    fabric.wait_for(lambda: fabric.trace(1, 6)[1], lambda r: r == "reached")
    # a neighbour's restart deletes its links, and with them every route through them; the kernel does not
    # bring those routes back when the link returns, so the slave must (without a new routing version)
    adj = fabric.topo.adjacency()
    port = [p for p, (peer, _) in adj[1].items() if peer == 2][0]
    sh("ip", "-n", fabric.ns(1), "link", "set", "ext%d" % port, "down")
    sh("ip", "-n", fabric.ns(1), "link", "set", "ext%d" % port, "up")
    fabric.wait_for(lambda: fabric.trace(1, 2), lambda r: r[1] == "reached")
    tables = fabric.ctrl("emp", "routes")["tables"]
    assert fabric.trace(1, 2)[0] == fabric.route(tables, fabric.topo, 1, 2)[1:]
