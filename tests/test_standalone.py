# SPDX-License-Identifier: GPL-3.0-or-later
"""The collection stands alone: built, installed from its tarball into an empty path and run with no bundle in
sight, site.yml's roles render a vendor system's (deep_est's) configuration with no trace of the simulation."""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import yaml

from ansible_collections.msa.hpc.plugins.module_utils._hostlist import expand as hostlist_expand

BUNDLE = Path(__file__).resolve().parents[1]
COLLECTION = BUNDLE / "collections" / "ansible_collections" / "msa" / "hpc"
BIN = Path(sys.executable).parent
# The ansible package's own collections (community.general, ansible.posix, ...): the only other content in use.
SITE_COLLECTIONS = next(Path(p) for p in sys.path if (Path(p) / "ansible_collections" / "ansible" / "posix").is_dir())
# A few hosts of every kind: the management host (Slurm controller and accounting, EMP master, NAM/GCE manager,
# MQTT broker, Collect Agent), a CM and an ESB node, an MPI and an IP gateway, a storage node (the image store).
HOSTS = ["localhost", "mgmt01", "cm01", "esb01", "gw01", "ipgw01", "sssm01"]
# What no rendered file, unit or command of a vendor system may mention: the simulation's package and install
# directory, and the bundle (its checkout, wherever it is).
FORBIDDEN = [re.compile(p) for p in (r"msa_sim", r"msa-sim", r"\bsim/msa", re.escape(str(BUNDLE)),
                                     re.escape(str(BUNDLE.resolve())), r"msa_bundle_dir")]


# A site-wide default in the site layer's group_vars/all.yml: the system's per-module hardware must still win
# (docs/inventories.md "Precedence", issue 24), and validate.yml must name the file and the variable.
SITE_WIDE_HARDWARE = {"sockets": 7, "cores_per_socket": 97, "threads_per_core": 1, "memory_mb": 1234}


def run(args, env, cwd, check=True):
    proc = subprocess.run([str(a) for a in args], capture_output=True, text=True, env=env, cwd=cwd)
    if check and proc.returncode != 0:
        raise AssertionError("%s exited %d\n--- stdout\n%s\n--- stderr\n%s"
                             % (" ".join(str(a) for a in args), proc.returncode, proc.stdout[-20000:], proc.stderr))
    return proc


def standalone_env(base):
    """No ANSIBLE_* setting of the caller, no ansible.cfg of the bundle, only the installed collection."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANSIBLE_", "MSA_")) and k != "PYTHONPATH"}
    cfg = base / "ansible.cfg"
    cfg.write_text("[defaults]\nretry_files_enabled = False\n")
    env.update(ANSIBLE_CONFIG=str(cfg), ANSIBLE_HOME=str(base / "ansible-home"), ANSIBLE_LOCAL_TEMP=str(base / "tmp"),
               ANSIBLE_COLLECTIONS_PATH=os.pathsep.join([str(base / "collections"), str(SITE_COLLECTIONS)]),
               ANSIBLE_COLLECTIONS_SCAN_SYS_PATH="False", ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0",
               ANSIBLE_INVENTORY_ENABLED="msa.hpc.system,ansible.builtin.yaml,ansible.builtin.host_list",
               # the collection's docs/inventories.md: its vars plugin ranks the description like group_vars files
               ANSIBLE_VARS_ENABLED="msa.hpc.system,host_group_vars",
               ANSIBLE_DEPRECATION_WARNINGS="False", ANSIBLE_STDOUT_CALLBACK="ansible.posix.json",
               ANSIBLE_CALLBACK_RESULT_FORMAT="json")
    return env


# The nodes' init system: this machine may run no systemd, so the play's systemctl answers as a fresh node's would
# (every unit known, stopped and disabled; the systemd modules only read state in check mode).
SYSTEMCTL = """#!/bin/sh
# stand-in systemctl of a fresh node, for a check-mode run (test_standalone.py)
for arg in "$@"; do case "$arg" in -*) ;; *) verb=${verb:-$arg} ;; esac; done
unit=$(for arg in "$@"; do case "$arg" in -*) ;; *) echo "$arg" ;; esac; done | tail -n 1)
case "$verb" in
  show) printf 'Id=%s\\nNames=%s\\nLoadState=loaded\\nActiveState=inactive\\nSubState=dead\\nUnitFileState=disabled\\n' "$unit" "$unit" ;;
  is-enabled) echo disabled; exit 1 ;;
  is-active) echo inactive; exit 3 ;;
  list-unit-files|list-units) ;;
  *) echo "systemctl stand-in: $* not expected in check mode" >&2; exit 1 ;;
esac
"""


def site_tls(directory):
    """The site's own CA and a server certificate with its key (openssl), as a site's PKI would hand them over."""
    directory.mkdir()
    ca_key, ca, key, csr, cert = (directory / n for n in ("ca.key", "ca.pem", "server.key", "server.csr", "server.crt"))
    for args in (["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", ca_key,
                  "-out", ca, "-days", "2", "-subj", "/CN=site CA"],
                 ["req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", key, "-out", csr,
                  "-subj", "/CN=mgmt01"],
                 ["x509", "-req", "-in", csr, "-CA", ca, "-CAkey", ca_key, "-CAcreateserial", "-out", cert, "-days", "2"]):
        subprocess.run(["openssl"] + [str(a) for a in args], check=True, capture_output=True)
    return {"msa_tls_ca": str(ca), "msa_tls_cert": str(cert), "msa_tls_key": str(key)}


def stand_in_wheel(files, version):
    """A stand-in udocker wheel for the play's files/ (check mode copies nothing) and its sha256."""
    wheel = files / ("udocker-%s-py2.py3-none-any.whl" % version)
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("udocker/__init__.py", "")
    return hashlib.sha256(wheel.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def standalone(tmp_path_factory):
    """Build and install the collection alone, copy deep_est and site.yml, run site.yml in check mode with
    --diff on a few deep_est hosts, connection local; yield the run's JSON and the work directory."""
    base = tmp_path_factory.mktemp("standalone")
    dist, play = base / "dist", base / "play"
    for d in (dist, play, base / "tmp", base / "collections"):
        d.mkdir()
    env = standalone_env(base)
    tools = base / "bin"
    tools.mkdir()
    (tools / "systemctl").write_text(SYSTEMCTL)
    (tools / "systemctl").chmod(0o755)
    env["PATH"] = os.pathsep.join([str(tools), env.get("PATH", "")])
    version = yaml.safe_load((COLLECTION / "galaxy.yml").read_text())["version"]
    run([BIN / "ansible-galaxy", "collection", "build", COLLECTION, "--output-path", dist], env, base)
    run([BIN / "ansible-galaxy", "collection", "install", "--offline", "--no-deps",
         dist / ("msa-hpc-%s.tar.gz" % version), "-p", base / "collections"], env, base)
    # The site's inventory: its group layout (the bundle's common.yml, which holds no variables), the system
    # layer of deep_est, and a layer that runs every host's tasks here, in check mode.
    shutil.copy(BUNDLE / "common.yml", play / "groups.yml")
    shutil.copytree(BUNDLE / "inventories" / "systems" / "deep_est", play / "deep_est")
    (play / "files").mkdir()     # the collection's default udocker_artifacts_dir: the playbook's files/
    udocker = yaml.safe_load((COLLECTION / "roles" / "udocker" / "defaults" / "main.yml").read_text())
    checksum = stand_in_wheel(play / "files", udocker["udocker_version"])
    local = play / "local" / "group_vars"
    local.mkdir(parents=True)
    (play / "local" / "hosts.yml").write_text("all: {}\n")
    # the site's layer names its own TLS files (deep_est's layer names paths of its PKI that this machine lacks)
    (local / "all.yml").write_text(yaml.safe_dump(dict({
        "ansible_connection": "local", "ansible_python_interpreter": sys.executable,
        "udocker_wheel_sha256": checksum, "msa_hardware": SITE_WIDE_HARDWARE,
        # and its BMCs, which Slurm's RebootProgram reaches (the bundle's simulated BMCs are not there)
        "msa_bmc_endpoint": "https://{{ inventory_hostname }}-bmc.site.example", "msa_bmc_username": "slurm-reboot",
        "msa_bmc_password": "site-secret"}, **site_tls(base / "pki"))))
    # site.yml and what it imports and includes: the validation, the image layer's build and reimage (nothing to do
    # on a system without image-booted nodes), plays of the collection's roles and modules only.
    (play / "tasks").mkdir()
    for name in ("site.yml", "validate.yml", "reimage.yml", "tasks/node_images.yml", "tasks/reimage_wave.yml"):
        shutil.copy(BUNDLE / "playbooks" / name, play / name)
    proc = run([BIN / "ansible-playbook", "-i", "groups.yml", "-i", "deep_est", "-i", "local",
                "--check", "--diff", "--limit", ",".join(HOSTS), "site.yml"], env, play, check=False)
    (play / "report.json").write_text(proc.stdout)     # kept for a failure's post-mortem
    try:
        report = json.loads(proc.stdout[proc.stdout.index("{"):])
    except ValueError:
        raise AssertionError("ansible-playbook wrote no JSON report (exit %d)\n%s\n%s"
                             % (proc.returncode, proc.stdout[-5000:], proc.stderr[-5000:]))
    yield report, proc, play


def results(report):
    """(play, task, host, result) of every task result, loop items flattened."""
    for play in report["plays"]:
        for task in play["tasks"]:
            for host, result in task["hosts"].items():
                items = result.get("results") if isinstance(result.get("results"), list) else None
                for one in items or [result]:
                    yield play["play"]["name"], task["task"]["name"], host, one


def rendered(result):
    """What a task put (or would put) on a node: diff text, file contents and sources, commands."""
    texts = []
    diffs = result.get("diff") or []
    for diff in [diffs] if isinstance(diffs, dict) else diffs:     # a module's one diff, or an action's list
        if isinstance(diff, dict):
            texts += [str(diff.get(k, "")) for k in ("after", "after_header", "prepared")]
    args = (result.get("invocation") or {}).get("module_args") or {}
    for key in ("src", "dest", "content", "cmd", "argv", "_raw_params", "path", "name", "validate"):
        if args.get(key) is not None:
            texts.append(json.dumps(args[key]))
    for key in ("cmd", "dest", "src", "path"):
        if result.get(key) is not None:
            texts.append(json.dumps(result[key]))
    return "\n".join(texts)


def test_site_yml_runs_in_check_mode_from_the_installed_collection_alone(standalone):
    report, proc, _ = standalone
    stats = report["stats"]
    assert set(HOSTS) <= set(stats), sorted(stats)
    failures = ["%s | %s | %s: %s" % (play, task, host, result.get("msg") or result.get("stderr") or result)
                for play, task, host, result in results(report) if result.get("failed")
                and not result.get("ignore_errors")]
    assert not failures, "\n".join(failures)
    bad = {h: s for h, s in stats.items() if s.get("failures") or s.get("unreachable")}
    assert not bad, bad
    assert proc.returncode == 0, proc.stderr[-3000:]


def test_no_rendered_file_unit_or_command_mentions_the_simulation_or_the_bundle(standalone):
    report, _, _ = standalone
    found = []
    for play, task, host, result in results(report):
        if result.get("skipped"):
            continue
        text = rendered(result)
        for pattern in FORBIDDEN:
            for match in pattern.finditer(text):
                line = text[text.rfind("\n", 0, match.start()) + 1:text.find("\n", match.end())]
                found.append("%s | %s | %s: %s" % (play, task, host, line.strip()[:200]))
    assert not found, "\n".join(sorted(set(found)))


# Files each kind of host gets: so a run that rendered nothing cannot pass the test above.
EXPECTED = {
    "mgmt01": ["/etc/slurm/slurm.conf", "/etc/extoll/master.conf", "/etc/extoll/topology.td", "manager.conf",
               "collectagent.conf", "system_overview.json", "/etc/mosquitto/conf.d/msa-dcdb.conf", "prolog",
               "epilog"],
    # configless: a compute node keeps no slurm.conf; its slurmd is pointed at the controller
    "cm01": ["/etc/default/slurmd", "/etc/hosts", "/etc/dcdb/dcdbpusher.conf", "/etc/msa-hpc/healthcheck.json",
             "/etc/msa-hpc/bmc.json"],
    "esb01": ["/etc/extoll/slave.conf"],
    "gw01": ["/etc/default/psgw-agent", "/etc/msa-gw"],
    "ipgw01": ["/etc/dcdb/dcdbpusher.conf"],
    "sssm01": ["/etc/systemd/system/msa-image-store.service", "/srv/msa-images/SHA256SUMS"],
}


def test_every_kind_of_host_had_its_configuration_rendered(standalone):
    report, _, _ = standalone
    destinations = {}
    for _, _, host, result in results(report):
        if result.get("skipped"):
            continue
        args = (result.get("invocation") or {}).get("module_args") or {}
        for value in [result.get("dest"), args.get("dest"), args.get("path")] + (result.get("files_changed") or []):
            if value:
                destinations.setdefault(host, set()).add(str(value))
    for host, wanted in EXPECTED.items():
        missing = [w for w in wanted if not any(w in d for d in destinations.get(host, ()))]
        assert not missing, "%s: nothing rendered for %s (rendered: %s)" % (
            host, missing, sorted(destinations.get(host, ())))


def test_site_wide_default_hardware_leaves_each_module_its_own_in_slurm_conf(standalone):
    """slurm.conf's node lines (its Include nodes.conf) carry each compute module's hardware from system.msa.yml,
    not the site-wide msa_hardware of the site layer's all.yml; validate.yml names that file and variable."""
    report, _, play = standalone
    texts = [rendered(result) for _, task, host, result in results(report)
             if host == "mgmt01" and "nodes.conf" in rendered(result) and "NodeName=" in rendered(result)]
    assert texts, "no nodes.conf (slurm.conf's node lines) rendered for mgmt01"
    hardware = {}
    for line in texts[0].splitlines():
        if line.startswith("NodeName="):
            fields = dict(f.split("=", 1) for f in line.split() if "=" in f)
            for node in hostlist_expand(fields["NodeName"]):
                hardware[node] = tuple(int(fields[k]) for k in ("Sockets", "CoresPerSocket", "ThreadsPerCore",
                                                                "RealMemory"))
    description = yaml.safe_load((play / "deep_est" / "system.msa.yml").read_text())
    compute = {name: m for name, m in description["modules"].items() if m.get("role", "compute") == "compute"}
    assert compute
    for name, module in compute.items():
        hw = module["hardware"]
        first = module.get("names", ["%s%0*d" % (module.get("prefix", name), module.get("digits", 2), 1)])[0]
        assert hardware.get(first) == (hw["sockets"], hw["cores_per_socket"], hw["threads_per_core"],
                                       hw["memory_mb"]), "%s (module %s): %s" % (first, name, hardware.get(first))
    site_wide = tuple(SITE_WIDE_HARDWARE[k] for k in ("sockets", "cores_per_socket", "threads_per_core",
                                                      "memory_mb"))
    assert site_wide not in hardware.values()
    warnings = [str(result.get("msg")) for _, task, _, result in results(report) if task.startswith("Warn about")]
    assert any("local/group_vars/all.yml: msa_hardware set for all has no effect" in w for w in warnings), warnings


def test_collection_tests_do_not_import_the_simulation():
    offenders = [str(p.relative_to(COLLECTION)) for p in (COLLECTION / "tests").rglob("*.py")
                 if re.search(r"^\s*(from|import)\s+msa_sim\b|\bsim/msa_sim|[\"']sim[\"']", p.read_text(), re.M)]
    assert not offenders, offenders
