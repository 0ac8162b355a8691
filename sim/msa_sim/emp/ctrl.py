# SPDX-License-Identifier: GPL-3.0-or-later
"""emp-ctrl: command-line wrapper around the EMP master's REST API (`python3 -m msa_sim.emp.ctrl help`)."""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

from ansible_collections.msa.hpc.plugins.module_utils._rest import (
    NOT_DONE, RestClient, RestError, RestTransportError, send_again)

COMMANDS = {
    "emp": {"run": ("POST", "emp/run"), "status": ("GET", "emp/status"), "discover": ("POST", "emp/discover"),
            "getdot": ("GET", "emp/getdot"), "gettd": ("GET", "emp/getTD"), "routes": ("GET", "emp/routes"),
            "log": ("GET", "log")},
    "network": {"status": ("GET", "network/status"), "info": ("GET", "network/info"),
                "start": ("POST", "network/start"), "stop": ("POST", "network/stop"), "listnodes": ("GET", "nodes"),
                "missinglinks": ("GET", "network/missinglinks"), "missingnodes": ("GET", "network/missingnodes")},
    "node": {"status": ("GET", "nodes/{i}"), "link": ("GET", "nodes/{i}/link"), "xbar": ("GET", "nodes/{i}/xbar"),
             "pcie": ("GET", "nodes/{i}/pcie"), "velo": ("GET", "nodes/{i}/velo"), "rma": ("GET", "nodes/{i}/rma"),
             "coordinate": ("GET", "nodes/{i}/coordinate")},
    "topology": {"load": ("PUT", "emp/topology"), "show": ("GET", "emp/topology")},
}


class CtrlError(Exception):
    pass


def call(endpoint, method, path, body=None, token=None, timeout=30, retries=2, ca_path=None):
    """One call of the EMP master's API: its JSON (or the text of a DOT graph); CtrlError with a sentence otherwise.

    The master's POSTs and PUTs set a state (run, network start/stop, discover, topology load), so one whose answer
    was lost is sent again: that cannot duplicate anything.
    """
    try:
        client = RestClient(endpoint, token=token, ca_path=ca_path, timeout=timeout, retries=retries)
        return client.request(method, path, body=body, lookup=send_again)[1]
    except RestTransportError as exc:
        what = "cannot reach" if exc.outcome == NOT_DONE else "lost the answer of"
        raise CtrlError("%s the EMP master at %s: %s" % (what, endpoint, exc)) from None
    except RestError as exc:
        if exc.status is None:
            raise CtrlError(str(exc)) from None
        err = exc.body.get("error") if isinstance(exc.body, dict) else None
        message = err.get("message") if isinstance(err, dict) else (exc.body.get("message") if isinstance(
            exc.body, dict) else exc.body)
        raise CtrlError("%s %s: HTTP %s: %s" % (method, path, exc.status, message)) from None


def main(argv=None):
    parser = argparse.ArgumentParser(prog="emp-ctrl", description=__doc__)
    parser.add_argument("--endpoint", default=os.environ.get("EMP_MASTER", "https://127.0.0.1:9000"))
    parser.add_argument("--token-file", default=os.environ.get("EMP_TOKEN_FILE", ""))
    parser.add_argument("--ca-file", default=os.environ.get("EMP_CA_FILE", ""),
                        help="CA the master's certificate is verified against (default: the system's CAs)")
    parser.add_argument("group", choices=sorted(COMMANDS) + ["help"])
    parser.add_argument("command", nargs="?")
    parser.add_argument("file", nargs="?", help="topology load: the .td file")
    parser.add_argument("--i", dest="node", type=int, help="node id for node commands")
    parser.add_argument("--routing", help="emp run: DimensionOrder, ShortestPath or UpDown")
    parser.add_argument("--mode", default="topology", choices=("auto", "topology"), help="emp run")
    parser.add_argument("--dry-run", action="store_true", help="emp run: compute, do not install")
    parser.add_argument("--wait", action="store_true", help="emp run: wait until the run is done or failed")
    parser.add_argument("--timeout", type=float, default=60.0)
    args = parser.parse_args(argv)
    if args.group == "help":
        parser.print_help()
        for group, cmds in sorted(COMMANDS.items()):
            print("  %-9s %s" % (group, " | ".join(sorted(cmds))))
        return 0
    cmds = COMMANDS[args.group]
    if args.command not in cmds:
        parser.error("%s needs one of: %s" % (args.group, ", ".join(sorted(cmds))))
    method, path = cmds[args.command]
    if "{i}" in path:
        if args.node is None:
            parser.error("node %s needs --i NODEID" % args.command)
        path = path.format(i=args.node)
    token = None
    if args.token_file:
        with open(args.token_file) as handle:
            token = handle.read().strip()
    body = None
    if (args.group, args.command) == ("emp", "run"):
        body = {"routing": args.routing, "mode": args.mode, "dry_run": args.dry_run,
                "timeout": args.timeout if args.mode == "topology" else None}
    elif (args.group, args.command) == ("topology", "load"):
        if not args.file:
            parser.error("topology load needs a .td file")
        with open(args.file) as handle:
            body = {"td": handle.read(), "source": args.file}
    elif method == "POST":
        body = {}
    try:
        result = call(args.endpoint, method, path, body, token, ca_path=args.ca_file or None)
        if args.wait and (args.group, args.command) == ("emp", "run") and not args.dry_run:
            deadline = time.monotonic() + args.timeout
            while result.get("state") not in ("done", "failed") and time.monotonic() < deadline:
                time.sleep(0.2)
                result = call(args.endpoint, "GET", "emp/status", None, token, ca_path=args.ca_file or None)
    except CtrlError as exc:
        print("emp-ctrl: %s" % exc, file=sys.stderr)
        return 1
    if isinstance(result, str):
        sys.stdout.write(result)
    else:
        print(json.dumps(result, indent=2, sort_keys=True))
    if isinstance(result, dict) and result.get("state") == "failed":
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
