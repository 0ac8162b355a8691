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
  - Check mode asks the master to compute the tables without installing them and reports what would change.
  - Works against a master with only the seed's endpoint list (C(emp/run), C(emp/status), C(network/*), C(nodes));
    the extras C(emp/topology) and C(emp/routes) (upload, dry run, table diff) are used when the master has them.
version_added: "0.1.0"
author:
  - msa.hpc maintainers (@msa-hpc)
extends_documentation_fragment:
  - msa.hpc.attributes
  - msa.hpc.attributes.platform
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
    details: Computes the routing tables on the master without installing them.
  diff_mode:
    support: full
    details: Shows the topology definition and the routing table entries that change.
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
    - Certificate of the routing tables (computed, or installed in check mode's place) - C(algorithm) (the
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

import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.msa.hpc.plugins.module_utils.extoll import topology as T
from ansible_collections.msa.hpc.plugins.module_utils._rest import RestClient, RestError, send_again
from ansible_collections.msa.hpc.plugins.module_utils.extoll.routing import table_changes

COMPARISON_KEYS = ("missing_nodes", "missing_links", "unexpected_nodes", "unexpected_links")


class FabricError(Exception):
    def __init__(self, message, **result):
        super().__init__(message)
        self.result = result


def load_definition(params):
    """The definition as .td text (normalised by the writer), or None."""
    if params.get("topology_file"):
        return T.to_td(T.load_td(params["topology_file"]))
    if params.get("topology"):
        return T.to_td(T.from_dict(params["topology"], "topology"))
    return None


def _table_lines(tables):
    return "".join("node %s dst %s port %s\n" % (s, d, p)
                   for s in sorted(tables, key=int) for d, p in sorted(tables[s].items(), key=lambda e: int(e[0])))


def _routing_options(params):
    """Only the options given: a master that predates them (the seed's endpoint list) is not sent them."""
    return {k: params[k] for k in ("fallback", "virtual_channels") if params.get(k) is not None}


def _wait_for_match(client, body, params, sleep):
    deadline = time.monotonic() + params["wait_timeout"]
    while True:
        plan = client.post("emp/run", body, lookup=send_again)
        comparison = plan.get("comparison") or {}
        if body["mode"] != "topology" or not (comparison.get("missing_nodes") or comparison.get("missing_links")):
            return plan
        if time.monotonic() >= deadline:
            raise FabricError("the discovered fabric still lacks %d nodes and %d links of the topology after %ss"
                              % (len(comparison["missing_nodes"]), len(comparison["missing_links"]),
                                 params["wait_timeout"]), **{k: comparison.get(k, []) for k in COMPARISON_KEYS})
        sleep(params["poll_interval"])


def _wait_for_run(client, params, sleep):
    deadline = time.monotonic() + params["wait_timeout"]
    while True:
        status = client.get("emp/status")
        if status.get("state") == "done":
            return status
        if status.get("state") == "failed":
            raise FabricError("emp run failed: %s" % status.get("message"))
        if time.monotonic() >= deadline:
            raise FabricError("emp run did not finish within %ss (state %s: %s)"
                              % (params["wait_timeout"], status.get("state"), status.get("message")))
        sleep(0.2)


def _extra(client, path):
    """GET an endpoint beyond the seed's list; None when the master does not have it (HTTP 404)."""
    try:
        return client.get(path) or {}
    except RestError as exc:
        if exc.status == 404:
            return None
        raise


def started_seed_only(client, params, check_mode, mode, sleep):
    """Against a master with only the seed's endpoints: it reads its topology definition itself (master.conf), so
    there is nothing to upload or dry-run; a network that is up after a finished run is left alone."""
    if params.get("topology_file") or params.get("topology"):
        load_definition(params)  # still validated, with line numbers
    status = client.get("emp/status") or {}
    net = client.get("network/status") or {}
    changed = not (net.get("status") == "up" and status.get("state") == "done")
    if changed and not check_mode:
        body = dict(_routing_options(params), mode=mode, timeout=params["wait_timeout"])
        if params.get("routing"):
            body["routing"] = params["routing"]
        client.post("emp/run", body, lookup=send_again)
        status = _wait_for_run(client, params, sleep)
        if (client.get("network/status") or {}).get("status") != "up":
            client.post("network/start", {}, lookup=send_again)
    info = client.get("network/info") or {}
    certificate = dict(status.get("summary") or (info.get("routing") or {}).get("summary") or {},
                       algorithm=status.get("algorithm") or (info.get("routing") or {}).get("algorithm"))
    return {"changed": changed, "status": "up" if check_mode else (client.get("network/status") or {}).get("status"),
            "routing": certificate, "certificate": certificate, "dot": None, "table_changes": 0,
            "seed_endpoints_only": True,
            "diff": {"before": "network %s\n" % net.get("status"), "after": "network up\n"}}


def started(client, params, check_mode, sleep=time.sleep):
    td = load_definition(params)
    mode = params.get("mode") or ("topology" if td is not None else "auto")
    stored = _extra(client, "emp/topology")
    if stored is None:
        return started_seed_only(client, params, check_mode, mode, sleep)
    before_td = stored.get("td")
    if td is None:
        td = before_td
    topology_changed = td is not None and td != before_td
    before_routes = client.get("emp/routes") or {}
    before_net = client.get("network/status") or {}
    body = {"dry_run": True, "mode": mode, "routing": params.get("routing"), "td": td}
    body.update(_routing_options(params))
    plan = _wait_for_match(client, body, params, sleep)
    after_tables = plan["tables"]
    changes = table_changes(before_routes.get("tables") or {}, after_tables)
    routes_changed = bool(changes) or not before_routes.get("version") or \
        before_routes.get("algorithm") != plan["algorithm"]
    start_network = before_net.get("status") != "up"
    if not check_mode:
        if topology_changed:
            client.request("PUT", "emp/topology", body={"td": td, "source": params.get("topology_file") or "topology"})
        if routes_changed:
            # The EMP master's POSTs set a state (run, network start/stop, discover): sending one again whose
            # answer was lost cannot duplicate anything.
            client.post("emp/run", dict(_routing_options(params), mode=mode, routing=params.get("routing"),
                                        timeout=params["wait_timeout"]), lookup=send_again)
            _wait_for_run(client, params, sleep)
        if start_network:
            client.post("network/start", {}, lookup=send_again)
    status = "up" if check_mode else (client.get("network/status") or {}).get("status")
    certificate = dict(plan["summary"], algorithm=plan["algorithm"])
    result = {"changed": topology_changed or routes_changed or start_network, "status": status,
              "routing": certificate, "certificate": certificate, "dot": plan["dot"],
              "table_changes": len(changes)}
    result.update({k: (plan.get("comparison") or {}).get(k, []) for k in COMPARISON_KEYS})
    result["diff"] = {"before": (before_td or "") + _table_lines(before_routes.get("tables") or {}),
                      "after": (td or "") + _table_lines(after_tables),
                      "before_header": "EMP topology and routing tables", "after_header": "EMP topology and routing tables"}
    return result


def stopped(client, params, check_mode):
    before = (client.get("network/status") or {}).get("status")
    changed = before == "up"
    if changed and not check_mode:
        client.post("network/stop", {}, lookup=send_again)
    after = "down" if changed else before
    diff = {"before": "network %s\n" % before, "after": "network %s\n" % after}
    return {"changed": changed, "status": after, "diff": diff}


def discovered(client, params):
    found = client.post("emp/discover", {}, lookup=send_again)
    result = {"changed": False, "nodes": found["nodes"], "links": found["links"],
              "status": (client.get("network/status") or {}).get("status")}
    td = load_definition(params)
    comparison = found.get("comparison")
    if td is not None:
        expected = T.parse_td(td, params.get("topology_file") or "topology")
        disc = T.from_discovery([{"guid": n["guid"], "id": n["id"]} for n in found["nodes"]],
                                [_link_guids(link, found["nodes"]) for link in found["links"]])
        comparison = T.compare(expected, disc)
    if comparison:
        result.update({k: comparison.get(k, []) for k in COMPARISON_KEYS})
    return result


def _link_guids(text, nodes):
    guid = {n["id"]: n["guid"] for n in nodes}
    a, pa, arrow, pb, b = text.split()
    return guid[int(a)], int(pa), guid[int(b)], int(pb)


def apply(client, params, check_mode=False, sleep=time.sleep):
    if params["state"] == "stopped":
        return stopped(client, params, check_mode)
    if params["state"] == "discovered":
        return discovered(client, params)
    return started(client, params, check_mode, sleep)


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
    try:
        client = RestClient(module.params["endpoint"], token=module.params["token"],
                            validate_certs=module.params["validate_certs"], ca_path=module.params["ca_path"],
                            timeout=module.params["timeout"])
        result = apply(client, module.params, module.check_mode)
    except T.TopologyError as exc:
        field = "topology_file" if module.params.get("topology_file") else "topology"
        module.fail_json(msg="%s: %s" % (field, exc), file=exc.file, line=exc.line, reason=exc.reason)
    except RestError as exc:
        module.fail_json(msg="EMP master at %s: %s" % (module.params["endpoint"], exc), status=exc.status)
    except FabricError as exc:
        module.fail_json(msg=str(exc), **exc.result)
    if not module._diff:
        result.pop("diff", None)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
