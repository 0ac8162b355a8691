# SPDX-License-Identifier: GPL-3.0-or-later
"""Every conditional in the bundle's and the collection's YAML is a string when YAML has read it.

An unquoted condition holding ': ' (a message it searches for, say) is read by YAML as a mapping; ansible-lint lets
it pass, and the task fails only when it runs ("Conditional expressions must be strings") - in molecule, late."""
from __future__ import annotations

import pytest
import yaml

from tests.helpers import BUNDLE

KEYS = ("that", "when", "until", "failed_when", "changed_when")
ROOTS = ("molecule", "playbooks", "collections/ansible_collections/msa/hpc/roles",
         "collections/ansible_collections/msa/hpc/playbooks", "roles")


def conditions(node, path=()):
    if isinstance(node, dict):
        for key, value in node.items():
            if key in KEYS:
                for item in value if isinstance(value, list) else [value]:
                    yield path + (key,), item
            yield from conditions(value, path + (key,))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from conditions(value, path + (index,))


def yaml_files():
    for root in ROOTS:
        yield from sorted((BUNDLE / root).rglob("*.yml"))


@pytest.mark.parametrize("path", list(yaml_files()), ids=lambda p: str(p.relative_to(BUNDLE)))
def test_every_condition_is_a_string(path):
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError:
        pytest.fail("%s is not YAML" % path)  # templates are .j2, so every .yml here must load
    bad = ["%s: %r" % ("/".join(map(str, where)), item) for where, item in conditions(data)
           if not isinstance(item, (str, bool, int))]
    assert bad == []
