# SPDX-License-Identifier: GPL-3.0-or-later
"""The RebootProgram's reimage (issue 38): the image comes from Slurm's reason for this node, is matched whole against
image_pattern, and is set as the BMC's one-time boot before the reset; anything else is refused before the BMC is
asked."""
from __future__ import annotations

import io
import json
import subprocess

import pytest

from ansible_collections.msa.hpc.plugins.module_utils.node import bmc_reboot as R

PATTERN = r"localhost/msa-[a-z0-9-]+:[0-9a-f]{12}"
IMAGE = "localhost/msa-compute:0123456789ab"


def sinfo(reason, node="cm01", code=0):
    def run(argv, **_):
        run.calls.append(argv)
        body = {"nodes": [{"name": node, "state": "idle", "state_flags": ["DRAIN", "REBOOT_ISSUED"],
                           "reason": reason}]}
        return subprocess.CompletedProcess(argv, code, stdout=json.dumps(body), stderr="down" if code else "")
    run.calls = []
    return run


def test_a_reimage_reason_gives_its_image_and_sinfo_is_asked_for_this_node_only():
    run = sinfo("msa-reimage " + IMAGE)
    assert R.requested_image({"image_pattern": PATTERN, "node_name": "cm01"}, run) == IMAGE
    assert run.calls == [["sinfo", "--json", "--nodes", "cm01"]]


def test_another_reason_is_a_plain_reboot_and_no_pattern_asks_slurm_nothing():
    assert R.requested_image({"image_pattern": PATTERN, "node_name": "cm01"}, sinfo("rolling reboot of cm")) is None
    run = sinfo("msa-reimage " + IMAGE)
    assert R.requested_image({"node_name": "cm01"}, run) is None and run.calls == []


@pytest.mark.parametrize("image", [
    "docker.io/evil/image:0123456789ab", "localhost/msa-compute:latest", "localhost/msa-compute:0123456789ab extra",
    "localhost/msa-compute:0123456789ab\n", "localhost/msa-compute:0123456789abc", " localhost/msa-compute:0123456789ab",
])
def test_an_image_off_the_pattern_is_refused_naming_the_reason_and_the_value(image):
    with pytest.raises(R.RebootError) as err:
        R.requested_image({"image_pattern": PATTERN, "node_name": "cm01"}, sinfo("msa-reimage " + image))
    assert str(err.value).startswith("reason: image %r does not match image_pattern" % image)


def test_the_note_slurmctld_appends_once_the_reboot_is_issued_is_not_part_of_the_image():
    """22.05 measured on mini: the reason reads 'msa-reimage <image> : reboot issued' when the program runs."""
    config = {"image_pattern": PATTERN, "node_name": "cm01"}
    assert R.requested_image(config, sinfo("msa-reimage " + IMAGE + " : reboot issued")) == IMAGE
    with pytest.raises(R.RebootError, match="does not match"):
        R.requested_image(config, sinfo("msa-reimage " + IMAGE + " : reboot issued : reboot issued"))


def test_a_reimage_asked_of_a_node_without_pattern_is_refused():
    with pytest.raises(R.RebootError, match="image_pattern is not set"):
        R.check_image("msa-reimage " + IMAGE, "")


@pytest.mark.parametrize("run,message", [
    (sinfo("x", code=1), "sinfo --json --nodes cm01: down"),
    (sinfo("x", node="cm02"), "no record of cm01"),
])
def test_an_unknown_reason_asks_nothing(run, message):
    with pytest.raises(R.RebootError, match=message):
        R.requested_image({"image_pattern": PATTERN, "node_name": "cm01"}, run)


class FakeBmc:
    """The Redfish client as the RebootProgram uses it, recording what it is asked."""
    calls = []

    def __init__(self, *args, **kwargs):
        FakeBmc.calls = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def find_system(self, _system_id):
        return "/redfish/v1/Systems/1", {"PowerState": "On"}, "W/\"1\""

    def get_system(self, uri):
        return uri, {"PowerState": "On"}, None

    def allowed_resets(self, _system):
        return ["On", "ForceOff", "PowerCycle"]

    def patch_boot(self, uri, patch, etag=None):
        FakeBmc.calls.append(("PATCH", uri, patch))

    def reset(self, _system, reset_type, _uri=None):
        FakeBmc.calls.append(("RESET", reset_type))


def write_config(tmp_path, **extra):
    (tmp_path / "pw").write_text("secret\n")
    path = tmp_path / "bmc.json"
    path.write_text(json.dumps(dict({"endpoint": "https://bmc", "username": "msa-reboot",
                                     "password_file": str(tmp_path / "pw"), "node_name": "cm01"}, **extra)))
    return str(path)


def test_main_sets_the_one_time_image_boot_before_the_reset(tmp_path):
    err = io.StringIO()
    path = write_config(tmp_path, image_pattern=PATTERN)
    assert R.main([path], client=FakeBmc, err=err, run=sinfo("msa-reimage " + IMAGE)) == 0
    assert FakeBmc.calls == [
        ("PATCH", "/redfish/v1/Systems/1", {"BootSourceOverrideEnabled": "Once", "BootSourceOverrideTarget": "UefiHttp",
                                            "HttpBootUri": "containers-storage:" + IMAGE}),
        ("RESET", "PowerCycle")]
    assert "booting %s once" % IMAGE in err.getvalue()


def test_main_refuses_a_bad_image_before_the_bmc_is_asked(tmp_path):
    err = io.StringIO()
    path = write_config(tmp_path, image_pattern=PATTERN)
    FakeBmc.calls = ["untouched"]
    assert R.main([path], client=FakeBmc, err=err, run=sinfo("msa-reimage localhost/evil:1")) == 1
    assert FakeBmc.calls == ["untouched"] and "does not match image_pattern" in err.getvalue()


def test_a_site_boot_uri_names_the_image_where_it_says(tmp_path):
    path = write_config(tmp_path, image_pattern=PATTERN, boot_uri="https://ww.example/boot/{image}.efi")
    assert R.main([path], client=FakeBmc, err=io.StringIO(), run=sinfo("msa-reimage " + IMAGE)) == 0
    assert FakeBmc.calls[0][2]["HttpBootUri"] == "https://ww.example/boot/%s.efi" % IMAGE


@pytest.mark.parametrize("extra,message", [
    ({"image_pattern": "("}, r"image_pattern: '\(' is not a regular expression"),
    ({"boot_uri": "https://x/"}, r"boot_uri: 'https://x/' must hold \{image\} once"),
    ({"boot_uri": "https://x/{image}/{node}"}, "boot_uri"),
    ({"node_name": 3}, "node_name: 3 is not a string"),
])
def test_a_bad_reimage_setting_is_refused_naming_it(tmp_path, extra, message):
    with pytest.raises(R.RebootError, match=message):
        R.load_config(write_config(tmp_path, **extra))
