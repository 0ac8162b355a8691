#!/usr/bin/python
# SPDX-License-Identifier: GPL-3.0-or-later
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

"""Ansible module msa.hpc.slurm_upgrade_plan: check a Slurm upgrade against Slurm's rules and order its steps."""

DOCUMENTATION = r"""
module: slurm_upgrade_plan
short_description: Check a Slurm upgrade against Slurm's rules and return its steps in Slurm's order
version_added: 0.3.0
author:
  - msa.hpc maintainers (@msa-hpc)
description:
  - Reads the Slurm versions installed on every host (O(installed)) and the version to upgrade to (O(target)), and
    either returns the upgrade's steps - slurmdbd first, then slurmctld, then slurmd, each with the hosts still
    below the target - or fails naming the rule the request breaks.
  - The rules are Slurm's own - daemons accept RPCs and state files from at most two earlier major releases (three
    from 24.11 on - 26.05 from 25.11, 25.05 and 24.11; 24.11 from 24.05, 23.11 and 23.02), so a jump over more
    (22.05 to 24.11) is refused with the release to go through first; there is no downgrade; and a system whose
    daemons already break C(slurmdbd >= slurmctld >= slurmd) is refused, since upgrading would not mend it.
  - The target must be a release the collection supports (24.11, 25.05, 25.11, 26.05; 22.05 is an upgrade source
    only), a release an upgrade from 22.05 passes through (23.02, 23.11, 24.05), or a newer micro release of the one
    installed.
  - With O(step), the step about to run is refused while a daemon before it in Slurm's order still has a host below
    the target; with O(settings), a C(StateSaveLocation) or C(SlurmdSpoolDir) the upgrade would move is refused.
    Every refusal names the installed and the target release (or the setting and its values).
  - Only reads its options; the playbook C(msa.hpc.slurm_upgrade) acts on the plan.
attributes:
  check_mode:
    support: full
    details: The module changes nothing.
  diff_mode:
    support: none
extends_documentation_fragment:
  - msa.hpc.attributes
options:
  installed:
    description:
      - "The installed Slurm versions, host name to daemon (C(slurmdbd), C(slurmctld), C(slurmd)) to version, for
        example C({mgmt01: {slurmctld: 22.05.8-4+deb12u3}}). Upstream (C(22.05.8)) and Debian versions are read."
    type: dict
    required: true
  target:
    description: The version to upgrade to, upstream (C(26.05.5)) or as the package repository names it.
    type: str
    required: true
  step:
    description: The daemon whose upgrade is about to run; refused unless every daemon before it runs the target.
    type: str
    choices: [slurmdbd, slurmctld, slurmd]
  settings:
    description:
      - "The slurm.conf paths an upgrade must keep, C(StateSaveLocation) and C(SlurmdSpoolDir), each as
        C({installed: <path in the running configuration>, target: <path the upgraded configuration names>})."
    type: dict
    default: {}
seealso:
  - module: msa.hpc.slurm_packjob
"""

EXAMPLES = r"""
- name: Plan the upgrade of the accounting, controller and compute hosts to 26.05, keeping the state directories
  msa.hpc.slurm_upgrade_plan:
    installed:
      mgmt01: {slurmdbd: 24.11.5-4+deb13u1, slurmctld: 24.11.5-4+deb13u1}
      cm01: {slurmd: 24.11.5-4+deb13u1}
    target: 26.05.5-1
    settings:
      StateSaveLocation: {installed: /var/lib/slurm/slurmctld, target: /var/lib/slurm/slurmctld}
  register: upgrade
"""

RETURN = r"""
steps:
  description: The upgrade in Slurm's order; a daemon already at the target everywhere has no step.
  returned: success
  type: list
  elements: dict
  contains:
    daemon:
      description: C(slurmdbd), C(slurmctld) or C(slurmd).
      type: str
    package:
      description: The package that carries the daemon.
      type: str
    hosts:
      description: The hosts whose daemon is below the target.
      type: list
      elements: str
    from:
      description: The versions those hosts have.
      type: list
      elements: str
  sample: [{daemon: slurmdbd, package: slurmdbd, hosts: [mgmt01], from: [24.11.5-4+deb13u1]}]
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.msa.hpc.plugins.module_utils._slurm_upgrade import UpgradeError, plan


def main():
    module = AnsibleModule(argument_spec={"installed": {"type": "dict", "required": True},
                                          "target": {"type": "str", "required": True},
                                          "step": {"type": "str", "choices": ["slurmdbd", "slurmctld", "slurmd"]},
                                          "settings": {"type": "dict", "default": {}}},
                           supports_check_mode=True)
    try:
        steps = plan(module.params["installed"], module.params["target"], module.params["step"],
                     module.params["settings"])
    except UpgradeError as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(changed=False, steps=steps)


if __name__ == "__main__":
    main()
