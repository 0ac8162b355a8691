# SPDX-License-Identifier: GPL-3.0-or-later
"""UDP traceroute with IP_RECVERR (no ping/traceroute binary needed): `python3 -m msa_sim.emp.trace DST`."""
from __future__ import annotations

import argparse
import json
import socket
import struct
import sys
import time

IP_RECVERR = 11
SO_EE_ORIGIN_ICMP = 2
ICMP_TIME_EXCEEDED = 11
ICMP_DEST_UNREACH = 3


def probe(dst, ttl, port=33434, timeout=1.0):
    """Send one UDP datagram with ``ttl``; return ``(address that answered, "hop"|"reached"|"refused"|None)``."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        sock.setsockopt(socket.IPPROTO_IP, IP_RECVERR, 1)
        sock.setsockopt(socket.IPPROTO_IP, socket.IP_TTL, ttl)
        try:
            sock.sendto(b"emp-trace", (dst, port + ttl))
        except OSError as exc:  # e.g. EACCES from a prohibit route
            return None, "refused: %s" % exc.strerror
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                _, ancdata, _, _ = sock.recvmsg(512, 512, socket.MSG_ERRQUEUE | socket.MSG_DONTWAIT)
            except BlockingIOError:
                time.sleep(0.01)
                continue
            for level, kind, data in ancdata:
                if level != socket.IPPROTO_IP or kind != IP_RECVERR:
                    continue
                errno_, origin, icmp_type, code = struct.unpack_from("=IBBB", data)
                offender = socket.inet_ntoa(data[20:24])  # sockaddr_in after the 16-byte sock_extended_err
                if origin == SO_EE_ORIGIN_ICMP and icmp_type == ICMP_TIME_EXCEEDED:
                    return offender, "hop"
                if origin == SO_EE_ORIGIN_ICMP and icmp_type == ICMP_DEST_UNREACH:
                    if code == 3:
                        return offender, "reached"
                    return offender, "unreachable(code %d)" % code
                return offender, "error(errno %d)" % errno_
        return None, None
    finally:
        sock.close()


def trace(dst, max_hops=16, timeout=1.0):
    hops = []
    for ttl in range(1, max_hops + 1):
        addr, kind = probe(dst, ttl, timeout=timeout)
        hops.append({"ttl": ttl, "address": addr, "result": kind})
        if kind != "hop":
            break
    return hops


def main(argv=None):
    parser = argparse.ArgumentParser(prog="emp-trace", description=__doc__)
    parser.add_argument("destination")
    parser.add_argument("--max-hops", type=int, default=16)
    parser.add_argument("--timeout", type=float, default=1.0)
    args = parser.parse_args(argv)
    hops = trace(args.destination, args.max_hops, args.timeout)
    print(json.dumps(hops))
    return 0 if hops and hops[-1]["result"] == "reached" else 1


if __name__ == "__main__":
    sys.exit(main())
