# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

"""DCDB stand-in (seed 004 §6): Pusher with plugins, Collect Agent with store, Grafana SimpleJSON API and operators."""
