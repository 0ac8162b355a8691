# SPDX-License-Identifier: GPL-3.0-or-later
"""The demo's coupled simulation (playbooks/demo.yml): one MPI program across the Cluster Module and the booster,
run by the job itself, and the delayed DAM part that reads its result from the NAM.

  step  (srun --mpi=pmix --het-group=0,1): the CM ranks integrate a 1-D diffusion field (halo exchange between the
        CM ranks, periodic) and send each ESB rank its slice of every CM block (MPI across the modules: through the
        job's gateways); the ESB ranks write their slices into the job's NAM allocation (msa_nam put), bin them into
        a histogram and reduce it with the GCE (msa_gce allreduce on the ESB ranks' communicator: the GCE, or the
        software fallback, compared with MPI's own Allreduce); ESB rank 0 then writes the header (block checksums
        from the CM ranks, the reduced histogram). World rank 0 prints `RESULT {json}`: every rank's place
        (rank, host, module) and what it did.
  hold  (one task on the booster, after the step): keeps the job, and so its NAM allocation, until the DAM part has
        acknowledged its read in the NAM (bounded by --timeout).
  dam   (the delayed component, its own job): attaches the first job's allocation, reads the header and the field,
        checks every block's sha256 against the CM's and the histogram recomputed from what it read against the
        GCE's, writes the acknowledgement and prints `RESULT {json}`; exit 1 when a check fails.

NAM layout: header JSON at 0 (HEADER bytes, space-padded), acknowledgement at HEADER (ACK bytes), field (float64,
CM block after CM block) from FIELD. Only mpi4py (step) and the node's msa_nam/msa_gce client library are used.
"""
import argparse
import array
import hashlib
import json
import math
import os
import re
import socket
import sys
import time

HEADER = 4096
ACK = 512
FIELD = HEADER + ACK
BINS = 64
LOW, HIGH = -2.0, 2.0
JOB_RE = re.compile(r"^[0-9]{1,12}$")


def module_of(host):
    """The module a node belongs to, from its name (``dev2-esb01`` or ``esb01`` -> ``esb``)."""
    return re.sub(r"\d+$", "", host.split(".")[0].split("-")[-1])


def split(count, parts):
    """``parts`` contiguous ranges ``(start, stop)`` covering ``range(count)``, sizes differing by at most one."""
    base, extra = divmod(count, parts)
    out, start = [], 0
    for i in range(parts):
        stop = start + base + (1 if i < extra else 0)
        out.append((start, stop))
        start = stop
    return out


def initial(start, stop, total):
    """The field's initial state on cells ``start..stop-1`` of ``total`` (two modes, periodic)."""
    w = 2.0 * math.pi / total
    return [math.sin(3 * w * i) + 0.5 * math.sin(17 * w * i) for i in range(start, stop)]


def diffuse(cells, left, right, k=0.25):
    """One explicit step of u_t = u_xx on a block with its halo cells."""
    ext = [left] + cells + [right]
    return [b + k * (a - 2.0 * b + c) for a, b, c in zip(ext, ext[1:], ext[2:])]


def histogram(values):
    """Counts of ``values`` in BINS equal bins over [LOW, HIGH) (outside values in the edge bins), as int64."""
    counts = array.array("q", [0] * BINS)
    scale = BINS / (HIGH - LOW)
    for v in values:
        counts[min(BINS - 1, max(0, int((v - LOW) * scale)))] += 1
    return counts


def encode_header(record):
    raw = json.dumps(record, sort_keys=True).encode()
    if len(raw) > HEADER:
        raise ValueError("header of %d bytes exceeds the %d bytes reserved for it" % (len(raw), HEADER))
    return raw + b" " * (HEADER - len(raw))


def decode_header(raw):
    text = bytes(raw).rstrip(b" \0")
    return json.loads(text) if text else None


def job_id(value):
    """The first job's id (the one that holds the NAM allocation), checked: digits only."""
    value = (value or "").strip()
    if not JOB_RE.match(value):
        raise SystemExit("coupled: job id %r is not a Slurm job id (give --job or run inside the job)" % value)
    return value


def attach(job):
    """The first job's NAM allocation, attached with that job's identity (munge proves the user to the manager)."""
    import msa_nam  # the node's client library (msa.hpc.nam_manager)
    env = dict(os.environ, SLURM_HET_JOB_ID=job, SLURM_JOB_ID=job)
    return msa_nam.attach(name="slurm-%s" % job, manager=msa_nam.Manager(env=env))


# --- step ------------------------------------------------------------------------------------------------------------

def step(args):
    from mpi4py import MPI
    world = MPI.COMM_WORLD
    rank, size = world.Get_rank(), world.Get_size()
    host = socket.gethostname()
    me = {"rank": rank, "host": host, "module": module_of(host)}
    places = world.allgather(me)
    cm = [p["rank"] for p in places if p["module"] == "cm"]
    esb = [p["rank"] for p in places if p["module"] == "esb"]
    if not cm or not esb or len(cm) + len(esb) != size:
        if rank == 0:
            print("coupled: the step needs CM and ESB ranks only, got %s" % [p["module"] for p in places],
                  file=sys.stderr)
        return 2
    on_cm = rank in cm
    sub = world.Split(0 if on_cm else 1, rank)
    total = args.cells * len(cm)
    slices = split(args.cells, len(esb))
    out = dict(me, role="compute" if on_cm else "reduce")
    started = time.monotonic()

    if on_cm:
        c = cm.index(rank)
        block = initial(c * args.cells, (c + 1) * args.cells, total)
        left_rank, right_rank = (c - 1) % len(cm), (c + 1) % len(cm)
        for _ in range(args.steps):
            # periodic halo: my first cell to the left neighbour, my last to the right
            left = sub.sendrecv(block[-1], dest=right_rank, source=left_rank, sendtag=1, recvtag=1)
            right = sub.sendrecv(block[0], dest=left_rank, source=right_rank, sendtag=2, recvtag=2)
            block = diffuse(block, left, right)
        data = array.array("d", block)
        out["computed_seconds"] = round(time.monotonic() - started, 3)
        sent = time.monotonic()
        parts = [data[lo:hi] for lo, hi in slices]
        requests = [world.Isend([part, MPI.DOUBLE], dest=esb[e], tag=100 + c) for e, part in enumerate(parts)]
        MPI.Request.Waitall(requests)
        out["sent"] = {str(esb[e]): (hi - lo) * 8 for e, (lo, hi) in enumerate(slices)}
        out["send_seconds"] = round(time.monotonic() - sent, 3)
        digest = hashlib.sha256(data.tobytes()).hexdigest()
    else:
        e = esb.index(rank)
        lo, hi = slices[e]
        received, got = [], 0
        t0 = time.monotonic()
        for c, src in enumerate(cm):
            part = array.array("d", bytes((hi - lo) * 8))
            status = MPI.Status()
            world.Recv([part, MPI.DOUBLE], source=src, tag=100 + c, status=status)
            got += status.Get_count(MPI.BYTE)   # what MPI delivered, not what the slice should hold
            received.append(part)
        out["received"] = got
        out["receive_seconds"] = round(time.monotonic() - t0, 3)
        nam = attach(args.job)
        t0 = time.monotonic()
        written = sum(nam.put(FIELD + (c * args.cells + lo) * 8, part) for c, part in enumerate(received))
        out["nam"] = {"allocation": nam.id, "device": nam.device, "written": written,
                      "seconds": round(time.monotonic() - t0, 3)}
        counts = histogram(v for part in received for v in part)
        import msa_gce  # the node's GCE client library, with its software fallback
        gce = msa_gce.Gce(sub, name="demo-%s" % args.job)
        reduced = gce.allreduce(counts, "sum")
        mine = array.array("q", bytes(BINS * 8))
        sub.Allreduce([counts, MPI.INT64_T], [mine, MPI.INT64_T], op=MPI.SUM)
        out["gce"] = {"path": gce.last_path, "equal_to_mpi": list(reduced) == list(mine),
                      "communicator": (gce.access or {}).get("communicator"), "ranks": sub.Get_size(),
                      "histogram_sum": sum(reduced)}
        gce.close()
        digest = None
    digests = world.allgather(digest)

    if not on_cm:
        sub.Barrier()   # every slice is in the NAM before the header says so
        if sub.Get_rank() == 0:
            header = {"job": args.job, "cells_per_block": args.cells, "blocks": len(cm), "steps": args.steps,
                      "offset": FIELD, "block_sha256": [digests[r] for r in cm], "histogram": list(reduced),
                      "bins": [BINS, LOW, HIGH], "gce_path": gce.last_path, "written_by": host,
                      "written_at": time.time()}
            nam.put(HEADER, b"\0" * ACK)
            nam.put(0, encode_header(header))
            out["header_written"] = True
        nam.close()
    out["seconds"] = round(time.monotonic() - started, 3)
    results = world.gather(out, root=0)
    if rank == 0:
        print("RESULT " + json.dumps({"size": size, "ranks": results, "cells": total}, sort_keys=True), flush=True)
    return 0


# --- hold and dam ----------------------------------------------------------------------------------------------------

def read_ack(nam):
    return decode_header(nam.get(HEADER, ACK))


def hold(args):
    started = time.monotonic()
    with attach(args.job) as nam:
        while True:
            ack = read_ack(nam)
            if ack:
                print("HOLD " + json.dumps({"ack": ack, "waited": round(time.monotonic() - started, 1)}), flush=True)
                return 0
            if time.monotonic() - started > args.timeout:
                print("coupled: no acknowledgement from the DAM part in the NAM after %d s" % args.timeout,
                      file=sys.stderr)
                return 1
            time.sleep(2)


def dam(args):
    out = {"host": socket.gethostname(), "module": module_of(socket.gethostname()), "job": args.job,
           "own_job": os.environ.get("SLURM_JOB_ID")}
    started = time.monotonic()
    with attach(args.job) as nam:
        out["allocation"] = nam.id
        header = None
        while header is None and time.monotonic() - started < args.timeout:
            header = decode_header(nam.get(0, HEADER))
            if header is None:
                time.sleep(2)
        if header is None:
            out["error"] = "no header in the NAM after %d s" % args.timeout
        else:
            t0 = time.monotonic()
            cells = header["cells_per_block"]
            values = array.array("d")
            blocks = []
            for c in range(header["blocks"]):
                raw = nam.get(header["offset"] + c * cells * 8, cells * 8)
                blocks.append(hashlib.sha256(raw).hexdigest())
                values.frombytes(raw)
            out["read"] = len(values) * 8
            out["read_seconds"] = round(time.monotonic() - t0, 3)
            out["checksum_ok"] = blocks == header["block_sha256"]
            out["histogram_ok"] = list(histogram(values)) == header["histogram"]
            out["blocks"] = len(blocks)
            out["gce_path"] = header.get("gce_path")
            out["ok"] = out["checksum_ok"] and out["histogram_ok"]
        ack = {"by": out["host"], "ok": bool(out.get("ok")), "at": time.time()}
        nam.put(HEADER, encode_header(ack)[:ACK])
    print("RESULT " + json.dumps(out, sort_keys=True), flush=True)
    return 0 if out.get("ok") else 1


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("part", choices=["step", "hold", "dam"])
    parser.add_argument("--job", help="the first job's id (default: MSA_PACK_LEADER, SLURM_HET_JOB_ID, SLURM_JOB_ID)")
    parser.add_argument("--cells", type=int, default=1 << 18, help="cells per CM rank (float64)")
    parser.add_argument("--steps", type=int, default=4, help="diffusion steps on the CM")
    parser.add_argument("--timeout", type=int, default=240, help="seconds hold and dam wait for each other")
    args = parser.parse_args(argv)
    env = os.environ
    args.job = job_id(args.job or env.get("MSA_PACK_LEADER") or env.get("SLURM_HET_JOB_ID") or env.get("SLURM_JOB_ID"))
    if args.cells < 1 or args.steps < 0 or args.timeout < 1:
        parser.error("--cells and --timeout must be positive, --steps not negative")
    return {"step": step, "hold": hold, "dam": dam}[args.part](args)


if __name__ == "__main__":
    sys.exit(main())
