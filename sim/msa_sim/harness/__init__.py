# SPDX-License-Identifier: GPL-3.0-or-later
"""Host-side helpers of the simulation harness (run on the machine that runs the node containers)."""
from __future__ import annotations
