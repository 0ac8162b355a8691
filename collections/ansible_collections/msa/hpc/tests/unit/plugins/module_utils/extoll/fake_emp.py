# SPDX-License-Identifier: GPL-3.0-or-later
"""A fake EMP master for the EMP client and fabric-state tests: scripted answers, a virtual clock."""
from __future__ import annotations

from ansible_collections.msa.hpc.plugins.module_utils.extoll.emp import EmpClient


class FakeRest:
    """Answers GET/POST from per-path lists (the last answer repeats); records every call."""

    def __init__(self, answers):
        self.answers = {k: list(v) for k, v in answers.items()}
        self.calls = []

    def _answer(self, method, path, body):
        self.calls.append((method, path, body))
        queue = self.answers[(method, path)]
        answer = queue.pop(0) if len(queue) > 1 else queue[0]
        if isinstance(answer, Exception):
            raise answer
        return answer

    def get(self, path, **kw):
        return self._answer("GET", path, None)

    def post(self, path, body=None, **kw):
        assert kw.get("lookup") is not None, "every EMP POST is sent again when its answer was lost"
        return self._answer("POST", path, body)

    def request(self, method, path, body=None, **kw):
        return 200, self._answer(method, path, body), {}


class Clock:
    def __init__(self):
        self.now = 0.0
        self.slept = []

    def sleep(self, seconds):
        self.slept.append(seconds)
        self.now += seconds

    def __call__(self):
        return self.now


def emp(answers):
    clock = Clock()
    return EmpClient(FakeRest(answers), sleep=clock.sleep, clock=clock), clock
