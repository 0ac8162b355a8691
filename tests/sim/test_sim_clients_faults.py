# SPDX-License-Identifier: GPL-3.0-or-later
"""The stand-ins' HTTP clients (emp-ctrl, emp-slave, DCDB's redfish group) when the far end dies mid-answer."""
from __future__ import annotations

import types

import pytest

from ansible_collections.msa.hpc.plugins.module_utils._rest import OutcomeUnknownError
from ansible_collections.msa.hpc.tests.unit.plugins.module_utils.faulty_http import FaultyServer, free_port
from msa_sim.dcdb.plugins import load_plugin
from msa_sim.emp import ctrl, slave


@pytest.fixture
def far_end():
    srv = FaultyServer()
    yield srv
    srv.close()


def test_emp_ctrl_reports_a_master_killed_mid_answer_as_a_lost_answer(far_end):
    far_end.script = ["half"]
    with pytest.raises(ctrl.CtrlError, match="lost the answer of the EMP master at %s" % far_end.url):
        ctrl.call(far_end.url, "GET", "emp/status", retries=0)


def test_emp_ctrl_sends_a_state_setting_post_again_after_a_lost_answer(far_end):
    far_end.script = ["half", ("answer", 200, {"state": "running"})]
    assert ctrl.call(far_end.url, "POST", "network/start", {}, retries=1) == {"state": "running"}
    assert far_end.count("POST", "/network/start") == 2


def test_emp_ctrl_says_it_cannot_reach_a_master_that_refuses():
    url = "http://127.0.0.1:%d" % free_port()
    with pytest.raises(ctrl.CtrlError, match="cannot reach the EMP master at %s" % url):
        ctrl.call(url, "GET", "emp/status", retries=0)


def test_emp_slave_report_cut_short_is_an_error_its_loop_catches(far_end):
    far_end.script = ["half"]
    me = types.SimpleNamespace(conf={"master": far_end.url}, token="t")
    with pytest.raises(OutcomeUnknownError):
        slave.Slave.post(me, {"guid": "0x1"})
    assert far_end.count("POST", "/slaves/report") == 1


def test_dcdb_redfish_group_backs_off_when_the_bmc_dies_mid_answer(tmp_path, far_end):
    far_end.script = ["half"]
    conf = tmp_path / "redfish.conf"
    conf.write_text("group power {\n endpoint %s\n chassis Self\n timeout 0.5\n}\n" % far_end.url)
    (group,) = load_plugin("redfish", str(conf))
    assert group.read(1) == [] and group._failures == 1
    assert group.read(2) == [] and far_end.count("GET") == 1    # the back-off holds the next try
