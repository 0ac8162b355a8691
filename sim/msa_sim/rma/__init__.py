# SPDX-License-Identifier: GPL-3.0-or-later
"""The data path of the NAM and GCE boards: their memory and their reduction engine, on the boards' EXTOLL address."""
