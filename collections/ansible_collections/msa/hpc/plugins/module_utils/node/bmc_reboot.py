# SPDX-License-Identifier: GPL-3.0-or-later
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Slurm's RebootProgram for an MSA node: restart this node through its own Redfish BMC.

``scontrol reboot [ASAP] [nextstate=resume] <nodes>`` makes slurmd run the program (msa-hpc-reboot, role
msa.hpc.slurm_reboot) as root on each node. It logs in to the node's BMC (a Redfish session over verified TLS,
through the collection's Redfish client) and sends the reset the configuration names (PowerCycle by default, or
the BMC's nearest sequence, ForceOff then On). The BMC cuts the node's power while the request is answered, so the
program usually ends with the node; the session it leaves expires on the BMC (SessionTimeout). Slurm sees the
node register again after its boot and applies nextstate.
"""
from __future__ import annotations

import json
import os
import sys

from ansible_collections.msa.hpc.plugins.module_utils._redfish import RESTARTS, Redfish, RedfishError, plan_power
from ansible_collections.msa.hpc.plugins.module_utils._rest import RestError

DEFAULT_CONFIG = "/etc/msa-hpc/bmc.json"


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
    try:
        with open(config["password_file"], encoding="utf-8") as fh:
            password = fh.read().strip()
    except OSError as exc:
        raise RebootError("%s: password_file: %s" % (path, exc)) from None
    if not password:
        raise RebootError("%s: password_file: %s is empty" % (path, config["password_file"]))
    return dict(config, reset=reset, password=password)


def reboot(config, client=Redfish):
    """Ask the BMC for the restart; return the reset types sent (none when the node is, oddly, off: then On)."""
    bmc = client(config["endpoint"], config["username"], config["password"], auth=config.get("auth", "session"),
                 validate_certs=True, ca_path=config.get("ca_path") or None, timeout=float(config.get("timeout", 10)),
                 retries=1)
    try:
        with bmc:
            uri, system, _etag = bmc.find_system(config.get("system_id"))
            sequence, _target = plan_power(config["reset"], system.get("PowerState"), bmc.allowed_resets(system))
            for reset_type in sequence:
                bmc.reset(system, reset_type, uri)
                if reset_type != sequence[-1]:
                    uri, system, _etag = bmc.get_system(uri)
    except (RedfishError, RestError) as exc:
        raise RebootError("BMC %s: %s" % (config["endpoint"], exc)) from None
    return sequence


def main(argv=None, client=Redfish, err=sys.stderr):
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
        err.write("msa-hpc-reboot: asking %s for %s of %s\n"
                  % (config["endpoint"], config["reset"], os.uname().nodename))
        err.flush()
        sent = reboot(config, client)
    except RebootError as exc:
        err.write("msa-hpc-reboot: %s\n" % exc)
        return 1
    err.write("msa-hpc-reboot: sent %s\n" % (", ".join(sent) or "nothing"))
    return 0
