# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

"""The slurm_upgrade_plan module: the plan of 24.11 → 26.05, and each refusal (a jump 22.05 → 24.11, a step out of
order, a state directory that would move) as a failed result naming the releases or the setting."""

import json

import pytest
from ansible.module_utils.testing import patch_module_args

from ansible_collections.msa.hpc.plugins.modules import slurm_upgrade_plan

TRIXIE, FORKY, BOOKWORM = "24.11.5-4+deb13u1", "26.05.5-1", "22.05.8-4+deb12u3"


def run(capsys, **args):
    with patch_module_args(args):
        with pytest.raises(SystemExit):
            slurm_upgrade_plan.main()
    return json.loads(capsys.readouterr().out)


def test_the_plan_of_24_11_to_26_05(capsys):
    out = run(capsys, installed={"mgmt01": {"slurmdbd": TRIXIE, "slurmctld": TRIXIE}, "cm01": {"slurmd": TRIXIE}},
              target=FORKY, step="slurmdbd",
              settings={"StateSaveLocation": {"installed": "/var/lib/slurm/slurmctld",
                                              "target": "/var/lib/slurm/slurmctld"}})
    assert not out.get("failed") and out["changed"] is False
    assert [s["daemon"] for s in out["steps"]] == ["slurmdbd", "slurmctld", "slurmd"]


@pytest.mark.parametrize("args,message", [
    ({"installed": {"cm01": {"slurmd": BOOKWORM}}, "target": TRIXIE},
     "target=%s: slurmd on cm01 has %s, 4 major releases back" % (TRIXIE, BOOKWORM)),
    ({"installed": {"mgmt01": {"slurmdbd": TRIXIE, "slurmctld": TRIXIE}}, "target": FORKY, "step": "slurmctld"},
     "step=slurmctld: slurmdbd on mgmt01 still has %s, below the target %s" % (TRIXIE, FORKY)),
    ({"installed": {"mgmt01": {"slurmctld": TRIXIE}}, "target": FORKY,
      "settings": {"SlurmdSpoolDir": {"installed": "/var/lib/slurm/slurmd", "target": "/var/spool/slurmd"}}},
     "SlurmdSpoolDir=/var/spool/slurmd: the upgrade to %s would move it from /var/lib/slurm/slurmd" % FORKY),
])
def test_each_refusal_fails_naming_what_it_refuses(capsys, args, message):
    out = run(capsys, **args)
    assert out["failed"] and out["msg"].startswith(message), out["msg"]
