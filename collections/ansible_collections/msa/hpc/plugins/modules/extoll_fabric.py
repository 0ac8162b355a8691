# SPDX-License-Identifier: GPL-3.0-or-later
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

"""Ansible module: configure an EXTOLL fabric through the EMP master's REST API."""

DOCUMENTATION = r"""
---
module: extoll_fabric
short_description: Discover, route, start and stop an EXTOLL fabric through the EMP master
description:
  - Talks to the REST API of the EXTOLL Management Program (EMP) master (seed 004 section 2.1).
  - Validates a topology definition (the C(.td) format, or the same model as YAML) with line-numbered
    errors, uploads it to the master, compares it with the discovered fabric, has the master compute and
    install routing tables (dimension-order, shortest path or up*/down*) and starts or stops the network.
  - In O(mode=topology) it waits until the discovered fabric holds every node and link of the definition
    (up to O(wait_timeout)) and reports what is missing; in O(mode=auto) it routes whatever was discovered
    with up*/down*, which is deadlock-free on any connected topology.
  - The module computes the routing tables itself and proves them deadlock-free (the collection's routing engines
    and channel-dependency proof, the same library the stand-in EMP master uses), from the fabric the master
    discovered and the options the master reports in its dry run. It refuses, installing nothing, when the
    master's dry run plans other tables for the same fabric and options; otherwise the master installs them.
  - Check mode and C(--diff) show the per-node table changes and the deadlock-freedom certificate before the master
    installs anything; check mode installs nothing.
  - Works against a master with only the seed's endpoint list (C(emp/run), C(emp/status), C(network/*), C(nodes));
    the extras C(emp/topology) and C(emp/routes) (upload, dry run, table diff) are used when the master has them.
version_added: "0.1.0"
requirements:
  - numpy (C(python3-numpy)) on the host that runs the module, which computes and proves the plan.
author:
  - msa.hpc maintainers (@msa-hpc)
extends_documentation_fragment:
  - msa.hpc.attributes
options:
  endpoint:
    description: Base URL of the EMP master, for example C(https://mgmt01:9000).
    type: str
    required: true
  token:
    description: Bearer token of the EMP master (the content of its C(token_file)).
    type: str
  validate_certs:
    description: Verify the master's TLS certificate (off is for tests only; the master speaks TLS only).
    type: bool
    default: true
  ca_path:
    description:
      - PEM file (or directory) of the CA certificates the master's certificate is verified against, for example the
        system's CA C(/etc/msa-hpc/tls/ca.pem). Default is the system's trusted CAs.
    type: path
  timeout:
    description: Seconds for one HTTP request.
    type: int
    default: 10
  state:
    description:
      - V(started) makes sure the definition is loaded, routing tables are installed and the network is up.
      - V(stopped) stops the network (EXTOLL traffic is refused again); tables stay installed.
      - V(discovered) runs a discovery and reports nodes, links and the comparison with the definition.
    type: str
    choices: [started, stopped, discovered]
    default: started
  topology_file:
    description: Path of a topology definition (C(.td)) file on the managed host.
    type: path
  topology:
    description:
      - The topology as a mapping with C(inventory), C(topologies) and C(links), or C(generate) with
        C(type) and C(dims) for a regular Mesh, Torus or Hypercube.
    type: dict
  routing:
    description:
      - Routing algorithm to use instead of the one the definition names. Without it, a definition with
        several C(topology) blocks is routed per block (V(PerBlock)) - each block by its own algorithm, the
        parent's between blocks.
    type: str
    choices: [DimensionOrder, ShortestPath, UpDown, PerBlock]
  fallback:
    description:
      - Engines tried in order when the routing's tables cannot be made deadlock-free on the available virtual
        channels (OpenSM's C(-R a,b)). Empty means refuse; nothing is installed then.
      - Omitted, the master's C(routing_fallback) applies.
    type: list
    elements: str
  virtual_channels:
    description:
      - Virtual channels per EXTOLL link the routing may use (1 to 4; an EXTOLL link offers 4 in the model).
        Routes that cycle are spread over them (torus datelines or up*/down* layers).
      - Omitted, the master's C(virtual_channels) applies.
    type: int
  mode:
    description:
      - V(topology) waits until the discovered fabric matches the definition, then routes with its algorithm.
      - V(auto) routes the discovered fabric with up*/down* (or O(routing)) without waiting.
      - Defaults to V(topology) when a definition is given, else V(auto).
    type: str
    choices: [auto, topology]
  wait_timeout:
    description: Seconds to wait for the fabric to match the definition and for the tables to be installed.
    type: int
    default: 300
  poll_interval:
    description: Seconds between discoveries while waiting.
    type: float
    default: 2.0
attributes:
  check_mode:
    support: full
    details: Computes and proves the routing tables on the managed host and installs nothing.
  diff_mode:
    support: full
    details:
      - Shows the topology definition, the routing table entries (one C(node S dst D port P) line each) and the
        deadlock-freedom certificate (C(certificate KEY VALUE) lines), before and after.
notes:
  - Ports in C(.td) links are the chip's link ports; in generated topologies port C(2d) leads to the minus
    and port C(2d+1) to the plus neighbour of dimension C(d).
seealso:
  - name: EMP (seed 004 section 2.1)
    description: EXTOLL Management Program REST API, emp-ctrl and the topology definition format.
    link: https://www.deep-projects.eu/
"""

EXAMPLES = r"""
- name: Route the ESB torus as defined and start the EXTOLL network
  msa.hpc.extoll_fabric:
    endpoint: https://mgmt01:9000
    ca_path: /etc/msa-hpc/tls/ca.pem
    token: "{{ emp_token }}"
    topology_file: /etc/extoll/topology.td
    mode: topology
    wait_timeout: 600

- name: Route whatever booted with up*/down*
  msa.hpc.extoll_fabric:
    endpoint: https://mgmt01:9000
    ca_path: /etc/msa-hpc/tls/ca.pem
    token: "{{ emp_token }}"
    mode: auto

- name: Define a 4x4 torus inline
  msa.hpc.extoll_fabric:
    endpoint: https://mgmt01:9000
    ca_path: /etc/msa-hpc/tls/ca.pem
    token: "{{ emp_token }}"
    topology:
      generate: {type: Torus, dims: [4, 4], routing: DimensionOrder}

- name: Show the tables and certificate the fabric would get, installing nothing
  check_mode: true
  diff: true
  msa.hpc.extoll_fabric:
    routing: UpDown
    topology_file: /etc/extoll/topology.td
    endpoint: https://mgmt01:9000
    ca_path: /etc/msa-hpc/tls/ca.pem
    token: "{{ emp_token }}"
  register: extoll_plan

- name: Fail unless the planned routing is deadlock-free
  ansible.builtin.assert:
    that: extoll_plan.plan.certificate.deadlock_free

- name: Report missing nodes and links without changing anything
  msa.hpc.extoll_fabric:
    endpoint: https://mgmt01:9000
    ca_path: /etc/msa-hpc/tls/ca.pem
    token: "{{ emp_token }}"
    topology_file: /etc/extoll/topology.td
    state: discovered

- name: Stop the EXTOLL network
  msa.hpc.extoll_fabric:
    endpoint: https://mgmt01:9000
    ca_path: /etc/msa-hpc/tls/ca.pem
    token: "{{ emp_token }}"
    state: stopped
"""

RETURN = r"""
status:
  description: Network status after the task (C(un-configured), C(configured), C(up) or C(down)).
  returned: always
  type: str
  sample: up
missing_nodes:
  description: Nodes of the definition that discovery did not find.
  returned: when a definition is known
  type: list
  elements: dict
  sample: [{"id": 19, "guid": "0x615"}]
missing_links:
  description: Links of the definition that discovery did not find, as C(NODE PORT <-> PORT NODE).
  returned: when a definition is known
  type: list
  elements: str
  sample: ["1 0 <-> 0 2"]
unexpected_nodes:
  description: Discovered nodes the definition does not list.
  returned: when a definition is known
  type: list
  elements: dict
unexpected_links:
  description: Discovered links the definition does not list.
  returned: when a definition is known
  type: list
  elements: str
routing:
  description:
    - Certificate of the routing tables (computed and proved by the module; against a master with only the seed's
      endpoints, the one the master installed, or the module's in check mode) - C(algorithm) (the
      engine used), C(requested), C(scheme) (VC rule - single, dateline or layers), C(virtual_channels)
      (used), C(virtual_channels_available), C(acyclic) (the channel-dependency graph on those VCs),
      C(deadlock_free), C(channels), C(dependencies), C(max_hops), C(avg_hops), C(blocks) (per-block
      algorithms) and C(attempts) (engines or schemes that failed, with the channels on their cycle).
  returned: when state is started
  type: dict
  sample: {"algorithm": "DimensionOrder", "scheme": "dateline", "max_hops": 4, "avg_hops": 2.13,
           "acyclic": true, "deadlock_free": true, "virtual_channels": 2, "virtual_channels_available": 4,
           "channels": 72, "dependencies": 104, "nodes": 16}
certificate:
  description: The same certificate as RV(routing).
  returned: when state is started
  type: dict
plan:
  description:
    - >-
      The routing plan computed and proved by the module (the collection's routing library) before the master
      installs it - C(algorithm), C(certificate) (as RV(routing)), C(changes) (the per-node table entries that
      change, as C(node S: dst D port A -> B)), C(computed_by) (V(collection), or V(emp) when the master's dry run
      does not say which fabric it discovered) and C(matches_emp) (the master's dry run plans the same tables;
      null when there is none to compare with, as against a master with only the seed's endpoints).
  returned: when state is started and the fabric could be planned
  type: dict
  sample: {"algorithm": "DimensionOrder", "computed_by": "collection", "matches_emp": true,
           "changes": ["node 1: dst 2 port - -> 1"], "certificate": {"deadlock_free": true, "max_hops": 3}}
dot:
  description: The fabric as a Graphviz graph.
  returned: when state is started
  type: str
nodes:
  description: Discovered nodes (id, guid, type).
  returned: when state is discovered
  type: list
  elements: dict
links:
  description: Discovered links.
  returned: when state is discovered
  type: list
  elements: str
seed_endpoints_only:
  description: True when the master answers only the seed's endpoint list (no upload, dry run or table diff).
  returned: when the master lacks the extra endpoints
  type: bool
table_changes:
  description: Number of routing table entries that changed (or would change in check mode).
  returned: when state is started
  type: int
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.msa.hpc.plugins.module_utils._module_run import rest_failure, run_module
from ansible_collections.msa.hpc.plugins.module_utils._rest import RestError
from ansible_collections.msa.hpc.plugins.module_utils.extoll.emp import EmpClient, FabricError
from ansible_collections.msa.hpc.plugins.module_utils.extoll.fabric_state import apply
from ansible_collections.msa.hpc.plugins.module_utils.extoll.topology import TopologyError


def main():
    module = AnsibleModule(
        argument_spec=dict(
            endpoint=dict(type="str", required=True),
            token=dict(type="str", no_log=True),
            validate_certs=dict(type="bool", default=True),
            ca_path=dict(type="path"),
            timeout=dict(type="int", default=10),
            state=dict(type="str", default="started", choices=["started", "stopped", "discovered"]),
            topology_file=dict(type="path"),
            topology=dict(type="dict"),
            routing=dict(type="str", choices=["DimensionOrder", "ShortestPath", "UpDown", "PerBlock"]),
            fallback=dict(type="list", elements="str"),
            virtual_channels=dict(type="int"),
            mode=dict(type="str", choices=["auto", "topology"]),
            wait_timeout=dict(type="int", default=300),
            poll_interval=dict(type="float", default=2.0),
        ),
        mutually_exclusive=[("topology_file", "topology")],
        supports_check_mode=True,
    )
    params = module.params
    field = "topology_file" if params.get("topology_file") else "topology"

    def action():
        emp = EmpClient.connect(params["endpoint"], token=params["token"], validate_certs=params["validate_certs"],
                                ca_path=params["ca_path"], timeout=params["timeout"])
        return apply(emp, params, module.check_mode)

    run_module(module, action, [
        (TopologyError, lambda exc: {"msg": "%s: %s" % (field, exc), "file": exc.file, "line": exc.line,
                                     "reason": exc.reason}),
        (RestError, rest_failure("EMP master", params["endpoint"])),
        (FabricError, lambda exc: dict(exc.result, msg=str(exc))),
    ])


if __name__ == "__main__":
    main()
