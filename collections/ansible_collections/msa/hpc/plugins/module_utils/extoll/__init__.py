# SPDX-License-Identifier: GPL-3.0-or-later
"""The EXTOLL fabric library, internal to msa.hpc: .td model, routing engines, deadlock proof, plans, EMP client."""
