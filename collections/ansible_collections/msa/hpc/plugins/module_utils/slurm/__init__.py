# SPDX-License-Identifier: GPL-3.0-or-later
"""Slurm from the controller: the job model, its scripts, the job records, and the CLI and REST transports."""
