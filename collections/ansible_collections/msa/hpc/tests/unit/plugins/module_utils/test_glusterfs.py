# SPDX-License-Identifier: GPL-3.0-or-later
"""GlusterFS's XML answers, captured from GlusterFS 10.3 (Debian 12) on the h36 test servers: the volumes and their
options, which options to set, and the use per user from the quota list."""
from __future__ import annotations

import pathlib

import pytest

from ansible_collections.msa.hpc.plugins.module_utils import _glusterfs as G

FIXTURES = pathlib.Path(__file__).parent / "fixtures/glusterfs"


def fixture(name):
    return (FIXTURES / name).read_text()


def test_volume_info_reads_a_replicated_volume_its_bricks_and_options():
    info = G.volume_info(fixture("volume-info-home.xml"))
    home = info["home"]
    assert (home["status"], home["type"], home["replica"], home["arbiter"]) == ("Started", "Replicate", 2, 0)
    assert home["bricks"] == ["10.236.5.11:/srv/glusterfs/home/brick", "10.236.5.12:/srv/glusterfs/home/brick"]
    assert home["options"]["server.ssl"] == "on" and home["options"]["auth.ssl-allow"] == "cm01,sssm01,sssm02"
    assert home["options"]["network.ping-timeout"] == "10"


def test_a_volume_that_does_not_exist_is_absent_and_other_errors_are_raised():
    assert G.volume_info(fixture("volume-info-absent.xml")) == {}
    broken = fixture("volume-info-absent.xml").replace("Volume does not exist", "Locking failed on 10.236.5.12")
    with pytest.raises(G.GlusterOutputError, match="gluster volume info failed: Locking failed on 10.236.5.12"):
        G.volume_info(broken)
    with pytest.raises(G.GlusterOutputError, match="not gluster's XML"):
        G.volume_info("Connection failed. Please check if gluster daemon is operational.")
    with pytest.raises(G.GlusterOutputError, match="root is <html>"):
        G.volume_info("<html/>")


def test_only_the_options_that_differ_are_set_and_switches_compare_by_meaning():
    current = G.volume_info(fixture("volume-info-home.xml"))["home"]["options"]
    desired = {"server.ssl": "yes", "client.ssl": True, "network.ping-timeout": 10, "cluster.quorum-type": "none",
               "auth.ssl-allow": "cm01,cm02,sssm01,sssm02", "features.shard": "off"}
    assert G.options_to_set(current, desired) == {"auth.ssl-allow": "cm01,cm02,sssm01,sssm02", "features.shard": "off"}


def test_the_quota_list_gives_each_limit_in_bytes_and_whether_it_is_exceeded():
    rows = G.quota_list(fixture("quota-list-home.xml"))
    assert [r["path"] for r in rows] == ["/alice", "/alice/proj", "/bob"]
    bob = rows[2]
    assert (bob["hard_limit"], bob["used"], bob["soft_exceeded"], bob["hard_exceeded"]) == (20971520, 18874368,
                                                                                            True, False)


def test_the_usage_report_has_one_line_per_user_directory_most_used_first():
    report = G.usage_report("home", G.quota_list(fixture("quota-list-home.xml")))
    assert [(r["user"], r["used"], r["percent"], r["state"]) for r in report] == [
        ("bob", 18874368, 90.0, "soft"), ("alice", 5242880, 25.0, "ok")]     # /alice/proj is no user's home
    lines = G.report_lines(report)
    assert lines[1].split() == ["home", "bob", "18.0", "MiB", "20.0", "MiB", "90.0%", "soft"]


def test_a_size_that_is_not_a_number_is_an_error_not_a_zero():
    with pytest.raises(G.GlusterOutputError, match="not a number"):
        G.quota_list(fixture("quota-list-home.xml").replace("<used_space>0</used_space>", "<used_space>N/A</used_space>"))
