# SPDX-License-Identifier: GPL-3.0-or-later
"""Launch the DMTF Redfish-Service-Validator with certificate verification against a CA bundle.

The validator (3.1.8) builds its client without a CA file, and the DMTF ``redfish`` library then sends every
request with ``verify=False`` (an explicit False: REQUESTS_CA_BUNDLE alone changes nothing, a wrong CA there
still connects); this launcher passes ``--ca-bundle`` on as the client's ``cafile`` (rucc_verified.launch).
Usage: python rsv_verified.py --ca-bundle CA.pem --rhost https://127.0.0.1:PORT -u USER -p PASS
       --schema_directory CSDL --skipschema --logdir DIR
"""
from __future__ import annotations

import sys

from redfish_service_validator import console_scripts
from rucc_verified import launch

if __name__ == "__main__":
    launch(sys.argv[1:], "rf_service_validator", console_scripts.main)
