# SPDX-License-Identifier: GPL-3.0-or-later
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

"""Ansible module: allocate, free, attach and detach network-attached memory through the NAM manager."""

DOCUMENTATION = r"""
---
module: nam_segment
short_description: Allocate, free, attach and detach NAM memory through the NAM/GCE manager
description:
  - Manages one allocation of network-attached memory (NAM, seed 004 section 2.2.1) through the REST API of the
    NAM/GCE manager, which keeps the free segments and allocations of every NAM board in an SQL database.
  - The allocation is found by O(name), so a task is idempotent and a second run changes nothing.
  - The manager takes the smallest contiguous free segment that fits and splits it; freeing merges the segment
    with its free neighbours. A request fails, saying how large the largest free segment is, when no contiguous
    segment is large enough, and an attach fails when the attached-allocation table (AAT) of the board is full.
  - Part of every NAM pool may be reserved for administrators (O(reserved)).
version_added: "0.1.0"
author:
  - msa.hpc maintainers (@msa-hpc)
extends_documentation_fragment:
  - msa.hpc.attributes
  - msa.hpc.manager
options:
  state:
    description:
      - V(present) allocates the memory when no allocation called O(name) exists.
      - V(absent) frees it (its AAT entries go with it).
      - V(attached) makes sure process O(vpid) on O(node) is attached (allocating first when O(size) is given).
      - V(detached) removes that process's AAT entry.
    type: str
    choices: [present, absent, attached, detached]
    default: present
  name:
    description: Name of the allocation, unique among the manager's live allocations; the key of idempotency.
    type: str
    required: true
  size:
    description:
      - Size in bytes or with a unit (V(512M), V(2G), V(1.5TiB)); K, M, G, T, P and E are powers of 1024 in every
        spelling, as Slurm reads sizes (C(M), C(MB) and C(MiB) all mean 2^20 bytes).
      - Required to create the allocation. An existing allocation of another size is an error (NAM allocations
        cannot be resized).
    type: str
  volatile:
    description: Fast volatile memory (V(true)) or the slower non-volatile memory of the NAM (V(false)).
    type: bool
    default: true
  job:
    description: Slurm job id that owns the allocation; the epilog and the orphan clean-up free by job.
    type: str
  owner:
    description: User that owns the allocation (default the authenticated user; others need the admin role).
    type: str
  device:
    description: NAM board to allocate on (default any, best fit over all boards).
    type: str
  reserved:
    description: Allocate from the administrator reserve (admin role only).
    type: bool
    default: false
  node:
    description: Node of the process to attach or detach (host name or EXTOLL node id).
    type: str
  vpid:
    description: Virtual process id (VPID) of the process to attach or detach.
    type: int
attributes:
  check_mode:
    support: full
    details: Reports the allocation, free or attachment that would happen, without asking the manager to do it.
  diff_mode:
    support: full
    details: Shows the allocation (size, placement, attachments) before and after.
seealso:
  - module: msa.hpc.gce_comm
"""

EXAMPLES = r"""
# The manager's endpoint and credentials once, for every NAM and GCE task of the block (action group
# msa.hpc.managers)
- name: Checkpoint memory of job 4242 on the NAM
  module_defaults:
    group/msa.hpc.managers:
      endpoint: https://mgmt01:8780
      ca_path: /etc/msa-hpc/tls/ca.pem
      username: slurm
      password: "{{ nam_manager_password }}"
  block:
    - name: Allocate 100 GiB of NAM memory for job 4242
      msa.hpc.nam_segment:
        name: job4242-checkpoint
        size: 100G
        volatile: false
        job: "4242"
        owner: alice

    - name: Attach rank 0 of the job to it
      msa.hpc.nam_segment:
        name: job4242-checkpoint
        state: attached
        node: esb01
        vpid: 0

    - name: Free it again
      msa.hpc.nam_segment:
        name: job4242-checkpoint
        state: absent
"""

RETURN = r"""
id:
  description: Allocation id (unique, never reused); null when absent or in check mode before creation.
  returned: when the allocation exists
  type: int
  sample: 17
size:
  description: Allocated bytes (the request rounded up to the manager's granularity).
  returned: when the allocation exists
  type: int
  sample: 107374182400
device:
  description: NAM board holding the allocation.
  returned: when the allocation exists
  type: str
  sample: nam01
offset:
  description: Offset of the allocation within its pool (volatile or non-volatile) of the board.
  returned: when the allocation exists
  type: int
  sample: 0
address:
  description: Address of the allocation on the board (the non-volatile pool follows the volatile one).
  returned: when the allocation exists
  type: int
  sample: 68719476736
allocation:
  description: The whole allocation record (owner, job, volatile, attachments, ...), or null when absent.
  returned: always
  type: dict
attachment:
  description: The AAT entry of O(node)/O(vpid) with what libNAM needs (board, address, size, AAT index).
  returned: when state is attached
  type: dict
  sample: {"allocation": 17, "device": "nam01", "address": 0, "size": 1048576, "aat_index": 3,
           "node": "esb01", "vpid": 0}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.msa.hpc.plugins.module_utils._module_run import rest_failure, run_module
from ansible_collections.msa.hpc.plugins.module_utils._manager import (
    MANAGER_MUTUALLY_EXCLUSIVE, MANAGER_REQUIRED_TOGETHER, manager_argument_spec, manager_client)
from ansible_collections.msa.hpc.plugins.module_utils._nam import ManagerError, NamService, ensure_segment
from ansible_collections.msa.hpc.plugins.module_utils._rest import RestError


def main():
    module = AnsibleModule(
        argument_spec=manager_argument_spec(
            state=dict(type="str", default="present", choices=["present", "absent", "attached", "detached"]),
            name=dict(type="str", required=True),
            size=dict(type="str"),
            volatile=dict(type="bool", default=True),
            job=dict(type="str"),
            owner=dict(type="str"),
            device=dict(type="str"),
            reserved=dict(type="bool", default=False),
            node=dict(type="str"),
            vpid=dict(type="int"),
        ),
        required_if=[("state", "attached", ("node", "vpid")), ("state", "detached", ("node", "vpid"))],
        required_together=MANAGER_REQUIRED_TOGETHER,
        mutually_exclusive=MANAGER_MUTUALLY_EXCLUSIVE,
        supports_check_mode=True,
    )
    run_module(module, lambda: ensure_segment(NamService(manager_client(module.params)), module.params,
                                              module.check_mode),
               [((ManagerError, ValueError), lambda exc: {"msg": str(exc), "code": getattr(exc, "code", None),
                                                          "details": getattr(exc, "details", None)}),
                (RestError, rest_failure("NAM manager", module.params["endpoint"]))])


if __name__ == "__main__":
    main()
