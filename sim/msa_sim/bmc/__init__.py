# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

"""Stand-in Redfish BMCs: one process serves one DMTF-schema BMC per simulated node (power, boot, sessions)."""
