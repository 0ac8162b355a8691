# SPDX-License-Identifier: GPL-3.0-or-later
"""The on-node programs (plugins/module_utils/node) and the code installed with them import no Ansible, and no
controller-side plugin (module, filter, inventory, vars, callback) imports them."""
from __future__ import annotations

import ast

import pytest

from tests.helpers import BUNDLE
from tests.test_hook_runtime import MODULE_UTILS, PREFIX, installed_code, programs

PLUGINS = BUNDLE / "collections/ansible_collections/msa/hpc/plugins"
CONTROLLER_PLUGINS = ("modules", "filter", "inventory", "vars", "callback")


def imported_names(path):
    """Every module a file imports, anywhere in it, as written (``from a.b import c`` gives ``a.b`` and ``a.b.c``)."""
    names = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names += [node.module] + [node.module + "." + alias.name for alias in node.names]
    return names


def ansible_imports(path):
    """Imports of Ansible: ``ansible``, or any ``ansible_collections`` name but the collection's module_utils."""
    return sorted({name for name in imported_names(path)
                   if name == "ansible" or name.startswith("ansible.")
                   or (name.startswith("ansible_collections") and not name.startswith(PREFIX))})


def node_imports(path):
    return sorted({name for name in imported_names(path) if name.startswith(PREFIX + ".node")})


def test_the_on_node_programs_import_no_ansible():
    files = sorted((MODULE_UTILS / "node").rglob("*.py"))
    assert len(files) >= 9, files
    found = {str(path.relative_to(MODULE_UTILS)): ansible_imports(path) for path in files}
    assert not {name: names for name, names in found.items() if names}


@pytest.mark.parametrize("group", sorted(programs()))
def test_the_code_installed_with_each_entry_point_imports_no_ansible(group):
    installed = installed_code(programs()[group])
    found = {name: ansible_imports(MODULE_UTILS / name) for name in installed}
    assert not {name: names for name, names in found.items() if names}


def test_no_controller_plugin_imports_the_on_node_programs():
    files = [path for kind in CONTROLLER_PLUGINS for path in sorted((PLUGINS / kind).rglob("*.py"))]
    assert len(files) >= 10, files
    found = {str(path.relative_to(PLUGINS)): node_imports(path) for path in files}
    assert not {name: names for name, names in found.items() if names}


def test_the_import_checks_see_every_form_of_import(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text("import os\n"
                      "def late():\n    from ansible.module_utils.basic import AnsibleModule\n"
                      "import ansible_collections.community.general.plugins.module_utils.x\n"
                      "from ansible_collections.msa.hpc.plugins.module_utils import _rest\n"
                      "from ansible_collections.msa.hpc.plugins.module_utils import node\n"
                      "from ansible_collections.msa.hpc.plugins.module_utils.node.gw_hooks import main\n")
    assert ansible_imports(sample) == ["ansible.module_utils.basic", "ansible.module_utils.basic.AnsibleModule",
                                       "ansible_collections.community.general.plugins.module_utils.x"]
    assert node_imports(sample) == [PREFIX + ".node", PREFIX + ".node.gw_hooks", PREFIX + ".node.gw_hooks.main"]
