# SPDX-License-Identifier: GPL-3.0-or-later
"""The collection's generated documentation: a reference page per module, plugin and role, and the README's content
list, which cannot drift from ansible-doc."""
from __future__ import annotations

import json
import re
import sys

from tests.collection_helpers import COLLECTION, BIN, run, module_files, role_dirs


def test_docs_script_writes_a_page_per_module_plugin_and_role(tmp_path):
    proc = run([sys.executable, COLLECTION / "docs" / "generate.py", "--ansible-doc", BIN / "ansible-doc",
                "--output", tmp_path], check=False)
    failures = re.findall(r"^could not document (\S+ \(\w+\))", proc.stderr, re.M)
    assert not failures, proc.stderr
    assert proc.returncode == (1 if failures else 0), proc.stderr
    pages = {str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*.md")}
    expected = {"module/%s.md" % m for m in module_files()}
    expected |= {"role/%s.md" % p.name for p in role_dirs() if p.parent == COLLECTION / "roles"}
    expected |= {"inventory/system.md", "vars/system.md", "filter/system_problems.md", "filter/layer_warnings.md",
                 "README.md"}
    assert expected <= pages, sorted(expected - pages)
    extoll = (tmp_path / "module" / "extoll_fabric.md").read_text()
    assert "## Examples" in extoll and "| `routing` | str |" in extoll and "C(" not in extoll


# The README's content list is generated from ansible-doc and cannot drift ------------------------------------------

def readme_check(path):
    return run([sys.executable, COLLECTION / "docs" / "generate.py", "--ansible-doc", BIN / "ansible-doc",
                "--check-readme", path], check=False)


def test_collection_readme_lists_every_module_role_and_plugin_as_ansible_doc_does():
    proc = readme_check(COLLECTION / "README.md")
    assert proc.returncode == 0, "README.md is stale (scripts/docs.sh --readme):\n%s%s" % (proc.stdout, proc.stderr)
    text = (COLLECTION / "README.md").read_text()
    block = text[text.index("<!-- BEGIN content"):text.index("<!-- END content -->")]
    named = set(re.findall(r"^\| `([a-z0-9_]+)` \|", block, re.M))
    plugins = {p.stem for kind in ("modules", "filter", "inventory", "strategy")
               for p in (COLLECTION / "plugins" / kind).glob("*.py") if not p.name.startswith("_")}
    # a filter file may hold several filters: its own name need not be one of them, but every filter's is listed
    filters = {n.split(".", 2)[2] for n in json.loads(
        run([BIN / "ansible-doc", "-t", "filter", "-l", "msa.hpc", "--json"]).stdout)}
    roles = {p.name for p in role_dirs() if p.parent == COLLECTION / "roles"}
    wanted = (plugins - {p.stem for p in (COLLECTION / "plugins" / "filter").glob("*.py")}) | filters | roles
    assert wanted <= named, sorted(wanted - named)


def test_readme_check_fails_on_a_stale_list_and_names_what_changed(tmp_path):
    stale = tmp_path / "README.md"
    text = (COLLECTION / "README.md").read_text()
    stale.write_text(re.sub(r"^\| `gw_pool` \|.*\n", "", text, flags=re.M))
    assert stale.read_text() != text
    proc = readme_check(stale)
    assert proc.returncode == 1 and "+| `gw_pool` |" in proc.stdout and "is stale" in proc.stderr, proc
    (tmp_path / "bare.md").write_text("# no generated block\n")
    proc = readme_check(tmp_path / "bare.md")
    assert proc.returncode == 2 and "has no <!-- BEGIN content" in proc.stderr, proc
