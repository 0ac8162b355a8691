# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

"""Run BMCs in-process on 127.0.0.1 with ephemeral ports and the file backend (for tests and demos)."""

import json
import os

from msa_sim.bmc import auth, config
from msa_sim.bmc.api import BmcService

FAST_ITERATIONS = 2000  # tests only; the CLI's hash-password defaults to auth.DEFAULT_ITERATIONS


def make_config(directory, bmcs, users, graceful_delay=0.0, **service):
    """A validated configuration: ``users`` maps user name to (password, role)."""
    accounts = [{"username": name, "password_hash": auth.hash_password(password, iterations=FAST_ITERATIONS),
                 "role": role} for name, (password, role) in users.items()]
    data = {"database": os.path.join(directory, "bmc.sqlite"),
            "backend": {"type": "file", "state_file": os.path.join(directory, "power.json"),
                        "graceful_delay": graceful_delay},
            "defaults": {"address": "127.0.0.1", "port": 0, "users": accounts},
            "bmcs": bmcs}
    data.update(service)
    path = os.path.join(directory, "bmcs.json")
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(data, handle, indent=1)
    return config.load(path)


def start(directory, bmcs, users, graceful_delay=0.0, log=None):
    return BmcService(make_config(directory, bmcs, users, graceful_delay), log=log).start()
