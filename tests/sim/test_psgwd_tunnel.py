# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

"""The simulator's VXLAN tunnel from a booster node to a gateway (msa_sim.psgwd.tunnel); ip is a recording fake."""

import json
import subprocess

import pytest

from msa_sim.psgwd import tunnel


class Ip:
    def __init__(self, links=(), routes=0):
        self.calls, self.links, self.routes = [], set(links), routes

    def __call__(self, argv, **_kw):
        self.calls.append(argv)
        if argv[:3] == ["ip", "link", "show"]:
            return subprocess.CompletedProcess(argv, 0 if argv[3] in self.links else 1, "", "")
        if argv[:3] == ["ip", "-j", "route"]:
            return subprocess.CompletedProcess(argv, 0, json.dumps([{}] * self.routes), "")
        return subprocess.CompletedProcess(argv, 0, "", "")

    def changes(self):
        return [c for c in self.calls if c[:3] != ["ip", "link", "show"] and c[:2] != ["ip", "-j"]]


def test_a_booster_node_tunnels_a_cluster_peer_to_the_gateway_both_ends_agreeing_on_its_mac():
    ip = Ip()
    assert tunnel.main(["add", "10.43.0.20", "10.44.0.80", "10.44.0.40"], run=ip) == 0
    assert ip.changes() == [
        ["ip", "link", "add", "msagw0a2c0050", "type", "vxlan", "id", str(0x2c0050), "local", "10.44.0.40", "remote",
         "10.44.0.80", "dstport", "4789"],
        ["ip", "link", "set", "msagw0a2c0050", "up"],
        ["ip", "neigh", "replace", "10.44.0.80", "lladdr", "02:4d:0a:2c:00:50", "dev", "msagw0a2c0050", "nud",
         "permanent"],
        ["ip", "route", "replace", "10.43.0.20/32", "via", "10.44.0.80", "dev", "msagw0a2c0050", "onlink",
         "src", "10.44.0.40"]]
    gw = Ip()
    assert tunnel.main(["gateway", "10.44.0.80"], run=gw) == 0
    assert ["ip", "link", "set", "msagw0", "address", "02:4d:0a:2c:00:50"] in gw.changes()
    assert gw.changes()[0][:7] == ["ip", "link", "add", "msagw0", "type", "vxlan", "id"]
    assert gw.changes()[0][7] == str(0x2c0050)   # the id the booster node computed for this gateway


def test_tunnels_to_two_gateways_get_two_devices_with_different_ids():
    ip = Ip()
    tunnel.main(["add", "10.43.0.20", "10.44.0.80", "10.44.0.40"], run=ip)
    tunnel.main(["add", "10.43.0.21", "10.44.0.81", "10.44.0.40"], run=ip)
    adds = [c for c in ip.changes() if c[:3] == ["ip", "link", "add"]]
    assert [(c[3], c[7]) for c in adds] == [("msagw0a2c0050", str(0x2c0050)), ("msagw0a2c0051", str(0x2c0051))]


def test_an_existing_device_is_reused_and_goes_with_its_last_route():
    ip = Ip(links={"msagw0a2c0050"}, routes=2)
    tunnel.main(["add", "10.43.0.21", "10.44.0.80", "10.44.0.40"], run=ip)
    assert not any(c[:3] == ["ip", "link", "add"] for c in ip.changes())
    tunnel.main(["del", "10.43.0.21", "10.44.0.80", "10.44.0.40"], run=ip)
    assert ip.changes()[-1] == ["ip", "route", "del", "10.43.0.21/32", "via", "10.44.0.80", "dev", "msagw0a2c0050"]
    last = Ip(links={"msagw0a2c0050"}, routes=1)
    tunnel.main(["del", "10.43.0.20", "10.44.0.80", "10.44.0.40"], run=last)
    assert last.changes()[-1] == ["ip", "link", "del", "msagw0a2c0050"]


@pytest.mark.parametrize("argv", [["add", "10.43.0.20", "10.44.0.80;reboot", "10.44.0.40"],
                                  ["add", "fd00::1", "10.44.0.80", "10.44.0.40"], ["gateway"], ["flush"]])
def test_bad_arguments_run_nothing(argv, capsys):
    ip = Ip()
    assert tunnel.main(argv, run=ip) == 1
    assert ip.calls == [] and capsys.readouterr().err.startswith("msa-gw-tunnel: ")
