# SPDX-License-Identifier: GPL-3.0-or-later
"""EMP master daemon: `python3 -m msa_sim.emp.master [-c /etc/extoll/master.conf]`."""
from __future__ import annotations

import argparse
import os
import signal
import sys
import threading

from . import config
from .api import make_server
from .auth import load_slave_tokens
from .engine import Master
from .monitor import Monitor
from .store import Store


def build(conf, insecure=False):
    """The master and its API server. The API needs a token and TLS; ``insecure`` (tests only) serves it without."""
    if bool(conf["tls_cert"]) != bool(conf["tls_key"]):
        raise ValueError("tls_cert and tls_key must be set together")
    token = config.read_token(conf["token_file"])
    missing = [what for what, given in (("a token (token_file)", token), ("TLS (tls_cert, tls_key)", conf["tls_cert"]))
               if not given]
    if missing and not insecure:
        raise ValueError("the API would be served without %s: configure it, or start with --insecure-no-auth "
                         "(tests only)" % " and ".join(missing))
    tls = (conf["tls_cert"], conf["tls_key"]) if conf["tls_cert"] else None
    master = Master(conf, Store(os.path.join(conf["state_dir"], "master.sqlite")))
    server = make_server(master, conf["listen_address"], conf["listen_port"], token, tls=tls,
                         slaves=load_slave_tokens(conf["slave_tokens_file"]))
    return master, server


def main(argv=None):
    parser = argparse.ArgumentParser(prog="emp-master", description=__doc__)
    parser.add_argument("-c", "--config", default="/etc/extoll/master.conf")
    parser.add_argument("--insecure-no-auth", action="store_true",
                        help="serve the API without a token and without TLS when none is configured (tests only)")
    args = parser.parse_args(argv)
    try:
        conf = config.load(args.config, config.MASTER_DEFAULTS)
        master, server = build(conf, insecure=args.insecure_no_auth)
    except (OSError, ValueError, RuntimeError) as exc:
        print("emp-master: %s" % exc, file=sys.stderr)
        return 1
    where = "%s://%s:%s" % ((server.scheme,) + server.server_address[:2])
    master.store.log("master listening on %s" % where)
    print("emp-master listening on %s" % where, flush=True)
    if config.flag(conf["auto_configuration"]):
        def auto():
            mode = "topology" if master.expected() is not None else "auto"
            master.run(mode=mode)
            if master.wait(timeout=float("inf")).get("state") == "done":
                master.network_start()
        threading.Thread(target=auto, daemon=True).start()
    if float(conf["sweep_interval"]) > 0:
        monitor = Monitor(master, conf["sweep_interval"], conf["sensor_dir"])
        threading.Thread(target=monitor.run, daemon=True).start()
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown).start())
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
