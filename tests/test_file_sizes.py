# SPDX-License-Identifier: GPL-3.0-or-later
"""No source file holds several jobs' worth of lines: every tracked *.py, *.yml, *.j2, *.sh, *.c and *.lua file
stays at or under 600 lines (split by job, as module_utils/slurm/ and molecule/default/faults/ are)."""
from __future__ import annotations

import subprocess

from tests.helpers import BUNDLE

LIMIT = 600
SOURCES = (".py", ".yml", ".yaml", ".j2", ".sh", ".c", ".lua")


def too_long(paths, limit=LIMIT):
    """``path: lines`` of each file in ``paths`` that has more than ``limit`` lines."""
    found = []
    for path in paths:
        with open(path, "rb") as handle:
            lines = sum(1 for _ in handle)
        if lines > limit:
            found.append("%s: %d lines" % (path.relative_to(BUNDLE), lines))
    return found


def test_no_source_file_is_over_600_lines():
    names = subprocess.run(["git", "ls-files", "-z"], cwd=BUNDLE, check=True, capture_output=True,
                           text=True).stdout.split("\0")
    paths = [BUNDLE / n for n in names if n.endswith(SOURCES) and (BUNDLE / n).is_file()]
    assert len(paths) > 200, "the file list is not the checkout's"
    assert too_long(paths) == []


def test_a_file_over_the_limit_is_named(tmp_path):
    (BUNDLE / ".cache").mkdir(exist_ok=True)
    big = BUNDLE / ".cache" / "test_file_sizes_probe.py"
    big.write_text("x = 1\n" * (LIMIT + 1))
    try:
        assert too_long([big]) == [".cache/test_file_sizes_probe.py: 601 lines"]
        assert too_long([big], limit=LIMIT + 1) == []
    finally:
        big.unlink()
