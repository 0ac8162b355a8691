# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

"""msa.hpc.redfish_node run for real by ansible-playbook against stand-in BMCs on 127.0.0.1 (file backend)."""

import json
import os
import shutil
import socket
import subprocess
import sys

import pytest

from msa_sim.bmc import testing

HERE = os.path.dirname(os.path.abspath(__file__))
COLLECTIONS = os.path.abspath(os.path.join(HERE, "..", "..", "collections"))
BIN = os.path.dirname(sys.executable)
PASSWORD = "Pw-7fq2-Zebra-Quartz"      # the operator's; must appear in no output
ADMIN_PASSWORD = "Adm-3kd9-Falcon"     # only for the fault switch
USERS = {"ops": (PASSWORD, "Operator"), "root": (ADMIN_PASSWORD, "Administrator")}
NICS = [{"mac": "02:00:0a:63:00:0b", "speed_mbps": 10000}, {"mac": "02:00:0a:64:00:0b", "name": "ib0"}]

PLAYBOOK = """
- name: Drive stand-in BMCs with msa.hpc.redfish_node
  hosts: localhost
  connection: local
  gather_facts: false
  module_defaults:
    msa.hpc.redfish_node: {username: ops, password: "{{ pw }}", retries: 1, timeout: 5, wait_timeout: 20}
  tasks:
    - {name: on1, msa.hpc.redfish_node: {endpoint: "{{ plain }}", state: "on"}}
    - {name: on2, msa.hpc.redfish_node: {endpoint: "{{ plain }}", state: "on"}}
    - {name: off_check, msa.hpc.redfish_node: {endpoint: "{{ plain }}", state: "off"}, check_mode: true}
    - {name: boot_once, msa.hpc.redfish_node: {endpoint: "{{ plain }}", boot: {target: pxe, mode: once}}}
    - {name: restart_once, msa.hpc.redfish_node: {endpoint: "{{ plain }}", state: force_restart}}
    - name: restart_continuous
      msa.hpc.redfish_node: {endpoint: "{{ plain }}", state: force_restart, boot: {target: Hdd, mode: continuous}}
    - {name: graceful, msa.hpc.redfish_node: {endpoint: "{{ plain }}", state: graceful_restart}}
    - {name: off1, msa.hpc.redfish_node: {endpoint: "{{ plain }}", state: "off"}}
    - {name: off2, msa.hpc.redfish_node: {endpoint: "{{ plain }}", state: "off"}}
    - name: wrong_password
      msa.hpc.redfish_node: {endpoint: "{{ plain }}", state: "on", password: "wrong-{{ pw }}"}
      ignore_errors: true
    - name: unreachable
      msa.hpc.redfish_node: {endpoint: "http://127.0.0.1:{{ closed_port }}", state: "on"}
      ignore_errors: true
    - name: bad_target
      msa.hpc.redfish_node: {endpoint: "{{ plain }}", boot: {target: Floppy}}
      ignore_errors: true
    - name: retried
      msa.hpc.redfish_node: {endpoint: "{{ flaky }}", state: "on", retries: 3, gather_facts: true}
    - name: gives_up
      msa.hpc.redfish_node: {endpoint: "{{ down }}", state: "on", retries: 1}
      ignore_errors: true
    - name: final_facts
      msa.hpc.redfish_node: {endpoint: "{{ plain }}", gather_facts: true}
    - name: tls_cycle
      msa.hpc.redfish_node: {endpoint: "{{ tls }}", ca_path: "{{ ca }}", state: power_cycle, gather_facts: true}
    - name: tls_unverified
      msa.hpc.redfish_node: {endpoint: "{{ tls }}", gather_facts: true}
      ignore_errors: true
    - name: tls_redfish_info
      community.general.redfish_info:
        baseuri: "{{ tls | regex_replace('^https://', '') }}"
        username: ops
        password: "{{ pw }}"
        category: Systems
        command: GetSystemInventory
    - {name: nosession, msa.hpc.redfish_node: {endpoint: "{{ nosess }}", state: "on"}}
"""


def _closed_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _env(tmp):
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=COLLECTIONS, ANSIBLE_LOCAL_TEMP=os.path.join(tmp, "tmp"),
               ANSIBLE_REMOTE_TEMP=os.path.join(tmp, "tmp"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_DEPRECATION_WARNINGS="0", ANSIBLE_RETRY_FILES_ENABLED="0", ANSIBLE_PIPELINING="1")
    env.pop("ANSIBLE_CONFIG", None)
    return env


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    if not shutil.which("openssl"):
        pytest.skip("openssl is needed to make the test BMC's certificate")
    tmp = str(tmp_path_factory.mktemp("bmc_module"))
    cert, key = os.path.join(tmp, "cert.pem"), os.path.join(tmp, "key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                    "-nodes", "-keyout", key, "-out", cert, "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1"], check=True, capture_output=True, timeout=60)
    bmcs = [{"name": "plain", "nics": NICS, "model": "CM-Node", "memory_gib": 192,
             "cpus": {"count": 2, "model": "Xeon Gold 6146", "cores": 12, "threads": 24}},
            {"name": "tls", "tls": {"cert": cert, "key": key},
             "reset_types": ["On", "ForceOff", "GracefulShutdown", "ForceRestart"]},
            {"name": "nosess", "session_service": False},
            {"name": "flaky", "faults": {"status": 503, "count": 2}},
            {"name": "down", "faults": {"status": 503, "count": 1000}}]
    with open(os.path.join(tmp, "power.json"), "w", encoding="utf-8") as handle:
        json.dump({"tls": "On"}, handle)  # the TLS node starts powered on
    service = testing.start(tmp, bmcs, USERS, graceful_delay=0.3)
    try:
        urls = {name: service.url(name) for name in service.bmcs}
        with open(os.path.join(tmp, "vars.json"), "w", encoding="utf-8") as handle:
            json.dump(dict(urls, pw=PASSWORD, admin_pw=ADMIN_PASSWORD, ca=cert, closed_port=_closed_port()), handle)
        with open(os.path.join(tmp, "play.yml"), "w", encoding="utf-8") as handle:
            handle.write(PLAYBOOK)
        proc = subprocess.run([os.path.join(BIN, "ansible-playbook"), "-i", "localhost,", "play.yml",
                               "-e", "@vars.json", "-e", "ansible_python_interpreter=" + sys.executable],
                              cwd=tmp, env=dict(_env(tmp), ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json"),
                              capture_output=True, text=True, timeout=300)
        report = json.loads(proc.stdout)
        results = {t["task"]["name"]: t["hosts"]["localhost"] for t in report["plays"][0]["tasks"]}
        yield {"service": service, "urls": urls, "results": results, "proc": proc, "tmp": tmp, "ca": cert}
    finally:
        service.stop()


def test_playbook_ran_to_the_end(world):
    assert world["proc"].returncode == 0, world["proc"].stdout[-3000:] + world["proc"].stderr[-3000:]
    assert "nosession" in world["results"]


def test_power_on_is_idempotent(world):
    on1, on2 = world["results"]["on1"], world["results"]["on2"]
    assert on1["changed"] and (on1["power_state_before"], on1["power_state"]) == ("Off", "On")
    assert on1["reset_types"] == ["On"] and on1["auth"] == "session"
    assert not on2["changed"] and on2["reset_types"] == [] and on2["power_state"] == "On"


def test_check_mode_reports_a_power_off_without_doing_it(world):
    check, boot_once = world["results"]["off_check"], world["results"]["boot_once"]
    assert check["changed"] and check["reset_types"] == ["ForceOff"] and check["power_state"] == "Off"
    assert boot_once["power_state_before"] == "On"  # the next task still finds the node on


def test_one_time_boot_override_reverts_after_a_restart_and_continuous_stays(world):
    r = world["results"]
    assert r["boot_once"]["changed"] and r["boot_once"]["boot"]["enabled"] == "Once"
    assert r["boot_once"]["boot"]["target"] == "Pxe"  # "pxe" matched case-insensitively
    assert r["restart_once"]["changed"] and r["restart_once"]["reset_types"] == ["ForceRestart"]
    assert r["restart_once"]["boot_before"]["enabled"] == "Once" and r["restart_once"]["boot"]["enabled"] == "Disabled"
    cont = r["restart_continuous"]
    assert (cont["boot"]["enabled"], cont["boot"]["target"], cont["power_state"]) == ("Continuous", "Hdd", "On")
    graceful = r["graceful"]
    assert graceful["reset_types"] == ["GracefulRestart"] and graceful["power_state"] == "On"
    assert graceful["boot"]["enabled"] == "Continuous"


def test_power_off_is_idempotent(world):
    off1, off2 = world["results"]["off1"], world["results"]["off2"]
    assert off1["changed"] and off1["power_state"] == "Off" and off1["reset_types"] == ["ForceOff"]
    assert not off2["changed"] and off2["power_state_before"] == "Off"


def test_faults_give_clear_failures_without_tracebacks(world):
    r = world["results"]
    for name, expected in (("wrong_password", "HTTP 401: authentication failed (check the credentials)"),
                           ("unreachable", "cannot reach http://127.0.0.1:%d after 2 attempts" % 0),
                           ("bad_target", "boot.target: 'Floppy' is not offered by the BMC (allowed: None, Pxe"),
                           ("gives_up", "answered HTTP 503"),
                           ("tls_unverified", "CERTIFICATE_VERIFY_FAILED")):
        result = r[name]
        assert result.get("failed"), name
        assert "Traceback" not in json.dumps(result), name
        if name == "unreachable":
            assert "cannot reach http://127.0.0.1:" in result["msg"] and "after 2 attempts" in result["msg"]
        else:
            assert expected in result["msg"], (name, result["msg"])
        assert result["msg"].startswith("BMC at "), name


def test_a_bmc_answering_503_twice_then_succeeding_is_retried(world):
    retried = world["results"]["retried"]
    assert not retried.get("failed") and retried["changed"] and retried["power_state"] == "On"
    assert retried["inventory"]["serial"] == "SIM-FLAKY"
    assert world["service"].bmcs["flaky"]._faults == []  # both injected 503s were consumed


def test_no_session_is_left_open_after_the_module_runs(world):
    service = world["service"]
    for name in ("plain", "tls", "flaky", "down"):
        assert service.store.sessions(name) == [], name


def test_the_password_appears_in_no_output(world):
    proc = world["proc"]
    assert PASSWORD not in proc.stdout + proc.stderr
    assert ADMIN_PASSWORD not in proc.stdout + proc.stderr


def test_a_verbose_ad_hoc_run_with_a_wrong_password_does_not_show_either_password(world):
    proc = subprocess.run([os.path.join(BIN, "ansible"), "localhost", "-i", "localhost,", "-c", "local", "-vvv",
                           "-e", "ansible_python_interpreter=" + sys.executable, "-m", "msa.hpc.redfish_node",
                           "-a", "endpoint=%s username=ops password=wrong-%s retries=0 state=on"
                           % (world["urls"]["plain"], PASSWORD)],
                          cwd=world["tmp"], env=_env(world["tmp"]), capture_output=True, text=True, timeout=120)
    output = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "HTTP 401: authentication failed" in output and "Traceback" not in output
    assert '"password": "VALUE_SPECIFIED_IN_NO_LOG_PARAMETER"' in output  # -vvv shows the module's arguments
    assert PASSWORD not in output


def test_module_facts_match_what_the_dmtf_redfish_library_reports(world):
    redfish = pytest.importorskip("redfish")
    facts = world["results"]["final_facts"]
    client = redfish.redfish_client(base_url=world["urls"]["plain"], username="ops", password=PASSWORD)
    client.login(auth="session")
    try:
        system = client.get(facts["system_uri"]).dict
        nics = [client.get(m["@odata.id"]).dict
                for m in client.get(system["EthernetInterfaces"]["@odata.id"]).dict["Members"]]
    finally:
        client.logout()
    inv = facts["inventory"]
    assert (inv["manufacturer"], inv["model"], inv["serial"], inv["uuid"]) == \
        (system["Manufacturer"], system["Model"], system["SerialNumber"], system["UUID"])
    assert inv["power_state"] == system["PowerState"] == "Off"  # off1/off2 left it off
    assert inv["cpus"] == {"count": 2, "model": "Xeon Gold 6146", "cores": 24, "threads": 48}
    assert inv["cpus"]["count"] == system["ProcessorSummary"]["Count"]
    assert inv["memory_gib"] == system["MemorySummary"]["TotalSystemMemoryGiB"] == 192
    assert [n["mac"] for n in inv["nics"]] == [n["MACAddress"] for n in nics] == ["02:00:0A:63:00:0B",
                                                                                   "02:00:0A:64:00:0B"]
    assert inv["boot"]["enabled"] == system["Boot"]["BootSourceOverrideEnabled"]
    assert inv["power_consumed_watts"] == 8.0  # standby reading while off


def test_module_facts_match_community_general_redfish_info_over_tls(world):
    r = world["results"]
    cycle, info = r["tls_cycle"], r["tls_redfish_info"]
    # the TLS BMC lists no PowerCycle, so the module cycled with ForceOff then On
    assert cycle["changed"] and cycle["reset_types"] == ["ForceOff", "On"]
    assert (cycle["power_state_before"], cycle["power_state"]) == ("On", "On")
    assert cycle["inventory"]["last_reset_time"] is not None
    entry = info["redfish_facts"]["system"]["entries"][0][1]
    inv = cycle["inventory"]
    assert (inv["manufacturer"], inv["model"], inv["serial"], inv["power_state"]) == \
        (entry["Manufacturer"], entry["Model"], entry["SerialNumber"], entry["PowerState"])
    assert inv["memory_gib"] == entry["MemorySummary"]["TotalSystemMemoryGiB"]
    assert inv["cpus"]["count"] == entry["ProcessorSummary"]["Count"]


def test_a_bmc_without_session_service_is_driven_with_basic_auth(world):
    result = world["results"]["nosession"]
    assert result["auth"] == "basic" and result["changed"] and result["power_state"] == "On"
    assert any("no SessionService" in w for w in result.get("warnings", []))
