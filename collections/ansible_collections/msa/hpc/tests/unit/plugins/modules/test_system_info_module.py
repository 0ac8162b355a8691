# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

"""The system_info module: facts from the commands or slurmrestd, schema-checked; clear failures without tokens."""

import json
from unittest import mock

import pytest
from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args

from ansible_collections.msa.hpc.plugins.module_utils import _system_info as S
from ansible_collections.msa.hpc.plugins.modules import system_info
from ansible_collections.msa.hpc.tests.unit.plugins.module_utils.slurm.test_slurmrest import (  # noqa: F401  # pylint: disable=unused-import
    TOKEN, slurmrestd)
from ansible_collections.msa.hpc.tests.unit.plugins.module_utils.test_system_info import LICENSES, NODES, SCONTROL_PARTITIONS


class Done(Exception):
    def __init__(self, result, failed):
        super().__init__(result.get("msg"))
        self.result, self.failed = result, failed


def _cli(self, argv, **kw):
    table = {"--json": json.dumps(NODES), "partitions": SCONTROL_PARTITIONS, "licenses": LICENSES,
             "config": "ClusterName = dev\n"}
    return 0, table[argv[-1]], ""


def _run(args, run_command=_cli):
    def exit_json(self, **result):
        raise Done(result, False)

    def fail_json(self, **result):
        raise Done(result, True)

    with patch_module_args(args), \
            mock.patch.object(basic.AnsibleModule, "run_command", run_command), \
            mock.patch.object(basic.AnsibleModule, "exit_json", exit_json), \
            mock.patch.object(basic.AnsibleModule, "fail_json", fail_json):
        with pytest.raises(Done) as info:
            system_info.main()
    return info.value


def test_the_commands_give_schema_valid_facts_and_no_change():
    done = _run({})
    assert not done.failed and done.result["changed"] is False
    info = done.result["system_info"]
    assert info["source"] == "cli" and info["cluster"] == "dev" and S.validate(info) == []
    assert info["resources"]["gateways"]["free"] == 1


def test_a_failing_command_fails_the_task_naming_it():
    done = _run({}, lambda self, argv, **kw: (1, "", "slurm_load_node error: Unable to contact slurm controller"))
    assert done.failed and "sinfo --json failed" in done.result["msg"]


def test_a_wrong_token_fails_the_task_without_the_token(slurmrestd):
    done = _run({"rest_url": slurmrestd, "rest_user": "alice", "rest_token": TOKEN + "x"})
    assert done.failed and "refused the credentials" in done.result["msg"]
    assert TOKEN not in json.dumps(done.result)


def test_rest_source_needs_url_user_and_token():
    done = _run({"source": "rest", "rest_url": "http://127.0.0.1:1"})
    assert done.failed and "rest_user" in done.result["msg"]
