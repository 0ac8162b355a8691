#!/usr/bin/python
# SPDX-License-Identifier: GPL-3.0-or-later
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

"""Ansible module msa.hpc.system_info: the MSA system as structured facts for a CMDB or an orchestrator."""

DOCUMENTATION = r"""
module: system_info
short_description: The MSA system as structured facts (modules, partitions, nodes, gateways, NAM, GCE, fabric)
version_added: 0.1.0
author:
  - msa.hpc maintainers (@msa-hpc)
description:
  - Information provider of seeds 002/003 - returns what an orchestrator, a portal or a CMDB needs to know about the
    system, read from the batch system, as one document that validates against a written JSON schema
    (C(docs/system_info.schema.json) in the collection, the same as C(SCHEMA) in C(module_utils/_system_info.py)).
  - Modules and partitions with node counts, node states, CPUs, memory and GPUs (from each node's GRES); every
    node with its state, flags, CPUs, memory, GPUs, features and address.
  - The MSA global resources Slurm counts as cluster licences - free MPI gateways (C(gateway)), NAM capacity in GiB
    (C(nam)) and GCE availability (C(gce)) - with total, used and free counts.
  - With O(fabric_endpoint), the EXTOLL fabric's status from the fabric manager (EMP) - network status, nodes seen,
    nodes up, routing algorithm.
  - Reads Slurm through slurmrestd (O(source=rest); C(/slurm/v0.0.38/nodes), C(/partitions), C(/licenses), or,
    where the API has no licence endpoint, licence use summed over the running jobs against O(license_totals)) or
    through the commands on the target (O(source=cli); C(sinfo --json), C(scontrol -o show partitions|licenses)).
attributes:
  check_mode:
    support: full
    details: The module only reads.
  diff_mode:
    support: none
extends_documentation_fragment:
  - msa.hpc.attributes
  - msa.hpc.slurmrest
options:
  source:
    description:
      - Where to read Slurm from. V(auto) uses slurmrestd when O(rest_url) is given, else the commands.
    type: str
    choices: [auto, rest, cli]
    default: auto
  validate_certs:
    description: Verify TLS certificates of C(https://) endpoints (off is for tests only).
    type: bool
    default: true
  ca_path:
    description:
      - PEM file of the CA certificates the C(https://) endpoints are verified against (O(rest_ca_path), when given,
        wins for slurmrestd), for example the system's CA C(/etc/msa-hpc/tls/ca.pem).
    type: path
  license_totals:
    description:
      - Total count of each licence (C(gateway), C(nam), C(gce), ...) for a slurmrestd without a licence endpoint;
        the licences in use are then summed over the running jobs. Ignored when the totals come from Slurm.
    type: dict
    default: {}
  partition_modules:
    description: Partition name to MSA module name, where they differ (default - the module is named as the partition).
    type: dict
    default: {}
  fabric_endpoint:
    description: Base URL of the EXTOLL fabric manager's REST API (EMP), for example C(https://mgmt01:9000). Without it
      C(fabric) is null.
    type: str
  fabric_token:
    description: Bearer token of the fabric manager (the content of its token file); never printed.
    type: str
notes:
  - The facts are checked against the schema before they are returned; a mismatch fails the task naming the paths.
seealso:
  - module: msa.hpc.slurm_packjob
  - module: msa.hpc.extoll_fabric
"""

EXAMPLES = r"""
- name: Read the system through slurmrestd
  msa.hpc.system_info:
    rest_url: "https://{{ hostvars[groups['slurm_controller'][0]].msa_addresses.mgmt }}:6820"
    rest_user: "{{ msa_slurm_rest_user }}"
    rest_token: "{{ msa_slurm_rest_token }}"
    license_totals: {gateway: 2, nam: 7, gce: 1}
  register: msa_system

- name: Read the system on the controller with Slurm's commands, with the fabric's status
  msa.hpc.system_info:
    source: cli
    fabric_endpoint: http://10.22.0.10:9000
    fabric_token: "{{ lookup('ansible.builtin.file', 'emp.token') }}"
  register: msa_system

- name: Show the free gateways
  ansible.builtin.debug:
    msg: "{{ msa_system.system_info.resources.gateways.free }} gateways free"
"""

RETURN = r"""
system_info:
  description: The system; the JSON schema C(docs/system_info.schema.json) describes every field.
  returned: success
  type: dict
  contains:
    schema_version: {description: Version of the schema (1)., type: int}
    source: {description: "V(rest) or V(cli).", type: str}
    cluster: {description: Slurm cluster name when known., type: str}
    totals: {description: "node_count, nodes, states (state to count), cpus, cpus_allocated, memory_mb, gpus.", type: dict}
    modules: {description: One entry per MSA module with its partitions and the totals of its nodes., type: list, elements: dict}
    partitions: {description: "One entry per partition - name, module, state, default, max_time_minutes and totals.", type: list, elements: dict}
    nodes:
      description: "One entry per node - name, state, flags, partitions, cpus, cpus_allocated, memory_mb, gpus, gres,
        features, address."
      type: list
      elements: dict
    licenses: {description: "Licence name to total, used, free.", type: dict}
    resources: {description: "gateways, nam (unit GiB) and gce (with available) as total, used, free.", type: dict}
    fabric: {description: "status, up, nodes, nodes_up, routing of the EXTOLL fabric, or null.", type: dict}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.msa.hpc.plugins.module_utils._rest import RestClient, RestError
from ansible_collections.msa.hpc.plugins.module_utils._system_info import (
    SystemInfoError, fabric_from_emp, from_cli, from_rest, validate)
from ansible_collections.msa.hpc.plugins.module_utils.slurm.rest import RestTransport, SlurmRestError, rest_argument_spec


def argument_spec():
    return dict(
        source=dict(type="str", choices=["auto", "rest", "cli"], default="auto"),
        **rest_argument_spec(),
        validate_certs=dict(type="bool", default=True), ca_path=dict(type="path"),
        license_totals=dict(type="dict", default={}), partition_modules=dict(type="dict", default={}),
        fabric_endpoint=dict(type="str"), fabric_token=dict(type="str", no_log=True),
    )


def _fabric(params):
    if not params["fabric_endpoint"]:
        return None
    client = RestClient(params["fabric_endpoint"], token=params["fabric_token"], timeout=params["rest_timeout"],
                        validate_certs=params["validate_certs"], ca_path=params.get("ca_path"), retries=1)
    try:
        return fabric_from_emp(client.get)
    except RestError as exc:
        raise SystemInfoError("fabric manager at %s (fabric_endpoint): %s" % (params["fabric_endpoint"], exc))


def gather(params, run_command, transport_class=RestTransport):
    """The facts for the module's parameters."""
    source = params["source"]
    if source == "auto":
        source = "rest" if params["rest_url"] else "cli"
    fabric = _fabric(params)
    if source == "cli":
        return from_cli(run_command, params["partition_modules"], fabric)
    transport = transport_class(params["rest_url"], params["rest_user"], params["rest_token"],
                                timeout=params["rest_timeout"], validate_certs=params["validate_certs"],
                                ca_path=params.get("rest_ca_path") or params.get("ca_path"))
    return from_rest(transport.get, params["license_totals"], params["partition_modules"], fabric, transport.api)


def main():
    module = AnsibleModule(argument_spec=argument_spec(), supports_check_mode=True,
                           required_if=[("source", "rest", ("rest_url", "rest_user", "rest_token"))],
                           required_together=[("rest_url", "rest_user", "rest_token")])
    try:
        info = gather(module.params, module.run_command)
    except (SlurmRestError, SystemInfoError) as exc:
        module.fail_json(msg="Could not read the system: %s" % exc)
    problems = validate(info)
    if problems:
        module.fail_json(msg="The system's facts do not match their schema: %s" % "; ".join(problems[:10]),
                         schema_problems=problems, system_info=info)
    module.exit_json(changed=False, system_info=info)


if __name__ == "__main__":
    main()
