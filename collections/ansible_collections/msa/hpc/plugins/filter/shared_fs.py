# SPDX-License-Identifier: GPL-3.0-or-later
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

"""Filters msa.hpc.shared_fs_entries (the systemd mount units of one node for the site's shared file systems) and
msa.hpc.shared_fs_clients (the client package of every mount's file system)."""

from ansible.errors import AnsibleFilterError

from ansible_collections.msa.hpc.plugins.module_utils._shared_fs import SharedFsError, clients, entries


def shared_fs_entries(host, mounts, filesystems, groups, hostvars, fabric="storage", automount=True,
                      mount_timeout=90, beegfs_config_dir="/etc/beegfs"):
    """``host``'s mounts (module_utils/_shared_fs.entries); ``groups`` maps each host to its group names."""
    try:
        return entries(host, mounts, filesystems, groups, hostvars, fabric=fabric, automount=automount,
                       mount_timeout=mount_timeout, beegfs_config_dir=beegfs_config_dir)
    except SharedFsError as exc:
        raise AnsibleFilterError("msa.hpc.shared_fs_entries: %s" % exc)


def shared_fs_clients(mounts, filesystems):
    """The client package of every mount's file system and the mount points it serves (_shared_fs.clients)."""
    try:
        return clients(mounts, filesystems)
    except SharedFsError as exc:
        raise AnsibleFilterError("msa.hpc.shared_fs_clients: %s" % exc)


class FilterModule:
    """Shared file system mounts."""

    def filters(self):
        return {"shared_fs_entries": shared_fs_entries, "shared_fs_clients": shared_fs_clients}
