# SPDX-License-Identifier: GPL-3.0-or-later
"""The documentation stays inside the repository: relative links resolve, no file points at a document outside it."""
from __future__ import annotations

import re
import subprocess

from tests.helpers import BUNDLE

LINK = re.compile(r"\]\(([^)\s]+)\)")
# ../shared/redfish-csdl is no design document: the DMTF's schema bundle, which the service validator reads where CI
# lays it beside the clone (the project must not carry a copy); nothing else there may be named
OUTSIDE = re.compile(r"\.\./shared/(?!redfish-csdl\b)|\bDESIGN\.md\b")


def tracked(suffix=""):
    names = subprocess.run(["git", "ls-files", "-z"], cwd=BUNDLE, check=True, capture_output=True,
                           text=True).stdout.split("\0")
    return [BUNDLE / n for n in names if n.endswith(suffix) and (BUNDLE / n).is_file()]


def test_every_relative_link_of_the_markdown_pages_resolves():
    broken = []
    for page in tracked(".md"):
        for target in LINK.findall(page.read_text()):
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue
            if not (page.parent / target.split("#")[0]).exists():
                broken.append("%s: %s" % (page.relative_to(BUNDLE), target))
    assert broken == []


def test_no_file_refers_to_a_design_document_outside_the_repository():
    this = BUNDLE / "tests" / "test_docs.py"
    offenders = []
    for path in tracked():
        if path == this or path.is_symlink():
            continue
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        offenders += ["%s: %s" % (path.relative_to(BUNDLE), m.group(0)) for m in OUTSIDE.finditer(text)]
    assert offenders == []
