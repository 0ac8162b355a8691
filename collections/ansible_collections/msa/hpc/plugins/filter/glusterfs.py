# SPDX-License-Identifier: GPL-3.0-or-later
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

"""Filters msa.hpc.glusterfs_volume_info, msa.hpc.glusterfs_options_to_set and msa.hpc.glusterfs_quota_report
(GlusterFS's XML answers, read by the role msa.hpc.glusterfs_server)."""

from ansible.errors import AnsibleFilterError

from ansible_collections.msa.hpc.plugins.module_utils import _glusterfs as G


def glusterfs_volume_info(text):
    """``gluster volume info --xml`` as {name: {status, type, replica, arbiter, bricks, options}}."""
    try:
        return G.volume_info(text)
    except G.GlusterOutputError as exc:
        raise AnsibleFilterError("msa.hpc.glusterfs_volume_info: %s" % exc)


def glusterfs_options_to_set(current, desired):
    """The options of ``desired`` that differ from ``current``."""
    if not isinstance(current, dict) or not isinstance(desired, dict):
        raise AnsibleFilterError("msa.hpc.glusterfs_options_to_set: both arguments must be mappings")
    return G.options_to_set(current, desired)


def glusterfs_quota_report(text, volume):
    """``gluster volume quota <volume> list --xml`` as a usage report per user directory."""
    try:
        return G.usage_report(volume, G.quota_list(text))
    except G.GlusterOutputError as exc:
        raise AnsibleFilterError("msa.hpc.glusterfs_quota_report: %s" % exc)


def glusterfs_report_lines(report):
    """A usage report (msa.hpc.glusterfs_quota_report) as aligned text lines."""
    return G.report_lines(report)


class FilterModule:
    """GlusterFS answers."""

    def filters(self):
        return {"glusterfs_volume_info": glusterfs_volume_info, "glusterfs_options_to_set": glusterfs_options_to_set,
                "glusterfs_quota_report": glusterfs_quota_report, "glusterfs_report_lines": glusterfs_report_lines}
