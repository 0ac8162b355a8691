# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

"""Test program: ``send`` N bytes to a peer node through its gateway from the routing file; ``recv`` verifies them."""

import argparse
import hashlib
import json
import os
import socket
import sys

from msa_sim.psgwd import PSCOM_ROUTING_FILE_ENV, ROUTING_FILE_ENV, SECRET_FILE_ENV
from msa_sim.psgwd import protocol as proto

from ansible_collections.msa.hpc.plugins.module_utils import _gw_routing as R


def routing_file_path(explicit=None, env=None):
    """--routing-file, else $MSA_GW_ROUTING_FILE, else $PSP_GW_SERVER, else ./psgw-route-<job> or ~/psgw-route-<job>."""
    env = os.environ if env is None else env
    for candidate in (explicit, env.get(ROUTING_FILE_ENV), env.get(PSCOM_ROUTING_FILE_ENV)):
        if candidate:
            return candidate
    job = env.get("SLURM_HET_JOB_ID") or env.get("SLURM_JOB_ID")
    if job:
        for base in (env.get("SLURM_SUBMIT_DIR"), os.getcwd(), env.get("HOME")):
            if base and os.path.exists(os.path.join(base, "psgw-route-%s" % job)):
                return os.path.join(base, "psgw-route-%s" % job)
    raise proto.ProtocolError("no routing file: pass --routing-file or set %s" % ROUTING_FILE_ENV)


def read_secret(explicit=None, routing_file=None, env=None):
    """The job's gateway secret: --secret-file, else $MSA_GW_SECRET_FILE, else the prolog's file beside the routing
    file (``<routing file>.secret``)."""
    env = os.environ if env is None else env
    path = explicit or env.get(SECRET_FILE_ENV) or (R.secret_file(routing_file) if routing_file else None)
    if not path:
        raise proto.ProtocolError("no job secret: pass --secret-file or set %s" % SECRET_FILE_ENV)
    try:
        with open(path, "r", encoding="utf-8") as fh:
            secret = fh.readline(256).strip()
    except OSError as exc:
        raise proto.ProtocolError("cannot read the job secret %s: %s" % (path, exc.strerror or exc)) from None
    if not secret:
        raise proto.ProtocolError("the job secret file %s is empty" % path)
    return secret


def find_route(path, node, peer):
    """``(gateway endpoint, my side)`` for the pair (node, peer) from a routing file, read line by line."""
    route = R.find_gateway(path, node, peer)
    if route is None:
        raise proto.ProtocolError("routing file %s has no line for nodes %s and %s" % (path, node, peer))
    return route


def translate(endpoint, pool_file, fabric):
    """Swap the routing file's gateway address for the same gateway's address on ``fabric`` (from pool.json/yml)."""
    if not pool_file or not fabric:
        return endpoint
    host, port = proto.split_endpoint(endpoint)
    with open(pool_file, "r", encoding="utf-8") as fh:
        text = fh.read()
    try:
        data = json.loads(text)
    except ValueError:
        import yaml  # python3-yaml, present on the nodes
        data = yaml.safe_load(text)
    for gw in data.get("gateways", []):
        addresses = {str(k): str(v) for k, v in (gw.get("addresses") or {}).items()}
        if host in addresses.values() and fabric in addresses:
            return "%s:%d" % (addresses[fabric], port)
    return endpoint


def payload(nbytes, seed):
    """Deterministic, incompressible-looking bytes: a SHA-256 counter stream."""
    out, counter = bytearray(), 0
    block = hashlib.sha256(str(seed).encode()).digest()
    while len(out) < nbytes:
        out += hashlib.sha256(block + counter.to_bytes(8, "big")).digest() * 64
        counter += 1
    return bytes(out[:nbytes])


def cmd_send(args):
    node = args.node or socket.gethostname().split(".")[0]
    path = None
    if args.gateway:
        gateway = args.gateway
    else:
        path = routing_file_path(args.routing_file)
        gateway, side = find_route(path, node, args.peer)
        gateway = translate(gateway, args.pool_file, args.fabric)
    secret = read_secret(args.secret_file, args.routing_file or path)
    job = args.job or os.environ.get("SLURM_HET_JOB_ID") or os.environ.get("SLURM_JOB_ID")
    if not job:
        raise proto.ProtocolError("no job id: pass --job or run inside a Slurm job")
    mtu = proto.mtu_from_env(args.mtu)
    data = payload(args.bytes, args.seed)
    env = proto.envelope(job, node, args.peer, args.to, len(data), mtu, proto.digest(data), args.rank, args.peer_rank)
    result = proto.send_message(gateway, env, data, secret, timeout=args.timeout)
    ok = bool(result.get("match")) and result.get("bytes") == len(data)
    print("sent %d bytes sha256 %s mtu %d via %s (%s): receiver %s" % (
        len(data), env["sha256"], mtu, gateway, result.get("gateway"), "verified" if ok else "MISMATCH %r" % result))
    return 0 if ok else 1


def receive_one(conn, job=None):
    """Serve one connection from a gateway: accept the envelope, read the fragments, verify, answer."""
    reader = proto.Reader(conn)
    env = reader.line()
    if job is not None and str(env.get("job")) != str(job):
        proto.send_line(conn, {"ok": False, "error": "receiver expects job %s, not %s" % (job, env.get("job"))})
        return None
    proto.send_line(conn, {"ok": True})
    h, got, fragments = hashlib.sha256(), 0, 0
    while got < int(env["length"]):
        fragment = reader.fragment()
        h.update(fragment)
        got += len(fragment)
        fragments += 1
    digest = h.hexdigest()
    match = got == int(env["length"]) and digest == env.get("sha256")
    result = {"ok": True, "bytes": got, "fragments": fragments, "sha256": digest, "match": match}
    proto.send_line(conn, result)
    return dict(result, envelope=env)


def cmd_recv(args):
    host, port = proto.split_endpoint(args.listen)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    failures = 0
    with socket.socket(family, socket.SOCK_STREAM) as srv:
        srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        srv.bind((host, port))
        srv.listen(16)
        srv.settimeout(args.timeout)
        if args.ready_file:
            with open(args.ready_file, "w", encoding="utf-8") as fh:
                fh.write("%s:%d\n" % (host, srv.getsockname()[1]))
        done = 0
        while done < args.count:
            conn, _ = srv.accept()
            with conn:
                conn.settimeout(args.timeout)
                result = receive_one(conn, args.job)
            if result is None:
                continue
            done += 1
            env = result["envelope"]
            print("received %d bytes in %d fragments sha256 %s from %s via %s: %s" % (
                result["bytes"], result["fragments"], result["sha256"], env["src"]["node"],
                (env.get("via") or {}).get("gateway"), "OK" if result["match"] else "MISMATCH"))
            sys.stdout.flush()
            failures += not result["match"]
    return 1 if failures else 0


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python3 -m msa_sim.psgwd.pingpong", description=__doc__)
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("send", help="send N bytes to the peer through its gateway")
    s.add_argument("--peer", required=True, help="peer node name (as in the routing file)")
    s.add_argument("--to", required=True, metavar="HOST:PORT", help="receiver's address on its own fabric")
    s.add_argument("--bytes", type=int, default=1 << 20)
    s.add_argument("--mtu", type=int, default=None, help="fragment size (default $PSP_GW_MTU or 65536)")
    s.add_argument("--node", default=None, help="this node's name (default: short host name)")
    s.add_argument("--job", default=None, help="job id (default $SLURM_HET_JOB_ID / $SLURM_JOB_ID)")
    s.add_argument("--routing-file", default=None, help="default $MSA_GW_ROUTING_FILE or $PSP_GW_SERVER")
    s.add_argument("--gateway", default=None, help="skip the routing file and use this HOST:PORT")
    s.add_argument("--secret-file", default=None,
                   help="the job's gateway secret (default $%s, else <routing file>.secret)" % SECRET_FILE_ENV)
    s.add_argument("--pool-file", default=os.environ.get("MSA_GW_POOL_FILE"),
                   help="pool.yml/json to find the gateway's address on --fabric")
    s.add_argument("--fabric", default=os.environ.get("MSA_GW_FABRIC"), help="this node's fabric name")
    s.add_argument("--rank", type=int, default=0)
    s.add_argument("--peer-rank", type=int, default=1)
    s.add_argument("--seed", default="msa")
    s.add_argument("--timeout", type=float, default=60.0)
    r = sub.add_parser("recv", help="receive messages and verify their checksum")
    r.add_argument("--listen", required=True, metavar="HOST:PORT")
    r.add_argument("--count", type=int, default=1, help="messages to receive before exiting")
    r.add_argument("--job", default=None, help="refuse envelopes of other jobs")
    r.add_argument("--ready-file", default=None, help="write the bound HOST:PORT here once listening")
    r.add_argument("--timeout", type=float, default=120.0)
    args = ap.parse_args(argv)
    try:
        return cmd_send(args) if args.cmd == "send" else cmd_recv(args)
    except (proto.ProtocolError, OSError) as exc:
        print("pingpong %s: %s" % (args.cmd, exc), file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
