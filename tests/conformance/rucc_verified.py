# SPDX-License-Identifier: GPL-3.0-or-later
"""Launch the DMTF Redfish-Use-Case-Checkers with certificate verification against a CA bundle.

The checkers (2.1.1) build their client without a CA file, and the DMTF ``redfish`` library then sends every
request with ``verify=False``; this launcher passes ``--ca-bundle`` on as the client's ``cafile``.
Usage: python rucc_verified.py --ca-bundle CA.pem --rhost https://127.0.0.1:PORT -u USER -p PASS --report-dir DIR
"""
from __future__ import annotations

import functools
import sys

import redfish


def launch(argv, name, console_main):
    """Run a DMTF tool's ``console_main`` as ``name`` with every ``redfish`` client it makes given the CA of
    ``--ca-bundle`` (taken out of ``argv``); without that option nothing runs."""
    argv = list(argv)
    if "--ca-bundle" not in argv:
        sys.exit("%s: --ca-bundle is required (the tool must verify the BMC's certificate)" % name)
    at = argv.index("--ca-bundle")
    cafile = argv[at + 1]
    del argv[at:at + 2]
    redfish.redfish_client = functools.partial(redfish.redfish_client, cafile=cafile)
    sys.argv = [name] + argv
    console_main()


def main(argv):
    from redfish_use_case_checkers import console_scripts
    launch(argv, "rf_use_case_checkers", console_scripts.main)


if __name__ == "__main__":
    main(sys.argv[1:])
