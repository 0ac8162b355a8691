# SPDX-License-Identifier: GPL-3.0-or-later
"""msa_deploy_mode overlay (issue 38, personalisation wiring): the SSH path's task list of site.yml is the one it had
before the overlay plays existed, each role declares a node's own files once and its SSH tasks write exactly those,
and the declarations render to the files the overlay path publishes."""
from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

from ansible_collections.msa.hpc.plugins.filter.node_files import node_files
from tests.helpers import BIN, BUNDLE, render

ROLES = BUNDLE / "collections/ansible_collections/msa/hpc/roles"
GOLDEN = BUNDLE / "tests/fixtures/site_ssh_tasks.txt"
INVENTORY = ["-i", "common.yml", "-i", "inventories/systems/mini", "-i", "inventories/sites/example"]
# role: (its declaration, the ssh task file that writes it, the overlay entry point that publishes it)
DECLARING = {
    "common": ("common_node_files", "configure.yml", "overlay.yml"),
    "munge": ("munge_node_files", "configure.yml", "overlay.yml"),
    "slurmd": ("slurmd_node_files", "configure.yml", "overlay.yml"),
    "extoll_node": ("extoll_node_node_files", "configure.yml", "overlay.yml"),
    "mpi": ("mpi_node_files", "configure.yml", "overlay.yml"),
    "slurm_healthcheck": ("slurm_healthcheck_node_files", "configure.yml", "overlay.yml"),
    "slurm_reboot": ("slurm_reboot_node_files", "configure.yml", "overlay.yml"),
    "nam_manager": ("nam_manager_client_node_files", "client_library_configure.yml", "client_library_overlay.yml"),
    "gateway": ("gateway_node_files", "node_routes_configure.yml", "node_routes_overlay.yml"),
    "udocker": ("udocker_node_files", "configure.yml", "overlay.yml"),
    "dcdb_pusher": ("dcdb_pusher_node_files", "configure.yml", "overlay.yml"),
}
FIELDS = ("content", "src", "dest", "owner", "group", "mode")
# the files msa.hpc.common's tls entry point installs from its variables: the CA (common_tls_ca to
# common_tls_ca_path) and a server's certificate and key (common_tls_cert, common_tls_key into common_tls_dir)
TLS_CA = {"common_tls_ca": "src", "common_tls_ca_path": "dest", "common_tls_cert": "src", "common_tls_key": "src",
          "common_tls_key_group": "group", "common_tls_key_mode": "mode"}
TLS_FIXED = {"owner": "root", "group": "root", "mode": "0644"}


def tls_installs(args, entry):
    """How tasks/tls.yml installs the file the include's argument took its src from: {dest, owner, group, mode}."""
    source = next(arg for arg, value in args.items() if value.endswith(".%s.src }}" % entry))
    if source == "common_tls_ca":
        return dict(TLS_FIXED, dest=None)
    name = "server.crt" if source == "common_tls_cert" else "server.key"
    return {"dest": args["common_tls_dir"] + "/" + name, "owner": "root",
            "group": "root" if name == "server.crt" else args.get("common_tls_key_group", "root"),
            "mode": "0644" if name == "server.crt" else args.get("common_tls_key_mode", "0600")}


def site_tasks():
    env = dict(os.environ, ANSIBLE_CONFIG=str(BUNDLE / "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    run = subprocess.run([str(BIN / "ansible-playbook"), "--list-tasks", *INVENTORY, "playbooks/site.yml"],
                         capture_output=True, text=True, cwd=BUNDLE, env=env)
    assert run.returncode == 0, run.stderr[-3000:]
    return run.stdout


def sorted_tags(found):
    return "TAGS: [%s]" % ", ".join(sorted(t.strip() for t in found.group(1).split(",") if t.strip()))


def plays(listing):
    """The --list-tasks output cut into plays (header line and its task lines), each line's tags sorted (Ansible
    prints a set, in an order that changes from run to run)."""
    listing = re.sub(r"TAGS: \[([^\]]*)\]", sorted_tags, listing)
    return [block.strip("\n") for block in re.split(r"\n(?=  play #)", listing.strip("\n"))[1:]]


def test_the_ssh_path_runs_the_same_tasks_as_before_the_overlay_plays():
    """Every play but the image layer's (the image build first, the overlay plays and the reimage last) lists the
    tasks it listed before msa_deploy_mode overlay existed (tests/fixtures/site_ssh_tasks.txt, site.yml's --list-tasks on main). A deliberate change of the
    SSH path regenerates the file: MSA_UPDATE_SITE_TASKS=1."""
    now = plays(site_tasks())
    tagged = [i for i, p in enumerate(now) if p.splitlines()[0].endswith("TAGS: [overlay]")]
    assert len(tagged) == 3 and tagged == list(range(tagged[0], tagged[0] + 3)), "the overlay plays, one after another"
    # after them only the reimage (reimage.yml: its validation, then its plays tagged reimage)
    tail = [p.splitlines()[0] for p in now[tagged[-1] + 1:]]
    assert tail and all("reimage" in h or "Validate" in h for h in tail) and "reimage" in tail[-1], tail
    # before them the SSH path, and the image build (tag image), which runs nothing on a node
    ssh = [p for p in now[:tagged[0]] if not p.splitlines()[0].endswith("TAGS: [image]")]
    assert len(ssh) == tagged[0] - 1
    if os.environ.get("MSA_UPDATE_SITE_TASKS") == "1":
        GOLDEN.write_text("\nplaybook: playbooks/site.yml\n\n" + "\n\n".join(ssh) + "\n")
    assert ssh == plays(GOLDEN.read_text())


def test_the_overlay_plays_end_at_once_on_a_node_configured_over_ssh(tmp_path):
    """Each overlay play on every host ends the host at its first task unless it is an overlay node; with the
    defaults (msa_deploy_mode ssh everywhere: system deep_est) no node is, mini boots its CM from the image, and a
    group a site sets to overlay gives exactly its nodes."""
    site = yaml.safe_load((BUNDLE / "playbooks/site.yml").read_text())
    overlay = [p for p in site if "overlay" in p.get("tags", [])]
    assert len(overlay) == 3
    for play in overlay:
        if play["hosts"] == "all":
            first = play["tasks"][0]
            assert first["ansible.builtin.meta"] == "end_host"
            assert first["when"] == "inventory_hostname not in site_overlay_nodes"
        else:
            assert play["tasks"][0]["when"] == "site_overlay_nodes | length > 0"
        assert play["vars"]["site_overlay_nodes"] == overlay[0]["vars"]["site_overlay_nodes"]
    # from the inventory alone, as the bundle's msa_overlay_nodes (the harness's list) is
    expression = overlay[0]["vars"]["site_overlay_nodes"].strip()[2:-2].strip()
    assert render(expression, "deep_est") == render("msa_overlay_nodes", "deep_est") == []
    booted = sorted(render("groups['cm']", "mini"))
    assert booted and render(expression, "mini") == render("msa_overlay_nodes", "mini") == booted
    # a site that boots its CM module from images: those nodes and no other
    site = tmp_path / "site"
    shutil.copytree(BUNDLE / "inventories/sites/example", site)
    (site / "group_vars").mkdir(exist_ok=True)
    (site / "group_vars/cm.yml").write_text("msa_deploy_mode: overlay\n")
    cm = sorted(render("groups['cm']", "deep_est"))
    assert cm and render(expression, "deep_est", site=site) == cm
    assert render("msa_overlay_nodes", "deep_est", site=site) == cm


def ssh_references(role, declaration, configure):
    """({(entry, field): task name}, {entries installed as the CA}) of the role's ssh task file: a copy task writes
    a field of the declaration when it takes it as the same argument; msa.hpc.common's tls entry point writes the
    CA from its common_tls_ca and common_tls_ca_path, with tls.yml's own owner, group and mode."""
    refs, tls = {}, {}
    for task in yaml.safe_load((ROLES / role / "tasks" / configure).read_text()):
        included = task.get("ansible.builtin.include_tasks") or task.get("ansible.builtin.import_tasks")
        if included:  # a task file of the same role
            more, more_tls = ssh_references(role, declaration, included)
            refs.update(more)
            tls.update(more_tls)
            continue
        if isinstance(task.get("ansible.builtin.copy"), dict):
            args, fields = task["ansible.builtin.copy"], None
        elif task.get("ansible.builtin.include_role", {}).get("tasks_from") == "tls":
            args, fields = task["vars"], TLS_CA
        else:
            continue
        # a loop over entries of the declaration, each field taken from the item as the same argument
        pairs = list(args.items())
        looped = [re.fullmatch(r"\{\{ %s\.(\w+) \}\}" % declaration, str(one)) for one in task.get("loop", [])]
        if looped and all(looped):
            pairs = [(arg, str(value).replace("item.", "%s.%s." % (declaration, entry.group(1))))
                     for entry in looped for arg, value in pairs]
        for arg, value in pairs:
            found = re.fullmatch(r"\{\{ %s\.(\w+)\.(\w+) \}\}" % declaration, str(value))
            if found:
                assert found.group(2) == (fields or {}).get(arg, arg), "%s: %s takes %s" % (task["name"], arg, value)
                refs[(found.group(1), found.group(2))] = task["name"]
                if fields is TLS_CA and found.group(2) == "src":
                    tls[found.group(1)] = tls_installs(args, found.group(1))
                    refs.update({(found.group(1), field): task["name"] for field in ("dest", *TLS_FIXED)})
    return refs, tls


@pytest.mark.parametrize("role", sorted(DECLARING))
def test_each_declared_file_is_written_by_the_ssh_path_from_its_declaration_alone(role):
    """Every field of every declared file (content or src, dest, owner, group, mode) is what one task of the
    role's ssh path writes, so the two paths cannot drift apart; the overlay entry point adds the same declaration,
    and site.yml's overlay play takes that entry point."""
    declaration, configure, overlay = DECLARING[role]
    declared = yaml.safe_load((ROLES / role / "vars/main.yml").read_text())[declaration]
    refs, tls = ssh_references(role, declaration, configure)
    for name, entry in declared.items():
        wanted = {(name, field) for field in FIELDS if field in entry}
        assert wanted <= set(refs), "%s.%s: the ssh path does not write %s" % (declaration, name, wanted - set(refs))
        assert len({refs[w] for w in wanted}) == 1, "%s.%s is written by more than one task" % (declaration, name)
        if name in tls:  # the declared dest (a CA's is the include's own), owner, group and mode are tls.yml's
            wanted = {f: entry.get(f) if v in (None, "{{ %s.%s.%s }}" % (declaration, name, f)) else v
                      for f, v in tls[name].items()}
            assert {f: entry.get(f) for f in wanted} == wanted, "%s.%s: not as tls.yml installs it (%s)" % (
                declaration, name, tls[name])
    assert "msa.hpc.node_files(%s)" % declaration in (ROLES / role / "tasks" / overlay).read_text()
    site = (BUNDLE / "playbooks/site.yml").read_text()
    assert re.search(r"name: msa\.hpc\.%s\n\s+tasks_from: %s\n" % (role, overlay[:-4]), site), role


def trusted(value):
    if isinstance(value, dict):
        return {k: trusted(v) for k, v in value.items()}
    if isinstance(value, list):
        return [trusted(v) for v in value]
    return trust_as_template(value) if isinstance(value, str) else value


def declared(role, entry="", **variables):
    """The role's declaration (or one entry of it) rendered as both paths render it (the Templar of a task's
    arguments)."""
    variables = dict(trusted(yaml.safe_load((ROLES / role / "vars/main.yml").read_text())), **variables)
    templar = Templar(loader=DataLoader(), variables=variables)
    return templar.template(trust_as_template("{{ %s%s }}" % (DECLARING[role][0], "." + entry if entry else "")))


def test_slurmds_files_render_its_conf_server_and_the_dropin_only_when_configless():
    configless = declared("slurmd", slurmd_conf_server="10.0.0.1:6817,10.0.0.2:6817", slurmd_options="-b")
    files = {f["dest"]: f for f in node_files([], configless)}
    assert files["/etc/default/slurmd"]["content"].splitlines()[1] == \
        'SLURMD_OPTIONS="-b --conf-server 10.0.0.1:6817,10.0.0.2:6817"'
    assert "ConditionPathExists=\n" in files["/etc/systemd/system/slurmd.service.d/configless.conf"]["content"]
    assert all(f["restart"] == ["slurmd.service"] and f["mode"] == "0644" for f in files.values())
    # a node that keeps its files: no drop-in in its overlay, and the ssh path removes it (present false)
    keeps = declared("slurmd", slurmd_conf_server="", slurmd_options="")
    assert keeps["configless"]["present"] is False
    assert [f["dest"] for f in node_files([], keeps)] == ["/etc/default/slurmd"]
    assert node_files([], keeps)[0]["content"].splitlines()[1] == 'SLURMD_OPTIONS=""'


def test_the_munge_key_and_the_ca_render_with_their_owner_mode_and_source():
    munge = node_files([], declared("munge", munge_key_path="/etc/munge/munge.key",
                                    munge_key={"content": "c2VjcmV0LWtleQ=="}))
    assert munge == [{"dest": "/etc/munge/munge.key", "content": "secret-key", "owner": "munge", "group": "munge",
                      "mode": "0400", "restart": ["munge.service"]}]
    # the system's CA from the control host (src), which a later role's identical CA entry does not duplicate
    common = declared("common", "ca", common_tls_ca="/pki/ca.pem", common_tls_ca_path="/etc/msa-hpc/tls/ca.pem")
    ca = node_files([], {"ca": common})
    assert ca == [{"dest": "/etc/msa-hpc/tls/ca.pem", "src": "/pki/ca.pem", "owner": "root", "group": "root",
                   "mode": "0644", "restart": []}]
    assert node_files(ca, {"ca": common}) == ca
    none = declared("common", "ca", common_tls_ca="", common_tls_ca_path="/etc/msa-hpc/tls/ca.pem")
    assert none["present"] is False and node_files([], {"ca": none}) == []


def test_the_node_exporters_listen_address_renders_as_its_ssh_task_wrote_it():
    args = declared("common", "exporter_args", common_node_exporter=True, common_node_exporter_address="10.42.0.21",
                    common_node_exporter_port=9100, common_node_exporter_web_config="/etc/prometheus/web.yml",
                    common_node_exporter_service="prometheus-node-exporter")
    assert args["content"] == ("# Managed by msa.hpc (role common): changes here are overwritten.\n"
                               'ARGS="--web.listen-address=10.42.0.21:9100 --web.config.file=/etc/prometheus/web.yml"\n')
    assert args["present"] is True and args["restart"] == ["prometheus-node-exporter.service"]


def test_the_harness_gives_an_image_booted_node_the_client_settings_the_ssh_path_writes():
    """The simulation's provisioner (roles/sim_system overlay_client) writes the same settings keys and CA path as
    msa.hpc.node_overlay's node_configure over SSH: the node's first overlay needs them, and no image holds them."""
    ssh = next(t for t in yaml.safe_load((ROLES / "node_overlay/tasks/node_configure.yml").read_text())
               if t["name"] == "Write the overlay client's settings")["vars"]["node_overlay_client_settings"]
    harness = next(t for t in yaml.safe_load((BUNDLE / "roles/sim_system/tasks/overlay_client.yml").read_text())
                   if "sim_system_overlay_client_files" in t.get("vars", {}))["vars"]
    assert sorted(harness["sim_system_overlay_client_settings"]) == sorted(ssh) == \
        ["ca_file", "state_dir", "token_file", "url"]
    defaults = yaml.safe_load((BUNDLE / "roles/sim_system/defaults/main.yml").read_text())
    overlay_defaults = yaml.safe_load((ROLES / "node_overlay/defaults/main.yml").read_text())
    assert defaults["sim_system_overlay_config_file"] == overlay_defaults["node_overlay_client_config"]
    assert defaults["sim_system_overlay_token_file"] == overlay_defaults["node_overlay_token_file"]
    assert defaults["sim_system_overlay_state_dir"] == overlay_defaults["node_overlay_state_dir"]
    assert defaults["sim_system_overlay_ca_path"] == overlay_defaults["node_overlay_tls_ca_path"]
