# SPDX-License-Identifier: GPL-3.0-or-later
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The descriptions of the attributes every msa.hpc module declares (check mode, diff mode, platform: every module
runs on the control host or a POSIX node); a module states only its support and details of check and diff mode."""
from __future__ import annotations


class ModuleDocFragment(object):
    DOCUMENTATION = r"""
options: {}
attributes:
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying target.
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check_mode), when in diff mode.
  # every module runs on the control host or a POSIX node
  platform:
    description: Target OS/families that can be operated against.
    platforms: posix
    support: full
"""
