# SPDX-License-Identifier: GPL-3.0-or-later
"""The msa.hpc.progress output: a wait prints what it awaits and for how long, never FAILED - RETRYING lines."""
from __future__ import annotations

import os
import re
import subprocess

from tests.helpers import BIN, BUNDLE

# A wait that succeeds on its third attempt (a counter file), then one that never does.
PLAYBOOK = """
- name: Two waits
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Wait until the counter reaches 3
      ansible.builtin.shell: n=$(( $(cat {counter} 2>/dev/null || echo 0) + 1 )); echo $n > {counter}; echo $n
      register: count
      until: count.stdout | int >= 3
      retries: 5
      delay: 1
      changed_when: false

    - name: Wait for something that never comes
      ansible.builtin.command: "false"
      register: never
      until: never.rc == 0
      retries: 2
      delay: 1
      changed_when: false
"""


def run_playbook(tmp_path, interval):
    book = tmp_path / "waits.yml"
    book.write_text(PLAYBOOK.format(counter=tmp_path / "counter"))
    env = dict(os.environ, ANSIBLE_CONFIG=str(BUNDLE / "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               MSA_PROGRESS_INTERVAL=str(interval))
    for name in ("ANSIBLE_STDOUT_CALLBACK", "ANSIBLE_LOAD_CALLBACK_PLUGINS"):
        env.pop(name, None)
    run = subprocess.run([str(BIN / "ansible-playbook"), "-i", "localhost,", "-c", "local", str(book)],
                         cwd=BUNDLE, env=env, capture_output=True, text=True, timeout=300)
    return run.returncode, run.stdout


def test_a_wait_prints_what_it_awaits_and_how_long_instead_of_retrying_lines(tmp_path):
    rc, out = run_playbook(tmp_path, interval=0)
    assert rc == 2, out  # the second wait gives up, and the play fails as the default output would
    assert "FAILED - RETRYING" not in out
    waiting = [line for line in out.splitlines() if line.startswith("waiting [localhost]: ")]
    # every retry prints with an interval of 0: two for the counter (attempts 1, 2), two for the never-coming wait
    assert [line.split(": ", 1)[1].split(" (")[0] for line in waiting] == [
        "Wait until the counter reaches 3"] * 2 + ["Wait for something that never comes"] * 2, out
    assert "(attempt 1 of 6, " in waiting[0] and "(attempt 2 of 6, " in waiting[1], out  # 5 retries: 6 attempts
    assert any(line.startswith("waited [localhost]: Wait until the counter reaches 3 (") for line in out.splitlines())
    assert "waited [localhost]: Wait for something that never comes (" in out
    assert "fatal: [localhost]: FAILED!" in out  # what was seen when the wait gave up is still printed
    # the play's start, stamped for scripts/stage_times.py
    assert re.search(r"^\[\d\d:\d\d:\d\d\] -- play Two waits$", out, re.M), out


def test_a_long_interval_prints_one_line_per_wait(tmp_path):
    rc, out = run_playbook(tmp_path, interval=3600)
    assert rc == 2, out
    waiting = [line for line in out.splitlines() if line.startswith("waiting [localhost]: ")]
    assert len(waiting) == 2, out
