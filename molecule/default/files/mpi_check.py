# SPDX-License-Identifier: GPL-3.0-or-later
"""MPI check of molecule/default/verify_mpi.yml: run by `srun --mpi=pmix` in a (heterogeneous) job, one rank per
task. Every rank prints one line `RESULT {json}`:

  rank, size, host, module (the host name without its number); with --world-only also a line `WORLD {json}`
  with these four, printed before any communication
  allreduce: true when MPI's Allreduce of every rank's vector equals the sum computed here from the formula
  pairs: for every pair of ranks on different modules (--pairs hosts: on different hosts) that this rank is part
         of, a pingpong of --bytes bytes (derived from the pair) there and back: the sha256 the receiver computed,
         whether the bytes matched the sender's, and whether the bytes that came back matched too
  rounds: with --seconds S, the pingpongs are done again and again until S seconds have passed on rank 0's clock
          (each round decided by rank 0 for all), a job that keeps its pairs talking (verify_gw_kill.yml)
  gce: with --gce, msa_gce's allreduce of the vector's first 1000 values (its path: gce or the software fallback)
       equal to MPI's Allreduce of them

After it, each rank leaves MPI (MPI_Finalize) and prints `FINALIZED {"rank", "host", "time"}`.

The verify playbook compares the results across ranks; nothing here decides what the counters on the gateways say.
"""
import argparse
import array
import hashlib
import json
import re
import socket
import sys
import time

from mpi4py import MPI


def pattern(a, b, size):
    """The bytes rank ``a`` sends to rank ``b``."""
    return hashlib.shake_256(b"msa-mpi %d->%d" % (a, b)).digest(size)


def pingpongs(comm, rank, size, places, nbytes, host):
    """One pingpong of every pair of ranks in different places that this rank is part of; the pairs' results."""
    pairs = []
    for a in range(size):
        for b in range(a + 1, size):
            if places[a] == places[b] or rank not in (a, b):
                continue
            if rank == a:
                data = pattern(a, b, nbytes)
                comm.Send([data, MPI.BYTE], dest=b, tag=1)
                back = bytearray(nbytes)
                comm.Recv([back, MPI.BYTE], source=b, tag=2)
                info = comm.recv(source=b, tag=3)
                pairs.append({"peer": b, "peer_host": info["host"], "bytes": nbytes, "sha256": info["sha256"],
                              "match": info["match"] and bytes(back) == pattern(b, a, nbytes)})
            else:
                got = bytearray(nbytes)
                comm.Recv([got, MPI.BYTE], source=a, tag=1)
                comm.Send([pattern(b, a, nbytes), MPI.BYTE], dest=a, tag=2)
                comm.send({"host": host, "sha256": hashlib.sha256(got).hexdigest(),
                           "match": bytes(got) == pattern(a, b, nbytes)}, dest=a, tag=3)
    return pairs


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bytes", type=int, default=4 << 20)
    parser.add_argument("--pairs", choices=["modules", "hosts"], default="modules",
                        help="pingpong between the ranks on different modules (default) or on different hosts")
    parser.add_argument("--world-only", action="store_true",
                        help="print the rank's place in MPI_COMM_WORLD first, before any communication")
    parser.add_argument("--seconds", type=float, default=0.0,
                        help="repeat the pingpongs until this many seconds have passed (rank 0 decides each round)")
    parser.add_argument("--gce", action="store_true")
    args = parser.parse_args()
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    host = socket.gethostname()
    module = re.sub(r"\d+$", "", host.split(".")[0].split("-")[-1])
    out = {"rank": rank, "size": size, "host": host, "module": module}
    if args.world_only:
        print("WORLD " + json.dumps(out, sort_keys=True), flush=True)

    values = array.array("q", [(rank + 1) * i - 7 for i in range(100000)])
    total = array.array("q", bytes(len(values) * values.itemsize))
    comm.Allreduce([values, MPI.INT64_T], [total, MPI.INT64_T], op=MPI.SUM)
    ranks_sum = size * (size + 1) // 2
    out["allreduce"] = all(total[i] == ranks_sum * i - 7 * size for i in range(len(values)))

    places = comm.allgather(module if args.pairs == "modules" else host)
    out["places"] = places
    start, rounds = time.monotonic(), 0
    while True:
        pairs = pingpongs(comm, rank, size, places, args.bytes, host)
        rounds += 1
        if not comm.bcast(time.monotonic() - start < args.seconds if rank == 0 else None, root=0):
            break
    out["rounds"] = rounds
    out["pairs"] = pairs

    if args.gce:
        import msa_gce  # the job's GCE client library (msa.hpc.nam_manager), with its software fallback
        small = values[:1000]  # the GCE's data goes its own way (not the job's fabric): kept small
        mine = array.array("q", bytes(len(small) * small.itemsize))
        comm.Allreduce([small, MPI.INT64_T], [mine, MPI.INT64_T], op=MPI.SUM)
        gce = msa_gce.Gce(msa_gce.SlurmComm())
        got = gce.allreduce(small, "sum")
        out["gce"] = {"path": gce.last_path, "equal": list(got) == list(mine)}
        gce.close()
    comm.Barrier()
    print("RESULT " + json.dumps(out, sort_keys=True), flush=True)
    # left explicitly (not at the interpreter's exit): a rank that does not come out of MPI_Finalize is named
    MPI.Finalize()
    print("FINALIZED " + json.dumps({"rank": rank, "host": host, "time": round(time.time(), 3)}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
