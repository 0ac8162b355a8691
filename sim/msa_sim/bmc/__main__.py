# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

"""`python3 -m msa_sim.bmc serve|check-config|hash-password`: the Redfish BMC stand-in's command line."""

import argparse
import getpass
import signal
import sys
import threading
import time

from msa_sim.bmc import auth, config


def _log(line):
    sys.stderr.write("%s %s\n" % (time.strftime("%Y-%m-%dT%H:%M:%S"), line))
    sys.stderr.flush()


def serve(args):
    from msa_sim.bmc.api import BmcService

    conf = config.load(args.config)
    service = BmcService(conf, log=None if args.quiet else _log)
    # before the first request can be served: a SIGTERM that comes as soon as a BMC answers stops the service cleanly
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    try:
        service.start()
    except OSError as exc:
        print("msa-bmc: %s" % exc, file=sys.stderr)
        return 1
    for name in service.bmcs:
        _log("BMC %s (%s) listening on %s" % (name, service.bmcs[name].conf["container"], service.url(name)))
    stop.wait()
    service.stop()
    return 0


def check_config(args):
    conf = config.load(args.config)
    for bmc in conf["bmcs"]:
        print("%-16s %s:%-5d system %-8s container %-24s %s" % (
            bmc["name"], bmc["address"], bmc["port"], bmc["system_id"], bmc["container"],
            "https" if bmc["tls"] else "http"))
    return 0


def hash_password(args):
    if sys.stdin.isatty():
        password = getpass.getpass("password: ")
    else:
        password = sys.stdin.readline().rstrip("\n")
    if not password:
        print("msa-bmc: empty password", file=sys.stderr)
        return 2
    print(auth.hash_password(password, iterations=args.iterations, salt=args.salt))
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python3 -m msa_sim.bmc", description="Redfish BMC stand-ins")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("serve", help="serve every BMC of the configuration")
    p.add_argument("--config", "-c", default=config.DEFAULT_PATH)
    p.add_argument("--quiet", action="store_true", help="do not log requests")
    p.set_defaults(func=serve)
    p = sub.add_parser("check-config", help="validate the configuration and list the BMCs")
    p.add_argument("--config", "-c", default=config.DEFAULT_PATH)
    p.set_defaults(func=check_config)
    p = sub.add_parser("hash-password", help="read a password on stdin, print its PBKDF2 hash")
    p.add_argument("--iterations", type=int, default=auth.DEFAULT_ITERATIONS)
    p.add_argument("--salt", help="fixed salt (for an idempotent configuration template)")
    p.set_defaults(func=hash_password)
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except (config.ConfigError, auth.HashError, OSError) as exc:
        print("msa-bmc: %s" % exc, file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
