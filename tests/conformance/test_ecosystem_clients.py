# SPDX-License-Identifier: GPL-3.0-or-later
"""Redfish clients nobody here wrote against one simulated BMC over TLS (throwaway CA): community.general's
redfish_command / redfish_config / redfish_info (every command, info with command=all for every category) through
the venv's ansible-playbook, OpenStack's sushy and the DMTF redfish library."""
from __future__ import annotations

import http.server
import json
import os
import ssl
import subprocess
import sys
import threading
import time

import pytest

from msa_sim.bmc import testing
from msa_sim.bmc.update import make_image

HERE = os.path.dirname(os.path.abspath(__file__))
USERS = {"admin": ("Adm1n-pass", "Administrator"), "ops": ("0ps-passw", "Operator"),
         "viewer": ("v1ew-pass", "ReadOnly")}
# redfish_info commands that read vendor OEM extensions this BMC does not have (and must not fake)
OEM_ONLY = {"hpe_thermal_config": "HPE iLO Oem.Hpe.ThermalConfiguration",
            "hpe_fan_percent_min": "HPE iLO Oem.Hpe.FanPercentMinimum"}



def _say(text):
    """Print to the stderr of the moment (capture disabled): pytest-xdist (make unit) shows no worker's stdout."""
    print(text, file=sys.stderr)

@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """One BMC, and an HTTPS server (same CA) holding a simulated BMC firmware image for SimpleUpdate."""
    directory = str(tmp_path_factory.mktemp("clients"))
    ca, tls = testing.make_tls(directory)
    images = os.path.join(directory, "images")
    os.makedirs(images)
    with open(os.path.join(images, "bmc-2.1.0.fw"), "wb") as handle:
        handle.write(make_image("BMC", "2.1.0"))
    with open(os.path.join(directory, "bios-1.7.0.fw"), "wb") as handle:
        handle.write(make_image("BIOS", "1.7.0"))
    # deprecated_resources as roles/sim_bmc/templates/bmcs.yaml.j2 sets it: community.general's Chassis power,
    # thermal and LED commands and its Manager virtual media commands read only the deprecated forms
    service = testing.start(directory, [{"name": "n1", "nics": [{"mac": "02:00:00:00:00:01"}]}], USERS,
                            defaults={"tls": tls, "update_seconds": 0.3, "ca_bundle": ca,
                                      "deprecated_resources": True})
    handler = lambda *a, **k: http.server.SimpleHTTPRequestHandler(*a, directory=images, **k)  # noqa: E731
    files = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(tls["cert"], tls["key"])
    files.socket = context.wrap_socket(files.socket, server_side=True)
    threading.Thread(target=files.serve_forever, daemon=True).start()
    yield {"url": service.url("n1"), "ca": ca, "dir": directory, "service": service,
           "image": "https://127.0.0.1:%d/bmc-2.1.0.fw" % files.server_address[1],
           "bios_image": os.path.join(directory, "bios-1.7.0.fw")}
    files.shutdown()
    service.stop()


def test_community_general_redfish_modules_work_on_every_category(served, capsys):
    out = os.path.join(served["dir"], "out.json")
    bindir = os.path.dirname(sys.executable)
    extra = {"bmc": served["url"].split("://", 1)[1], "ca": served["ca"], "admin_password": USERS["admin"][0],
             "image_uri": served["image"], "bios_image": served["bios_image"], "out": out,
             "ansible_python_interpreter": sys.executable}
    proc = subprocess.run([os.path.join(bindir, "ansible-playbook"), "-i", "localhost,", "-c", "local",
                           os.path.join(HERE, "redfish_clients.yml"), "-e", json.dumps(extra)],
                          capture_output=True, text=True, timeout=600, cwd=served["dir"],
                          env=dict(os.environ, ANSIBLE_NOCOLOR="1", PATH=bindir + os.pathsep + os.environ["PATH"]))
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    with open(out, encoding="utf-8") as handle:
        results = json.load(handle)
    failed = ["%s %s: %s" % (r["item"]["cat"], r["item"]["cmd"], r.get("msg"))
              for r in results["commands"] + results["configs"] if r.get("failed")]
    assert not failed, "\n".join(failed)
    assert results["update"]["redfish_facts"]["update_status"]["status"] == "Completed"
    assert not results["deleted"].get("failed")
    categories, not_ok, oem = [], [], []
    for result in results["info"]:
        assert not result.get("failed"), "redfish_info %s failed: %s" % (result["item"], result.get("msg"))
        categories.append(result["item"])
        for key, facts in result["redfish_facts"].items():
            if isinstance(facts, dict) and facts.get("ret") is False:
                (oem if key in OEM_ONLY else not_ok).append("%s/%s: %s" % (result["item"], key, facts.get("msg")))
    info = {r["item"]: r["redfish_facts"] for r in results["info"]}
    with capsys.disabled():
        _say("\nredfish_info command=all: %d categories (%s), %d commands answered" % (
            len(categories), ", ".join(categories), sum(len(f) for f in info.values())))
        for line in oem:
            _say("  vendor-only, not offered: %s (%s)" % (line, OEM_ONLY[line.split("/")[1].split(":")[0]]))
    assert categories == ["Systems", "Chassis", "Accounts", "Sessions", "Update", "Manager", "Service"]
    assert not not_ok, "\n".join(not_ok)
    firmware = {e["Id"]: e["Version"] for e in info["Update"]["firmware"]["entries"]}
    assert firmware["BMC"] == "2.1.0", firmware  # SimpleUpdate over HTTPS
    assert firmware["BIOS"] == "1.7.0", firmware  # MultipartHTTPPushUpdate
    users = [u["UserName"] for u in info["Accounts"]["user"]["entries"]]
    assert "alice" not in users and "alice2" not in users and "admin" in users, users  # added, renamed, deleted
    assert info["Systems"]["boot_order"]["entries"][0][1][0]["BootOptionReference"] == "Boot0001"
    # what community.general reads only from the deprecated forms (deprecated_resources, as the harness sets it):
    # without them these answers are empty or missing, which the checks above would not notice
    chassis = info["Chassis"]
    assert chassis["chassis"]["entries"][0]["IndicatorLED"] == "Off", chassis["chassis"]  # after IndicatorLedOff
    assert chassis["chassis_power"]["entries"][0]["PowerCapacityWatts"] == 450, chassis["chassis_power"]
    assert [p["Name"] for p in chassis["psu"]["entries"]] == ["PSU 1"], chassis["psu"]
    assert [f["Name"] for f in chassis["fan"]["entries"]] == ["Fan 1", "Fan 2"], chassis["fan"]
    assert [t["Name"] for t in chassis["thermals"]["entries"]] == ["Inlet Temp", "CPU Temp"], chassis["thermals"]
    media = info["Manager"]["virtual_media"]["entries"][0][1]
    assert [m["Id"] for m in media] == ["CD1"] and media[0]["ConnectedVia"] == "NotConnected", media  # ejected


def test_sushy_reads_and_drives_the_bmc(served, monkeypatch, request):
    import sushy
    import sushy.auth

    # requests lets REQUESTS_CA_BUNDLE / CURL_CA_BUNDLE override a session's `verify`, which is how sushy passes
    # its CA: point them at the same CA, so verification stays on whatever the environment says
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", served["ca"])
    monkeypatch.delenv("CURL_CA_BUNDLE", raising=False)
    # the session is deleted while the BMC still answers: left to Sushy.__del__, the DELETE would retry with back-off
    # against the stopped BMC in whichever thread collects it later (a later test's BMC thread: its client timed out)
    auth = sushy.auth.SessionOrBasicAuth(username="ops", password=USERS["ops"][0])
    request.addfinalizer(auth.close)
    root = sushy.Sushy(served["url"] + "/redfish/v1", auth=auth, verify=served["ca"])
    system = root.get_system("/redfish/v1/Systems/1")
    assert system.manufacturer == "MSA Simulated Systems"
    system.reset_system(sushy.RESET_ON)
    system.refresh()
    assert system.power_state == sushy.SYSTEM_POWER_STATE_ON
    system.set_system_boot_options(sushy.BOOT_SOURCE_TARGET_PXE, enabled=sushy.BOOT_SOURCE_ENABLED_ONCE)
    system.refresh()
    assert system.boot.target == sushy.BOOT_SOURCE_TARGET_PXE
    assert system.boot.enabled == sushy.BOOT_SOURCE_ENABLED_ONCE
    assert root.get_manager("/redfish/v1/Managers/BMC").manager_type == sushy.MANAGER_TYPE_BMC
    assert [c.identity for c in root.get_chassis_collection().get_members()] == ["1"]
    assert root.get_session_service().session_timeout >= 30
    update = root.get_update_service()
    assert {i.identity for i in update.firmware_inventory.get_members()} >= {"BMC", "BIOS"}
    events = root.get_event_service()
    assert events.service_enabled is True
    # SimpleUpdate over HTTPS as the Operator (ConfigureComponents), followed through sushy's TaskMonitor
    monitor = update.simple_update(served["image"], transfer_protocol=sushy.UPDATE_PROTOCOL_HTTPS)
    assert monitor.task is not None and monitor.task.task_state == sushy.TASK_STATE_RUNNING
    # sushy follows the Task's @odata.id (not the Location monitor): read the task through the TaskService
    tasks = root.get_task_service().tasks
    for _ in range(100):
        task = tasks.get_member(monitor.task_monitor_uri)
        if task.task_state != sushy.TASK_STATE_RUNNING:
            break
        time.sleep(0.2)
    assert task.task_state == sushy.TASK_STATE_COMPLETED, [m.message for m in task.messages]
    # subscribing to events needs ConfigureManager, which the Operator role lacks
    with pytest.raises(sushy.exceptions.AccessError):
        events.subscriptions.create({"Destination": "https://127.0.0.1:9/events", "Protocol": "Redfish"})


def test_dmtf_redfish_library_sessions_and_privileges(served):
    import redfish

    client = redfish.redfish_client(base_url=served["url"], username="viewer", password=USERS["viewer"][0],
                                    cafile=served["ca"], timeout=15, max_retry=1)
    client.login(auth="session")
    try:
        assert client.get("/redfish/v1/Systems/1").dict["PowerState"] in ("On", "Off")
        denied = client.post("/redfish/v1/Systems/1/Actions/ComputerSystem.Reset", body={"ResetType": "ForceOff"})
        assert denied.status == 403
        assert denied.dict["error"]["@Message.ExtendedInfo"][0]["MessageId"] == "Base.1.16.InsufficientPrivilege"
        metadata = client.get("/redfish/v1/$metadata")
        assert metadata.status == 200 and "ComputerSystem.v1_20_0" in metadata.text
    finally:
        client.logout()
