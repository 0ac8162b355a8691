# SPDX-License-Identifier: GPL-3.0-or-later
"""Launch the DMTF Redfish-Service-Validator with certificate verification against a CA bundle.

The validator (3.1.8) builds its client without a CA file, and the DMTF ``redfish`` library then sends every
request with ``verify=False`` (an explicit False: REQUESTS_CA_BUNDLE alone changes nothing); this launcher
passes ``--ca-bundle`` on as the client's ``cafile``, as rucc_verified.py does for the use case checkers.
Usage: python rsv_verified.py --ca-bundle CA.pem --rhost https://127.0.0.1:PORT -u USER -p PASS
       --schema_directory CSDL --skipschema --logdir DIR
"""
from __future__ import annotations

import functools
import sys

import redfish
from redfish_service_validator import console_scripts


def main(argv):
    argv = list(argv)
    if "--ca-bundle" not in argv:
        sys.exit("rsv_verified: --ca-bundle is required (the validator must verify the BMC's certificate)")
    at = argv.index("--ca-bundle")
    cafile = argv[at + 1]
    del argv[at:at + 2]
    redfish.redfish_client = functools.partial(redfish.redfish_client, cafile=cafile)
    sys.argv = ["rf_service_validator"] + argv
    console_scripts.main()


if __name__ == "__main__":
    main(sys.argv[1:])
