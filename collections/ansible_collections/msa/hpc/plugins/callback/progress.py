# SPDX-License-Identifier: GPL-3.0-or-later
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Ansible's default output, with waits a person can read: one progress line per wait instead of FAILED - RETRYING."""
from __future__ import annotations

DOCUMENTATION = r"""
name: progress
type: stdout
short_description: The default output, with readable progress lines for tasks that wait (until/retries)
description:
  - Everything is printed as by C(ansible.builtin.default), except the retries of a task with C(until).
  - Each play's banner is followed by a line C([HH:MM:SS] -- play <name>), so a long run's log shows when each play
    began (C(scripts/stage_times.py) turns these lines into the time each stage and play took).
  - Instead of one red C(FAILED - RETRYING) line per attempt, a wait prints one line when it starts and one every
    O(progress_interval) seconds after, naming the host, the task (which says what is awaited), the attempt and how
    long it has waited so far. The task's own result, or its C(fail_msg), says what was seen when a wait gives up.
version_added: 0.2.0
author:
  - msa.hpc maintainers (@msa-hpc)
extends_documentation_fragment:
  - ansible.builtin.default_callback
  - ansible.builtin.result_format_callback
options:
  progress_interval:
    description: Seconds between two progress lines of one wait.
    type: int
    default: 15
    ini:
      - section: callback_progress
        key: interval
    env:
      - name: MSA_PROGRESS_INTERVAL
requirements:
  - set as stdout callback in ansible.cfg (C(stdout_callback = msa.hpc.progress))
"""

import time

from ansible import constants as C
from ansible.plugins.callback.default import CallbackModule as DefaultCallback


def play_line(name, now=None):
    """The line printed after a play's banner: the wall-clock time it began and its name."""
    return "[%s] -- play %s" % (time.strftime("%H:%M:%S", time.localtime(now)), name)


def wait_line(host, task, attempt, retries, waited):
    """The line printed for a wait: what is awaited, on which host, for how long, with how many tries left."""
    return "waiting [%s]: %s (attempt %d of %d, %ds so far)" % (host, task, attempt, retries, int(waited))


class CallbackModule(DefaultCallback):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "stdout"
    CALLBACK_NAME = "msa.hpc.progress"

    def __init__(self):
        super().__init__()
        self._waits = {}

    def v2_runner_retry(self, result):
        res = getattr(result, "result", None)
        if res is None:  # ansible-core before 2.19 names it _result
            res = result._result
        key = self._wait_key(result)
        now = time.monotonic()
        started, last = self._waits.get(key, (now, None))
        if last is None or now - last >= self.get_option("progress_interval"):
            self._waits[key] = (started, now)
            self._display.display(wait_line(key[0], key[1], int(res.get("attempts", 0)), int(res.get("retries", 0)),
                                            now - started), color=C.COLOR_VERBOSE)
        if self._run_is_verbose(result, verbosity=2):
            self._display.display("Result was: %s" % self._dump_results(res), color=C.COLOR_DEBUG)

    def v2_playbook_on_play_start(self, play):
        super().v2_playbook_on_play_start(play)
        self._display.display(play_line(play.get_name().strip()), color=C.COLOR_VERBOSE)

    def v2_runner_on_ok(self, result, *args, **kwargs):
        self._end_wait(result)
        super().v2_runner_on_ok(result, *args, **kwargs)

    def v2_runner_on_failed(self, result, *args, **kwargs):
        self._end_wait(result)
        super().v2_runner_on_failed(result, *args, **kwargs)

    def _wait_key(self, result):
        return self.host_label(result), getattr(result, "task_name", None) or str(result._task)

    def _end_wait(self, result):
        key = self._wait_key(result)
        started = self._waits.pop(key, (None,))[0]
        if started is not None:
            self._display.display("waited [%s]: %s (%ds)" % (key[0], key[1], int(time.monotonic() - started)),
                                  color=C.COLOR_VERBOSE)
