# SPDX-License-Identifier: GPL-3.0-or-later
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

"""Filter msa.hpc.shared_fs_entries: the systemd mount units of one node for the site's shared file systems."""

from ansible.errors import AnsibleFilterError

from ansible_collections.msa.hpc.plugins.module_utils._shared_fs import SharedFsError, entries


def shared_fs_entries(host, mounts, filesystems, groups, hostvars, fabric="storage", automount=True,
                      mount_timeout=90, beegfs_config_dir="/etc/beegfs"):
    """``host``'s mounts (module_utils/_shared_fs.entries); ``groups`` maps each host to its group names."""
    try:
        return entries(host, mounts, filesystems, groups, hostvars, fabric=fabric, automount=automount,
                       mount_timeout=mount_timeout, beegfs_config_dir=beegfs_config_dir)
    except SharedFsError as exc:
        raise AnsibleFilterError("msa.hpc.shared_fs_entries: %s" % exc)


class FilterModule:
    """Shared file system mounts."""

    def filters(self):
        return {"shared_fs_entries": shared_fs_entries}
