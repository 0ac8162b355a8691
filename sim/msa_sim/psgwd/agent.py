# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

"""psgw-agent: the always-on REST service on a gateway node that starts and stops the per-job psgwd.

API (bearer token on every call but /v1/health):
  GET    /v1/health            {"ok": bool, "gateway": name, "fabrics": {name: {"address", "interface", "up", ...}},
                                "jobs": n}  ok is false when a fabric's link is down (read from the kernel each call)
  GET    /v1/jobs              [daemon, ...]
  POST   /v1/jobs              {"job": "42", "port": 0, "secret": "...", "pairs": [[cluster addr, booster addr], ...]}
                                -> 201 daemon (200 if it already runs; the pairs are set again)
                                secret: the job's, handed to a new psgwd on its standard input (needed to start one)
                                pairs: the only node pairs its psgwd relays between (msa_sim.psgwd.policy)
  GET    /v1/jobs/<job>        daemon with live byte counters (and "forwarded": bytes per direction)
  DELETE /v1/jobs/<job>        stop it -> {"stopped": true|false, "stats": {...}}  (idempotent)

With ``--forward-network`` for both fabrics the agent also opens the kernel's forwarding for exactly the job's
``pairs`` (msa_sim.psgwd.forward: nftables table inet msa_gw) and closes it when the job is deleted or its psgwd
dies (``monitor``, every second), so nothing joins the modules outside a job.

With ``--end-lost-jobs`` (the role passes it, gateway_end_lost_jobs) the agent, root on a node with Slurm's clients
and munge, also ends in Slurm a job whose psgwd died (``JobEnder``, once per job, in a thread of its own): a job
whose path between the modules is cut would otherwise wait in its MPI calls until its time limit.
"""

import argparse
import contextlib
import hmac
import json
import logging
import os
import re
import select
import signal
import socket
import subprocess
import sys
import threading
import time

from ansible_collections.msa.hpc.plugins.module_utils.node.tlsserver import BodyError, TLSThreadingHTTPServer, \
    dispatching
from msa_sim.psgwd import forward as fwd
from msa_sim.psgwd import policy
from msa_sim.psgwd import tunnel
from msa_sim.psgwd.ender import JobEnder  # noqa: F401  (agent.JobEnder, as before)
from msa_sim.psgwd.store import DaemonStore

log = logging.getLogger("psgw-agent")
JOB_RE = re.compile(r"^[0-9A-Za-z_.+-]{1,64}$")


class AgentError(Exception):
    def __init__(self, status, message):
        super().__init__(message)
        self.status = status


def _alive(pid, job):
    """True when ``pid`` is still a psgwd for ``job`` (not a recycled pid)."""
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as fh:
            argv = fh.read().split(b"\0")
    except OSError:
        return False
    return b"msa_sim.psgwd" in argv and job.encode() in argv


def read_interfaces(run=subprocess.run):
    """The node's interfaces as ``ip -json addr show`` lists them (a list of dicts)."""
    out = run(["ip", "-json", "addr", "show"], capture_output=True, text=True, timeout=10, check=False)
    if out.returncode != 0:
        raise OSError("ip addr show failed: %s" % (out.stderr.strip() or out.returncode))
    return json.loads(out.stdout or "[]")


def _link_up(iface):
    """An interface carries traffic: administratively up with a carrier (loopback and dummy report UNKNOWN)."""
    flags = iface.get("flags") or []
    return "UP" in flags and "LOWER_UP" in flags and iface.get("operstate") in ("UP", "UNKNOWN")


def fabric_state(interfaces, address, ports_prefix=None):
    """Whether this node's link to one fabric is up, from the kernel's interfaces.

    The fabric is up when the interface holding ``address`` is up and, with ``ports_prefix`` (an EXTOLL node keeps
    its address on a dummy or loopback interface and reaches the torus through point-to-point ports named
    <prefix><port number>), at least one of those ports has its link up."""
    holder = next((i for i in interfaces
                   if any(a.get("local") == address for a in i.get("addr_info") or [])), None)
    state = {"address": address, "interface": holder["ifname"] if holder else None}
    if holder is None:
        return dict(state, up=False, reason="no interface holds %s" % address)
    if not _link_up(holder):
        return dict(state, up=False, reason="interface %s is down" % holder["ifname"])
    if ports_prefix:
        ports = sorted(i["ifname"] for i in interfaces
                       if re.fullmatch(re.escape(ports_prefix) + r"\d+", i.get("ifname", "")))
        live = [p for p in ports if _link_up(next(i for i in interfaces if i["ifname"] == p))]
        state.update(ports=ports, ports_up=live)
        if not live:
            return dict(state, up=False, reason="no %s* port has its link up (%s)" % (ports_prefix, ", ".join(ports) or
                                                                                       "none exists"))
    return dict(state, up=True)


class Agent:
    """Starts one psgwd per job on this gateway, bound to the gateway's address on every fabric."""

    def __init__(self, name, fabrics, state_dir, run_dir, python=sys.executable, start_timeout=10.0,
                 ports=None, interfaces=read_interfaces, forwarder=None, clock=time.monotonic, ender=None,
                 daemon_args=()):
        if not fabrics:
            raise ValueError("the agent needs the gateway's address on each fabric (--fabric NAME=ADDR)")
        self.name = name
        self.fabrics = list(fabrics)
        # fabric name -> prefix of its point-to-point port interfaces (--fabric-ports), and the kernel's view
        self.ports = dict(ports or {})
        self.interfaces = interfaces
        self.run_dir = run_dir
        self.python = python
        self.start_timeout = start_timeout
        os.makedirs(run_dir, exist_ok=True)
        self.store = DaemonStore(os.path.join(state_dir, "agent.db"))
        self.children = {}
        self.lock = threading.Lock()
        # the kernel forwarding of the jobs' node pairs (msa_sim.psgwd.forward.Forwarder); None: psgwd only
        self.forwarder = forwarder
        self.clock = clock
        self.closed_stats = {}
        # ends in Slurm the jobs whose psgwd died (JobEnder); None: the forwarding is closed, the job left alone
        self.ender = ender
        self.daemon_args = list(daemon_args)  # psgwd's bounds (--max-bytes, --refuse-ports) from the agent's options

    def describe(self, rec, with_stats=False):
        out = dict(rec, running=_alive(rec["pid"], rec["job"]), gateway=self.name)
        out["endpoints"] = {f: ("[%s]:%d" if ":" in a else "%s:%d") % (a, rec["port"]) for f, a in self.fabrics}
        if with_stats:
            out["stats"] = self._stats(rec)
            if self.forwarder is not None and str(rec["job"]) in self.forwarder.jobs:
                out["forwarded"] = self.forwarder.stats(rec["job"])
        if self.forwarder is not None:
            out["pairs"] = [list(p) for p in self.forwarder.jobs.get(str(rec["job"]), [])]
        return out

    @staticmethod
    def _stats(rec):
        try:
            with open(rec["stats_file"], "r", encoding="utf-8") as fh:
                return json.load(fh)
        except (OSError, ValueError):
            return None

    def start(self, job, port=0, pairs=None, secret=None):
        if not JOB_RE.match(str(job)):
            raise AgentError(400, "job %r is not a job id" % (job,))
        if not isinstance(port, int) or not 0 <= port < 65536:
            raise AgentError(400, "port %r is not a port number" % (port,))
        if pairs is not None:
            self._check_pairs(job, pairs)
        try:
            secret = None if secret is None else policy.check_secret(secret)
        except ValueError as exc:
            raise AgentError(400, str(exc)) from None
        with self.lock:
            rec = self.store.get(job)
            if rec and _alive(rec["pid"], rec["job"]):
                self._open(job, pairs)
                return self.describe(rec), False
            if secret is None:
                raise AgentError(400, "no psgwd runs for job %s on %s and the request carries no 'secret' to start "
                                 "one with" % (job, self.name))
            stats_file = os.path.join(self.run_dir, "psgwd-%s.json" % job)
            log_file = open(os.path.join(self.run_dir, "psgwd-%s.log" % job), "ab")
            argv = [self.python, "-m", "msa_sim.psgwd", "--job", str(job), "--port", str(port), "--name", self.name,
                    "--stats-file", stats_file, "--pairs-file", self._pairs_file(job)] + self.daemon_args
            for fabric, addr in self.fabrics:
                argv += ["--listen", "%s=%s" % (fabric, addr)]
            proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=log_file, stdin=subprocess.PIPE,
                                    start_new_session=True, env=os.environ.copy())
            log_file.close()
            with contextlib.suppress(OSError), proc.stdin:  # the job's secret: on its standard input, not in argv
                proc.stdin.write(secret.encode() + b"\n")  # (a daemon that died at once is reported below)
            lines = self._read_ready(proc)
            if len(lines) < 2:
                proc.kill()
                proc.wait()
                raise AgentError(500, "psgwd for job %s did not start (see %s/psgwd-%s.log)"
                                 % (job, self.run_dir, job))
            proc.stdout.close()
            endpoint = lines[0]
            real_port = int(endpoint.rsplit(":", 1)[1])
            self.children[str(job)] = proc
            self.store.add(job, proc.pid, real_port, ["%s=%s" % fa for fa in self.fabrics], stats_file)
            log.info("started psgwd for job %s: pid %d port %d", job, proc.pid, real_port)
            try:
                self._open(job, pairs)
            except AgentError:
                self._stop_locked(job, 1.0)
                raise
            return self.describe(self.store.get(job)), True

    def _pairs_file(self, job):
        return os.path.join(self.run_dir, "psgwd-%s.pairs" % job)

    def _check_pairs(self, job, pairs):
        """The job's pairs checked: inside the fabrics' networks with forwarding, else IP addresses of their kinds."""
        try:
            if self.forwarder is not None:
                return self.forwarder.check(job, pairs)[1]
            if len(self.fabrics) != 2:
                raise AgentError(409, "gateway %s bridges no two fabrics: it has no node pairs" % self.name)
            return fwd.check_pairs(pairs, *(fwd.network(a + "/0", f) for f, a in self.fabrics))
        except fwd.ForwardError as exc:
            raise AgentError(400, str(exc)) from None

    def _open(self, job, pairs):
        """Set the job's pairs (caller holds the lock): the ones its psgwd relays, and the kernel forwarding of them
        with a forwarder; nothing without pairs."""
        if pairs is None:
            return
        checked = self._check_pairs(job, pairs)
        if self.forwarder is not None:
            try:
                checked = self.forwarder.open(job, pairs, self.clock())
            except fwd.ForwardError as exc:
                raise AgentError(500, "job %s: forwarding not opened: %s" % (job, exc)) from None
        self.store.set_pairs(job, checked)
        policy.write_pairs(self._pairs_file(job), job, checked)
        log.info("job %s: %s %d node pairs", job, "forwarding" if self.forwarder else "relaying", len(checked))

    def _close(self, job, why):
        """Close the job's forwarding (caller holds the lock); its final counters, or None."""
        if self.forwarder is None:
            return None
        if job not in self.forwarder.jobs:
            return self.closed_stats.pop(job, None)
        self.store.remove_pairs(job)
        try:
            final = self.forwarder.close(job, self.clock())
        except fwd.ForwardError as exc:
            log.error("job %s: forwarding not closed (%s): %s", job, why, exc)
            return None
        log.info("job %s: forwarding closed (%s): %s", job, why, json.dumps(final, sort_keys=True))
        return final

    def restore(self):
        """After an agent restart: apply again the forwarding of the jobs the store holds (counters survive)."""
        if self.forwarder is None:
            return
        with self.lock:
            self.forwarder.jobs = {str(j): p for j, p in self.store.pairs().items()}
            self.forwarder.apply(self.clock())
        self.monitor()

    def monitor(self):
        """Close the forwarding of every job whose psgwd is gone, and end expired resets; return the jobs closed.

        The forwarding lives only as long as the job's psgwd: killing the daemon cuts the job's path, and the
        reset rules make its MPI connections fail at once (the agent's loop calls this every second). With an
        ``ender``, every job whose psgwd is gone is also ended in Slurm (once; the call returns at once)."""
        if self.ender is not None:
            with self.lock:
                for rec in self.store.all():
                    if not _alive(rec["pid"], rec["job"]):
                        self.ender.end(rec["job"])
        if self.forwarder is None:
            return []
        closed = []
        with self.lock:
            for job in sorted(self.forwarder.jobs):
                rec = self.store.get(job)
                if rec is None or not _alive(rec["pid"], rec["job"]):
                    log.error("job %s: its psgwd is gone; closing its forwarding", job)
                    # kept for the DELETE of the epilog, whose report carries the bytes forwarded
                    self.closed_stats[job] = self._close(job, "psgwd gone")
                    closed.append(job)
            self.forwarder.expire(self.clock())
        return closed

    def _read_ready(self, proc):
        """Read the psgwd's two start-up lines (address:port, pid) within the start timeout."""
        deadline, buf = time.monotonic() + self.start_timeout, b""
        while buf.count(b"\n") < 2 and time.monotonic() < deadline:
            ready, _, _ = select.select([proc.stdout], [], [], 0.1)
            if ready:
                chunk = os.read(proc.stdout.fileno(), 4096)
                if not chunk:
                    break
                buf += chunk
        return buf.decode(errors="replace").splitlines()

    def stop(self, job, grace=5.0):
        with self.lock:
            return self._stop_locked(job, grace)

    def _stop_locked(self, job, grace):
        """Stop the job's psgwd and close its forwarding; the caller holds self.lock."""
        rec = self.store.get(job)
        forwarded = self._close(str(job), "job deleted")
        if rec is None:
            return {"job": str(job), "stopped": False, "reason": "no psgwd for this job", "gateway": self.name}
        stopped = False
        if _alive(rec["pid"], rec["job"]):
            os.kill(rec["pid"], signal.SIGTERM)
            deadline = time.monotonic() + grace
            while _alive(rec["pid"], rec["job"]) and time.monotonic() < deadline:
                self._reap()
                time.sleep(0.05)
            if _alive(rec["pid"], rec["job"]):
                os.kill(rec["pid"], signal.SIGKILL)
            stopped = True
        self._reap()
        stats = self._stats(rec)
        if forwarded is not None:
            stats = dict(stats or {}, forwarded=forwarded)
        self.store.remove(job)
        self.store.remove_pairs(job)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self._pairs_file(job))
        self.children.pop(str(job), None)
        if self.ender is not None:
            self.ender.forget(job)
        log.info("stopped psgwd for job %s", job)
        return {"job": str(job), "stopped": stopped, "stats": stats, "gateway": self.name}

    def _reap(self):
        for job, proc in list(self.children.items()):
            if proc.poll() is not None:
                self.children.pop(job, None)

    def list(self):
        self._reap()
        return [self.describe(r) for r in self.store.all()]

    def get(self, job):
        rec = self.store.get(job)
        if rec is None:
            raise AgentError(404, "no psgwd for job %s on %s" % (job, self.name))
        return self.describe(rec, with_stats=True)

    def health(self):
        """The agent answers, and each fabric's link as the kernel sees it now: ok only when every one is up."""
        try:
            interfaces = self.interfaces()
        except (OSError, ValueError, subprocess.SubprocessError) as exc:
            fabrics = {f: {"address": a, "up": False, "reason": "interfaces unreadable: %s" % exc}
                       for f, a in self.fabrics}
        else:
            fabrics = {f: fabric_state(interfaces, a, self.ports.get(f)) for f, a in self.fabrics}
        return {"ok": all(s["up"] for s in fabrics.values()), "gateway": self.name, "fabrics": fabrics,
                "jobs": len(self.store.all())}


class Handler(dispatching("GET", "POST", "DELETE")):
    server_version = "psgw-agent/1"
    max_body = 256 << 10  # a job's start: its id, port and node pairs

    def log_message(self, fmt, *args):
        log.info("%s %s", self.address_string(), fmt % args)

    def _send(self, status, body):
        raw = json.dumps(body, sort_keys=True).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def _authorised(self, method, path):
        """The agents' token for everything; the compute nodes' read-only token for GET /v1/jobs/<job> only."""
        token = self.server.token
        if token is None:
            return True
        got = self.headers.get("Authorization", "")
        if not got.startswith("Bearer "):
            return False
        got = got[7:].strip().encode()
        if hmac.compare_digest(got, token.encode()):
            return True
        read = getattr(self.server, "read_token", None)
        return bool(read) and method == "GET" and re.fullmatch(r"/v1/jobs/[^/]+", path) is not None \
            and hmac.compare_digest(got, read.encode())

    def _dispatch(self, method):
        agent = self.server.agent
        path = self.path.split("?", 1)[0].rstrip("/")
        try:
            if method == "GET" and path == "/v1/health":
                return self._send(200, agent.health())
            if not self._authorised(method, path):
                return self._send(401, {"error": {"message": "missing or wrong bearer token"}})
            if path == "/v1/jobs" and method == "GET":
                return self._send(200, agent.list())
            if path == "/v1/jobs" and method == "POST":
                try:
                    body = json.loads(self.read_body() or b"{}")
                except ValueError:
                    raise AgentError(400, "request body is not JSON")
                if not isinstance(body, dict) or "job" not in body:
                    raise AgentError(400, "request body needs a 'job'")
                rec, created = agent.start(str(body["job"]), body.get("port", 0), body.get("pairs"), body.get("secret"))
                return self._send(201 if created else 200, rec)
            m = re.fullmatch(r"/v1/jobs/([^/]+)", path)
            if m and method == "GET":
                return self._send(200, agent.get(m.group(1)))
            if m and method == "DELETE":
                return self._send(200, agent.stop(m.group(1)))
            raise AgentError(404, "no such resource: %s %s" % (method, path))
        except AgentError as exc:
            return self._send(exc.status, {"error": {"message": str(exc)}})
        except BodyError as exc:
            return self._send(exc.status, exc.document())


class AgentServer(TLSThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address, agent, token, tls=None, read_token=None):
        self.agent = agent
        self.token = token
        self.read_token = read_token  # the compute nodes' (msa-gw-routes): GET /v1/jobs/<job> only
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        super().__init__(address, Handler, tls=tls)


def _monitor_loop(agent, interval=1.0):
    """Every ``interval`` seconds: close the forwarding of jobs whose psgwd died and end them (``Agent.monitor``)."""
    while True:
        try:
            agent.monitor()
        except (OSError, ValueError) as exc:  # ForwardError is a ValueError: an nft failure, retried next round
            log.error("forwarding monitor: %s", exc)
        time.sleep(interval)


def read_token(path):
    with open(path, "r", encoding="utf-8") as fh:
        token = fh.read().strip()
    if not token:
        raise ValueError("token file %s is empty" % path)
    return token


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python3 -m msa_sim.psgwd.agent", description="psgw-agent on a gateway node")
    ap.add_argument("--listen", default="0.0.0.0:7433", help="management address:port to serve on")
    ap.add_argument("--fabric", action="append", default=[], metavar="NAME=ADDR",
                    help="this gateway's address on one fabric (repeat for each fabric)")
    ap.add_argument("--fabric-ports", action="append", default=[], metavar="NAME=PREFIX",
                    help="the fabric is up only while one interface named PREFIX* has its link up (EXTOLL ports)")
    ap.add_argument("--name", default=socket.gethostname().split(".")[0])
    ap.add_argument("--token-file", default="/etc/msa-gw/agent.token")
    ap.add_argument("--read-token-file", help="token of the compute nodes' route hooks: GET /v1/jobs/<job> only")
    ap.add_argument("--insecure-no-auth", action="store_true", help="serve without a token, and without TLS when none is given (tests only)")
    ap.add_argument("--tls-cert", help="PEM certificate of the API: with --tls-key, the agent speaks TLS only")
    ap.add_argument("--tls-key", help="PEM key of --tls-cert")
    ap.add_argument("--forward-network", action="append", default=[], metavar="NAME=CIDR",
                    help="the network of a --fabric whose addresses job pairs may name: given for both fabrics, "
                    "the agent opens nftables forwarding for each job's node pairs (first --fabric: cluster side)")
    ap.add_argument("--tunnel", choices=("none", "vxlan"), default="none",
                    help="vxlan: the simulator's booster nodes reach this gateway through a VXLAN tunnel over the "
                    "torus (msa_sim.psgwd.tunnel); set it up at start (with --forward-network)")
    ap.add_argument("--psgwd-max-bytes", metavar="N", help="bytes one psgwd connection may carry (its --max-bytes)")
    ap.add_argument("--psgwd-refuse-ports", metavar="LOW-HIGH[,...]",
                    help="ports no psgwd relays to (its --refuse-ports)")
    ap.add_argument("--end-lost-jobs", action="store_true",
                    help="end in Slurm (scontrol notify, AdminComment, scancel) a job whose psgwd died")
    ap.add_argument("--scontrol", default="scontrol", help="Slurm's scontrol (with --end-lost-jobs)")
    ap.add_argument("--scancel", default="scancel", help="Slurm's scancel (with --end-lost-jobs)")
    ap.add_argument("--slurm-conf-server", metavar="HOST[:PORT][,HOST[:PORT]]",
                    help="the slurmctld hosts Slurm's commands fetch their configuration from (SLURM_CONF_SERVER, "
                    "configless Slurm: a gateway keeps no slurm.conf)")
    ap.add_argument("--state-dir", default="/var/lib/msa-gw")
    ap.add_argument("--run-dir", default="/run/msa-gw")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="psgw-agent %(levelname)s %(message)s")
    if bool(args.tls_cert) != bool(args.tls_key):
        ap.error("--tls-cert and --tls-key go together")
    if not (args.tls_cert or args.insecure_no_auth):
        ap.error("--tls-cert and --tls-key are required: the API would be plain HTTP (--insecure-no-auth: tests only)")
    def pairs(items, option, value, names=None):
        """``[(NAME, VALUE)]`` of the option's NAME=VALUE items; NAME one of ``names`` when given."""
        out = []
        for item in items:
            name, sep, text = item.partition("=")
            if not sep or not name or not text or (names is not None and name not in names):
                ap.error("%s %r is not NAME=%s%s" % (option, item, value, "" if names is None else " of a --fabric"))
            out.append((name, text))
        return out

    fabrics = pairs(args.fabric, "--fabric", "ADDR")
    ports = dict(pairs(args.fabric_ports, "--fabric-ports", "PREFIX", dict(fabrics)))
    networks = dict(pairs(args.forward_network, "--forward-network", "CIDR", dict(fabrics)))
    if args.tunnel != "none" and not networks:
        ap.error("--tunnel %s needs --forward-network" % args.tunnel)
    if networks and (len(fabrics) != 2 or set(networks) != set(dict(fabrics))):
        ap.error("--forward-network is needed for both fabrics of a gateway (two --fabric), got %s"
                 % ", ".join(sorted(networks)))
    try:
        token = None if args.insecure_no_auth else read_token(args.token_file)
        forwarder = None
        if networks:
            (cluster, _), (booster, _) = fabrics
            forwarder = fwd.Forwarder(networks[cluster], networks[booster], (cluster, booster),
                                      transit_prefix=ports.get(booster))
            if args.tunnel == "vxlan":
                tunnel.setup_gateway(fabrics[1][1])
        if args.slurm_conf_server and not re.fullmatch(r"[A-Za-z0-9.:\[\]-]+(,[A-Za-z0-9.:\[\]-]+)*",
                                                       args.slurm_conf_server):
            raise ValueError("--slurm-conf-server %r is not HOST[:PORT][,HOST[:PORT]]" % args.slurm_conf_server)
        ender = JobEnder(args.name, args.scontrol, args.scancel, conf_server=args.slurm_conf_server) \
            if args.end_lost_jobs else None
        bounds = [("--max-bytes", args.psgwd_max_bytes), ("--refuse-ports", args.psgwd_refuse_ports)]
        agent = Agent(args.name, fabrics, args.state_dir, args.run_dir, ports=ports, forwarder=forwarder, ender=ender,
                      daemon_args=[a for option, value in bounds if value is not None for a in (option, value)])
        agent.restore()
        host, _, port = args.listen.rpartition(":")
        read = read_token(args.read_token_file) if args.read_token_file and token else None
        server = AgentServer((host.strip("[]"), int(port)), agent, token,
                             tls=(args.tls_cert, args.tls_key) if args.tls_cert else None, read_token=read)
    except (OSError, ValueError, tunnel.TunnelError) as exc:
        print("psgw-agent: %s" % exc, file=sys.stderr)
        return 2
    if forwarder is not None or ender is not None:
        threading.Thread(target=_monitor_loop, args=(agent,), daemon=True, name="forward-monitor").start()
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown).start())
    print("psgw-agent %s serving on %s://%s:%d" % (args.name, server.scheme, *server.server_address[:2]), flush=True)
    server.serve_forever(poll_interval=0.2)
    server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
