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
    from 24.11 on), so a jump over more is refused with the releases to go through first; there is no downgrade; and
    a system whose daemons already break C(slurmdbd >= slurmctld >= slurmd) is refused, since upgrading would
    not mend it.
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
    description: The version to upgrade to, upstream (C(23.02.7)) or as the package repository names it.
    type: str
    required: true
seealso:
  - module: msa.hpc.slurm_packjob
"""

EXAMPLES = r"""
- name: Plan the upgrade of the accounting, controller and compute hosts to 23.02
  msa.hpc.slurm_upgrade_plan:
    installed:
      mgmt01: {slurmdbd: 22.05.8-4+deb12u3, slurmctld: 22.05.8-4+deb12u3}
      cm01: {slurmd: 22.05.8-4+deb12u3}
    target: 23.02.7-1
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
  sample: [{daemon: slurmdbd, package: slurmdbd, hosts: [mgmt01], from: [22.05.8-4+deb12u3]}]
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.msa.hpc.plugins.module_utils._slurm_upgrade import UpgradeError, plan


def main():
    module = AnsibleModule(argument_spec={"installed": {"type": "dict", "required": True},
                                          "target": {"type": "str", "required": True}},
                           supports_check_mode=True)
    try:
        steps = plan(module.params["installed"], module.params["target"])
    except UpgradeError as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(changed=False, steps=steps)


if __name__ == "__main__":
    main()
