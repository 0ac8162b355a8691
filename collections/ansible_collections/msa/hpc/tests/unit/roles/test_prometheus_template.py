# SPDX-License-Identifier: GPL-3.0-or-later
"""prometheus.yml of msa.hpc.prometheus: without slurmctld hosts (Slurm 24.11 to 25.11) it is what it was; with them
(26.05) one job per metrics endpoint, plain HTTP as Slurm serves it, with the JWT, never following a standby's 303."""
from __future__ import annotations

import base64
import grp
import hashlib
import hmac
import json
import os
import pathlib
import subprocess
import sys
import time

import jinja2
import yaml
from ansible.plugins.filter.core import FilterModule as CoreFilters

ROLE = pathlib.Path(__file__).resolve().parents[3] / "roles" / "prometheus"
HOSTS = {"mgmt01": "10.0.0.1", "mgmt02": "10.0.0.2", "cm01": "10.0.0.21"}


def render(**overrides):
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(ROLE / "templates")), trim_blocks=True,
                             keep_trailing_newline=True, undefined=jinja2.StrictUndefined)
    env.filters.update(CoreFilters().filters())
    defaults = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    variables = {k: v for k, v in defaults.items() if "{{" not in str(v)}
    variables.update(
        ansible_managed="Ansible managed", msa_system="dev", prometheus_listen_address="10.0.0.1",
        prometheus_tls_ca_path="/etc/msa-hpc/tls/ca.pem", prometheus_node_hosts=sorted(HOSTS),
        prometheus_dcdb_hosts=["mgmt01"], prometheus_slurmctld_token_file="/etc/prometheus/slurmctld.token",
        hostvars={h: {"msa_addresses": {"mgmt": a}, "msa_management_fabric": "mgmt", "msa_module": h[:-2]}
                  for h, a in HOSTS.items()})
    variables.update(overrides)
    return env.get_template("prometheus.yml.j2").render(variables)


def test_without_slurmctld_hosts_the_configuration_is_what_it_was():
    # fixtures/prometheus.yml: rendered from the template before slurmctld's scrape was added (commit 0ad97e0)
    assert render() == (ROLE.parents[1] / "tests/unit/roles/fixtures/prometheus.yml").read_text()
    assert "slurmctld" not in render()


def test_26_05_scrapes_each_slurmctld_endpoint_with_the_jwt_and_no_redirect():
    config = yaml.safe_load(render(prometheus_slurmctld_hosts=["mgmt01", "mgmt02"]))
    jobs = {j["job_name"]: j for j in config["scrape_configs"] if j["job_name"].startswith("slurmctld")}
    assert sorted(jobs) == ["slurmctld_jobs", "slurmctld_nodes", "slurmctld_partitions", "slurmctld_scheduler"]
    for name, job in jobs.items():
        assert job["metrics_path"] == "/metrics/" + name.split("_", 1)[1]
        assert job["scheme"] == "http" and job["follow_redirects"] is False
        assert job["authorization"] == {"type": "Bearer", "credentials_file": "/etc/prometheus/slurmctld.token"}
        assert [t["targets"] for t in job["static_configs"]] == [["10.0.0.1:6817"], ["10.0.0.2:6817"]]
        # Slurm's per-node series carry node="esb01": a target label node would push theirs to exported_node
        # (measured with 26.05.5), so the controller is named in a label of its own
        assert [t["labels"] for t in job["static_configs"]] == [{"controller": "mgmt01"}, {"controller": "mgmt02"}]
    # the unbounded per-user endpoint is not scraped unless asked
    assert "slurmctld_jobs_users_accts" not in jobs
    wider = yaml.safe_load(render(prometheus_slurmctld_hosts=["mgmt01"],
                                  prometheus_slurmctld_metrics_paths=["/metrics/jobs-users-accts"]))
    assert [j["job_name"] for j in wider["scrape_configs"]][-1] == "slurmctld_jobs_users_accts"


SCRIPT = ROLE / "files" / "slurm_metrics_token.py"


def run_script(*args):
    return subprocess.run([sys.executable, "-I", str(SCRIPT)] + [str(a) for a in args], capture_output=True,
                          text=True, check=False)


def test_the_token_script_refuses_what_is_not_an_account_a_lifespan_or_a_key(tmp_path):
    key, out, group = tmp_path / "key", tmp_path / "token", grp.getgrgid(os.getgid()).gr_name
    key.write_bytes(b"k" * 64)
    for args, rc, message in (((key, "-u", 3600, out, group), 2, "is not an account name"),
                              ((key, "slurm;id", 3600, out, group), 2, "is not an account name"),
                              ((key, "slurm", "1h", out, group), 2, "is not a number of seconds"),
                              ((key, "slurm", 10 ** 6, out, group), 2, "is not a number of seconds"),
                              ((key, "slurm", 3600), 2, "usage:"),
                              ((tmp_path / "nokey", "slurm", 3600, out, group), 1, "No such file"),
                              ((key, "slurm", 3600, out, "no-such-group-x"), 1, "no group 'no-such-group-x'")):
        run = run_script(*args)
        assert run.returncode == rc and message in run.stderr, (args, run.stderr)
    key.write_bytes(b"short")
    run = run_script(key, "slurm", 3600, out, group)
    assert run.returncode == 1 and "shorter than 32 bytes" in run.stderr
    assert not out.exists()


def test_the_token_is_slurms_hs256_jwt_signed_with_the_key(tmp_path):
    key, out, group = tmp_path / "key", tmp_path / "token", grp.getgrgid(os.getgid()).gr_name
    key.write_bytes(b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ01")
    before = int(time.time())
    run = run_script(key, "slurm", 3600, out, group)
    assert run.returncode == 0, run.stderr
    assert oct(out.stat().st_mode & 0o777) == "0o640" and out.read_text().endswith("\n")
    header, claims, signature = out.read_text().strip().split(".")

    def decode(part):
        return json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))

    assert decode(header) == {"alg": "HS256", "typ": "JWT"}
    body = decode(claims)
    assert body["sun"] == "slurm" and body["exp"] - body["iat"] == 3600 and before <= body["iat"] <= time.time()
    expected = hmac.new(key.read_bytes(), ("%s.%s" % (header, claims)).encode(), hashlib.sha256).digest()
    assert base64.urlsafe_b64decode(signature + "=" * (-len(signature) % 4)) == expected
    # another key does not sign it
    assert hmac.new(b"x" * 64, ("%s.%s" % (header, claims)).encode(), hashlib.sha256).digest() != expected
