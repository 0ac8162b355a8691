#!/usr/bin/python
# SPDX-License-Identifier: GPL-3.0-or-later
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

"""Ansible module msa.hpc.reimage_plan: which nodes run an out-of-date image, and the waves that reimage them."""

DOCUMENTATION = r"""
module: reimage_plan
short_description: Plan the reimage of a software set's nodes through Slurm, in waves
version_added: 0.7.0
author:
  - msa.hpc maintainers (@msa-hpc)
description:
  - Compares the image each node booted (its C(/etc/msa-hpc/image.json), which C(playbooks/image.yml) writes into
    every node image) with the set's current image, and plans the reimage of the nodes that differ in waves of
    O(wave_size) nodes, each one C(scontrol reboot ASAP nextstate=resume reason="msa-reimage <image>" <nodes>).
  - C(ASAP) drains the nodes, so a running job finishes before its node reboots; the node's RebootProgram
    (role C(msa.hpc.slurm_reboot)) boots the image its reason names, after checking it against its own pattern.
  - Unless O(whole_partition), no wave holds every node of a Slurm partition of two or more nodes.
  - Computes only; changes nothing (C(changed) is always false). The bundle's C(playbooks/reimage.yml) runs the waves.
attributes:
  check_mode:
    support: full
    details: The module changes nothing; the playbook stops after the plan in check mode.
  diff_mode:
    support: none
extends_documentation_fragment:
  - msa.hpc.attributes
options:
  nodes:
    description:
      - Each node of the set and what it booted, the content of its C(/etc/msa-hpc/image.json) (at least C(hash));
        an empty mapping for a node that says nothing (not booted from an image).
    type: dict
    required: true
  image:
    description: The set's current image, C(<name>:<first 12 characters of its hash>), as the nodes' BMCs boot it.
    type: str
    required: true
  image_hash:
    description: Its C(msa.hpc.image.hash) label (sha256, hex).
    type: str
    required: true
  image_pattern:
    description: The images a node may be asked to boot (a regular expression matched whole), as the nodes check it.
    type: str
    default: "localhost/msa-[a-z0-9-]+:[0-9a-f]{12}"
  wave_size:
    description: At most this many nodes reboot at a time.
    type: int
    default: 1
  slurm_nodes:
    description:
      - Node records with C(name) and C(partitions) (C(scontrol show nodes --json) through the filter
        msa.hpc.slurm_nodes); every stale node must be among them, and their partitions bound the waves. Omitted,
        the waves are bounded by O(wave_size) alone.
    type: list
    elements: dict
  whole_partition:
    description: Allow a wave to hold every node of a partition (the partition then runs no job for a while).
    type: bool
    default: false
  adopt:
    description: Reimage nodes that booted no image too (their C(image.json) is missing); otherwise they are left alone.
    type: bool
    default: false
"""

EXAMPLES = r"""
- name: Plan the reimage of the compute nodes
  msa.hpc.reimage_plan:
    nodes: {cm01: {hash: "{{ old_hash }}"}, cm02: {hash: "{{ new_hash }}"}}
    image: "localhost/msa-compute:{{ new_hash[:12] }}"
    image_hash: "{{ new_hash }}"
    wave_size: 2
  register: plan
"""

RETURN = r"""
current:
  description: The nodes that run the image already.
  returned: always
  type: list
  elements: str
stale:
  description: The nodes to reimage.
  returned: always
  type: list
  elements: str
unknown:
  description: The nodes that booted no image, left alone unless O(adopt).
  returned: always
  type: list
  elements: str
waves:
  description: The stale nodes, wave by wave.
  returned: always
  type: list
  elements: list
commands:
  description: The argv of each wave's C(scontrol reboot).
  returned: always
  type: list
  elements: list
  sample: [[scontrol, reboot, ASAP, nextstate=resume, "reason=msa-reimage localhost/msa-compute:3f5c0a1b2c3d", "cm01,cm02"]]
summary:
  description: One line saying what the plan is.
  returned: always
  type: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.msa.hpc.plugins.module_utils._reimage_plan import PlanError, plan


def main():
    module = AnsibleModule(argument_spec={
        "nodes": {"type": "dict", "required": True},
        "image": {"type": "str", "required": True},
        "image_hash": {"type": "str", "required": True},
        "image_pattern": {"type": "str", "default": "localhost/msa-[a-z0-9-]+:[0-9a-f]{12}"},
        "wave_size": {"type": "int", "default": 1},
        "slurm_nodes": {"type": "list", "elements": "dict"},
        "whole_partition": {"type": "bool", "default": False},
        "adopt": {"type": "bool", "default": False}}, supports_check_mode=True)
    p = module.params
    try:
        result = plan(p["nodes"], p["image"], p["image_hash"], p["image_pattern"], p["wave_size"], p["slurm_nodes"],
                      p["whole_partition"], p["adopt"])
    except PlanError as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
