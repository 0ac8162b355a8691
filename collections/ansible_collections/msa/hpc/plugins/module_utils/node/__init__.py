# SPDX-License-Identifier: GPL-3.0-or-later
"""Programs Slurm or systemd runs on nodes and controllers, installed whole by msa.hpc.hook_runtime; no Ansible."""
