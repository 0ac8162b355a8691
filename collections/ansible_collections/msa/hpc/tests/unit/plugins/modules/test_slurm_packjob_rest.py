# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

"""slurm_packjob with transport=rest: the same results as over the CLI, clear failures that never show the token."""

import json
from unittest import mock

import pytest
from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args

from ansible_collections.msa.hpc.plugins.modules import slurm_packjob
from ansible_collections.msa.hpc.tests.unit.plugins.module_utils.slurm.test_slurmrest import (  # noqa: F401  # pylint: disable=unused-import
    TOKEN, FakeSlurmrestd, slurmrestd)

JOB = {"name": "coupled", "components": [{"partition": "cm", "nodes": 1, "command": "hostname"},
                                         {"partition": "esb", "nodes": 2, "command": "hostname"}]}


def _record(job_id, state, offset, nodes, user="alice", exit_code=0):
    return {"job_id": job_id, "name": "coupled", "user_name": user, "job_state": state, "het_job_id": 710,
            "het_job_offset": offset, "nodes": nodes, "exit_code": exit_code, "partition": "cm", "comment": ""}


QUEUE = [_record(710, "COMPLETED", 0, "cm01"), _record(711, "FAILED", 1, "esb[01-02]", exit_code=512)]


class Done(Exception):
    def __init__(self, result, failed):
        super().__init__(result.get("msg"))
        self.result, self.failed = result, failed


def _run(args, run_command=None):
    def exit_json(self, **result):
        raise Done(self._remove_values(result) if hasattr(self, "_remove_values") else result, False)

    def fail_json(self, **result):
        raise Done(result, True)

    with patch_module_args(args), \
            mock.patch.object(basic.AnsibleModule, "run_command", run_command or (lambda self, argv, **kw: (1, "", ""))), \
            mock.patch.object(basic.AnsibleModule, "exit_json", exit_json), \
            mock.patch.object(basic.AnsibleModule, "fail_json", fail_json), \
            mock.patch.object(slurm_packjob.pwd, "getpwuid", lambda uid: mock.Mock(pw_name="alice")), \
            mock.patch.object(slurm_packjob.time, "sleep", lambda s: None):
        with pytest.raises(Done) as info:
            slurm_packjob.main()
    return info.value


def _rest(url, **extra):
    return dict(JOB, transport="rest", rest_url=url, rest_user="alice", rest_token=TOKEN, **extra)


def test_a_job_over_rest_reports_what_the_cli_reports(slurmrestd):
    FakeSlurmrestd.queue = {"meta": {}, "errors": [], "jobs": QUEUE}
    over_rest = _run(_rest(slurmrestd, wait=True, fail_on_error=False))

    def cli(self, argv, **kw):
        if argv[0] == "squeue":
            return 0, json.dumps({"errors": [], "jobs": QUEUE}), ""
        return 0, "710\n", ""
    over_cli = _run(dict(JOB, wait=True, fail_on_error=False), cli)
    assert not over_rest.failed and not over_cli.failed
    for key in ("job_id", "job_ids", "state", "components"):
        assert over_rest.result[key] == over_cli.result[key]
    assert [c["exit_code"] for c in over_rest.result["components"]] == [0, 2]
    assert over_rest.result["components"][1]["node_list"] == ["esb01", "esb02"]


def test_a_job_already_in_the_queue_is_not_submitted_again_over_rest(slurmrestd):
    FakeSlurmrestd.queue = {"meta": {}, "errors": [], "jobs": [_record(710, "RUNNING", 0, "cm01"),
                                                               _record(711, "RUNNING", 1, "esb01")]}
    done = _run(_rest(slurmrestd))
    assert not done.failed and not done.result["changed"] and FakeSlurmrestd.submitted == []


def test_a_new_job_over_rest_is_submitted_once_with_both_components(slurmrestd):
    done = _run(_rest(slurmrestd))
    assert not done.failed and done.result["changed"] and done.result["job_id"] == 710
    (body,) = FakeSlurmrestd.submitted
    assert [j["partition"] for j in body["jobs"]] == ["cm", "esb"]


@pytest.mark.parametrize("user,token", [("alice", "eyJ.expired.or.wrong"), ("mallory", TOKEN)],
                         ids=["wrong-token", "user-not-matching-the-token"])
def test_bad_credentials_fail_the_task_clearly_with_no_token_in_the_result(slurmrestd, user, token):
    done = _run(dict(_rest(slurmrestd), rest_user=user, rest_token=token))
    assert done.failed
    assert "refused the credentials of user %r" % user in done.result["msg"]
    assert token not in json.dumps(done.result)


def test_an_unreachable_rest_url_fails_the_task_naming_it():
    done = _run(_rest("http://127.0.0.1:9", rest_timeout=1))
    assert done.failed and "unreachable at http://127.0.0.1:9" in done.result["msg"]
    assert TOKEN not in json.dumps(done.result)


def test_rest_without_a_token_fails_naming_the_option():
    args = _rest("http://127.0.0.1:9")
    del args["rest_token"]
    done = _run(args)
    assert done.failed and "rest_token" in done.result["msg"]
