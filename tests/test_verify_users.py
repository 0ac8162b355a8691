# SPDX-License-Identifier: GPL-3.0-or-later
"""The users molecule's checks create each have a uid of their own: two checks giving one uid to different names made
the later check's useradd fail ("UID 5104 is not unique") after every earlier check had passed."""
from __future__ import annotations

import collections
import glob
import os
import re

from tests.helpers import BUNDLE

UID = re.compile(r"^\s*(?:-\s*\{.*\b)?\w*uid:\s*(\d+)", re.MULTILINE)


def test_each_uid_a_check_creates_is_given_once():
    seen = collections.defaultdict(list)
    for path in sorted(glob.glob(os.path.join(BUNDLE, "molecule", "*", "*.yml"))):
        with open(path, encoding="utf-8") as handle:
            for uid in UID.findall(handle.read()):
                seen[uid].append(os.path.relpath(path, BUNDLE))
    assert seen, "no uid found: the pattern no longer matches how the checks create users"
    assert {uid: files for uid, files in seen.items() if len(files) > 1} == {}
