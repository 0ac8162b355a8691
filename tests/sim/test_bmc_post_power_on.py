# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

"""The BMC's post-power-on hook: the harness's command runs after every container start, failures are reported."""

import subprocess

import pytest

from msa_sim.bmc import auth, config
from msa_sim.bmc.backend import BackendError, PodmanBackend, make_backend


class FakeRun:
    def __init__(self, fail_on=None):
        self.calls = []
        self.fail_on = fail_on

    def __call__(self, cmd, **kwargs):
        self.calls.append(cmd)
        code = 3 if self.fail_on and cmd[0] == self.fail_on else 0
        return subprocess.CompletedProcess(cmd, code, stdout="", stderr="links broken" if code else "")


def test_power_on_runs_the_hook_after_the_start_with_the_container_name():
    run = FakeRun()
    backend = PodmanBackend(run=run, post_power_on=["relink", "--node", "{container}"])
    backend.power_on("dev3-esb01")
    assert run.calls == [["podman", "start", "dev3-esb01"], ["relink", "--node", "dev3-esb01"]]


def test_power_off_does_not_run_the_hook():
    run = FakeRun()
    PodmanBackend(run=run, post_power_on=["relink"]).force_off("dev3-esb01")
    assert run.calls == [["podman", "stop", "-t", "0", "dev3-esb01"]]


def test_failing_hook_is_a_backend_error_naming_container_and_command():
    backend = PodmanBackend(run=FakeRun(fail_on="relink"), post_power_on=["relink"])
    with pytest.raises(BackendError, match=r"dev3-esb01 is on, but its post-power-on hook 'relink' failed \(3\): links broken"):
        backend.power_on("dev3-esb01")


def _conf(backend):
    user = {"username": "admin", "password_hash": auth.hash_password("pw", iterations=1000)}
    return {"backend": backend, "bmcs": [{"name": "esb01", "users": [user]}]}


def test_configured_hook_reaches_the_podman_backend():
    conf = config.validate(_conf({"type": "podman", "post_power_on": ["relink", "{container}"]}))
    assert make_backend(conf["backend"]).post_power_on == ["relink", "{container}"]
    assert config.validate(_conf({"type": "podman"}))["backend"]["post_power_on"] == []


@pytest.mark.parametrize("hook", ["relink --all", [""], [1]])
def test_hook_that_is_not_a_word_list_is_refused_naming_the_field(hook):
    with pytest.raises(config.ConfigError, match=r"backend\.post_power_on"):
        config.validate(_conf({"type": "podman", "post_power_on": hook}))
