# SPDX-License-Identifier: GPL-3.0-or-later
"""The simulator's booster side of a job's path to a gateway: a VXLAN tunnel over the EXTOLL torus.

On real EXTOLL a booster node's ``<cluster addr>/32 via <gateway's EXTOLL addr>`` is one IP hop. The simulated torus
forwards hop by hop by destination address (msa_sim.emp.iproute), and its inner nodes have no route to cluster
fabric addresses, so the booster node wraps such packets in VXLAN (UDP to the gateway's EXTOLL address, which every
torus node routes) instead:

* gateway (``gateway OWN``, run by the agent with ``--tunnel vxlan``): device ``msagw0`` on its EXTOLL address, its
  VXLAN id and MAC derived from that address (a booster node with tunnels to two gateways needs two devices, and
  Linux refuses two VXLAN devices with one id and port); what comes out of it is forwarded (or dropped) by the gateway's
  nftables rules like any other packet;
* booster node (``add PEER VIA OWN`` / ``del PEER VIA OWN``, the compute nodes' route hook's ``--route-helper``):
  device ``msagw<VIA in hex>`` to the gateway, the gateway's MAC as a permanent neighbour, and
  ``PEER/32 via VIA dev msagw… onlink src OWN`` (the node's EXTOLL address, which the gateway forwards for the job,
  whatever address the kernel would pick for a device without one); the device goes when its last route does.

The way back (cluster node → gateway → torus → booster node) is ordinary EXTOLL routing. Stdlib only; every address
is checked before ``ip`` sees it.
"""
from __future__ import annotations

import ipaddress
import json
import subprocess
import sys

PORT = 4789
GATEWAY_DEVICE = "msagw0"


class TunnelError(RuntimeError):
    pass


def _v4(text, field):
    try:
        addr = ipaddress.IPv4Address(str(text))
    except ValueError:
        raise TunnelError("%s %r is not an IPv4 address" % (field, text)) from None
    return str(addr)


def gateway_mac(address):
    """The MAC of a gateway's tunnel device, from its EXTOLL address (both ends compute it)."""
    return "02:4d:" + ":".join("%02x" % b for b in ipaddress.IPv4Address(address).packed)


def vni(address):
    """The VXLAN id of a gateway's tunnels: the low 24 bits of its EXTOLL address (both ends compute it)."""
    return int(ipaddress.IPv4Address(address)) & 0xFFFFFF


def device(via):
    return "msagw%08x" % int(ipaddress.IPv4Address(via))


def gateway_commands(own):
    own = _v4(own, "gateway address")
    return [["ip", "link", "add", GATEWAY_DEVICE, "type", "vxlan", "id", str(vni(own)), "local", own, "dstport", str(PORT),
             "nolearning"],
            ["ip", "link", "set", GATEWAY_DEVICE, "address", gateway_mac(own)],
            ["ip", "link", "set", GATEWAY_DEVICE, "up"]]


def add_commands(peer, via, own):
    peer, via, own = _v4(peer, "peer"), _v4(via, "gateway"), _v4(own, "own address")
    dev = device(via)
    return [["ip", "link", "add", dev, "type", "vxlan", "id", str(vni(via)), "local", own, "remote", via,
             "dstport", str(PORT)],
            ["ip", "link", "set", dev, "up"],
            ["ip", "neigh", "replace", via, "lladdr", gateway_mac(via), "dev", dev, "nud", "permanent"],
            ["ip", "route", "replace", "%s/32" % peer, "via", via, "dev", dev, "onlink", "src", own]]


def del_commands(peer, via, routes_left):
    """Remove one route; the device too when ``routes_left`` (routes still on it after this one) is 0."""
    peer, via = _v4(peer, "peer"), _v4(via, "gateway")
    out = [["ip", "route", "del", "%s/32" % peer, "via", via, "dev", device(via)]]
    if routes_left == 0:
        out.append(["ip", "link", "del", device(via)])
    return out


def _exists(dev, run):
    return run(["ip", "link", "show", dev], capture_output=True, text=True, check=False).returncode == 0


def _run_all(commands, run, skip_existing=None):
    for argv in commands:
        if skip_existing and argv[:3] == ["ip", "link", "add"] and _exists(argv[3], run):
            continue
        proc = run(argv, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise TunnelError("%s failed: %s" % (" ".join(argv), (proc.stderr or "").strip() or proc.returncode))


def routes_on(dev, run):
    proc = run(["ip", "-j", "route", "show", "dev", dev], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        return 0
    return len(json.loads(proc.stdout or "[]"))


def setup_gateway(own, run=subprocess.run):
    """The gateway's end of the tunnels (idempotent)."""
    _run_all(gateway_commands(own), run, skip_existing=True)


def main(argv=None, run=subprocess.run):
    """``gateway OWN`` | ``add PEER VIA OWN`` | ``del PEER VIA OWN``; exit 0, or 1 with one line on stderr."""
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        if args[:1] == ["gateway"] and len(args) == 2:
            setup_gateway(args[1], run)
        elif args[:1] == ["add"] and len(args) == 4:
            _run_all(add_commands(*args[1:]), run, skip_existing=True)
        elif args[:1] == ["del"] and len(args) == 4:
            dev = device(_v4(args[2], "gateway"))
            _run_all(del_commands(args[1], args[2], max(routes_on(dev, run) - 1, 0)), run)
        else:
            raise TunnelError("usage: python3 -m msa_sim.psgwd.tunnel gateway OWN | add|del PEER VIA OWN")
    except TunnelError as exc:
        print("msa-gw-tunnel: %s" % exc, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
