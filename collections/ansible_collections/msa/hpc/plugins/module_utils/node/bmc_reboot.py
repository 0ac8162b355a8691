# SPDX-License-Identifier: GPL-3.0-or-later
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Slurm's RebootProgram for an MSA node: restart this node through its own Redfish BMC.

``scontrol reboot [ASAP] [nextstate=resume] <nodes>`` makes slurmd run the program (msa-hpc-reboot, role
msa.hpc.slurm_reboot) as root on each node. It logs in to the node's BMC (a Redfish session over verified TLS,
through the collection's Redfish client) and sends the reset the configuration names (PowerCycle by default, or
the BMC's nearest sequence, ForceOff then On). The BMC cuts the node's power while the request is answered, so the
program usually ends with the node; the session it leaves expires on the BMC (SessionTimeout). Slurm sees the
node register again after its boot and applies nextstate.

A reimage (issue 38) is a reboot whose reason, as Slurm holds it for this node, is ``msa-reimage <image>``
(``scontrol reboot ASAP nextstate=resume reason="msa-reimage localhost/msa-compute:<hash12>" <nodes>``). The image is
checked against ``image_pattern`` of the configuration (matched whole; no pattern: no reimage), then set as the
system's one-time boot (BootSourceOverrideTarget UefiHttp, HttpBootUri from ``boot_uri``) before the reset.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys

from ansible_collections.msa.hpc.plugins.module_utils._redfish import RESTARTS, Redfish, RedfishError, plan_power
from ansible_collections.msa.hpc.plugins.module_utils._rest import RestError
from ansible_collections.msa.hpc.plugins.module_utils.slurm import nodes as N

DEFAULT_CONFIG = "/etc/msa-hpc/bmc.json"
REIMAGE_PREFIX = "msa-reimage "
SLURM_REBOOT_NOTE = re.compile(r" : reboot issued$")
# the simulation's BMC names a local node image as the containers-image transports do; a site's provisioner URL
# (https://.../{image}) is set in the configuration
DEFAULT_BOOT_URI = "containers-storage:{image}"


class RebootError(Exception):
    """The reboot cannot be asked for; the message names the field or the BMC's answer."""


def load_config(path):
    """The node's BMC settings (JSON, root-only: it names the password file): validated, with the password read."""
    try:
        with open(path, encoding="utf-8") as fh:
            config = json.load(fh)
    except (OSError, ValueError) as exc:
        raise RebootError("%s: %s" % (path, exc)) from None
    if not isinstance(config, dict):
        raise RebootError("%s: not a JSON object" % path)
    for key in ("endpoint", "username", "password_file"):
        if not isinstance(config.get(key), str) or not config[key]:
            raise RebootError("%s: %s: %r is not set" % (path, key, config.get(key)))
    reset = config.get("reset", "power_cycle")
    if reset not in RESTARTS:
        raise RebootError("%s: reset: %r is not one of %s" % (path, reset, ", ".join(RESTARTS)))
    if config.get("system_id") is not None and not isinstance(config["system_id"], str):
        raise RebootError("%s: system_id: %r is not a string" % (path, config["system_id"]))
    for key in ("image_pattern", "node_name"):
        if config.get(key) is not None and not isinstance(config[key], str):
            raise RebootError("%s: %s: %r is not a string" % (path, key, config[key]))
    try:
        re.compile(config.get("image_pattern") or "")
    except re.error as exc:
        raise RebootError("%s: image_pattern: %r is not a regular expression (%s)"
                          % (path, config["image_pattern"], exc)) from None
    boot_uri = config.get("boot_uri", DEFAULT_BOOT_URI)
    if not isinstance(boot_uri, str) or boot_uri.count("{image}") != 1 or boot_uri.replace("{image}", "").count("{"):
        raise RebootError("%s: boot_uri: %r must hold {image} once and no other field" % (path, boot_uri))
    try:
        with open(config["password_file"], encoding="utf-8") as fh:
            password = fh.read().strip()
    except OSError as exc:
        raise RebootError("%s: password_file: %s" % (path, exc)) from None
    if not password:
        raise RebootError("%s: password_file: %s is empty" % (path, config["password_file"]))
    return dict(config, reset=reset, password=password, boot_uri=boot_uri)


def requested_image(config, run=subprocess.run):
    """The image this reboot must boot (None for a plain reboot): from Slurm's reason for this node, checked. A node
    without image_pattern boots no image, and does not ask Slurm."""
    if not config.get("image_pattern"):
        return None
    node = config.get("node_name") or os.uname().nodename
    argv = ["sinfo", "--json", "--nodes", node]
    try:
        out = run(argv, capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise RebootError("%s: %s (the reboot's reason is unknown, so nothing is asked)" % (" ".join(argv), exc)) \
            from None
    if out.returncode != 0:
        raise RebootError("%s: %s (the reboot's reason is unknown, so nothing is asked)"
                          % (" ".join(argv), (out.stderr or "").strip()[:300] or out.returncode))
    try:
        record = N.find(N.load_nodes(out.stdout, " ".join(argv)), node)
    except N.NodeRecordError as exc:
        raise RebootError(str(exc)) from None
    if record is None:
        raise RebootError("%s: no record of %s in its answer" % (" ".join(argv), node))
    return check_image(record.get("reason") or "", config.get("image_pattern") or "")


def check_image(reason, pattern):
    """The image of a reason ``msa-reimage <image>``, matched whole by ``pattern``; None for any other reason."""
    if not reason.startswith(REIMAGE_PREFIX):
        return None
    # slurmctld appends its own note to the reason once it has sent the reboot request to slurmd (22.05 to 26.05:
    # "<reason> : reboot issued"), which is what this program reads
    image = SLURM_REBOOT_NOTE.sub("", reason[len(REIMAGE_PREFIX):])
    if not pattern:
        raise RebootError("reason: %r asks for a reimage, but image_pattern is not set: this node boots no image "
                          "through its BMC" % reason[:200])
    if not re.fullmatch(pattern, image):
        raise RebootError("reason: image %r does not match image_pattern %s" % (image[:200], pattern))
    return image


def reboot(config, client=Redfish, image=None):
    """Ask the BMC for the restart, booting ``image`` once when given; return the reset types sent (none when the
    node is, oddly, off: then On)."""
    bmc = client(config["endpoint"], config["username"], config["password"], auth=config.get("auth", "session"),
                 validate_certs=True, ca_path=config.get("ca_path") or None, timeout=float(config.get("timeout", 10)),
                 retries=1)
    try:
        with bmc:
            uri, system, etag = bmc.find_system(config.get("system_id"))
            if image:
                bmc.patch_boot(uri, {"BootSourceOverrideEnabled": "Once", "BootSourceOverrideTarget": "UefiHttp",
                                     "HttpBootUri": config["boot_uri"].replace("{image}", image)}, etag)
                uri, system, _etag = bmc.get_system(uri)
            sequence, _target = plan_power(config["reset"], system.get("PowerState"), bmc.allowed_resets(system))
            for reset_type in sequence:
                bmc.reset(system, reset_type, uri)
                if reset_type != sequence[-1]:
                    uri, system, _etag = bmc.get_system(uri)
    except (RedfishError, RestError) as exc:
        raise RebootError("BMC %s: %s" % (config["endpoint"], exc)) from None
    return sequence


def main(argv=None, client=Redfish, err=sys.stderr, run=subprocess.run):
    """RebootProgram entry point: msa-hpc-reboot [--validate] [CONFIG]. Exit 1 (slurmd logs it) when the BMC was not
    asked; ``--validate`` only reads the configuration (the role's ``validate:``)."""
    argv = sys.argv[1:] if argv is None else argv
    path = argv[0] if argv else DEFAULT_CONFIG
    if argv[:1] == ["--validate"]:
        try:
            load_config(argv[1] if len(argv) > 1 else DEFAULT_CONFIG)
        except RebootError as exc:
            err.write("msa-hpc-reboot: %s\n" % exc)
            return 1
        return 0
    try:
        config = load_config(path)
        image = requested_image(config, run)
        err.write("msa-hpc-reboot: asking %s for %s of %s%s\n"
                  % (config["endpoint"], config["reset"], os.uname().nodename,
                     ", booting %s once" % image if image else ""))
        err.flush()
        sent = reboot(config, client, image)
    except RebootError as exc:
        err.write("msa-hpc-reboot: %s\n" % exc)
        return 1
    err.write("msa-hpc-reboot: sent %s\n" % (", ".join(sent) or "nothing"))
    return 0
