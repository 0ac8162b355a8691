# SPDX-License-Identifier: GPL-3.0-or-later
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

"""Filter msa.hpc.slurm_nodes: Slurm's node records in one form, whatever the release's JSON layout."""

from ansible.errors import AnsibleFilterError

from ansible_collections.msa.hpc.plugins.module_utils.slurm.nodes import NodeRecordError, records


def slurm_nodes(text, what="scontrol show nodes --json"):
    """The nodes of ``scontrol show nodes --json`` or ``sinfo --json`` (any supported release), normalized."""
    try:
        return records(str(text), what)
    except NodeRecordError as exc:
        raise AnsibleFilterError("msa.hpc.slurm_nodes: %s" % exc)


class FilterModule:
    """Slurm node record filters."""

    def filters(self):
        return {"slurm_nodes": slurm_nodes}
