# SPDX-License-Identifier: GPL-3.0-or-later
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

"""Filters msa.hpc.hostlist_compress and msa.hpc.hostlist_expand (Slurm hostlist expressions)."""

from ansible.errors import AnsibleFilterError

from ansible_collections.msa.hpc.plugins.module_utils._hostlist import HostlistError, compress, expand


def hostlist_compress(names):
    """Compress host names (a list or an expression) into a Slurm hostlist such as ``cm[01-04,07],esb01``."""
    try:
        return compress(names if names is not None else [])
    except HostlistError as exc:
        raise AnsibleFilterError("msa.hpc.hostlist_compress: %s" % exc)


def hostlist_expand(expression):
    """Expand a Slurm hostlist expression (or a list of them) into the list of host names."""
    try:
        return expand(expression)
    except HostlistError as exc:
        raise AnsibleFilterError("msa.hpc.hostlist_expand: %s" % exc)


class FilterModule:
    """Slurm hostlist filters."""

    def filters(self):
        return {"hostlist_compress": hostlist_compress, "hostlist_expand": hostlist_expand}
