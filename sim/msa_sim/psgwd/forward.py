# SPDX-License-Identifier: GPL-3.0-or-later
"""Per-job kernel forwarding on a gateway: the nftables rules that let exactly a job's node pairs cross modules.

The gateway forwards IP between its two fabrics (cluster side, e.g. InfiniBand, and booster side, EXTOLL) only
through table ``inet msa_gw``: its ``forward`` chain drops by default, accepts transit inside the booster fabric
(a gateway is a torus hop too: booster address to booster address, and with ``transit_prefix`` any packet from one
torus port to another) and, per open job, the packets of each of the job's pairs in both directions,
counted in two named counters ``job<ID>_c2b`` / ``job<ID>_b2c`` (bytes per direction for the epilog's report).
A pair whose job closed (DELETE, or its psgwd died) is answered ``reject with tcp reset`` (ICMP admin-prohibited
for anything else) for ``CLOSED_HOLD`` seconds, so an MPI code using it fails at once instead of waiting for
retransmission time-outs; after that its packets are dropped like any other.

The ruleset is text from the pure function :func:`render`; :class:`Forwarder` applies it with ``nft -f -`` (one
transaction: all or nothing) through an injectable runner. The rules are regenerated whole at every change, but
the counters are declared with ``add`` (no-op when they exist) and only a closed job's are deleted, so the other
jobs' byte counts survive. Every address is checked here, whoever sent it (``check_pairs``).
"""
from __future__ import annotations

import ipaddress
import json
import re
import subprocess

TABLE = "msa_gw"
FAMILY = "inet"
MAX_PAIRS = 65536     # pairs one job may open on one gateway (a 256 x 256 hetjob)
CLOSED_HOLD = 60.0    # seconds a closed pair is answered with a reset before it is simply dropped
JOB_ID = re.compile(r"^[0-9]{1,10}$")
_COUNTER = re.compile(r"^job([0-9]{1,10})_(c2b|b2c)$")
DIRECTIONS = ("c2b", "b2c")
_PREFIX = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,13}$")


class ForwardError(ValueError):
    """A forwarding request is malformed or cannot be applied; the message names the field and value."""


def check_job(job):
    job = str(job)
    if not JOB_ID.match(job):
        raise ForwardError("job %r is not a numeric Slurm job id (forwarding rules are named after it)" % (job,))
    return job


def network(text, field):
    try:
        return ipaddress.ip_network(str(text), strict=False)
    except ValueError:
        raise ForwardError("%s %r is not an IP network" % (field, text)) from None


def check_pairs(pairs, cluster_net, booster_net, limit=MAX_PAIRS):
    """``[[cluster address, booster address], ...]`` checked: every cluster address inside ``cluster_net``, every
    booster address inside ``booster_net``, at most ``limit`` pairs. Returns sorted unique ``(str, str)`` tuples."""
    if not isinstance(pairs, list):
        raise ForwardError("pairs must be a list of [cluster address, booster address], not %s"
                           % type(pairs).__name__)
    if len(pairs) > limit:
        raise ForwardError("pairs: %d pairs, at most %d per job and gateway" % (len(pairs), limit))
    out = set()
    for i, pair in enumerate(pairs):
        if not isinstance(pair, (list, tuple)) or len(pair) != 2:
            raise ForwardError("pairs[%d] %r is not [cluster address, booster address]" % (i, pair))
        checked = []
        for side, value, net in (("cluster", pair[0], cluster_net), ("booster", pair[1], booster_net)):
            try:
                addr = ipaddress.ip_address(str(value))
            except ValueError:
                raise ForwardError("pairs[%d]: %s address %r is not an IP address" % (i, side, value)) from None
            if addr.version != net.version or addr not in net:
                raise ForwardError("pairs[%d]: %s address %s is outside this gateway's %s network %s"
                                   % (i, side, addr, side, net))
            if addr in (net.network_address, net.broadcast_address) and net.num_addresses > 2:
                raise ForwardError("pairs[%d]: %s address %s is not a host of %s" % (i, side, addr, net))
            checked.append(str(addr))
        out.add(tuple(checked))
    return sorted(out, key=lambda p: (ipaddress.ip_address(p[0]), ipaddress.ip_address(p[1])))


def _ip(addr):
    return "ip" if ipaddress.ip_address(addr).version == 4 else "ip6"


def counter_name(job, direction):
    return "job%s_%s" % (check_job(job), direction)


def render(cluster_net, booster_net, jobs, closed=(), existing_counters=(), transit_prefix=None):
    """The nft script (text) for the forward state.

    ``jobs``: ``{job id: [(cluster addr, booster addr), ...]}`` open now; ``closed``: pairs to answer with a reset;
    ``existing_counters``: counter names in the table now (those of jobs no longer open are deleted);
    ``transit_prefix``: name prefix of the booster fabric's port interfaces (the simulator's torus ports): a packet
    that comes in on one and goes out on another is torus transit, whatever its addresses (a job's packet that
    another gateway let into the torus crosses this one on its way)."""
    cluster_net, booster_net = ipaddress.ip_network(cluster_net), ipaddress.ip_network(booster_net)
    bf = _ip(str(booster_net.network_address))
    lines = ["add table %s %s" % (FAMILY, TABLE),
             "add chain %s %s forward { type filter hook forward priority filter; policy drop; }" % (FAMILY, TABLE)]
    wanted = []
    for job in sorted(jobs, key=int):
        for direction in DIRECTIONS:
            wanted.append(counter_name(job, direction))
            lines.append("add counter %s %s %s" % (FAMILY, TABLE, wanted[-1]))
    lines.append("flush chain %s %s forward" % (FAMILY, TABLE))
    rule = "add rule %s %s forward " % (FAMILY, TABLE)
    lines.append(rule + "%s saddr %s %s daddr %s accept comment \"booster fabric transit\""
                 % (bf, booster_net, bf, booster_net))
    if transit_prefix:
        if not _PREFIX.match(str(transit_prefix)):
            raise ForwardError("port interface prefix %r is not an interface name" % (transit_prefix,))
        lines.append(rule + "iifname \"%s*\" oifname \"%s*\" accept comment \"torus transit\""
                     % (transit_prefix, transit_prefix))
    for job in sorted(jobs, key=int):
        for c, b in jobs[job]:
            lines.append(rule + "%s saddr %s %s daddr %s counter name %s accept"
                         % (_ip(c), c, _ip(b), b, counter_name(job, "c2b")))
            lines.append(rule + "%s saddr %s %s daddr %s counter name %s accept"
                         % (_ip(b), b, _ip(c), c, counter_name(job, "b2c")))
    for c, b in sorted(set(closed)):
        for src, dst in ((c, b), (b, c)):
            match = "%s saddr %s %s daddr %s " % (_ip(src), src, _ip(dst), dst)
            lines.append(rule + match + "meta l4proto tcp reject with tcp reset")
            lines.append(rule + match + "reject with icmpx admin-prohibited")
    for name in sorted(set(existing_counters) - set(wanted)):
        if _COUNTER.match(name):
            lines.append("delete counter %s %s %s" % (FAMILY, TABLE, name))
    return "\n".join(lines) + "\n"


def parse_counters(text):
    """``nft -j list counters table inet msa_gw`` → ``{counter name: {"packets": n, "bytes": n}}``."""
    try:
        data = json.loads(text or "{}")
    except ValueError as exc:
        raise ForwardError("nft printed no JSON: %s" % exc) from None
    out = {}
    for item in data.get("nftables", []) if isinstance(data, dict) else []:
        counter = item.get("counter") if isinstance(item, dict) else None
        if isinstance(counter, dict) and counter.get("table") == TABLE and isinstance(counter.get("name"), str):
            out[counter["name"]] = {"packets": int(counter.get("packets", 0)), "bytes": int(counter.get("bytes", 0))}
    return out


def job_counters(counters, job, cluster_fabric="cluster", booster_fabric="booster"):
    """Bytes and packets of one job per direction, named after the fabrics: ``{"ib->extoll": {...}, ...}``."""
    names = {"c2b": "%s->%s" % (cluster_fabric, booster_fabric), "b2c": "%s->%s" % (booster_fabric, cluster_fabric)}
    return {names[d]: counters.get(counter_name(job, d), {"packets": 0, "bytes": 0}) for d in DIRECTIONS}


def nft_run(args, script=None):
    """Run ``nft`` (``script`` on its standard input); return its output, raise ForwardError naming its error."""
    try:
        proc = subprocess.run(["nft"] + list(args), input=script, capture_output=True, text=True, timeout=30,
                              check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        raise ForwardError("nft %s failed: %s" % (" ".join(args), exc)) from None
    if proc.returncode != 0:
        raise ForwardError("nft %s failed: %s" % (" ".join(args), proc.stderr.strip() or proc.returncode))
    return proc.stdout


class Forwarder:
    """The forwarding state of one gateway: open jobs and recently closed pairs, applied through ``run``."""

    def __init__(self, cluster_net, booster_net, fabric_names=("cluster", "booster"), run=nft_run,
                 hold=CLOSED_HOLD, transit_prefix=None):
        self.cluster_net = network(cluster_net, "cluster network")
        self.booster_net = network(booster_net, "booster network")
        self.fabric_names = tuple(fabric_names)
        self.run = run
        self.hold = hold
        self.transit_prefix = transit_prefix
        self.jobs = {}
        self.closed = {}  # pair -> time until which it is answered with a reset

    def check(self, job, pairs):
        return check_job(job), check_pairs(pairs, self.cluster_net, self.booster_net)

    def counters(self):
        """Every counter of the table now (empty when the table does not exist yet)."""
        try:
            return parse_counters(self.run(["-j", "list", "counters", "table", FAMILY, TABLE]))
        except ForwardError as exc:
            if "No such file or directory" in str(exc) or "does not exist" in str(exc):
                return {}
            raise

    def apply(self, now):
        self.closed = {p: t for p, t in self.closed.items() if t > now}
        script = render(self.cluster_net, self.booster_net, self.jobs, self.closed, self.counters(),
                        self.transit_prefix)
        self.run(["-f", "-"], script)
        return script

    def open(self, job, pairs, now):
        """Open (or re-open with these pairs) the job's forwarding; idempotent."""
        job, pairs = self.check(job, pairs)
        self.jobs[job] = pairs
        for p in pairs:
            self.closed.pop(p, None)
        self.apply(now)
        return pairs

    def close(self, job, now):
        """Close the job's forwarding; return its final counters (None when it had none open)."""
        job = check_job(job)
        if job not in self.jobs:
            return None
        final = job_counters(self.counters(), job, *self.fabric_names)
        pairs = self.jobs.pop(job)
        still_open = {p for other in self.jobs.values() for p in other}
        for p in pairs:
            if p not in still_open:
                self.closed[p] = now + self.hold
        self.apply(now)
        return final

    def stats(self, job):
        return job_counters(self.counters(), check_job(job), *self.fabric_names)

    def expire(self, now):
        """Re-apply when a closed pair's reset time is over; return whether it did."""
        if any(t <= now for t in self.closed.values()):
            self.apply(now)
            return True
        return False
