# SPDX-License-Identifier: GPL-3.0-or-later
"""Slurm: the job model, its scripts, the CLI and REST transports, and the one reader of each Slurm record (jobs,
licences and reservations, nodes) that modules, filters and the on-node programs share."""
