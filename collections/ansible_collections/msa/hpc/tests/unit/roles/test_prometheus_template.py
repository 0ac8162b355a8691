# SPDX-License-Identifier: GPL-3.0-or-later
"""prometheus.yml of msa.hpc.prometheus: without slurmctld hosts (Slurm 24.11 to 25.11) it is what it was; with them
(26.05) one job per metrics endpoint, plain HTTP as Slurm serves it, with the JWT, never following a standby's 303."""
from __future__ import annotations

import pathlib
import subprocess

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
    # the unbounded per-user endpoint is not scraped unless asked
    assert "slurmctld_jobs_users_accts" not in jobs
    wider = yaml.safe_load(render(prometheus_slurmctld_hosts=["mgmt01"],
                                  prometheus_slurmctld_metrics_paths=["/metrics/jobs-users-accts"]))
    assert [j["job_name"] for j in wider["scrape_configs"]][-1] == "slurmctld_jobs_users_accts"


def test_the_token_script_refuses_what_is_not_an_account_or_a_lifespan(tmp_path):
    script = ROLE / "files" / "msa-hpc-slurm-metrics-token"
    for args, message in ((["-u", "7200", str(tmp_path / "t")], "is not an account name"),
                          (["prom;id", "7200", str(tmp_path / "t")], "is not an account name"),
                          (["prometheus", "2h", str(tmp_path / "t")], "is not a number of seconds"),
                          (["prometheus", "7200"], "usage:")):
        run = subprocess.run(["sh", str(script)] + args, capture_output=True, text=True, check=False)
        assert run.returncode == 2 and message in run.stderr, (args, run.stderr)
    assert not (tmp_path / "t").exists()


def test_the_token_script_writes_only_a_jwt_that_scontrol_printed(tmp_path):
    fake = tmp_path / "bin"
    fake.mkdir()
    for name, body in (("scontrol", 'echo "$SCONTROL_OUT"'), ("chgrp", "exit 0")):
        (fake / name).write_text("#!/bin/sh\n%s\n" % body)
        (fake / name).chmod(0o755)
    script, target = ROLE / "files" / "msa-hpc-slurm-metrics-token", tmp_path / "token"
    env = {"PATH": "%s:/usr/bin:/bin" % fake}
    bad = subprocess.run(["sh", str(script), "prometheus", "7200", str(target)], capture_output=True, text=True,
                         env=dict(env, SCONTROL_OUT="Invalid user"), check=False)
    assert bad.returncode == 1 and "no SLURM_JWT= line" in bad.stderr and not target.exists()
    good = subprocess.run(["sh", str(script), "prometheus", "7200", str(target)], capture_output=True, text=True,
                          env=dict(env, SCONTROL_OUT="SLURM_JWT=eyJ.abc.def"), check=False)
    assert good.returncode == 0, good.stderr
    assert target.read_text() == "eyJ.abc.def\n" and oct(target.stat().st_mode & 0o777) == "0o640"
