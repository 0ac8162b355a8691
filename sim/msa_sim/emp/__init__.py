# SPDX-License-Identifier: GPL-3.0-or-later
"""Stand-in EXTOLL Management Program (EMP): master daemon, slave agents, emp-ctrl CLI (seed 004 §2.1)."""
from __future__ import annotations
