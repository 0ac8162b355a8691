# SPDX-License-Identifier: GPL-3.0-or-later
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

"""Filters msa.hpc.extoll_td, msa.hpc.extoll_node_ids, msa.hpc.extoll_route and msa.hpc.extoll_slurm_topology
(EXTOLL topology of the inventory)."""

import ipaddress
import math

from ansible.errors import AnsibleFilterError

from ansible_collections.msa.hpc.plugins.module_utils.extoll import slurm_topology as ST
from ansible_collections.msa.hpc.plugins.module_utils.extoll import topology as T


def _ordered_hosts(hosts, hostvars, fabric):
    """The fabric's hosts with their GUIDs, ordered by EXTOLL address (then name): node ids follow this order."""
    entries = []
    for host in hosts or []:
        hv = hostvars.get(host) if hasattr(hostvars, "get") else hostvars[host]
        if hv is None:
            raise AnsibleFilterError("extoll_td: host %s is not in hostvars" % host)
        guid = hv.get("msa_extoll_guid")
        if guid is None:
            raise AnsibleFilterError("extoll_td: host %s has no msa_extoll_guid (is it on the EXTOLL fabric %s?)"
                                     % (host, fabric))
        try:
            guid = int(str(guid), 0)
        except ValueError:
            raise AnsibleFilterError("extoll_td: host %s: msa_extoll_guid %r is not an integer" % (host, guid))
        address = (hv.get("msa_addresses") or {}).get(fabric)
        try:
            key = (0, int(ipaddress.ip_address(str(address))), host) if address else (1, 0, host)
        except ValueError:
            raise AnsibleFilterError("extoll_td: host %s: msa_addresses.%s %r is not an IP address" % (host, fabric, address))
        entries.append((key, host, guid))
    entries.sort()
    seen = {}
    for sort_key, host, guid in entries:
        if guid in seen:
            raise AnsibleFilterError("extoll_td: hosts %s and %s have the same msa_extoll_guid 0x%x" % (seen[guid], host, guid))
        seen[guid] = host
    return [(host, guid) for sort_key, host, guid in entries]


def build(hosts, hostvars, topology, fabric="extoll"):
    """``(Topology, {host: node id})`` for the fabric's hosts and the system's ``topology`` description.

    ``topology`` is ``{type, dims, routing}`` (a generated Mesh/Torus/Hypercube: node ids 1..n in the order of
    the hosts' EXTOLL addresses, NAM and GCE devices marked ``t=NAM<k>``/``t=GCE<k>``), ``{file}`` (a .td file)
    or the YAML form of _topology.from_dict; the inventory of a file or YAML form must list exactly the hosts'
    GUIDs.
    """
    ordered = _ordered_hosts(hosts, hostvars, fabric)
    if not isinstance(topology, dict) or not topology:
        raise AnsibleFilterError("extoll_td: topology must be a mapping with type/dims/routing or file, got %r" % (topology,))
    where = "msa_fabrics.%s.topology" % fabric
    try:
        if "file" in topology:
            topo = T.load_td(str(topology["file"]))
        elif "type" in topology or "dims" in topology:
            topo = _generated(topology, ordered, where)
        else:
            topo = T.from_dict(topology, where)
    except T.TopologyError as exc:
        raise AnsibleFilterError("extoll_td: %s" % exc)
    by_guid = topo.by_guid()
    wanted = {guid: host for host, guid in ordered}
    missing = sorted(set(wanted) - set(by_guid))
    extra = sorted(set(by_guid) - set(wanted))
    if missing or extra:
        raise AnsibleFilterError(
            "extoll_td: %s (%s) does not list the GUIDs of the fabric's hosts: missing %s; not in the inventory %s"
            % (where, topo.source, ", ".join("0x%x (%s)" % (g, wanted[g]) for g in missing) or "none",
               ", ".join("0x%x" % g for g in extra) or "none"))
    return topo, {host: by_guid[guid].id for host, guid in ordered}


def _generated(spec, ordered, where):
    kind = spec.get("type", "Torus")
    dims = spec.get("dims")
    if str(kind).lower() == "hypercube" and isinstance(dims, int):
        size = 2 ** dims
    elif isinstance(dims, (list, tuple)) and dims and all(isinstance(k, int) and k > 0 for k in dims):
        size = 2 ** len(dims) if str(kind).lower() == "hypercube" else math.prod(dims)
    else:
        raise T.TopologyError("dims must be a list of positive extents, got %r" % (dims,), where, "dims")
    if size != len(ordered):
        raise T.TopologyError("a %s of %s holds %d nodes but the fabric has %d hosts with a GUID"
                              % (kind, "x".join(str(k) for k in (dims if isinstance(dims, list) else [dims])),
                                 size, len(ordered)), where, "dims")
    routing = spec.get("routing") or "DimensionOrder"
    if routing not in T.ROUTINGS:
        raise T.TopologyError("routing %r is not one of %s" % (routing, ", ".join(T.ROUTINGS)), where, "routing")
    try:
        topo = T.generate(kind, dims, routing=routing)
    except ValueError as exc:
        raise T.TopologyError(str(exc), where, "type")
    counters = {}
    for index, (host, guid) in enumerate(ordered):
        node_id = index + 1
        marker = None
        kind_name = T.guid_type(guid)
        if kind_name in ("NAM", "GCE"):
            counters[kind_name] = counters.get(kind_name, 0) + 1
            marker = "%s%d" % (kind_name, counters[kind_name])
        topo.nodes[node_id] = T.Node(node_id, guid, marker)
    topo.source = where
    return T.validate(topo)


def extoll_td(hosts, hostvars, topology, fabric="extoll"):
    """The .td text of the fabric (inventory by GUID, topology block with coordinates, links)."""
    return T.to_td(build(hosts, hostvars, topology, fabric)[0])


def extoll_node_ids(hosts, hostvars, topology, fabric="extoll"):
    """Host name → EXTOLL node id as the .td of extoll_td assigns them."""
    return build(hosts, hostvars, topology, fabric)[1]


def extoll_route(tables, td, src, dst):
    """Node ids a packet visits from ``src`` to ``dst`` following routing ``tables`` (node → {dst: port},
    as the EMP master's ``emp/routes`` returns them) over the links of ``td`` (.td text)."""
    try:
        topo = T.parse_td(td, "td") if isinstance(td, str) else T.from_dict(td, "td")
    except T.TopologyError as exc:
        raise AnsibleFilterError("extoll_route: %s" % exc)
    adjacency = topo.adjacency()
    src, dst = int(src), int(dst)
    for node in (src, dst):
        if node not in adjacency:
            raise AnsibleFilterError("extoll_route: node %d is not in the topology" % node)
    path = [src]
    while path[-1] != dst:
        here = path[-1]
        try:
            port = int(tables[str(here)][str(dst)])
        except (KeyError, TypeError, ValueError):
            raise AnsibleFilterError("extoll_route: node %d has no route to %d" % (here, dst))
        if port not in adjacency[here]:
            raise AnsibleFilterError("extoll_route: node %d routes %d through port %d, which has no link" % (here, dst, port))
        path.append(adjacency[here][port][0])
        if len(path) > len(adjacency) + 1:
            raise AnsibleFilterError("extoll_route: the route %d → %d loops (%s)" % (src, dst, " ".join(map(str, path))))
    return path


def extoll_slurm_topology(hosts, hostvars, topology, fabric="extoll", slurm_nodes=(), leaf_size=4):
    """Slurm topology.conf (topology/tree) for ``slurm_nodes``: the fabric's Slurm nodes grouped by its blocks
    and coordinates (see _slurm_topology), the other Slurm nodes under a switch of their own."""
    topo, ids = build(hosts, hostvars, topology, fabric)
    wanted = set(slurm_nodes or [])
    on_fabric = {node_id: host for host, node_id in ids.items() if host in wanted}
    try:
        return ST.tree(topo, on_fabric, sorted(wanted - set(on_fabric.values())), leaf_size)
    except ValueError as exc:
        raise AnsibleFilterError("extoll_slurm_topology: %s" % exc)


class FilterModule:
    def filters(self):
        return {"extoll_td": extoll_td, "extoll_node_ids": extoll_node_ids, "extoll_route": extoll_route,
                "extoll_slurm_topology": extoll_slurm_topology}
