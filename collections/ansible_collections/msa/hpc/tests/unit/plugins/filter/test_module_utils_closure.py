# SPDX-License-Identifier: GPL-3.0-or-later
"""msa.hpc.module_utils_closure: the module_utils files entry modules import, transitively, read with ast."""
from __future__ import annotations

import os

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.msa.hpc.plugins.filter.module_utils_closure import (
    MODULE_UTILS, ClosureError, FilterModule, module_closure, module_utils_closure, package_files)

P = "ansible_collections.msa.hpc.plugins.module_utils"


def tree(root, files):
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return str(root)


@pytest.fixture
def utils(tmp_path):
    return tree(tmp_path, {
        "node/__init__.py": '"""Programs."""\n',
        "node/hook.py": "import os\nfrom %s import _a as A\nfrom %s._b import thing\n" % (P, P),
        "node/other.py": "from %s.node import hook\n" % P,
        "node/unused.py": "from %s import _unused\n" % P,
        "_a.py": "import json\nfrom %s import _c\n" % P,  # _c only through _a: transitive
        "_b.py": "def f():\n    from %s.pkg.deep import x  # imported late\n" % P,
        "_c.py": "import ansible_collections.msa.hpc.plugins.module_utils._d\n",
        "_d.py": "",
        "_unused.py": "",
        "pkg/__init__.py": "",
        "pkg/deep.py": "x = 1\n",
        "pkg/__pycache__/deep.cpython-311.pyc": "",
    })


def test_the_closure_holds_the_transitive_and_late_imports_with_their_package_files(utils):
    assert module_closure(["node.hook"], utils) == [
        "_a.py", "_b.py", "_c.py", "_d.py", "node/__init__.py", "node/hook.py", "pkg/__init__.py", "pkg/deep.py"]


def test_the_closure_is_closed_under_imports(utils):
    closure = module_closure(["node.other"], utils)
    assert set(module_closure([name[:-3].replace("/", ".") for name in closure], utils)) == set(closure)
    assert "_unused.py" not in closure  # a sibling in node/ brings nothing it does not import


def test_a_missing_module_names_the_file_that_imports_it(utils, tmp_path):
    (tmp_path / "_a.py").write_text("from %s import _gone\n" % P)
    with pytest.raises(ClosureError, match=r"^_a.py imports module_utils._gone, which is not a file under "):
        module_closure(["node.hook"], utils)
    with pytest.raises(ClosureError, match=r"^entry module node.nope, which is not a file under "):
        module_closure(["node.nope"], utils)


def test_a_relative_import_is_refused(utils, tmp_path):
    (tmp_path / "_d.py").write_text("from . import _a\n")
    with pytest.raises(ClosureError, match=r"^_d.py: relative import \(line 1\)"):
        module_closure(["_c"], utils)


def test_a_whole_package_is_every_python_file_in_it_and_no_cache(utils):
    assert package_files(["node"], utils) == ["node/__init__.py", "node/hook.py", "node/other.py", "node/unused.py"]
    assert package_files(["pkg"], utils) == ["pkg/__init__.py", "pkg/deep.py"]
    with pytest.raises(ClosureError, match="module_utils._a is no package"):
        package_files(["_a"], utils)


def test_the_filter_reads_the_collection_and_fails_as_a_filter():
    files = FilterModule().filters()["module_utils_closure"](["node.bmc_reboot"], packages=["node"])
    assert {"node/__init__.py", "node/bmc_reboot.py", "node/tlsserver.py", "_redfish.py", "_rest.py"} <= set(files)
    assert files == sorted(files) and "_packjob.py" not in files
    assert all(os.path.isfile(os.path.join(MODULE_UTILS, name)) for name in files)
    with pytest.raises(AnsibleFilterError, match=r"^msa.hpc.module_utils_closure: .*node.nope"):
        module_utils_closure(["node.nope"])
