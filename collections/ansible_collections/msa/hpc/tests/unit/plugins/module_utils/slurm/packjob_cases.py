# SPDX-License-Identifier: GPL-3.0-or-later
"""Job specs, the system they are checked against, and the 22.05 fixtures that slurm_packjob's unit tests share."""
from __future__ import annotations

import os

import pytest

from ansible_collections.msa.hpc.plugins.module_utils.slurm.model import PackJobError, validate

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(__file__)), "fixtures", "slurm")
SYSTEM = {"partitions": {"cm": {"nodes": 4, "max_time": "1-00:00:00", "cpus_per_node": 24},
                         "booster": {"nodes": 8, "module": "esb", "gres": {"gpu": 1}}},
          "gateways": 2, "nam": "1TiB", "gce": True}
TEST_ONLY = "sbatch: Job 4711 to start at 2026-11-26T11:30:00 using 8 processors on nodes cm[01-02] in partition cm\n"


def read_fixture(name):
    with open(os.path.join(FIXTURES, name)) as handle:
        return handle.read()


def coupled_job(**extra):
    spec = {"name": "coupled", "components": [
        {"partition": "cm", "nodes": 1, "ntasks": 2, "time": "30", "command": "./hello_cluster"},
        {"module": "esb", "nodes": 2, "ntasks": 2, "gres": "gpu:1", "command": "./hello_booster"}]}
    spec.update(extra)
    return spec


def problems_of(spec, system=None):
    system = SYSTEM if system is None else system
    with pytest.raises(PackJobError) as info:
        validate(spec, system)
    return info.value.problems
