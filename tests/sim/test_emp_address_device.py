# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

"""The EMP slave stand-in holds a node's EXTOLL address on an interface of its own, extoll0, not on lo: a dummy
where the kernel has the driver, else a veth end whose peer is up (Open MPI's btl_tcp_if_include skips loopback
interfaces, so MPI over EXTOLL needs it; msa.hpc.mpi)."""

import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
ENV = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO / "sim"), str(REPO / "collections")]))

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("ip") or not shutil.which("unshare"),
                                reason="needs root, iproute2 and util-linux to make a network namespace")

PROG = """
import json, subprocess
from msa_sim.emp import iproute
fwd = iproute.Forwarding("10.99.0.0/24")
first = fwd.address_device()
fwd.prepare("10.99.0.7")
again = fwd.address_device()
links = json.loads(subprocess.run(["ip", "-j", "-d", "addr", "show"], capture_output=True, text=True).stdout)
print(json.dumps({"first": first, "again": again, "links": links}))
"""


def test_address_is_on_extoll0_not_lo():
    # a new network namespace with its own sysfs (the code reads /sys/class/net), as a node's container has;
    # prepare() writes sysctls under /proc/sys/net, which the namespace has of its own
    out = subprocess.run(["unshare", "--net", "--mount", "sh", "-c", 'mount -t sysfs sysfs /sys && exec "$0" -c "$1"',
                          sys.executable, PROG], capture_output=True, text=True, env=ENV, timeout=60, check=True)
    got = json.loads(out.stdout)
    assert got["first"] == got["again"] == "extoll0", got
    links = {link["ifname"]: link for link in got["links"]}
    holder = [name for name, link in links.items()
              if any(a.get("local") == "10.99.0.7" for a in link.get("addr_info", []))]
    assert holder == ["extoll0"], holder
    kind = links["extoll0"].get("linkinfo", {}).get("info_kind")
    assert kind in ("dummy", "veth"), links["extoll0"]
    assert "LOOPBACK" not in links["extoll0"]["flags"]
    assert "UP" in links["extoll0"]["flags"]
    if kind == "veth":
        # the peer is up, so extoll0 has its carrier (a program that wants a working link sees one)
        assert "UP" in links["extoll0p"]["flags"] and "LOWER_UP" in links["extoll0"]["flags"], links
