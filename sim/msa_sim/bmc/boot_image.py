# SPDX-License-Identifier: GPL-3.0-or-later
"""The simulation's HTTP boot: Boot.HttpBootUri names a local node image, checked against the BMC's allow-list."""
from __future__ import annotations

import re

from msa_sim.bmc import resource as R
from msa_sim.bmc.resource import Fail

# HttpBootUri (ComputerSystem v1_9_0) is a URI; a local node image is named the way the containers-image transports
# (skopeo, podman) name it: containers-storage:<reference>.
BOOT_IMAGE_SCHEME = "containers-storage:"


def boot_image(uri, pattern):
    """The image reference ``uri`` names (``containers-storage:<reference>``), the reference matched whole by
    ``pattern`` (the BMC's boot_image_pattern); a 400 naming Boot/HttpBootUri and the value otherwise."""
    if not isinstance(uri, str):
        raise R.type_error(uri, "Boot/HttpBootUri")
    reference = uri[len(BOOT_IMAGE_SCHEME):] if uri.startswith(BOOT_IMAGE_SCHEME) else None
    if reference is None or not re.fullmatch(pattern, reference):
        raise Fail(400, "PropertyValueFormatError", "The value '%s' for the property Boot/HttpBootUri is not an "
                   "allowed boot image: it must be %s<reference> with a reference matching %s."
                   % (uri[:200], BOOT_IMAGE_SCHEME, pattern),
                   "Correct the value for the property in the request body and resubmit the request if the "
                   "operation failed.", args=[uri[:200], "Boot/HttpBootUri"])
    return reference
