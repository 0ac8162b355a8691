#!/usr/bin/python3
# SPDX-License-Identifier: GPL-3.0-or-later
"""A burst of named NAM allocations for the kill tests, and a wait that reports what it sees.

  nam_burst.py run  --path P --job J --size BYTES    (BURST_URL, BURST_USER, BURST_PASSWORD, BURST_CA in the environment)
  nam_burst.py wait --path P --acks N [--timeout S]
  nam_burst.py stop --path P [--timeout S]

``run`` writes one line per attempt to P.log ("try NAME", "ack NAME ID", "fail NAME KIND: MESSAGE") until P.stop
appears (or a generous bound is reached), and always ends by writing P.done with why it ended: an exception of any
kind is written down as a failed attempt and the burst goes on, so a manager that dies mid-answer can never end the
burst silently. ``wait`` returns once N acknowledgements are in the log, prints progress every few seconds, and
fails at once, saying what it saw, when the burst has ended or stopped making progress.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
import traceback

MAX_ATTEMPTS = 20000
MAX_SECONDS = 900
PROGRESS_EVERY = 5.0


def run(args):
    from msa_sim.nammgr import client as C  # the node's stand-in client (the one the Slurm NAM hooks use)

    client = C.Client(os.environ["BURST_URL"], os.environ["BURST_USER"], os.environ["BURST_PASSWORD"],
                      timeout=5, retries=0, ca_path=os.environ.get("BURST_CA") or None)
    why = "crashed"
    with open(args.path + ".log", "a", buffering=1, encoding="utf-8") as log:
        try:
            end, i = time.monotonic() + MAX_SECONDS, 0
            while True:
                if os.path.exists(args.path + ".stop"):
                    why = "stopped"
                    break
                if i >= MAX_ATTEMPTS or time.monotonic() > end:
                    why = "bound reached (%d attempts)" % i
                    break
                i += 1
                name = "%s-%d" % (args.job, i)
                log.write("try %s\n" % name)
                try:
                    rec = C.alloc(client, args.job, "root", args.size, name=name)
                except Exception as exc:  # noqa: BLE001 - every failure is an outcome of the test, never its end
                    text = str(exc).replace("\n", " ")
                    log.write("fail %s %s: %s\n" % (name, type(exc).__name__, text))
                    time.sleep(0.05)
                    continue
                log.write("ack %s %s\n" % (name, rec["id"]))
        except BaseException:
            log.write("crash %s\n" % traceback.format_exc().replace("\n", " | "))
            raise
        finally:
            with open(args.path + ".done", "w", encoding="utf-8") as fh:
                fh.write(why + "\n")
    return 0


def counts(path):
    acks = fails = tries = 0
    last = []
    try:
        with open(path + ".log", "r", encoding="utf-8") as fh:
            for line in fh:
                word = line.split(" ", 1)[0]
                acks += word == "ack"
                fails += word == "fail"
                tries += word == "try"
                last = (last + [line.rstrip()])[-3:]
    except FileNotFoundError:
        pass
    return acks, fails, tries, last


def ended(path):
    try:
        with open(path + ".done", "r", encoding="utf-8") as fh:
            return fh.read().strip() or "ended"
    except FileNotFoundError:
        return None


def wait(args):
    start = time.monotonic()
    last_progress, said = (None, start), start - PROGRESS_EVERY
    while True:
        acks, fails, tries, last = counts(args.path)
        now = time.monotonic()
        if acks >= args.acks:
            print("burst: %d acknowledged, %d refused (%d tried) after %.0fs: reached %d"
                  % (acks, fails, tries, now - start, args.acks))
            return 0
        why = ended(args.path)
        if tries != last_progress[0]:
            last_progress = (tries, now)
        problem = None
        if why is not None:
            problem = "the burst ended (%s)" % why
        elif now - last_progress[1] > args.stall:
            problem = "the burst made no attempt for %.0fs" % (now - last_progress[1])
        elif now - start > args.timeout:
            problem = "%.0fs passed" % (now - start)
        if problem:
            print("burst: waited for %d acknowledgements, saw %d (%d refused, %d tried): %s; last lines: %s"
                  % (args.acks, acks, fails, tries, problem, " / ".join(last) or "none"), file=sys.stderr)
            return 1
        if now - said >= PROGRESS_EVERY:
            print("burst: %d acknowledged, %d refused, %d tried after %.0fs; waiting for %d"
                  % (acks, fails, tries, now - start, args.acks), flush=True)
            said = now
        time.sleep(0.2)


def stop(args):
    open(args.path + ".stop", "w").close()
    deadline = time.monotonic() + args.timeout
    while ended(args.path) is None:
        if time.monotonic() > deadline:
            print("burst: asked to stop %.0fs ago and still running" % args.timeout, file=sys.stderr)
            return 1
        time.sleep(0.2)
    acks, fails, tries, _ = counts(args.path)
    print("burst: %s after %d attempts (%d acknowledged, %d refused)" % (ended(args.path), tries, acks, fails))
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("action", choices=("run", "wait", "stop"))
    ap.add_argument("--path", required=True)
    ap.add_argument("--job")
    ap.add_argument("--size", type=int, default=1 << 20)
    ap.add_argument("--acks", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds the wait may take at most")
    ap.add_argument("--stall", type=float, default=60.0, help="seconds without a new attempt that mean stuck")
    args = ap.parse_args(argv)
    return {"run": run, "wait": wait, "stop": stop}[args.action](args)


if __name__ == "__main__":
    sys.exit(main())
