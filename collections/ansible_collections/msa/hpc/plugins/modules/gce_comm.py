# SPDX-License-Identifier: GPL-3.0-or-later
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

"""Ansible module: create and release GCE communicators through the NAM/GCE manager."""

DOCUMENTATION = r"""
---
module: gce_comm
short_description: Create and release Global Collective Engine communicators
description:
  - Creates or releases a communicator on the Global Collective Engine (GCE, seed 004 section 2.2.2) through the
    NAM/GCE manager, which writes the communicator tables into GCE memory.
  - Enforces the hardware limits of seed 004 Table 1 before asking the manager (at most 1024 processes per
    communicator, 256 communicators in the system, 8 concurrent operations per communicator, 8 MiB per
    operation). A communicator the GCE cannot hold is not an error; the task reports C(fallback=software)
    with the reason, and the MPI library uses its software collectives.
  - Idempotent by O(name); a communicator whose members or root differ is released and created again.
version_added: "0.1.0"
author:
  - msa.hpc maintainers (@msa-hpc)
extends_documentation_fragment:
  - msa.hpc.attributes
  - msa.hpc.manager
options:
  state:
    description: V(present) creates the communicator, V(absent) releases it.
    type: str
    choices: [present, absent]
    default: present
  name:
    description: Name of the communicator, unique among the manager's communicators.
    type: str
    required: true
  members:
    description:
      - Processes of the communicator in rank order, each C({node, vpid}) or the string C(node:vpid).
      - Required when O(state=present).
    type: list
    elements: raw
  root:
    description:
      - The process that delivers the communicator to the GCE (C({node, vpid}) or C(node:vpid)).
      - Defaults to the first member.
    type: raw
  job:
    description: Slurm job id the communicator belongs to (the epilog releases by job).
    type: str
  owner:
    description: User that owns the communicator (default the authenticated user; others need the admin role).
    type: str
attributes:
  check_mode:
    support: full
    details: Checks the limits and reports whether the communicator would be created or fall back to software.
  diff_mode:
    support: full
    details: Shows the members and root before and after.
seealso:
  - module: msa.hpc.nam_segment
"""

EXAMPLES = r"""
# The manager's endpoint and credentials once, for every NAM and GCE task of the block (action group
# msa.hpc.managers)
- name: The world communicator of job 4242
  module_defaults:
    group/msa.hpc.managers:
      endpoint: https://mgmt01:8780
      ca_path: /etc/msa-hpc/tls/ca.pem
      username: slurm
      password: "{{ nam_manager_password }}"
  block:
    - name: Create the world communicator of job 4242 on the GCE
      msa.hpc.gce_comm:
        name: job4242-world
        job: "4242"
        owner: alice
        members: "{{ groups['esb'] | product(range(4)) | map('join', ':') | list }}"
      register: world

    - name: Tell the user when the collectives will run in software
      ansible.builtin.debug:
        msg: "{{ world.fallback_reason }}"
      when: world.fallback is not none

    - name: Release it
      msa.hpc.gce_comm:
        name: job4242-world
        state: absent
"""

RETURN = r"""
id:
  description: Manager id of the communicator (unique, never reused); null when absent or on fall-back.
  returned: always
  type: int
  sample: 12
comm_id:
  description: Hardware Comm ID (8 bits) of the communicator on the GCE.
  returned: always
  type: int
  sample: 3
communicator:
  description: The communicator record (device, members, root, size, operations), or null.
  returned: always
  type: dict
limits_left:
  description: What is left of the GCE limits after the task (communicators).
  returned: always
  type: dict
  sample: {"communicators": 253}
fallback:
  description: V(software) when the GCE cannot hold the communicator, else null.
  returned: always
  type: str
  sample: software
fallback_reason:
  description: Why the collectives fall back to software (the Table 1 limit that was hit).
  returned: always
  type: str
  sample: a communicator of 2048 processes exceeds the GCE limit of 1024 processes per communicator
fallback_limit:
  description: Name of the limit that was hit (for example C(max_processes_per_communicator)).
  returned: on fall-back
  type: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.msa.hpc.plugins.module_utils._module_run import rest_failure, run_module
from ansible_collections.msa.hpc.plugins.module_utils._gce import GceService, ensure_communicator
from ansible_collections.msa.hpc.plugins.module_utils._manager import (
    MANAGER_MUTUALLY_EXCLUSIVE, MANAGER_REQUIRED_TOGETHER, manager_argument_spec, manager_client)
from ansible_collections.msa.hpc.plugins.module_utils._nam import ManagerError
from ansible_collections.msa.hpc.plugins.module_utils._rest import RestError


def main():
    module = AnsibleModule(
        argument_spec=manager_argument_spec(
            state=dict(type="str", default="present", choices=["present", "absent"]),
            name=dict(type="str", required=True),
            members=dict(type="list", elements="raw"),
            root=dict(type="raw"),
            job=dict(type="str"),
            owner=dict(type="str"),
        ),
        required_if=[("state", "present", ("members",))],
        required_together=MANAGER_REQUIRED_TOGETHER,
        mutually_exclusive=MANAGER_MUTUALLY_EXCLUSIVE,
        supports_check_mode=True,
    )
    run_module(module, lambda: ensure_communicator(GceService(manager_client(module.params)), module.params,
                                                   module.check_mode),
               [((ManagerError, ValueError), lambda exc: {"msg": str(exc), "code": getattr(exc, "code", None)}),
                (RestError, rest_failure("GCE manager", module.params["endpoint"]))])


if __name__ == "__main__":
    main()
