# SPDX-License-Identifier: GPL-3.0-or-later
"""run_module: how every module ends (result, expected errors as fail_json, diff only under --diff)."""
from __future__ import annotations

import pytest

from ansible_collections.msa.hpc.plugins.module_utils._module_run import rest_failure, run_module
from ansible_collections.msa.hpc.plugins.module_utils._rest import RestError


class Ended(Exception):
    pass


class FakeModule:
    def __init__(self, diff):
        self._diff = diff
        self.ended = None

    def exit_json(self, **kwargs):
        self.ended = ("exit", kwargs)
        raise Ended()

    def fail_json(self, **kwargs):
        self.ended = ("fail", kwargs)
        raise Ended()


def _end(module, action, failures):
    with pytest.raises(Ended):
        run_module(module, action, failures)
    return module.ended


@pytest.mark.parametrize("diff, expected", [(True, {"changed": True, "diff": {"before": 1}}), (False, {"changed": True})])
def test_the_result_keeps_its_diff_only_under_diff_mode(diff, expected):
    assert _end(FakeModule(diff), lambda: {"changed": True, "diff": {"before": 1}}, []) == ("exit", expected)


def test_the_first_matching_failure_names_the_error():
    def action():
        raise KeyError("size")
    failures = [(ValueError, lambda exc: {"msg": "value"}), ((TypeError, KeyError), lambda exc: {"msg": "key %s" % exc})]
    assert _end(FakeModule(False), action, failures) == ("fail", {"msg": "key 'size'"})


def test_a_rest_failure_names_the_service_its_endpoint_and_the_status():
    def action():
        raise RestError("HTTP 503: busy", status=503)
    ended = _end(FakeModule(False), action, [(RestError, rest_failure("NAM manager", "https://mgmt01:8780"))])
    assert ended == ("fail", {"msg": "NAM manager at https://mgmt01:8780: HTTP 503: busy", "status": 503})


def test_an_error_no_failure_names_is_not_caught():
    def action():
        raise ZeroDivisionError()
    module = FakeModule(False)
    with pytest.raises(ZeroDivisionError):
        run_module(module, action, [(ValueError, lambda exc: {"msg": "x"})])
    assert module.ended is None
