# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

"""CLI of the stand-in psgwd: ``python3 -m msa_sim.psgwd --job ID --listen [FABRIC=]ADDR ... --port P``.

The job's secret is the first line of standard input (the agent writes it there): never an argument, never logged."""

import argparse
import logging
import os
import signal
import sys
import threading

from msa_sim.psgwd import policy
from msa_sim.psgwd import protocol as proto
from msa_sim.psgwd.daemon import Gateway, log


def parse_listen(values):
    out = []
    for i, v in enumerate(values):
        fabric, sep, addr = v.partition("=")
        out.append((fabric, addr) if sep else ("fabric%d" % i, v))
    return out


def main(argv=None, stdin=None):
    ap = argparse.ArgumentParser(prog="python3 -m msa_sim.psgwd", description=__doc__)
    ap.add_argument("--job", required=True, help="the only job id whose envelopes are accepted")
    ap.add_argument("--listen", action="append", required=True, metavar="[FABRIC=]ADDR",
                    help="address on one fabric (repeat: one per fabric, e.g. ib=10.1.0.201 extoll=10.2.0.201)")
    ap.add_argument("--port", type=int, default=0, help="port on every address (0: pick a free one)")
    ap.add_argument("--name", default=None, help="gateway name in stats (default: host name)")
    ap.add_argument("--stats-file", default=None, help="JSON byte counters, rewritten after every message")
    ap.add_argument("--max-fragment", type=int, default=proto.MAX_FRAGMENT, help="largest fragment accepted")
    ap.add_argument("--pairs-file", default=None,
                    help="the job's node pairs (JSON, written by the agent; re-read when it changes): a message is "
                    "relayed only between the two addresses of one pair; without it, for no pair")
    ap.add_argument("--refuse-ports", default=policy.REFUSED_PORTS, metavar="LOW-HIGH[,...]",
                    help="destination ports never relayed to (default %(default)s: only root can listen there)")
    ap.add_argument("--max-bytes", type=int, default=policy.MAX_BYTES,
                    help="bytes one connection may carry (a bigger message is refused, the connection closed)")
    ap.add_argument("--idle-timeout", type=float, default=60.0, help="seconds a connection may stay silent")
    ap.add_argument("--peer-connections", type=int, default=64, help="connections open at once from one address")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="psgwd[%(process)d] %(levelname)s %(message)s")
    try:
        secret = policy.check_secret((stdin or sys.stdin).readline(256).strip(), "job secret on standard input")
        rules = policy.Policy(args.job, secret, policy.PairsFile(args.pairs_file, args.job, log),
                              policy.parse_ports(args.refuse_ports), args.max_bytes)
    except ValueError as exc:
        print("psgwd: %s" % exc, file=sys.stderr)
        return 2
    try:
        gw = Gateway(args.job, parse_listen(args.listen), rules, args.port, args.name, args.stats_file,
                     args.max_fragment, idle_timeout=args.idle_timeout, peer_connections=args.peer_connections)
    except OSError as exc:
        print("psgwd: cannot listen: %s" % exc, file=sys.stderr)
        return 2
    gw.start()
    # The same two lines the ParaStation psgwd prints: its address:port, then its pid.
    sys.stdout.write("%s\npid\t%d\n" % (gw.endpoint(0), os.getpid()))
    sys.stdout.flush()
    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: done.set())
    done.wait()
    gw.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
