# SPDX-License-Identifier: GPL-3.0-or-later
"""The bundle's default strategy (mitogen_linear, playbooks/strategy_plugins) pins no process to a CPU.

Mitogen's own policy pinned every process a task started to all CPUs but the first on a 2- or 3-CPU host, so the
simulated system that sim_up's tasks started ran on one CPU of two. A task's command must see every CPU this test
process may use."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

BUNDLE = Path(__file__).resolve().parents[1]
PLAY = """
- hosts: localhost
  gather_facts: false
  tasks:
    - name: Print the CPUs a task's command may run on
      ansible.builtin.command: grep Cpus_allowed_list /proc/self/status
      register: cpus
      changed_when: false
    - name: Show them
      ansible.builtin.debug:
        msg: "ALLOWED={{ cpus.stdout.split()[-1] }}"
"""


def cpu_list(cpus):
    """{0, 1, 2, 5} -> '0-2,5' (the kernel's Cpus_allowed_list format)."""
    out, run = [], []
    for cpu in sorted(cpus) + [None]:
        if run and (cpu is None or cpu != run[-1] + 1):
            out.append(str(run[0]) if len(run) == 1 else "%d-%d" % (run[0], run[-1]))
            run = []
        if cpu is not None:
            run.append(cpu)
    return ",".join(out)


def test_cpu_list_format():
    assert cpu_list({0, 1, 2, 5}) == "0-2,5" and cpu_list({1}) == "1" and cpu_list({0, 1}) == "0-1"


def test_a_task_command_runs_on_every_cpu(tmp_path):
    mine = os.sched_getaffinity(0)
    if len(mine) < 2:
        pytest.skip("one CPU only: a pinned and an unpinned process look the same here")
    play = tmp_path / "affinity.yml"
    play.write_text(PLAY)
    env = dict(os.environ, ANSIBLE_CONFIG=str(BUNDLE / "ansible.cfg"), ANSIBLE_STDOUT_CALLBACK="default",
               ANSIBLE_NOCOLOR="1", ANSIBLE_LOCALHOST_WARNING="0", ANSIBLE_INVENTORY_UNPARSED_WARNING="0")
    run = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", "localhost,", "-c", "local",
                          str(play)], capture_output=True, text=True, cwd=BUNDLE, env=env, timeout=300)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    assert "mitogen_linear" in (BUNDLE / "ansible.cfg").read_text()
    assert "ALLOWED=%s" % cpu_list(mine) in run.stdout, run.stdout[-2000:]
