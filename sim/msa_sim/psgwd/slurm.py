# SPDX-License-Identifier: GPL-3.0-or-later
"""Alias of the collection's gateway hooks for the stand-in's users: ``python3 -m msa_sim.psgwd.slurm prolog``.

The hooks themselves live in the collection (module_utils/node/gw_hooks.py) and the role msa.hpc.gateway installs
them as ``msa-gw-hook``; nothing the roles install runs this alias.
"""
from __future__ import annotations

import sys

from ansible_collections.msa.hpc.plugins.module_utils.node.gw_hooks import (  # noqa: F401 - the alias's API
    REQUEUE, RESERVATION, PrologError, health, main, prolog, epilog)

if __name__ == "__main__":
    sys.exit(main(prog="python3 -m msa_sim.psgwd.slurm"))
