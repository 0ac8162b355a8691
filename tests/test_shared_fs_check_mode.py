# SPDX-License-Identifier: GPL-3.0-or-later
"""msa.hpc.shared_fs in check mode on this host (connection local, a throw-away inventory, units and BeeGFS files
pointed into a temporary directory): the mount units of NFS, Lustre, BeeGFS and GlusterFS file systems render with
their options and nothing is written; for real, a file system whose client no apt source offers is refused, naming
the mount point and the package. Debian has no BeeGFS or Lustre client and this host no kernel NFS: check mode is
what can run here for those (the GlusterFS mount runs for real in tests/storage/ on h36 test containers)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml

BUNDLE = Path(__file__).resolve().parents[1]
PLAY = [{"name": "Shared file systems", "hosts": "cm01", "gather_facts": False,
         "roles": ["msa.hpc.shared_fs"]}]


def inventory(tmp_path, mounts):
    filesystems = {
        "home": {"type": "nfs", "servers": ["sssm01"], "volume": "/export/home", "options": ["nosuid"]},
        "scratch": {"type": "lustre", "servers": ["sssm01", "sssm02"], "volume": "lfs01"},
        "work": {"type": "beegfs", "servers": ["sssm02"]},
        "data": {"type": "glusterfs", "servers": ["sssm01", "sssm02"], "volume": "data"},
    }
    return {"all": {"vars": {"ansible_python_interpreter": sys.executable,
                             "shared_fs_filesystems": filesystems, "shared_fs_mounts": mounts,
                             "shared_fs_unit_dir": str(tmp_path / "units"),
                             "shared_fs_beegfs_config_dir": str(tmp_path / "beegfs"),
                             "shared_fs_glusterfs_tls": False},
                    "children": {"cm": {"hosts": {"cm01": {"ansible_connection": "local"}}},
                                 "msa_storage": {"hosts": {
                                     "sssm01": {"msa_addresses": {"storage": "10.45.0.120"}},
                                     "sssm02": {"msa_addresses": {"storage": "10.45.0.121"}}}}}}}


MOUNTS = [{"path": "/msa-test/home", "filesystem": "home", "purpose": "home", "groups": ["cm"]},
          {"path": "/msa-test/scratch", "filesystem": "scratch", "purpose": "scratch", "groups": ["cm"]},
          {"path": "/msa-test/work", "filesystem": "work", "purpose": "scratch", "groups": ["cm"]},
          {"path": "/msa-test/data", "filesystem": "data", "purpose": "software", "groups": ["cm"],
           "readonly": True}]


def play(tmp_path, mounts, *flags):
    (tmp_path / "units").mkdir()
    (tmp_path / "inventory.yml").write_text(yaml.safe_dump(inventory(tmp_path, mounts)))
    (tmp_path / "play.yml").write_text(yaml.safe_dump(PLAY))
    (tmp_path / "ansible.cfg").write_text("[defaults]\n")   # not the bundle's: no system inventory in sight
    env = dict(os.environ, ANSIBLE_CONFIG=str(tmp_path / "ansible.cfg"), ANSIBLE_NOCOLOR="1", ANSIBLE_RETRY_FILES_ENABLED="0",
               ANSIBLE_COLLECTIONS_PATH=str(BUNDLE / "collections"), ANSIBLE_STDOUT_CALLBACK="default",
               ANSIBLE_DEPRECATION_WARNINGS="0")
    return subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(tmp_path / "inventory.yml"),
                           str(tmp_path / "play.yml"), *flags], capture_output=True, text=True, env=env, check=False,
                          timeout=600)


def test_check_mode_renders_the_units_of_every_type_and_writes_nothing(tmp_path):
    out = play(tmp_path, MOUNTS, "--check", "--diff")
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    text = out.stdout
    # NFS: one server on the storage fabric, NFS 4.2 hard mounts, the site's option last
    assert "What=10.45.0.120:/export/home" in text and "Type=nfs4" in text
    assert "Options=rw,_netdev,vers=4.2,proto=tcp,hard,timeo=600,retrans=2,nosuid" in text
    # Lustre: the MGS and its failover as NIDs, flock, noatime for scratch
    assert "What=10.45.0.120@tcp:10.45.0.121@tcp:/lfs01" in text and "Options=rw,_netdev,flock,noatime" in text
    # BeeGFS: its management host in the client file, the helper required
    assert "sysMgmtdHost = 10.45.0.121" in text and "Requires=beegfs-helperd.service" in text
    assert "Options=rw,_netdev,noatime,cfgFile=%s/work-client.conf" % (tmp_path / "beegfs") in text
    # GlusterFS, read-only, with the second server as the backup volume-file server
    assert "Options=ro,_netdev,log-level=WARNING,backup-volfile-servers=10.45.0.121" in text
    for unit in ("msa\\x2dtest-home.mount", "msa\\x2dtest-scratch.automount", "msa\\x2dtest-data.mount"):
        assert "(item=%s" % unit in text       # the units' names, as systemd-escape --path gives them
    assert "TimeoutSec=90" in text
    # Debian offers no BeeGFS or Lustre client: check mode says so and goes on
    assert "check mode: no apt source offers lustre-client-utils, beegfs-client" in text
    assert list((tmp_path / "units").iterdir()) == [] and not (tmp_path / "beegfs").exists()


def test_a_file_system_whose_client_no_apt_source_offers_is_refused_naming_the_mount(tmp_path):
    out = play(tmp_path, [MOUNTS[2]])
    assert out.returncode != 0
    assert ("cannot mount /msa-test/work: no apt source offers beegfs-client (add the vendor's repository "
            "in the site layer)") in out.stdout.replace("\n", " ")
    assert list((tmp_path / "units").iterdir()) == []
