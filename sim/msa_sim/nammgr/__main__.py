# SPDX-License-Identifier: GPL-3.0-or-later
"""CLI of the NAM/GCE manager: ``python3 -m msa_sim.nammgr serve|check|hash-password``."""
from __future__ import annotations

import argparse
import getpass
import logging
import os
import sys

from msa_sim.serve import serve_until_signalled
from msa_sim.nammgr import config as C
from msa_sim.nammgr.api import Manager, Server
from msa_sim.nammgr.auth import AuthError, Authenticator, hash_password
from msa_sim.nammgr.datapath import DataPath
from msa_sim.rma.capability import CapabilityError
from msa_sim.nammgr.store import Store, StoreError

log = logging.getLogger("nam-manager")


def open_store(cfg):
    os.makedirs(cfg.state_dir, mode=0o750, exist_ok=True)
    store = Store(cfg.db_path, synchronous=cfg.synchronous, granularity=cfg.granularity)
    store.configure_nonvolatile(cfg.nonvolatile_quota, cfg.nonvolatile_quota_count,
                                int(cfg.nonvolatile_expiry_days * 86400))
    store.sync_devices(cfg.nam_devices, cfg.gce_devices)
    merged = store.merge_adjacent()
    if merged:
        log.warning("merged %d pairs of adjacent free segments found at start-up", merged)
    problems = store.check()
    if problems:
        raise StoreError(500, "corrupt", "the state in %s is inconsistent: %s" % (cfg.db_path, "; ".join(problems)))
    return store


def serve(args):
    cfg = C.load(args.config)
    if cfg.tls is None and not args.insecure_no_tls:
        raise C.ConfigError("%s: tls_cert and tls_key are not set, the API would be plain HTTP (serve "
                            "--insecure-no-tls for tests only)" % args.config)
    store = open_store(cfg)
    auth = Authenticator(cfg.users_file, os.path.join(cfg.state_dir, "token.key"), cfg.token_ttl)
    manager = Manager(store, auth, DataPath.from_config(cfg), cfg.job_token_ttl)
    server = Server((args.listen or cfg.listen, cfg.port if args.port is None else args.port), manager, tls=cfg.tls)
    host, port = server.server_address[:2]
    log.info("serving %d NAM and %d GCE devices on %s://%s:%d (state %s)", len(cfg.nam_devices),
             len(cfg.gce_devices), server.scheme, host, port, cfg.db_path)
    serve_until_signalled(server, args.ready_file)
    store.close()
    return 0


def check(args):
    cfg = C.load(args.config)
    store = Store(cfg.db_path, synchronous=cfg.synchronous, granularity=cfg.granularity)
    problems = store.check()
    for p in problems:
        print(p)
    print("%s: %s" % (cfg.db_path, "inconsistent" if problems else "consistent"))
    return 1 if problems else 0


def hash_cmd(args):
    password = sys.stdin.readline().rstrip("\n") if args.stdin else getpass.getpass("password: ")
    if not password:
        print("hash-password: empty password", file=sys.stderr)
        return 2
    hashed = hash_password(password, iterations=args.iterations)
    print("%s:%s:%s" % (args.user, args.role, hashed) if args.user else hashed)
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python3 -m msa_sim.nammgr", description="The NAM/GCE manager (seed 004 section 2.2): serve its REST API, check its state, hash passwords.")
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("serve", help="run the manager")
    s.add_argument("--config", default=C.DEFAULT_PATH)
    s.add_argument("--listen", default=None, help="address to bind (default: listen of the config)")
    s.add_argument("--port", type=int, default=None, help="port (0: any free port; default: port of the config)")
    s.add_argument("--ready-file", default=None, help="write HOST:PORT here once listening")
    s.add_argument("--log-level", default="INFO")
    s.add_argument("--insecure-no-tls", action="store_true", help="serve plain HTTP when no TLS is configured "
                   "(tests only)")
    c = sub.add_parser("check", help="check the invariants of the state database")
    c.add_argument("--config", default=C.DEFAULT_PATH)
    h = sub.add_parser("hash-password", help="print a PBKDF2 hash (or a users.conf line) for a password")
    h.add_argument("--user", default=None, help="print a whole users.conf line for this user")
    h.add_argument("--role", default="user", choices=["user", "admin"])
    h.add_argument("--iterations", type=int, default=200000)
    h.add_argument("--stdin", action="store_true", help="read the password from the first line of stdin")
    args = ap.parse_args(argv)
    logging.basicConfig(level=getattr(args, "log_level", "INFO").upper(), stream=sys.stderr,
                        format="nam-manager[%(process)d] %(levelname)s %(message)s")
    try:
        return {"serve": serve, "check": check, "hash-password": hash_cmd}[args.cmd](args)
    except (C.ConfigError, AuthError, CapabilityError) as exc:
        print("nam-manager: %s" % exc, file=sys.stderr)
        return 2
    except StoreError as exc:
        print("nam-manager: %s" % exc.message, file=sys.stderr)
        return 3
    except OSError as exc:
        print("nam-manager: %s" % exc, file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
