# SPDX-License-Identifier: GPL-3.0-or-later
"""The shared file system against each node's local disk, from a node of each module, in one run.

Run: ``MSA_BENCH_SYSTEM=mini .venv/bin/python tests/bench/bench_storage.py`` after ``make sim-up site SYSTEM=mini``
with the shared file systems deployed (msa.hpc.glusterfs_server on the storage nodes, msa.hpc.shared_fs on the
others). Without MSA_BENCH_SYSTEM (or ``--system``) it says so and measures nothing.

On the first node of each of --modules (default cm, esb, dam) it runs tests/bench/_storage_probe.py as root, with
the node's python3, on --mount (default /scratch) and on --local (default /var/tmp, the node's own disk): one
file of --size-mib written with fsync and read back (O_DIRECT where the file system allows it), then --files small
files of 4 KiB created, stat()ed and removed. It prints each figure and the ratios shared / local per module.

The paths differ by module as the seed draws them: a CM node reaches the storage network through the IP gateways
(InfiniBand, then forwarded), a DAM node sits on the storage network itself, an ESB node through its EXTOLL path.
The bench reads the byte counters of the node's interfaces (one per fabric, `<fabric>0`) and of the IP gateways
during each shared run, so the figures say which path the traffic took (a write to a two-way replicated GlusterFS
volume leaves the client twice: the client writes to both servers).
"""
from __future__ import annotations

import argparse
import json
import os
import posixpath
import shlex
import sys

import _bench_paths  # (the checkout's collection, stand-ins and tests)

import bench_containers  # noqa: E402
from bench_containers import say, ssh  # noqa: E402

PROBE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_storage_probe.py")
FIGURES = (("write", "write_mib_s", "MiB/s"), ("read", "read_mib_s", "MiB/s"), ("create", "create_per_s", "/s"),
           ("stat", "stat_per_s", "/s"), ("unlink", "unlink_per_s", "/s"))
MIB = 1 << 20


def parse_args(argv=None, environ=None):
    environ = os.environ if environ is None else environ
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--system", default=environ.get("MSA_BENCH_SYSTEM"))
    ap.add_argument("--mount", default="/scratch", help="the shared file system's mount point")
    ap.add_argument("--local", default="/var/tmp", help="a directory on the node's own disk")
    ap.add_argument("--modules", default="cm,esb,dam", help="modules to measure from (their first node each)")
    ap.add_argument("--size-mib", type=int, default=64)
    ap.add_argument("--files", type=int, default=300)
    args = ap.parse_args(argv)
    for name in ("mount", "local"):
        value = getattr(args, name)
        if not value.startswith("/") or posixpath.normpath(value) != value or value == "/":
            ap.error("--%s %r is not a normalised absolute directory below /" % (name, value))
    if not 1 <= args.size_mib <= 4096:
        ap.error("--size-mib %d is not from 1 to 4096" % args.size_mib)
    if not 1 <= args.files <= 100000:
        ap.error("--files %d is not from 1 to 100000" % args.files)
    args.modules = [m for m in args.modules.split(",") if m]
    if not args.modules or not all(m.isalnum() for m in args.modules):
        ap.error("--modules %r is not a comma-separated list of module names" % ",".join(args.modules))
    return args


def ratios(shared, local):
    """{figure: shared / local} of one node's two results (None where the local figure is 0)."""
    return {name: (shared[key] / local[key] if local[key] else None) for name, key, unit in FIGURES}


def figures_line(result):
    parts = ["%s %.1f %s" % (name, result[key], unit) for name, key, unit in FIGURES]
    return ", ".join(parts) + ("" if result.get("read_direct", True) else " (read through the page cache)")


def ratio_line(module, node, shared, local):
    values = ratios(shared, local)
    return "ratio shared/local %-4s %-7s %s" % (module, node, "  ".join(
        "%s %s" % (name, "n/a" if values[name] is None else "%.3f" % values[name]) for name, key, unit in FIGURES))


def traffic_line(node, net):
    """The bytes each interface of ``node`` moved during the shared run."""
    moved = ["%s tx %.1f MiB rx %.1f MiB" % (i, c["tx"] / MIB, c["rx"] / MIB) for i, c in sorted(net.items()) if c]
    return "  %s during the shared run: %s" % (node, "; ".join(moved) or "no counters")


def gateway_bytes(before, after):
    """{gateway: bytes sent on all its interfaces between two readings} ({gw: {iface: tx}} each)."""
    return {gw: sum(after[gw].get(i, 0) - tx for i, tx in before[gw].items()) for gw in before if gw in after}


def _tx_counters(address, ifaces):
    script = "for i in %s; do printf '%%s %%s\\n' $i $(cat /sys/class/net/$i/statistics/tx_bytes 2>/dev/null || echo -1); done\n" % (
        " ".join(shlex.quote(i) for i in ifaces))
    out = {}
    for line in ssh(address, script).splitlines():
        name, dummy, value = line.partition(" ")
        if value.strip().lstrip("-").isdigit() and int(value) >= 0:
            out[name] = int(value)
    return out


def main(argv=None):
    args = parse_args(argv)
    if not args.system:
        _bench_paths.skip("bench_storage", "no system: set MSA_BENCH_SYSTEM=<system> or run make bench-system")
    inv = bench_containers.system_inventory(args.system)
    hostvars = inv["_meta"]["hostvars"]
    any_host = next(iter(hostvars.values()))
    fabrics = any_host["msa_fabrics"]

    def ifaces(host):
        return ["%s0" % f for f in sorted(hostvars[host]["msa_addresses"]) if fabrics[f].get("kind") != "extoll"]

    gateways = sorted(inv.get("msa_ip_gateway", {}).get("hosts", []))
    with open(PROBE, encoding="utf-8") as fh:
        probe = fh.read()
    say("system %s: %s against %s, %d MiB file, %d small files, from %s" % (
        args.system, args.mount, args.local, args.size_mib, args.files, ", ".join(args.modules)))
    results = {}
    for module in args.modules:
        hosts = sorted(inv.get(module, {}).get("hosts", []))
        if not hosts:
            raise SystemExit("bench_storage: system %s has no module %r" % (args.system, module))
        node = hosts[0]
        address = hostvars[node]["ansible_host"]
        gw_before = {g: _tx_counters(hostvars[g]["ansible_host"], ifaces(g)) for g in gateways}
        out = ssh(address, "cat > /root/_storage_probe.py <<'PROBE_EOF'\n%sPROBE_EOF\n"
                           "python3 -I /root/_storage_probe.py --dir shared=%s --dir local=%s --size-mib %d --files %d "
                           "--net %s\n" % (probe, shlex.quote(args.mount), shlex.quote(args.local), args.size_mib,
                                           args.files, ",".join(ifaces(node))), timeout=1800)
        gw_after = {g: _tx_counters(hostvars[g]["ansible_host"], ifaces(g)) for g in gateways}
        lines = [line for line in out.splitlines() if line.startswith("RESULT ")]
        if not lines:
            raise RuntimeError("%s printed no result:\n%s" % (node, out[-2000:]))
        measured = {r["label"]: r for r in json.loads(lines[0][len("RESULT "):])}
        results[module] = {"node": node, "shared": measured["shared"], "local": measured["local"],
                           "gateways": gateway_bytes(gw_before, gw_after)}
        say("%s (%s) done" % (node, module))

    print("shared file system %s against the local disk %s: %d MiB written with fsync and read back, %d files of "
          "4 KiB created, stat()ed, removed" % (args.mount, args.local, args.size_mib, args.files))
    for module, r in results.items():
        print("  %-4s %-7s shared: %s" % (module, r["node"], figures_line(r["shared"])))
        print("  %-4s %-7s local:  %s" % (module, r["node"], figures_line(r["local"])))
        print(traffic_line(r["node"], r["shared"]["net"]))
        if r["gateways"]:
            print("  IP gateways sent meanwhile: %s" % ", ".join(
                "%s %.1f MiB" % (g, b / MIB) for g, b in sorted(r["gateways"].items())))
    for module, r in results.items():
        print(ratio_line(module, r["node"], r["shared"], r["local"]))
    print("all nodes are containers on one host (%d CPUs, load %.1f): the storage servers' disks and the local disks "
          "are the same host disk" % (os.cpu_count(), os.getloadavg()[0]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
