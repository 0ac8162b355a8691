# SPDX-License-Identifier: GPL-3.0-or-later
"""The BMC's image boot (issue 38): Boot.HttpBootUri names a node image, checked against the allow-list; the next
power-on recreates the node's container from it (same settings and volumes), the old one kept when a step fails."""
from __future__ import annotations

import base64
import json
import subprocess

import pytest

from msa_sim.bmc import config, testing
from msa_sim.bmc.backend import BackendError, PodmanBackend, create_args

ADMIN = ("admin", "Adm1n-pw")
SYS = "/redfish/v1/Systems/1"
RESET = SYS + "/Actions/ComputerSystem.Reset"

IMAGE = "localhost/msa-compute:0123456789ab"
URI = "containers-storage:" + IMAGE
NODE = ("reimage-n1", "n0de-secret-2")
CREATE = ["podman", "container", "run", "--name", "mini-cm01", "--hostname", "cm01", "--privileged=True",
          "--systemd=always", "--no-hosts=True", "--dns", "none", "--network",
          "mini-mgmt:ip=10.10.0.11,interface_name=mgmt0", "--network=mini-ib:ip=10.20.0.11,interface_name=ib0",
          "--label", "msa.system=mini", "--label", "msa.node=cm01", "-l", "msa.module=cm", "--volume",
          "/s/ssh/id.pub:/root/.ssh/authorized_keys:ro", "--detach=True", "localhost/msa-node:latest"]
INSPECT = [{"Name": "mini-cm01", "ImageName": "localhost/msa-node:latest", "State": {"Running": False},
            "Config": {"Hostname": "cm01", "CreateCommand": CREATE,
                       # the old image's labels are mixed in here: they must not reach the new container
                       "Labels": {"msa.node": "cm01", "msa.hpc.image.hash": "old"}},
            "HostConfig": {"Privileged": True},
            "Mounts": [{"Type": "bind", "Source": "/s/ssh/id.pub", "Destination": "/root/.ssh/authorized_keys",
                        "RW": False},
                       {"Type": "volume", "Name": "mini-cm01-ssh", "Source": "/v/x", "Destination": "/etc/ssh",
                        "RW": True},
                       {"Type": "tmpfs", "Destination": "/run"}]}]
ARGS = ["--hostname", "cm01", "--privileged", "--systemd=always", "--no-hosts=True", "--dns=none",
        "--network=mini-mgmt:ip=10.10.0.11,interface_name=mgmt0", "--network=mini-ib:ip=10.20.0.11,interface_name=ib0",
        "--label=msa.system=mini", "--label=msa.node=cm01", "--label=msa.module=cm",
        "--volume", "/s/ssh/id.pub:/root/.ssh/authorized_keys:ro", "--volume", "mini-cm01-ssh:/etc/ssh"]


class FakePodman:
    """Answers podman as a stopped container mini-cm01 would; ``fail`` makes the first command starting so fail."""

    def __init__(self, fail=None, inspect=None):
        self.calls, self.fail = [], fail
        self.inspect = INSPECT if inspect is None else inspect

    def __call__(self, cmd, **_):
        self.calls.append(cmd)
        if self.fail and cmd[:len(self.fail)] == self.fail:
            return subprocess.CompletedProcess(cmd, 125, stdout="", stderr="simulated failure")
        out = json.dumps(self.inspect) if cmd[1:3] == ["container", "inspect"] else ""
        return subprocess.CompletedProcess(cmd, 0, stdout=out, stderr="")


def test_create_args_keep_hostname_privileges_networks_labels_and_volumes_from_inspect():
    assert create_args(INSPECT[0]) == ARGS


def test_a_power_on_with_an_image_recreates_the_node_under_a_staged_name_then_swaps_it_in():
    run = FakePodman()
    PodmanBackend(run=run, post_power_on=["relink", "{container}"]).power_on("mini-cm01", image=IMAGE)
    assert run.calls == [
        ["podman", "container", "inspect", "mini-cm01"],
        ["podman", "rm", "--force", "--ignore", "mini-cm01.reimage"],
        ["podman", "create", "--name", "mini-cm01.reimage"] + ARGS + [IMAGE],
        ["podman", "rename", "mini-cm01", "mini-cm01.previous"],
        ["podman", "rename", "mini-cm01.reimage", "mini-cm01"],
        ["podman", "rm", "--force", "mini-cm01.previous"],
        ["podman", "start", "mini-cm01"],
        ["relink", "mini-cm01"],
    ]


def test_a_power_on_without_an_image_only_starts_the_node():
    run = FakePodman()
    PodmanBackend(run=run).power_on("mini-cm01")
    assert run.calls == [["podman", "start", "mini-cm01"]]


def test_a_failed_create_leaves_the_old_container_in_place_and_starts_nothing():
    run = FakePodman(fail=["podman", "create"])
    with pytest.raises(BackendError, match="simulated failure"):
        PodmanBackend(run=run).power_on("mini-cm01", image=IMAGE)
    assert run.calls[-1] == ["podman", "rm", "--force", "--ignore", "mini-cm01.reimage"]
    assert not [c for c in run.calls if c[1] in ("rename", "start") or c[1:3] == ["rm", "--force"] and
                c[-1] == "mini-cm01"]


def test_a_failed_swap_puts_the_old_container_back_under_its_name():
    run = FakePodman(fail=["podman", "rename", "mini-cm01.reimage"])
    with pytest.raises(BackendError):
        PodmanBackend(run=run).power_on("mini-cm01", image=IMAGE)
    assert run.calls[-2:] == [["podman", "rename", "mini-cm01.previous", "mini-cm01"],
                              ["podman", "rm", "--force", "--ignore", "mini-cm01.reimage"]]
    assert ["podman", "start", "mini-cm01"] not in run.calls


@pytest.mark.parametrize("image", ["--privileged", "localhost/msa-compute:x y", "Localhost/x", "a" * 300])
def test_the_backend_refuses_what_is_no_image_reference_before_running_anything(image):
    run = FakePodman()
    with pytest.raises(BackendError, match="is not an image reference"):
        PodmanBackend(run=run).power_on("mini-cm01", image=image)
    assert run.calls == []


def test_a_running_node_is_not_recreated():
    running = [dict(INSPECT[0], State={"Running": True})]
    run = FakePodman(inspect=running)
    with pytest.raises(BackendError, match="running"):
        PodmanBackend(run=run).power_on("mini-cm01", image=IMAGE)
    assert run.calls == [["podman", "container", "inspect", "mini-cm01"]]


class RecordingBackend:
    """The BMC's view of a backend: power state and the image each power-on was asked to boot."""

    def __init__(self):
        self.on, self.boots = False, []

    def is_on(self, _container):
        return self.on

    def power_on(self, _container, image=None):
        self.boots.append(image)
        self.on = True

    def force_off(self, _container):
        self.on = False

    graceful_shutdown = force_off


@pytest.fixture()
def bmcs(tmp_path):
    from msa_sim.bmc.service import Bmc
    from msa_sim.bmc.store import Store
    conf = testing.make_config(str(tmp_path), [{"name": "n1"}, {"name": "n2"}],
                               {ADMIN[0]: (ADMIN[1], "Administrator")})
    store = Store(conf["database"])
    backend = RecordingBackend()
    found = [Bmc(b, backend, store) for b in conf["bmcs"]]
    for bmc in found:
        bmc.password_iterations = testing.FAST_ITERATIONS
    assert call(found[0], "POST", "/redfish/v1/AccountService/Accounts",
                {"UserName": NODE[0], "Password": NODE[1], "RoleId": "MsaReimageOperator"})[0] == 201
    yield found, backend
    store.close()


def call(bmc, method, path, body=None, user=ADMIN):
    basic = {"Authorization": "Basic " + base64.b64encode(("%s:%s" % user).encode()).decode()}
    resp = bmc.handle(method, path, basic, json.dumps(body).encode() if body is not None else b"")
    return resp.status, resp.body


ONCE = {"Boot": {"BootSourceOverrideEnabled": "Once", "BootSourceOverrideTarget": "UefiHttp", "HttpBootUri": URI}}


def test_the_node_account_boots_its_own_system_once_from_an_allowed_image(bmcs):
    (n1, _), backend = bmcs
    status, body = call(n1, "PATCH", SYS, ONCE, user=NODE)
    assert status == 200 and body["Boot"]["HttpBootUri"] == URI, body
    assert call(n1, "POST", RESET, {"ResetType": "PowerCycle"}, user=NODE)[0] == 204
    assert backend.boots == [IMAGE]
    system = call(n1, "GET", SYS)[1]
    assert system["Boot"]["BootSourceOverrideEnabled"] == "Disabled"  # Once: consumed by that boot
    assert system["Oem"]["MsaBmc"]["BootImage"] == IMAGE
    assert call(n1, "POST", RESET, {"ResetType": "PowerCycle"}, user=NODE)[0] == 204
    assert backend.boots == [IMAGE, None]  # the next boot boots what is there


@pytest.mark.parametrize("uri", [
    "localhost/msa-compute:0123456789ab",                  # no scheme: not a URI
    "containers-storage:docker.io/library/evil:latest",     # another registry
    "containers-storage:localhost/msa-compute:latest;rm",  # trailing junk
    "containers-storage:localhost/msa-compute:x\nlocalhost/msa-compute:y",
    "containers-storage:localhost/../msa-compute:1",
    "https://example.org/boot.efi",
])
def test_an_image_off_the_allow_list_is_refused_naming_the_field_and_value_before_any_boot(bmcs, uri):
    (n1, _), backend = bmcs
    body = {"Boot": dict(ONCE["Boot"], HttpBootUri=uri)}
    status, answer = call(n1, "PATCH", SYS, body, user=NODE)
    assert status == 400, answer
    message = answer["error"]["@Message.ExtendedInfo"][0]
    assert "Boot/HttpBootUri" in message["Message"] and uri[:20] in message["Message"]
    system = call(n1, "GET", SYS)[1]
    assert system["Boot"]["HttpBootUri"] == "" and system["Boot"]["BootSourceOverrideEnabled"] == "Disabled"
    call(n1, "POST", RESET, {"ResetType": "On"}, user=NODE)
    assert backend.boots == [None]


@pytest.mark.parametrize("body", [
    {"Boot": {"BootSourceOverrideEnabled": "Once", "BootSourceOverrideTarget": "Pxe"}},
    {"Boot": {"BootSourceOverrideEnabled": "Continuous", "BootSourceOverrideTarget": "UefiHttp"}},
    {"Boot": {"BootSourceOverrideMode": "Legacy"}},
    {"AssetTag": "pwned"},
    {"Boot": ONCE["Boot"], "IndicatorLED": "Blinking"},
])
def test_the_reimage_role_may_set_the_one_time_image_boot_and_nothing_else(bmcs, body):
    n1 = bmcs[0][0]
    before = call(n1, "GET", SYS)[1]
    status, answer = call(n1, "PATCH", SYS, body, user=NODE)
    assert status == 403 and answer["error"]["code"].endswith("InsufficientPrivilege"), answer
    after = call(n1, "GET", SYS)[1]
    assert (after["Boot"], after["AssetTag"], after["IndicatorLED"]) == \
        (before["Boot"], before["AssetTag"], before["IndicatorLED"])
    assert call(n1, "PATCH", SYS + "/Bios/Settings", {"Attributes": {"HyperThreading": "Disabled"}},
                user=NODE)[0] == 403


def test_the_node_account_cannot_set_another_nodes_boot_image(bmcs):
    n2 = bmcs[0][1]
    status, _ = call(n2, "PATCH", SYS, ONCE, user=NODE)
    assert status == 401
    assert call(n2, "GET", SYS)[1]["Boot"]["HttpBootUri"] == ""


def test_a_reset_only_account_may_not_set_the_boot_image(bmcs):
    n1 = bmcs[0][0]
    assert call(n1, "POST", "/redfish/v1/AccountService/Accounts",
                {"UserName": "reset-only", "Password": "r3set-only-pw", "RoleId": "SystemResetOperator"})[0] == 201
    assert call(n1, "PATCH", SYS, ONCE, user=("reset-only", "r3set-only-pw"))[0] == 403


def test_the_reimage_role_states_its_oem_privilege(bmcs):
    n1 = bmcs[0][0]
    role = call(n1, "GET", "/redfish/v1/AccountService/Roles/MsaReimageOperator")[1]
    assert role["AssignedPrivileges"] == ["Login", "OperateSystems"] and role["OemPrivileges"] == ["MsaBootOverride"]
    pmap = call(n1, "GET", "/redfish/v1/AccountService/PrivilegeMap")[1]
    assert pmap["OEMPrivilegesUsed"] == ["MsaBootOverride"]
    system = [m for m in pmap["Mappings"] if m["Entity"] == "ComputerSystem"][0]
    assert {"Privilege": ["MsaBootOverride"]} in system["OperationMap"]["PATCH"]


def test_a_boot_image_pattern_that_is_no_regular_expression_is_refused_naming_it(tmp_path):
    with pytest.raises(config.ConfigError, match=r"boot_image_pattern: '\(' is not a regular expression"):
        testing.make_config(str(tmp_path), [{"name": "n1", "boot_image_pattern": "("}],
                            {ADMIN[0]: (ADMIN[1], "Administrator")})


def test_the_provisioned_files_go_from_the_old_container_into_the_new_one_before_the_swap():
    run = FakePodman(fail=["podman", "cp", "mini-cm01:/etc/msa-hpc/overlay.json"])
    PodmanBackend(run=run, carry_paths=["/etc/msa-hpc/tls/ca.pem", "/etc/msa-hpc/overlay.json"]).power_on(
        "mini-cm01", image=IMAGE)
    cps = [c for c in run.calls if c[1] == "cp"]
    # each file is copied out into a tree of its path; the settings the old node never had are skipped, not an
    # error; the tree goes in at once, so a directory the new image lacks (/etc/msa-hpc/tls) is made
    assert [c[2] for c in cps[:2]] == ["mini-cm01:/etc/msa-hpc/tls/ca.pem", "mini-cm01:/etc/msa-hpc/overlay.json"]
    assert cps[0][3].endswith("/root/etc/msa-hpc/tls/ca.pem")
    assert cps[2][2:] == [cps[0][3][:-len("/etc/msa-hpc/tls/ca.pem")] + "/.", "mini-cm01.reimage:/"]
    assert len(cps) == 3
    assert run.calls.index(cps[2]) < run.calls.index(["podman", "rename", "mini-cm01", "mini-cm01.previous"])


def test_a_provisioned_file_that_cannot_be_copied_in_keeps_the_old_container():
    class CopyInFails(FakePodman):
        def __call__(self, cmd, **kw):
            if cmd[1] == "cp" and cmd[-1] == "mini-cm01.reimage:/":
                self.calls.append(cmd)
                return subprocess.CompletedProcess(cmd, 125, stdout="", stderr="simulated failure")
            return super().__call__(cmd, **kw)

    run = CopyInFails()
    with pytest.raises(BackendError, match="simulated failure"):
        PodmanBackend(run=run, carry_paths=["/etc/msa-hpc/overlay.token"]).power_on("mini-cm01", image=IMAGE)
    assert run.calls[-1] == ["podman", "rm", "--force", "--ignore", "mini-cm01.reimage"]
    assert not [c for c in run.calls if c[1] in ("rename", "start")]


@pytest.mark.parametrize("paths", [["etc/x"], ["/etc/../root/x"], "/etc/x", [3]])
def test_carry_paths_that_are_not_absolute_paths_are_refused_naming_the_field(paths):
    with pytest.raises(config.ConfigError, match="backend.carry_paths"):
        config.validate({"backend": {"carry_paths": paths}, "bmcs": [{"name": "n1", "container": "c1"}]})
