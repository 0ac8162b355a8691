# SPDX-License-Identifier: GPL-3.0-or-later
"""emp-ctrl: command-line wrapper around the EMP master's REST API (`python3 -m msa_sim.emp.ctrl help`)."""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
import urllib.error
import urllib.request

COMMANDS = {
    "emp": {"run": ("POST", "emp/run"), "status": ("GET", "emp/status"), "discover": ("POST", "emp/discover"),
            "getdot": ("GET", "emp/getdot"), "gettd": ("GET", "emp/getTD"), "routes": ("GET", "emp/routes"),
            "log": ("GET", "log")},
    "network": {"status": ("GET", "network/status"), "info": ("GET", "network/info"),
                "start": ("POST", "network/start"), "stop": ("POST", "network/stop"), "listnodes": ("GET", "nodes"),
                "missinglinks": ("GET", "network/missinglinks"), "missingnodes": ("GET", "network/missingnodes")},
    "node": {"status": ("GET", "nodes/{i}"), "link": ("GET", "nodes/{i}/link"), "xbar": ("GET", "nodes/{i}/xbar"),
             "pcie": ("GET", "nodes/{i}/pcie"), "velo": ("GET", "nodes/{i}/velo"), "rma": ("GET", "nodes/{i}/rma")},
    "topology": {"load": ("PUT", "emp/topology"), "show": ("GET", "emp/topology")},
}


class CtrlError(Exception):
    pass


def call(endpoint, method, path, body=None, token=None, timeout=30):
    request = urllib.request.Request(endpoint.rstrip("/") + "/" + path, method=method,
                                     data=json.dumps(body).encode() if body is not None else None,
                                     headers={"Content-Type": "application/json", "Accept": "application/json"})
    if token:
        request.add_header("Authorization", "Bearer " + token)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as resp:
            raw, ctype = resp.read().decode(), resp.headers.get("Content-Type", "")
    except urllib.error.HTTPError as exc:
        raw = exc.read().decode()
        try:
            message = json.loads(raw)["error"]["message"]
        except (ValueError, KeyError, TypeError):
            message = raw
        raise CtrlError("%s %s: HTTP %s: %s" % (method, path, exc.code, message))
    except (urllib.error.URLError, OSError) as exc:
        raise CtrlError("cannot reach the EMP master at %s: %s" % (endpoint, getattr(exc, "reason", exc)))
    return json.loads(raw) if ctype.startswith("application/json") else raw


def main(argv=None):
    parser = argparse.ArgumentParser(prog="emp-ctrl", description=__doc__)
    parser.add_argument("--endpoint", default=os.environ.get("EMP_MASTER", "http://127.0.0.1:9000"))
    parser.add_argument("--token-file", default=os.environ.get("EMP_TOKEN_FILE", ""))
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
        result = call(args.endpoint, method, path, body, token)
        if args.wait and (args.group, args.command) == ("emp", "run") and not args.dry_run:
            deadline = time.monotonic() + args.timeout
            while result.get("state") not in ("done", "failed") and time.monotonic() < deadline:
                time.sleep(0.2)
                result = call(args.endpoint, "GET", "emp/status", None, token)
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
