# SPDX-License-Identifier: GPL-3.0-or-later
"""Launch the DMTF Redfish-Protocol-Validator with SSDP discovery disabled (it multicasts off the machine).

Usage: python rpv_offline.py --rhost https://127.0.0.1:PORT -u USER -p PASS --ca-bundle CA.pem --report-dir DIR
Without --ca-bundle the launcher refuses to run: certificates are always verified.
"""
from __future__ import annotations

import os
import sys

from redfish_protocol_validator import console_scripts, utils


def no_ssdp(*_args, **_kwargs):
    """Discovery answers nothing: no M-SEARCH ever leaves this host."""
    return {}


def main(argv):
    if "--ca-bundle" not in argv:
        sys.exit("rpv_offline: --ca-bundle is required (the validator must verify the BMC's certificate)")
    if "--no-cert-check" in argv:
        sys.exit("rpv_offline: --no-cert-check is refused")
    utils.discover_ssdp = no_ssdp
    # the validator's logged-in requests.Session is created without `verify` (1.3.2): requests then falls back
    # to REQUESTS_CA_BUNDLE, so point that at the same CA (verification stays on)
    os.environ["REQUESTS_CA_BUNDLE"] = argv[argv.index("--ca-bundle") + 1]
    sys.argv = ["rf_protocol_validator"] + list(argv)
    console_scripts.main()


if __name__ == "__main__":
    main(sys.argv[1:])
