# SPDX-License-Identifier: GPL-3.0-or-later
"""Who wins, for every variable the msa.hpc.system plugin sets, when another layer sets it too: throwaway bundle,
system and site layers each set every such variable at one level, and ansible-inventory says which value a node
gets. The measured table is the one in the collection's docs/inventories.md ("Precedence"); rewrite it with
``.venv/bin/python -m tests.test_layer_precedence --write``."""
from __future__ import annotations

import json
import re
import shutil
import sys

import pytest
import yaml

from ansible_collections.msa.hpc.plugins.module_utils._layers import CLASS_OF, OWNED, _judge, layer_warnings, winner
from tests.helpers import BUNDLE, ansible_inventory, render

DOC = BUNDLE / "collections/ansible_collections/msa/hpc/docs/inventories.md"
MINI = BUNDLE / "inventories/systems/mini"
NODE, MODULE = "esb01", "esb"     # an ESB node: on the EXTOLL fabric, so it has every per-node value
# (row label, layer, directory in that layer, file name, level for the rule in module_utils/_layers.py)
LEVELS = [
    ("bundle", "group_vars", "all", "all"),
    ("bundle", "group_vars", MODULE, "module"),
    ("bundle", "host_vars", NODE, "host"),
    ("system", "group_vars", "all", "all"),
    ("system", "group_vars", MODULE, "module"),
    ("site", "group_vars", "all", "all"),
    ("site", "group_vars", "msa_compute", "role"),
    ("site", "group_vars", "fabric_extoll", "fabric"),
    ("site", "group_vars", "slurm_compute", "group"),
    ("site", "group_vars", MODULE, "module"),
    ("site", "host_vars", NODE, "host"),
    ("bundle", "inline", "all", "inline-all"),
    ("site", "inline", "all", "inline-all"),
    ("site", "inline", MODULE, "inline-group"),
    ("site", "inline", NODE, "inline-host"),
    ("extra", None, None, "extra"),
]
KIND_LABEL = {"node": "per-node", "module": "per-module", "system": "system-wide"}


def probe(layer, level, name):
    return "probe:%s:%s:%s" % (layer, level, name)


def build_layers(base, layer, subdir, name):
    """common.yml, a copy of mini's system layer and an empty site layer under ``base``; ``layer``'s ``subdir``
    file ``name`` sets every owned variable to a probe value. Returns the -i arguments, in layer order."""
    dirs = {"bundle": base / "bundle", "system": base / "system", "site": base / "site"}
    for path in dirs.values():
        path.mkdir()
    shutil.copy(BUNDLE / "common.yml", dirs["bundle"] / "common.yml")
    shutil.copy(MINI / "system.msa.yml", dirs["system"] / "system.msa.yml")
    (dirs["site"] / "hosts.yml").write_text("all: {}\n")
    values = {var: probe(layer, subdir, name) for var in CLASS_OF}
    if layer in dirs and subdir == "inline":
        # written into the layer's own inventory file, as vars of `all` or a group, or as a host's vars
        inventory = dirs[layer] / ("common.yml" if layer == "bundle" else "hosts.yml")
        data = yaml.safe_load(inventory.read_text()) or {}
        top = data["all"] = data.get("all") or {}
        if name == "all":
            top["vars"] = values
        elif name == NODE:
            top["hosts"] = {NODE: values}
        else:
            top.setdefault("children", {})[name] = {"vars": values}
        inventory.write_text(yaml.safe_dump(data))
    elif layer in dirs:
        (dirs[layer] / subdir).mkdir()
        (dirs[layer] / subdir / (name + ".yml")).write_text(yaml.safe_dump(values))
    return [dirs["bundle"] / "common.yml", dirs["system"], dirs["site"]]


def measure(base, layer, subdir, name):
    """Variable → 'layer' or 'system': whose value NODE gets."""
    sources = build_layers(base, layer, subdir, name)
    args = ["--host", NODE]
    for source in sources:
        args += ["-i", source]
    if layer == "extra":
        extra = base / "extra.json"
        extra.write_text(json.dumps({var: probe("extra", "-e", "") for var in CLASS_OF}))
        args += ["-e", "@%s" % extra]
    hostvars = ansible_inventory(*args)
    return {var: "layer" if str(hostvars.get(var, "")).startswith("probe:") else "system" for var in CLASS_OF}


def row_label(layer, subdir, name, level):
    if layer == "extra":
        return "extra vars (`-e`)", "any"
    label = {"bundle": "bundle (`common.yml`)", "system": "system", "site": "site"}[layer]
    if subdir == "inline":
        where = {"inline-all": "`vars:` of `all`", "inline-group": "`vars:` of group `%s`" % name,
                 "inline-host": "host `%s`'s vars" % name}[level]
        return label, "inline in `%s`: %s" % ("common.yml" if layer == "bundle" else "hosts.yml", where)
    return label, "`%s/%s.yml` (%s)" % (subdir, name, level if level != "group" else "service group")


def expected(layer, level, kind):
    return winner(kind, level, after_system=(layer != "bundle"))


def cell(layer, level, kind, who):
    text = "**the file**" if who == "layer" else "the description"
    if layer in ("bundle", "site") and _judge(kind, level, layer == "site", "v", "g"):
        text += " (warns)"
    return text


def table(measured):
    head = ["| layer | where it is set | %s |" % " | ".join(
        "%s values (%s)" % (KIND_LABEL[kind], ", ".join("`%s`" % v for v in OWNED[kind])) for kind in OWNED),
        "|---|---|%s" % ("---|" * len(OWNED))]
    rows = []
    for (layer, subdir, name, level) in LEVELS:
        label, where = row_label(layer, subdir, name, level)
        winners = measured[(layer, subdir, name, level)]
        rows.append("| %s | %s | %s |" % (label, where, " | ".join(
            cell(layer, level, kind, winners[kind]) for kind in OWNED)))
    return "\n".join(head + rows) + "\n"


def measure_all(base):
    found = {}
    for index, key in enumerate(LEVELS):
        work = base / str(index)
        work.mkdir()
        per_var = measure(work, *key[:3])
        kinds = {}
        for var, who in per_var.items():
            kinds.setdefault(CLASS_OF[var], set()).add(who)
        # every variable of a class ranks alike, or the table's one cell per class would hide a difference
        assert all(len(w) == 1 for w in kinds.values()), (key, per_var)
        found[key] = {kind: w.pop() for kind, w in kinds.items()}
        found[key]["_vars"] = per_var
    return found


START, END = "<!-- precedence table: generated by tests/test_layer_precedence.py -->", "<!-- end of precedence table -->"


def doc_table(text):
    match = re.search(re.escape(START) + r"\n(.*?)" + re.escape(END), text, re.S)
    return match.group(1) if match else None


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    return measure_all(tmp_path_factory.mktemp("layers"))


@pytest.mark.parametrize("key", LEVELS, ids=["%s-%s-%s" % (k[0], k[1], k[2]) for k in LEVELS])
def test_each_system_owned_variable_has_the_documented_winner_at_each_level(measured, key):
    layer, _, _, level = key
    wrong = ["%s: %s wins, documented: %s" % (var, who, expected(layer, level, CLASS_OF[var]))
             for var, who in sorted(measured[key]["_vars"].items()) if who != expected(layer, level, CLASS_OF[var])]
    assert not wrong, "%s/%s/%s:\n%s" % (key[0], key[1], key[2], "\n".join(wrong))


def test_a_site_overrides_a_module_from_its_group_and_a_node_from_host_vars_but_not_from_all(measured):
    assert measured[("site", "group_vars", MODULE, "module")]["module"] == "layer"
    assert measured[("site", "host_vars", NODE, "host")]["module"] == "layer"
    assert measured[("site", "host_vars", NODE, "host")]["node"] == "layer"
    assert measured[("site", "group_vars", "all", "all")]["module"] == "system"
    assert measured[("bundle", "group_vars", "all", "all")]["system"] == "system"


def test_the_precedence_table_of_the_docs_is_the_measured_one(measured):
    assert doc_table(DOC.read_text()) == table(measured), (
        "docs/inventories.md's precedence table is stale: .venv/bin/python -m tests.test_layer_precedence --write")


def test_validate_names_the_file_and_variable_of_each_misplaced_site_value(tmp_path):
    sources = build_layers(tmp_path, "site", "group_vars", "all")
    (tmp_path / "site" / "group_vars" / (MODULE + ".yml")).write_text("msa_hardware: {sockets: 4}\n")
    (tmp_path / "site" / "group_vars" / "msa_compute.yml").write_text("msa_features: [fast]\n")
    modules = {name: {} for name in yaml.safe_load((MINI / "system.msa.yml").read_text())["modules"]}
    warnings = layer_warnings([str(s) for s in sources], modules, yaml.safe_load)
    site_all = str(tmp_path / "site" / "group_vars" / "all.yml")
    assert "%s: msa_hardware set for all has no effect" % site_all in "\n".join(warnings)
    assert "%s: msa_modules set for all replaces what the system description says" % site_all in "\n".join(warnings)
    assert any(w.startswith(str(tmp_path / "site/group_vars/msa_compute.yml") + ": msa_features set for msa_compute "
                            "replaces") for w in warnings), warnings
    assert not any("group_vars/%s.yml" % MODULE in w for w in warnings), warnings   # the intended place


def test_slurm_node_lines_keep_each_modules_hardware_under_a_site_wide_default(tmp_path):
    """The filters that render slurm.conf's node lines (role msa.hpc.slurm), with a site-wide msa_hardware in the
    site's all.yml: every compute module keeps what system.msa.yml says (tests/test_standalone.py runs the whole
    check-mode site.yml with such a default)."""
    (tmp_path / "group_vars").mkdir()
    (tmp_path / "hosts.yml").write_text("all: {}\n")
    (tmp_path / "group_vars" / "all.yml").write_text(
        "msa_hardware: {sockets: 7, cores_per_socket: 97, threads_per_core: 1, memory_mb: 1234}\n")
    conf = render("{'nodes': groups['slurm_compute'] | msa.hpc.slurm_node_records(hostvars, msa_modules, "
                  "msa_management_fabric), 'partitions': {'cm': {'module': 'cm'}, 'esb': {'module': 'esb'}, "
                  "'dam': {'module': 'dam'}}} | msa.hpc.slurm_nodes_conf", "mini", tmp_path)
    lines = "\n".join(conf["node_lines"])
    modules = yaml.safe_load((MINI / "system.msa.yml").read_text())["modules"]
    for name in ("cm", "esb", "dam"):
        hw = modules[name]["hardware"]
        assert ("Sockets=%(sockets)d CoresPerSocket=%(cores_per_socket)d ThreadsPerCore=%(threads_per_core)d "
                "RealMemory=%(memory_mb)d" % hw) in lines, (name, lines)
    assert "CoresPerSocket=97" not in lines


if __name__ == "__main__" and sys.argv[1:] == ["--write"]:
    import tempfile
    from pathlib import Path
    with tempfile.TemporaryDirectory() as tmp:
        new = table(measure_all(Path(tmp)))
    text = DOC.read_text()
    old = doc_table(text)
    DOC.write_text(text.replace(START + "\n" + old + END, START + "\n" + new + END) if old is not None
                   else text + "\n" + START + "\n" + new + END + "\n")
    print("wrote the precedence table of %s" % DOC)
