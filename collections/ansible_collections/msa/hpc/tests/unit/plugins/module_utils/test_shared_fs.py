# SPDX-License-Identifier: GPL-3.0-or-later
"""The shared file systems' mount units: what each type mounts, from which servers, with which options, for which
nodes; and every value root would write checked, the error naming the field."""
from __future__ import annotations

import pathlib

import jinja2
import pytest

from ansible_collections.msa.hpc.plugins.module_utils import _shared_fs as S

ROLE = pathlib.Path(__file__).parents[4] / "roles/shared_fs"
HOSTVARS = {"sssm01": {"msa_addresses": {"mgmt": "10.42.0.120", "storage": "10.45.0.120"}},
            "sssm02": {"msa_addresses": {"mgmt": "10.42.0.121", "storage": "10.45.0.121"}},
            "cm01": {"msa_addresses": {"mgmt": "10.42.0.20", "ib": "10.43.0.20"}}}
GROUPS = {"cm01": ["cm", "msa_compute"], "esb01": ["esb", "msa_compute"], "mgmt01": ["mgmt"]}
MOUNTS = [{"path": "/home", "filesystem": "home", "purpose": "home", "groups": ["cm", "esb", "mgmt"]},
          {"path": "/scratch", "filesystem": "scratch", "purpose": "scratch", "groups": ["cm", "esb"]}]


def only(host, filesystems, mounts=None, **kw):
    mounts = MOUNTS if mounts is None else mounts
    return {e["path"]: e for e in S.entries(host, mounts, filesystems, GROUPS, HOSTVARS, **kw)}


def test_glusterfs_mounts_from_the_first_server_on_the_storage_fabric_with_the_other_as_backup():
    fs = {"home": {"type": "glusterfs", "servers": ["sssm01", "sssm02"]},
          "scratch": {"type": "glusterfs", "servers": ["sssm01", "sssm02"], "volume": "scratch1"}}
    got = only("cm01", fs)
    assert got["/home"]["src"] == "10.45.0.120:/home" and got["/home"]["fstype"] == "glusterfs"
    assert got["/home"]["mounted_type"] == "fuse.glusterfs"
    assert got["/home"]["opts"] == "rw,_netdev,log-level=WARNING,backup-volfile-servers=10.45.0.121"
    assert got["/scratch"]["src"] == "10.45.0.120:/scratch1"
    assert got["/scratch"]["opts"] == "rw,_netdev,log-level=WARNING,noatime,backup-volfile-servers=10.45.0.121"
    assert (got["/home"]["unit"], got["/home"]["automount"], got["/home"]["package"]) == (
        "home.mount", "home.automount", "glusterfs-client")
    assert list(only("mgmt01", fs)) == ["/home"]          # mgmt mounts home only
    assert only("esb01", fs, automount=False)["/home"]["automount"] == ""


def test_a_mount_may_choose_boot_or_first_access_itself_and_a_non_boolean_is_refused():
    fs = {"home": {"type": "glusterfs", "servers": ["sssm01"]}, "scratch": {"type": "glusterfs", "servers": ["sssm01"]}}
    mounts = [dict(MOUNTS[0], automount=False), dict(MOUNTS[1], automount=True)]
    got = only("cm01", fs, mounts=mounts, automount=True)
    assert (got["/home"]["automount"], got["/scratch"]["automount"]) == ("", "scratch.automount")
    assert only("cm01", fs, mounts=mounts, automount=False)["/scratch"]["automount"] == "scratch.automount"
    with pytest.raises(S.SharedFsError, match=r"shared_fs_mounts\[0\].automount: 'no' is not true or false"):
        only("cm01", fs, mounts=[dict(MOUNTS[0], automount="no")])


def test_nfs_mounts_one_export_over_nfs4_hard_with_the_sites_options_last():
    fs = {"home": {"type": "nfs", "servers": ["nas.example.org"], "volume": "/export/home",
                   "options": ["timeo=300", "nosuid"]}}
    got = only("cm01", fs, mounts=MOUNTS[:1])["/home"]
    assert (got["src"], got["fstype"], got["package"]) == ("nas.example.org:/export/home", "nfs4", "nfs-common")
    assert got["opts"] == "rw,_netdev,vers=4.2,proto=tcp,hard,retrans=2,timeo=300,nosuid"
    with pytest.raises(S.SharedFsError, match=r"shared_fs_filesystems.home.servers: NFS mounts from one server"):
        only("cm01", {"home": dict(fs["home"], servers=["a", "b"])}, mounts=MOUNTS[:1])


def test_lustre_lists_the_mgs_and_its_failover_as_nids_and_a_subdirectory():
    fs = {"scratch": {"type": "lustre", "servers": ["10.46.0.1", "10.46.0.2"], "volume": "lfs01", "lnet": "o2ib"}}
    mounts = [{"path": "/scratch", "filesystem": "scratch", "purpose": "scratch", "groups": ["cm"],
               "subdir": "projects"}]
    got = only("cm01", fs, mounts=mounts)["/scratch"]
    assert got["src"] == "10.46.0.1@o2ib:10.46.0.2@o2ib:/lfs01/projects"
    assert (got["fstype"], got["opts"]) == ("lustre", "rw,_netdev,flock,noatime")


def test_beegfs_names_its_management_host_in_a_client_file_and_needs_the_helper():
    fs = {"scratch": {"type": "beegfs", "servers": ["sssm01"]}}
    got = only("cm01", fs, mounts=MOUNTS[1:], beegfs_config_dir="/etc/beegfs")["/scratch"]
    assert (got["src"], got["fstype"], got["package"]) == ("beegfs_nodev", "beegfs", "beegfs-client")
    assert got["opts"] == "rw,_netdev,noatime,cfgFile=/etc/beegfs/scratch-client.conf"
    assert (got["beegfs_mgmtd"], got["requires"]) == ("10.45.0.120", ["beegfs-helperd.service"])
    with pytest.raises(S.SharedFsError, match="BeeGFS mounts the whole file system"):
        only("cm01", fs, mounts=[dict(MOUNTS[1], subdir="x")])


def test_a_mounts_own_options_override_and_readonly_is_ro():
    fs = {"home": {"type": "nfs", "servers": ["10.45.0.9"], "volume": "/home"}}
    mounts = [dict(MOUNTS[0], readonly=True, options=["vers=4.1", "rw"])]
    assert only("cm01", fs, mounts=mounts)["/home"]["opts"] == (
        "_netdev,proto=tcp,hard,timeo=600,retrans=2,vers=4.1,rw")
    mounts = [dict(MOUNTS[0], readonly=True)]
    assert only("cm01", fs, mounts=mounts)["/home"]["opts"].startswith("ro,_netdev,")


def test_the_mounted_root_gets_its_purposes_mode_or_the_mounts_own():
    fs = {"home": {"type": "glusterfs", "servers": ["sssm01"]}, "scratch": {"type": "glusterfs", "servers": ["sssm01"]}}
    got = only("cm01", fs)
    assert (got["/home"]["mode"], got["/scratch"]["mode"]) == ("0755", "1777")
    assert only("cm01", fs, mounts=[dict(MOUNTS[1], mode="770")])["/scratch"]["mode"] == "0770"


@pytest.mark.parametrize("mounts, filesystems, message", [
    ([dict(MOUNTS[0], path="home")], {"home": {"type": "nfs", "servers": ["n"]}}, r"shared_fs_mounts\[0\].path: 'home'"),
    ([dict(MOUNTS[0], path="/home/../etc")], {"home": {"type": "nfs", "servers": ["n"]}}, "not a normalised path"),
    ([dict(MOUNTS[0], path="/home x")], {"home": {"type": "nfs", "servers": ["n"]}}, "without blanks"),
    ([MOUNTS[0], MOUNTS[0]], {"home": {"type": "nfs", "servers": ["n"]}}, "/home is mounted twice"),
    ([dict(MOUNTS[0], filesystem="homes")], {"home": {"type": "nfs", "servers": ["n"]}},
     r"filesystem: 'homes' is not one of shared_fs_filesystems \(home\)"),
    ([dict(MOUNTS[0], purpose="temp")], {"home": {"type": "nfs", "servers": ["n"]}}, "purpose: 'temp' is not one of"),
    ([dict(MOUNTS[0], groups="cm")], {"home": {"type": "nfs", "servers": ["n"]}}, "groups: 'cm' is not a list"),
    ([MOUNTS[0]], {"home": {"type": "cephfs", "servers": ["n"]}}, "home.type: 'cephfs' is not one of glusterfs"),
    ([MOUNTS[0]], {"home": {"type": "nfs", "servers": []}}, "home.servers: .* not a non-empty list"),
    ([MOUNTS[0]], {"home": {"type": "nfs", "servers": ["cm01"]}},
     r"servers\[0\]: server cm01 has no address on fabric 'storage' \(it has ib, mgmt\)"),
    ([MOUNTS[0]], {"home": {"type": "nfs", "servers": ["n;reboot"]}}, "is neither an inventory host"),
    ([MOUNTS[0]], {"home": {"type": "nfs", "servers": ["n"], "options": ["rw,suid"]}},
     r"home.options: 'rw,suid' is not a mount option"),
    ([dict(MOUNTS[0], options=["x y"])], {"home": {"type": "nfs", "servers": ["n"]}}, r"mounts\[0\].options"),
    ([MOUNTS[0]], {"home": {"type": "glusterfs", "servers": ["n"], "volume": "../x"}}, "home.volume: '../x'"),
    ([dict(MOUNTS[0], subdir="a/../../b")], {"home": {"type": "nfs", "servers": ["n"]}}, "subdir: 'a/../../b'"),
    ([dict(MOUNTS[0], mode="u+rwx")], {"home": {"type": "nfs", "servers": ["n"]}}, r"mode: 'u\+rwx' is not an octal"),
    ([dict(MOUNTS[0], mode=1777)], {"home": {"type": "nfs", "servers": ["n"]}}, "mode: 1777 is not an octal mode in"),
])
def test_a_value_root_would_misuse_is_refused_naming_the_field(mounts, filesystems, message):
    with pytest.raises(S.SharedFsError, match=message):
        S.entries("cm01", mounts, filesystems, GROUPS, HOSTVARS)


def test_a_node_outside_every_group_mounts_nothing_but_its_inventory_is_still_checked():
    assert S.entries("gw01", MOUNTS, {"home": {"type": "nfs", "servers": ["n"]},
                                      "scratch": {"type": "nfs", "servers": ["n"]}}, GROUPS, HOSTVARS) == []
    with pytest.raises(S.SharedFsError, match="scratch.type"):
        S.entries("gw01", MOUNTS, {"home": {"type": "nfs", "servers": ["n"]}, "scratch": {"type": "x"}},
                  GROUPS, HOSTVARS)


@pytest.mark.parametrize("path, unit", [("/home", "home"), ("/home/a-b", "home-a\\x2db"), ("/srv/.x", "srv-.x"),
                                        ("/scratch/x.y", "scratch-x.y"), ("/data_1", "data_1"), ("/é", "\\xc3\\xa9")])
def test_unit_names_escape_as_systemd_escape_does(path, unit):
    assert S.unit_name(path) == unit


def render(template, item):
    env = jinja2.Environment(undefined=jinja2.StrictUndefined, trim_blocks=True, keep_trailing_newline=True)  # as Ansible
    env.filters["comment"] = lambda text: "# " + str(text)
    return env.from_string((ROLE / "templates" / template).read_text()).render(item=item, ansible_managed="managed")


def test_the_mount_unit_carries_source_type_options_and_timeout():
    item = only("cm01", {"home": {"type": "glusterfs", "servers": ["sssm01", "sssm02"]}}, mounts=MOUNTS[:1],
                mount_timeout=45)["/home"]
    unit = render("shared-fs.mount.j2", item)
    assert "\nWhat=10.45.0.120:/home\nWhere=/home\nType=glusterfs\n" in unit
    assert "\nOptions=rw,_netdev,log-level=WARNING,backup-volfile-servers=10.45.0.121\n" in unit
    assert "\nTimeoutSec=45\n" in unit and "[Install]" not in unit     # started by its automount
    automount = render("shared-fs.automount.j2", item)
    assert "\nWhere=/home\n" in automount and "\nWantedBy=remote-fs.target\n" in automount


def test_without_automount_the_mount_unit_is_wanted_by_remote_fs_and_beegfs_requires_its_helper():
    item = only("cm01", {"scratch": {"type": "beegfs", "servers": ["sssm01"]}}, mounts=MOUNTS[1:],
                automount=False)["/scratch"]
    unit = render("shared-fs.mount.j2", item)
    assert "\nWantedBy=remote-fs.target\n" in unit and "RequiredBy" not in unit
    assert "\nRequires=beegfs-helperd.service\n" in unit
    assert "After=network-online.target beegfs-helperd.service\n" in unit


def test_an_image_holds_the_client_of_every_mounts_file_system_whoever_mounts_it():
    fs = {"home": {"type": "nfs", "servers": ["n"]}, "scratch": {"type": "glusterfs", "servers": ["sssm01"]},
          "unused": {"type": "lustre", "servers": ["m"]}}
    assert S.clients(MOUNTS, fs) == {"nfs-common": ["/home"], "glusterfs-client": ["/scratch"]}
    assert S.clients([], fs) == {}
    with pytest.raises(S.SharedFsError, match=r"shared_fs_mounts\[1\].filesystem: 'scratch' is not one of"):
        S.clients(MOUNTS, {"home": fs["home"]})
    with pytest.raises(S.SharedFsError, match=r"shared_fs_filesystems.home.type: 'ceph' is not one of"):
        S.clients(MOUNTS[:1], {"home": {"type": "ceph"}})


def test_a_state_mount_keeps_what_its_mount_point_held_and_names_the_units_to_stop_first():
    fs = {"state": {"type": "glusterfs", "servers": ["sssm01"]}, "home": {"type": "glusterfs", "servers": ["sssm01"]}}
    mounts = [{"path": "/srv/state", "filesystem": "state", "purpose": "state", "groups": ["mgmt"],
               "stop_units": ["slurmctld.service"]},
              {"path": "/home", "filesystem": "home", "groups": ["mgmt"]}]
    got = only("mgmt01", fs, mounts=mounts)
    assert (got["/srv/state"]["keep_files"], got["/srv/state"]["stop_units"]) == (True, ["slurmctld.service"])
    assert (got["/home"]["keep_files"], got["/home"]["stop_units"]) == (False, [])
    assert only("mgmt01", fs, mounts=[dict(mounts[1], keep_files=True)])["/home"]["keep_files"] is True
    for bad in (["slurmctld; reboot"], "slurmctld.service", ["../x.service"]):
        with pytest.raises(S.SharedFsError, match=r"shared_fs_mounts\[0\].stop_units: .* is not a list of systemd unit"):
            only("mgmt01", fs, mounts=[dict(mounts[0], stop_units=bad)])
    with pytest.raises(S.SharedFsError, match=r"shared_fs_mounts\[0\].keep_files: 'yes' is not true or false"):
        only("mgmt01", fs, mounts=[dict(mounts[0], keep_files="yes")])
