# SPDX-License-Identifier: GPL-3.0-or-later
"""NAM put/get bandwidth through the job's client library (msa_nam) against a local memcpy baseline, in one run."""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

import _bench_paths  # noqa: F401  (the checkout's collection and stand-ins)

sys.path.insert(0, os.path.join(_bench_paths.BUNDLE, "sim", "nam_client"))

import msa_nam  # noqa: E402
from msa_sim.rma.testing import System  # noqa: E402

HELP = """
    .venv/bin/python tests/bench/bench_nam_data.py [--mib 64] [--rounds 5]

Starts a NAM/GCE manager and a NAM board (python3 -m msa_sim.rma) on 127.0.0.1 over TLS, allocates --mib MiB for a
job, attaches it with msa_nam and times put and get of the whole allocation (16 MiB requests over one kept-alive
TLS connection), against copying the same bytes in memory (bytearray slice assignment from a memoryview, and
bytes() of a memoryview). Prints the median of --rounds rounds and the ratios of one run.
"""


def timed(func, rounds):
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        func()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mib", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    size = args.mib << 20
    data = os.urandom(size)
    work = tempfile.mkdtemp(prefix="bench_nam_data.")
    system = System(work, capacity="%dM" % (2 * args.mib))
    try:
        system.allocate("bench", 1, size)
        manager = msa_nam.Manager(system.url, system.job("bench", 1), system.ca, conf=os.devnull,
                                  env={"SLURM_JOB_ID": "1"})
        with msa_nam.attach(manager=manager) as nam:
            nam.put(0, data)                                  # first touch (the board claims the range)
            assert nam.get(0, size) == data
            put = timed(lambda: nam.put(0, data), args.rounds)
            get = timed(lambda: nam.get(0, size), args.rounds)
        target = bytearray(size)
        view = memoryview(data)

        def copy_in():
            target[:] = view

        copy = timed(copy_in, args.rounds)
        clone = timed(lambda: bytes(view), args.rounds)
    finally:
        system.stop()
        shutil.rmtree(work, ignore_errors=True)

    def rate(seconds):
        return size / seconds / (1 << 20)

    print("NAM put  %8.1f MiB/s  (%d MiB, median of %d)" % (rate(put), args.mib, args.rounds))
    print("NAM get  %8.1f MiB/s" % rate(get))
    print("memcpy   %8.1f MiB/s  (bytearray[:] = memoryview)" % rate(copy))
    print("bytes()  %8.1f MiB/s  (bytes(memoryview))" % rate(clone))
    print("ratio memcpy / NAM put: %.1f, memcpy / NAM get: %.1f, bytes() / NAM get: %.1f" % (
        put / copy, get / copy, get / clone))
    print("client, board and manager on one host over TLS (loopback); %d CPUs, load %.1f"
          % (os.cpu_count(), os.getloadavg()[0]))


if __name__ == "__main__":
    main()
