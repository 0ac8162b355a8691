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
