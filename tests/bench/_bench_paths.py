# SPDX-License-Identifier: GPL-3.0-or-later
"""Makes a benchmark run from the checkout as `make bench` runs it: the bundle's collection, stand-ins and tests
importable with the venv's Python and no PYTHONPATH (imported first by every tests/bench/bench_*.py)."""
from __future__ import annotations

import os
import sys

BUNDLE = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
for _path in (os.path.join(BUNDLE, "collections"), os.path.join(BUNDLE, "sim"), BUNDLE):
    if _path not in sys.path:
        sys.path.insert(0, _path)


def skip(name, reason):
    """End a bench (or a named part of one, ``bench_x:part``) that cannot run here. It passes only when the person
    asked for that skip by name (``MSA_BENCH_SKIP=bench_a,bench_b:part``, ``make bench SKIP=...``); otherwise it
    fails (exit 3) naming what is missing, so `make bench` never passes without measuring."""
    asked = {s.strip() for s in os.environ.get("MSA_BENCH_SKIP", "").split(",") if s.strip()}
    if name in asked or name.split(":")[0] in asked:
        print("%s: SKIPPED, as asked (MSA_BENCH_SKIP): %s" % (name, reason))
        if ":" in name:
            return
        sys.exit(0)
    print("%s: CANNOT RUN: %s (to skip it on purpose: make bench SKIP=%s)" % (name, reason, name), file=sys.stderr)
    sys.exit(3)
