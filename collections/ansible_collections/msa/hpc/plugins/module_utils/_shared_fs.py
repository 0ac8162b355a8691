# SPDX-License-Identifier: GPL-3.0-or-later
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The site's shared file systems as the systemd mount units of one node (role msa.hpc.shared_fs, filter
msa.hpc.shared_fs_entries): the system layer's mounts (path, purpose, file system, groups) joined with the site
layer's file systems (type, servers, volume, options), validated field by field because root writes them."""
from __future__ import annotations

import ipaddress
import posixpath
import re

TYPES = ("glusterfs", "nfs", "beegfs", "lustre")
PURPOSES = ("home", "scratch", "software", "state")
# The Debian package that carries each type's client, and the mount helper it installs.
PACKAGES = {"glusterfs": "glusterfs-client", "nfs": "nfs-common", "beegfs": "beegfs-client", "lustre": "lustre-client-utils"}
FSTYPES = {"glusterfs": "glusterfs", "nfs": "nfs4", "beegfs": "beegfs", "lustre": "lustre"}
# The type /proc/self/mountinfo shows once mounted (a FUSE client's is fuse.<name>).
MOUNTED_TYPES = {"glusterfs": "fuse.glusterfs", "nfs": "nfs4", "beegfs": "beegfs", "lustre": "lustre"}
# What each type mounts by default (the purpose adds its own, the file system and the mount add theirs after).
TYPE_OPTIONS = {
    "glusterfs": ["log-level=WARNING"],
    "nfs": ["vers=4.2", "proto=tcp", "hard", "timeo=600", "retrans=2"],
    "beegfs": [],
    "lustre": ["flock"],
}
PURPOSE_OPTIONS = {"home": [], "scratch": ["noatime"], "software": [], "state": []}
# The mode of the file system's root the role sets once it is mounted (a mount's own mode replaces it): scratch is
# every user's to make their directory in, sticky so none removes another's; the others are root's.
PURPOSE_MODES = {"home": "0755", "scratch": "1777", "software": "0755", "state": "0700"}
_MODE = re.compile(r"^0?[0-7]{3,4}$")
_OPTION = re.compile(r"^[A-Za-z0-9_.:=/@+-]+$")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_UNIT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9:_.@-]*\.(service|socket|timer|target)$")
_HOST = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?$")


class SharedFsError(ValueError):
    """A mount or a file system the inventory describes in a way root must not write; says which field and value."""


def _path(value, field):
    if not isinstance(value, str) or not value.startswith("/") or any(c.isspace() or c in "#,\\" for c in value):
        raise SharedFsError("%s: %r is not an absolute path without blanks, commas or '#'" % (field, value))
    if posixpath.normpath(value) != value or value == "/":
        raise SharedFsError("%s: %r is not a normalised path below / (write %r)"
                            % (field, value, posixpath.normpath(value)))
    return value


def _options(values, field):
    if values is None:
        return []
    if isinstance(values, str) or not isinstance(values, list):
        raise SharedFsError("%s: %r is not a list of mount options" % (field, values))
    for value in values:
        if not isinstance(value, str) or not _OPTION.match(value):
            raise SharedFsError("%s: %r is not a mount option (letters, digits and _.:=/@+- only, one per item)"
                                % (field, value))
    return list(values)


def server_address(server, fabric, hostvars, field):
    """The address of ``server`` on ``fabric`` when it is a host of the inventory, else ``server`` itself when it is
    a host name or an IP address (a server outside the inventory)."""
    if not isinstance(server, str) or not server:
        raise SharedFsError("%s: %r is not a server name" % (field, server))
    if server in hostvars:
        addresses = hostvars[server].get("msa_addresses") or {}
        if fabric not in addresses:
            raise SharedFsError("%s: server %s has no address on fabric %r (it has %s)"
                                % (field, server, fabric, ", ".join(sorted(addresses)) or "none"))
        return str(addresses[fabric])
    try:
        ipaddress.ip_address(server)
        return server
    except ValueError:
        pass
    if not _HOST.match(server):
        raise SharedFsError("%s: %r is neither an inventory host, a host name nor an IP address" % (field, server))
    return server


def _source(kind, addresses, volume, subdir, lnet, field):
    """The source (What=) and the options the type needs to reach every server."""
    extra = []
    if kind == "glusterfs":
        source = "%s:/%s" % (addresses[0], volume)
        if len(addresses) > 1:
            extra.append("backup-volfile-servers=" + ":".join(addresses[1:]))
    elif kind == "nfs":
        if len(addresses) != 1:
            raise SharedFsError("%s.servers: NFS mounts from one server (a site's HA NFS has one floating address), "
                                "got %d: %s" % (field, len(addresses), ", ".join(addresses)))
        source = "%s:%s" % (addresses[0], volume if volume.startswith("/") else "/" + volume)
    elif kind == "lustre":
        # the MGS and its failover partners, each as a NID on the LNet network
        source = "%s:/%s" % (":".join("%s@%s" % (a, lnet) for a in addresses), volume)
    else:  # beegfs: the management host is in the client's configuration file (cfgFile=), not in the source
        if subdir:
            raise SharedFsError("%s: BeeGFS mounts the whole file system; subdir %r is not supported" % (field, subdir))
        return "beegfs_nodev", extra
    if subdir:
        source += "/" + subdir.strip("/")
    return source, extra


def unit_name(path):
    """systemd's name for ``path`` without the suffix (``systemd-escape --path``): /home/a-b -> home-a\\x2db."""
    out = []
    for i, char in enumerate(path.strip("/")):
        if char == "/":
            out.append("-")
        elif char.isascii() and (char.isalnum() or char in ":_" or (char == "." and i > 0)):
            out.append(char)
        else:
            out.extend("\\x%02x" % b for b in char.encode("utf-8"))
    return "".join(out)


def entries(host, mounts, filesystems, groups, hostvars, fabric="storage", automount=True, mount_timeout=90,
            beegfs_config_dir="/etc/beegfs"):
    """The mounts of ``host``: one dict per mount of a group it is in, each with ``path``, ``src`` (What=),
    ``fstype``, ``mounted_type`` (as /proc/self/mountinfo shows it), ``opts`` (the option string), ``mode`` (of the
    mounted root, four octal digits), ``unit`` (the .mount unit's name), ``automount`` (the .automount's, or
    empty), ``timeout``, ``requires`` (units it needs), ``type``, ``filesystem``, ``purpose``, ``servers``
    (addresses), ``package``, ``keep_files`` (copy what the mount point holds onto the file system before its first
    mount there; default for a service's ``state``), ``stop_units`` (stopped before that copy) and, for BeeGFS,
    ``beegfs_config`` and ``beegfs_mgmtd``. Raises SharedFsError naming the field."""
    if not isinstance(mounts, list):
        raise SharedFsError("shared_fs_mounts: %r is not a list" % (mounts,))
    if not isinstance(filesystems, dict):
        raise SharedFsError("shared_fs_filesystems: %r is not a mapping of names to file systems" % (filesystems,))
    if isinstance(mount_timeout, bool) or not isinstance(mount_timeout, int) or not 1 <= mount_timeout <= 600:
        raise SharedFsError("shared_fs_mount_timeout: %r is not a number of seconds from 1 to 600" % (mount_timeout,))
    out, seen = [], {}
    for index, mount in enumerate(mounts):
        field = "shared_fs_mounts[%d]" % index
        if not isinstance(mount, dict):
            raise SharedFsError("%s: %r is not a mapping" % (field, mount))
        path = _path(mount.get("path"), field + ".path")
        if path in seen:
            raise SharedFsError("%s.path: %s is mounted twice (also shared_fs_mounts[%d])" % (field, path, seen[path]))
        seen[path] = index
        member_of = mount.get("groups")
        if not isinstance(member_of, list) or not all(isinstance(g, str) for g in member_of):
            raise SharedFsError("%s.groups: %r is not a list of inventory groups" % (field, member_of))
        name = mount.get("filesystem")
        if name not in filesystems:
            raise SharedFsError("%s.filesystem: %r is not one of shared_fs_filesystems (%s)"
                                % (field, name, ", ".join(sorted(filesystems)) or "none defined"))
        purpose = mount.get("purpose", "home")
        if purpose not in PURPOSES:
            raise SharedFsError("%s.purpose: %r is not one of %s" % (field, purpose, ", ".join(PURPOSES)))
        mode = mount.get("mode") or PURPOSE_MODES[purpose]
        if not isinstance(mode, str) or not _MODE.match(mode):
            raise SharedFsError("%s.mode: %r is not an octal mode in quotes such as '0755' or '1777'" % (field, mode))
        own_automount = mount.get("automount", automount)
        if not isinstance(own_automount, bool):
            raise SharedFsError("%s.automount: %r is not true or false" % (field, own_automount))
        keep = mount.get("keep_files", purpose == "state")
        if not isinstance(keep, bool):
            raise SharedFsError("%s.keep_files: %r is not true or false" % (field, keep))
        stop = mount.get("stop_units", [])
        if not isinstance(stop, list) or not all(isinstance(u, str) and _UNIT.match(u) for u in stop):
            raise SharedFsError("%s.stop_units: %r is not a list of systemd unit names (such as slurmctld.service)"
                                % (field, stop))
        subdir = mount.get("subdir") or ""
        if subdir and (not isinstance(subdir, str) or not all(_NAME.match(p) for p in subdir.strip("/").split("/"))):
            raise SharedFsError("%s.subdir: %r is not a relative path of plain names" % (field, subdir))
        fs = filesystems[name]
        fs_field = "shared_fs_filesystems.%s" % name
        if not isinstance(fs, dict):
            raise SharedFsError("%s: %r is not a mapping" % (fs_field, fs))
        kind = fs.get("type")
        if kind not in TYPES:
            raise SharedFsError("%s.type: %r is not one of %s" % (fs_field, kind, ", ".join(TYPES)))
        servers = fs.get("servers")
        if not isinstance(servers, list) or not servers:
            raise SharedFsError("%s.servers: %r is not a non-empty list of servers" % (fs_field, servers))
        server_fabric = fs.get("fabric", fabric)
        addresses = [server_address(s, server_fabric, hostvars, "%s.servers[%d]" % (fs_field, i))
                     for i, s in enumerate(servers)]
        volume = fs.get("volume", name)
        if not isinstance(volume, str) or not all(_NAME.match(p) for p in volume.strip("/").split("/")):
            raise SharedFsError("%s.volume: %r is not a volume, export or file system name" % (fs_field, volume))
        lnet = fs.get("lnet", "tcp")
        if not isinstance(lnet, str) or not _NAME.match(lnet):
            raise SharedFsError("%s.lnet: %r is not an LNet network name" % (fs_field, lnet))
        fs_options = _options(fs.get("options"), fs_field + ".options")
        mount_options = _options(mount.get("options"), field + ".options")
        if not set(member_of) & set(groups.get(host, [])):
            continue
        source, extra = _source(kind, addresses, volume, subdir, lnet, fs_field)
        options = ["ro" if mount.get("readonly") else "rw", "_netdev"]
        unit = unit_name(path)
        entry = {"path": path, "fstype": FSTYPES[kind], "mounted_type": MOUNTED_TYPES[kind], "type": kind, "filesystem": name, "purpose": purpose,
                 "mode": mode.zfill(4),
                 "servers": addresses, "package": PACKAGES[kind], "unit": unit + ".mount",
                 "automount": unit + ".automount" if own_automount else "", "timeout": mount_timeout, "requires": [],
                 "keep_files": keep, "stop_units": list(stop)}
        if kind == "beegfs":
            entry["beegfs_config"] = "%s/%s-client.conf" % (beegfs_config_dir, name)
            entry["beegfs_mgmtd"] = addresses[0]
            extra.append("cfgFile=" + entry["beegfs_config"])
            entry["requires"].append("beegfs-helperd.service")
        options += TYPE_OPTIONS[kind] + PURPOSE_OPTIONS[purpose] + extra + fs_options + mount_options
        entry["src"] = source
        entry["opts"] = ",".join(_dedupe(options))
        out.append(entry)
    return out


def _dedupe(options):
    """Options in order, a later ``key=value`` replacing an earlier one of the same key (the site's and the mount's
    options override the defaults) and a repeated flag kept once."""
    keyed = {}
    for option in options:
        keyed.pop(option.split("=", 1)[0], None)
        keyed[option.split("=", 1)[0]] = option
    if "ro" in keyed and "rw" in keyed:  # the later of the two wins
        first = [o for o in options if o in ("ro", "rw")][-1]
        keyed.pop("rw" if first == "ro" else "ro")
    return list(keyed.values())


def clients(mounts, filesystems):
    """The client package of every file system ``mounts`` name (every mount of the inventory, whichever node mounts
    it: what a node image holds), as {package: [mount points]} in the order of the mounts; each mount's file system
    and its type are checked, the error naming the field."""
    if not isinstance(mounts, list):
        raise SharedFsError("shared_fs_mounts: %r is not a list" % (mounts,))
    if not isinstance(filesystems, dict):
        raise SharedFsError("shared_fs_filesystems: %r is not a mapping of names to file systems" % (filesystems,))
    out = {}
    for index, mount in enumerate(mounts):
        name = mount.get("filesystem") if isinstance(mount, dict) else None
        if name not in filesystems:
            raise SharedFsError("shared_fs_mounts[%d].filesystem: %r is not one of shared_fs_filesystems (%s)"
                                % (index, name, ", ".join(sorted(filesystems)) or "none defined"))
        kind = filesystems[name].get("type") if isinstance(filesystems[name], dict) else None
        if kind not in TYPES:
            raise SharedFsError("shared_fs_filesystems.%s.type: %r is not one of %s" % (name, kind, ", ".join(TYPES)))
        out.setdefault(PACKAGES[kind], []).append(mount.get("path"))
    return out
