# SPDX-License-Identifier: GPL-3.0-or-later
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

"""Unit-test set-up shared by pytest and ansible-test units: the bundle's stand-in services (msa_sim) on sys.path."""

import pathlib
import sys


def _bundle_sim_dir():
    """The bundle's ``sim`` directory (holding ``msa_sim``) above this collection, or None outside the bundle."""
    for parent in pathlib.Path(__file__).resolve().parents:
        if (parent / "sim" / "msa_sim" / "__init__.py").is_file():
            return str(parent / "sim")
    return None


# ansible-test units sets PYTHONPATH itself (the collection root and ansible), so pytest.ini's pythonpath does not
# apply there; tests that start a stand-in service (EMP, NAM manager) import msa_sim from the bundle's sim/.
SIM_DIR = _bundle_sim_dir()
if SIM_DIR and SIM_DIR not in sys.path:
    sys.path.append(SIM_DIR)
