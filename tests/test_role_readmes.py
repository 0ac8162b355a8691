# SPDX-License-Identifier: GPL-3.0-or-later
"""Every collection role's README is the one scripts/role_readmes.py writes from its meta/argument_specs.yml."""
from __future__ import annotations

import importlib.util
import shutil

import yaml

from tests.helpers import BUNDLE

SCRIPT = BUNDLE / "scripts" / "role_readmes.py"
spec = importlib.util.spec_from_file_location("role_readmes", SCRIPT)
role_readmes = importlib.util.module_from_spec(spec)
spec.loader.exec_module(role_readmes)
ROLES = BUNDLE / "collections" / "ansible_collections" / "msa" / "hpc" / "roles"


def test_every_collection_role_has_a_readme_written_from_its_argument_specs():
    every = sorted(p.name for p in ROLES.iterdir() if (p / "tasks").is_dir())
    assert [r.name for r in role_readmes.roles()] == every, "a role without meta/argument_specs.yml"
    stale = [str(p.relative_to(BUNDLE)) for p in role_readmes.stale()]
    assert not stale, "README.md out of date with meta/argument_specs.yml (run python scripts/role_readmes.py): %s" % (
        ", ".join(stale))


def test_a_changed_spec_makes_the_readme_stale_and_the_script_keeps_what_a_person_wrote(tmp_path):
    role = tmp_path / "udocker"
    shutil.copytree(ROLES / "udocker", role)
    written = (role / "README.md").read_text()
    person = written.split(role_readmes.BEGIN)[0]
    assert person.startswith("# msa.hpc.udocker\n") and len(person.splitlines()) > 10
    specs_file = role / "meta" / "argument_specs.yml"
    specs = yaml.safe_load(specs_file.read_text())
    specs["argument_specs"]["main"]["options"]["udocker_version"]["description"] = (
        "The udocker release. Only C(1.3.17) is known to work.")
    specs["argument_specs"]["main"]["options"]["udocker_wrong"] = {"type": "int", "required": True,
                                                                   "description": ["Added. Second sentence."]}
    specs_file.write_text(yaml.safe_dump(specs))
    assert role_readmes.stale(tmp_path) == [role / "README.md"]
    assert (role / "README.md").read_text() == written, "--check must not write"
    role_readmes.stale(tmp_path, write=True)
    text = (role / "README.md").read_text()
    assert text.startswith(person) and role_readmes.stale(tmp_path) == []
    assert "| `udocker_version` | str | `1.3.17` |  | The udocker release. |" in text
    assert "| `udocker_wrong` | int |  | yes | Added. |" in text


def test_a_role_without_a_readme_gets_the_title_and_the_generated_part(tmp_path):
    role = tmp_path / "gateway"
    shutil.copytree(ROLES / "gateway", role)
    (role / "README.md").unlink()
    role_readmes.stale(tmp_path, write=True)
    text = (role / "README.md").read_text()
    assert text == (ROLES / "gateway" / "README.md").read_text()
    assert text.startswith("# msa.hpc.gateway\n\n" + role_readmes.BEGIN)
    assert "### `tasks_from: slurm_hooks`" in text and "Its variables are those of `main`." in text
