# SPDX-License-Identifier: GPL-3.0-or-later
"""CLI of a NAM or GCE board's data path: ``python3 -m msa_sim.rma serve --kind nam|gce --device NAME ...``."""
from __future__ import annotations

import argparse
import logging
import os
import sys

from ansible_collections.msa.hpc.plugins.module_utils._sizes import SizeError, parse_size
from msa_sim.serve import serve_until_signalled
from msa_sim.rma import capability as C
from msa_sim.rma.api import Server
from msa_sim.rma.collective import Engine
from msa_sim.rma.memory import Memory

log = logging.getLogger("msa-rma")


def _size(text):
    try:
        return 0 if text in ("0", "") else parse_size(text, "size")
    except SizeError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def serve(args):
    if not (args.tls_cert and args.tls_key) and not args.insecure_no_tls:
        print("msa-rma: --tls-cert and --tls-key are not set, the data path would be plain HTTP (--insecure-no-tls "
              "for tests only)", file=sys.stderr)
        return 2
    try:
        key = C.load_key(args.key_file)
    except C.CapabilityError as exc:
        print("msa-rma: %s" % exc, file=sys.stderr)
        return 2
    memory = engine = None
    if args.kind == "nam":
        memory = Memory(args.state_dir, args.volatile_dir, args.capacity, args.nonvolatile_capacity)
    else:
        engine = Engine(max_timeout=args.max_timeout)
    tls = (args.tls_cert, args.tls_key) if args.tls_cert else None
    server = Server((args.listen, args.port), args.device, args.kind, key, memory, engine, tls)
    host, port = server.server_address[:2]
    log.info("%s board %s: data path on %s://%s:%d", args.kind.upper(), args.device, server.scheme, host, port)
    serve_until_signalled(server, args.ready_file)
    if memory is not None:
        memory.close()
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python3 -m msa_sim.rma", description=__doc__)
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("serve", help="serve one board's data path")
    s.add_argument("--kind", choices=("nam", "gce"), required=True)
    s.add_argument("--device", required=True, help="the board's name in the manager's configuration")
    s.add_argument("--listen", required=True, help="the board's EXTOLL address")
    s.add_argument("--port", type=int, default=8790)
    s.add_argument("--key-file", default="/etc/msa-rma/device.key", help="key shared with the manager (0600)")
    s.add_argument("--tls-cert", default="")
    s.add_argument("--tls-key", default="")
    s.add_argument("--insecure-no-tls", action="store_true", help="plain HTTP (tests only)")
    s.add_argument("--state-dir", default="/var/lib/msa-rma", help="non-volatile memory and the scrub records")
    s.add_argument("--volatile-dir", default="/run/msa-rma", help="volatile memory (tmpfs)")
    s.add_argument("--capacity", type=_size, default=0, help="volatile memory (as the manager's capacity)")
    s.add_argument("--nonvolatile-capacity", type=_size, default=0)
    s.add_argument("--max-timeout", type=float, default=300.0, help="longest wait of a collective for its ranks")
    s.add_argument("--ready-file", default=None)
    s.add_argument("--log-level", default="INFO")
    args = ap.parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr,
                        format="msa-rma[%(process)d] %(levelname)s %(message)s")
    try:
        return serve(args)
    except OSError as exc:
        print("msa-rma: %s" % exc, file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
