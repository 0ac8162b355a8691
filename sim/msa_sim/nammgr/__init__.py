# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

"""Stand-in NAM/GCE manager: one REST service on the fabri3 management CPU for all NAM and GCE boards."""
