# SPDX-License-Identifier: GPL-3.0-or-later
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter msa.hpc.module_utils_closure: the collection's module_utils files some entry modules need, found by reading
their imports (ast), so what msa.hpc.hook_runtime installs on a node is derived from the code, never listed by hand."""
from __future__ import annotations

import ast
import os

from ansible.errors import AnsibleFilterError

PREFIX = "ansible_collections.msa.hpc.plugins.module_utils"
MODULE_UTILS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "module_utils")


class ClosureError(ValueError):
    """An entry module or an import the closure cannot resolve to a file under module_utils."""


def _source(root, dotted):
    """The file of a dotted module under module_utils (``node.gw_hooks``), or None."""
    base = os.path.join(root, *dotted.split("."))
    for path in (base + ".py", os.path.join(base, "__init__.py")):
        if os.path.isfile(path):
            return os.path.relpath(path, root).replace(os.sep, "/")
    return None


def _packages(dotted):
    """The package prefixes of a dotted module below module_utils: ``a.b.c`` gives ``a`` and ``a.b``."""
    parts = dotted.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def collection_imports(tree, where="<source>"):
    """The dotted modules below module_utils that a parsed file imports, anywhere in it (functions included).

    ``from PREFIX import _a`` names a module; ``from PREFIX.pkg import name`` names ``pkg.name`` if that is a module,
    else ``pkg`` (a name defined in its ``__init__``), which the caller decides: both are returned as candidates.
    """
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [[a.name[len(PREFIX) + 1:]] for a in node.names if a.name.startswith(PREFIX + ".")]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                raise ClosureError("%s: relative import (line %d); the collection imports absolutely, from %s"
                                   % (where, node.lineno, PREFIX))
            module = node.module or ""
            if module == PREFIX:
                found += [[a.name] for a in node.names]
            elif module.startswith(PREFIX + "."):
                inner = module[len(PREFIX) + 1:]
                found += [[inner + "." + a.name, inner] for a in node.names]
    return found


def module_closure(modules, root=MODULE_UTILS):
    """The files (paths relative to ``root``, sorted) of ``modules`` (dotted, relative to module_utils) and of every
    collection module_utils they import, transitively, with the ``__init__.py`` of each subpackage on the way."""
    files, seen, todo = set(), set(), [(m, None) for m in modules]
    while todo:
        dotted, importer = todo.pop()
        if dotted in seen:
            continue
        seen.add(dotted)
        path = _source(root, dotted)
        if path is None:
            what = "%s imports module_utils.%s" % (importer, dotted) if importer else "entry module %s" % dotted
            raise ClosureError("%s, which is not a file under %s" % (what, root))
        files.add(path)
        todo += [(pkg, path) for pkg in _packages(dotted)]
        with open(os.path.join(root, path), encoding="utf-8") as handle:
            tree = ast.parse(handle.read(), path)
        for candidates in collection_imports(tree, path):
            todo.append((next((c for c in candidates if _source(root, c)), candidates[-1]), path))
    return sorted(files)


def package_files(packages, root=MODULE_UTILS):
    """Every ``.py`` file of whole packages under module_utils (``node``), relative to ``root``, sorted."""
    files = []
    for package in packages:
        top = os.path.join(root, *package.split("."))
        if not os.path.isfile(os.path.join(top, "__init__.py")):
            raise ClosureError("module_utils.%s is no package under %s" % (package, root))
        for directory, dirs, names in os.walk(top):
            dirs[:] = sorted(d for d in dirs if os.path.isfile(os.path.join(directory, d, "__init__.py")))
            files += [os.path.relpath(os.path.join(directory, n), root).replace(os.sep, "/")
                      for n in names if n.endswith(".py")]
    return sorted(files)


def module_utils_closure(modules, packages=None):
    """Filter: the module_utils files to install for entry ``modules``, plus every file of the whole ``packages``."""
    try:
        return sorted(set(module_closure(list(modules))) | set(package_files(packages or [])))
    except (ClosureError, OSError, SyntaxError) as exc:
        raise AnsibleFilterError("msa.hpc.module_utils_closure: %s" % exc)


class FilterModule:
    """The closure of module_utils imports."""

    def filters(self):
        return {"module_utils_closure": module_utils_closure}
