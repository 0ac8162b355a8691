# SPDX-License-Identifier: GPL-3.0-or-later
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Content hash of a node image (issue 38): the files of the roles applied to it and the variables they read.

Standard library only. Everything is hashed in a stable order (sorted paths, keys sorted in canonical JSON), so the
same roles and variables give the same hash on any machine, and any changed file, file mode or value gives another."""
from __future__ import annotations

import hashlib
import json
import os
import re
import stat

# Left out of a tree's digest: interpreter caches and editor droppings, which no task reads.
SKIP_DIRS = frozenset(("__pycache__", ".pytest_cache", ".mypy_cache"))
SKIP_SUFFIXES = (".pyc", ".pyo", ".swp", "~")
# Names a variable of the image is never looked for under: Ansible's own and the inventory's shape (host names,
# groups), which change when a node is added and do not go into an image of no node.
MAGIC = frozenset(("groups", "group_names", "hostvars", "vars", "omit", "environment", "play_hosts", "playbook_dir",
                   "role_path", "role_name", "role_names", "lookup", "query", "q", "true", "false", "none", "True",
                   "False", "None", "item", "loop", "range", "dict", "lipsum", "cycler", "joiner", "namespace"))
MAGIC_PREFIXES = ("ansible_", "inventory_", "hostvars", "groups", "play_", "role_")
# Secrets never go into an image (msa_deploy_mode image writes none), so their values are not hashed either: a
# vaulted value would otherwise be decrypted to be hashed. Names of paths to secrets (*_token_file, *_tls_key: a
# control-host path) are hashed: their text is no secret.
SECRET = re.compile(r"(password|passwd|secret|_token|_tokens)$", re.IGNORECASE)
# A name inside a Jinja expression or statement ({{ ... }} or {% ... %}); over-approximates (filter and attribute
# names match too), which costs nothing: a name that is no variable is not found among the variables.
_JINJA_BLOCK = re.compile(r"\{\{(.*?)\}\}|\{%(.*?)%\}", re.DOTALL)
_NAME = re.compile(r"(?<![\w.'\"])([A-Za-z_][A-Za-z0-9_]*)")
_STRING = re.compile(r"'[^']*'|\"[^\"]*\"")


def tree_digest(root):
    """sha256 of a directory tree: every file's relative path, executable bit and content, in sorted path order.

    A symbolic link is hashed as its target's path text. Raises FileNotFoundError when root is no directory."""
    if not os.path.isdir(root):
        raise FileNotFoundError("%s is not a directory" % root)
    digest = hashlib.sha256()
    for rel in _files(root):
        path = os.path.join(root, rel)
        info = os.lstat(path)
        if stat.S_ISLNK(info.st_mode):
            kind, data = b"L", os.readlink(path).encode()
        else:
            kind = b"X" if info.st_mode & stat.S_IXUSR else b"F"
            with open(path, "rb") as handle:
                data = handle.read()
        digest.update(b"%s %d %s\0" % (kind, len(data), rel.encode()))
        digest.update(data)
    return digest.hexdigest()


def file_digest(path):
    """sha256 of one file's content."""
    with open(path, "rb") as handle:
        return hashlib.sha256(handle.read()).hexdigest()


def _files(root):
    found = []
    for top, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d not in SKIP_DIRS]
        for name in files:
            if not name.endswith(SKIP_SUFFIXES):
                found.append(os.path.relpath(os.path.join(top, name), root).replace(os.sep, "/"))
    return sorted(found)


def canonical(value):
    """The canonical JSON text of a value (sorted keys, no spaces); tuples as lists, other objects as text."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True, default=str)


def referenced_names(value):
    """The names a value's Jinja expressions use (in strings anywhere inside lists and dicts), sorted."""
    names = set()
    for text in _strings(value):
        for match in _JINJA_BLOCK.finditer(text):
            expression = _STRING.sub("''", match.group(1) if match.group(1) is not None else match.group(2))
            names.update(_NAME.findall(expression))
    return sorted(names)


def _strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(key)
            yield from _strings(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _strings(item)


def is_candidate(name):
    """Whether a name may stand for a variable of the image (not Ansible's own, not a secret)."""
    return name not in MAGIC and not name.startswith(MAGIC_PREFIXES) and not SECRET.search(name)


def variable_closure(raw_vars, defaults, seeds):
    """The variables that go into an image: the seed names, and every name their values (inventory or play values,
    templates not rendered, else the roles' defaults) refer to, again and again. Returns {name: raw value} of the
    names the inventory or play defines; a name only the roles' defaults set is carried by the roles' files, which
    are hashed themselves, and is followed but not returned."""
    todo, seen, chosen = list(seeds), set(), {}
    while todo:
        name = todo.pop()
        if name in seen or not is_candidate(name):
            continue
        seen.add(name)
        if name in raw_vars:
            chosen[name] = raw_vars[name]
            todo.extend(referenced_names(raw_vars[name]))
        elif name in defaults:
            todo.extend(referenced_names(defaults[name]))
    return chosen


_TASKS_REF = re.compile(r"tasks_from:\s*[\"']?([\w-]+)|([\w-]+\.ya?ml)\b")
_ROLE_REF = re.compile(r"\bmsa\.hpc\.(\w+)|\.\./(\w+)/(?:templates|files|tasks)/")
_TEMPLATE_REF = re.compile(r"([\w.-]+\.j2)\b")
# A YAML comment: a whole line, or after a blank (a file or role a comment names is not read by the task).
_COMMENT = re.compile(r"(?m)(?:^|\s)#(?![#{}]).*$")
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def image_files(roles_dir, entries):
    """The task files and templates an image's build reads, from its entry task files (role, file name), following
    include_tasks/import_tasks/tasks_from and the templates they name (in the role or a role they name).

    Returns (files, roles): the sorted relative paths (role/tasks/x.yml, role/templates/y.j2) and the sorted names
    of every role they touch. An entry file that does not exist raises FileNotFoundError."""
    todo, files, roles = [], set(), set()
    for role, name in entries:
        path = os.path.join(role, "tasks", name)
        if not os.path.isfile(os.path.join(roles_dir, path)):
            raise FileNotFoundError("%s: no such task file under %s" % (path, roles_dir))
        todo.append(path)
    while todo:
        rel = todo.pop()
        if rel in files:
            continue
        files.add(rel)
        role = rel.split("/", 1)[0]
        roles.add(role)
        if not rel.endswith((".yml", ".yaml")):
            continue
        with open(os.path.join(roles_dir, rel), encoding="utf-8") as handle:
            text = _COMMENT.sub("", handle.read())
        near = {role} | {a or b for a, b in _ROLE_REF.findall(text)}
        wanted = [("tasks", (a + ".yml") if a else b) for a, b in _TASKS_REF.findall(text)]
        wanted += [("templates", t) for t in _TEMPLATE_REF.findall(text)]
        for other in sorted(near):
            for kind, name in wanted:
                candidate = "%s/%s/%s" % (other, kind, name)
                if os.path.isfile(os.path.join(roles_dir, candidate)):
                    todo.append(candidate)
    return sorted(files), sorted(roles)


def words(text):
    """Every name-like word of a file: the variables its tasks or templates may read (over-approximated)."""
    return set(_WORD.findall(text))


def image_hash(components, variables):
    """The image's hash from its components' digests ({name: hex}) and its variables ({name: raw value}).

    Returns {'hash': hex, 'components': {name: hex, ..., 'vars': hex}}: one digest per component, so two images'
    labels show which role (or the variables) made them differ."""
    parts = dict(components)
    if "vars" in parts:
        raise ValueError("components: 'vars' is the variables' own digest, not a component name")
    parts["vars"] = hashlib.sha256(canonical(variables).encode()).hexdigest()
    total = hashlib.sha256(canonical(parts).encode()).hexdigest()
    return {"hash": total, "components": parts}


def changed_components(old_labels, new_components, prefix):
    """Names of the components whose digest differs from an older image's labels (prefix + name), sorted; a
    component the old image has no label for counts as changed."""
    return sorted(name for name, digest in new_components.items()
                  if not digest.startswith(old_labels.get(prefix + name, "-")))
