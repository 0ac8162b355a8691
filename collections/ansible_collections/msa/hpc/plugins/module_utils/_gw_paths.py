# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

"""The IP paths of a job across the gateways (docs/architecture.md §4.6): which node pairs each gateway forwards,
and which host routes each compute node needs.

A routing file maps a (cluster node, booster node) pair to one gateway. For the kernel data path of MPI codes
(Open MPI over TCP on the data fabrics) that pair becomes a pair of addresses, the cluster node's on the cluster
fabric and the booster node's on the booster fabric, which the gateway forwards for the job only (its agent's
nftables rules are the enforcement), and two host routes: on the cluster node ``<booster addr>/32 via <gateway's
cluster-fabric addr>``, on the booster node ``<cluster addr>/32 via <gateway's booster-fabric addr>`` (the routes
are convenience: without the gateway's rules they lead nowhere). The node addresses come from the pool file's
``nodes`` (written from the inventory), never from the job.
"""

import ipaddress
import re

_NODE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_FABRIC = re.compile(r"^[A-Za-z0-9_-]{1,32}$")


class PathError(ValueError):
    """The job's paths cannot be worked out; the message names the node, fabric or value."""


def _address(value, where):
    try:
        return str(ipaddress.ip_address(str(value)))
    except ValueError:
        raise PathError("%s: %r is not an IP address" % (where, value)) from None


def parse_nodes(data, source="pool"):
    """The pool file's ``nodes``: ``{node name: {fabric: address}}``, every name and address checked."""
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise PathError("%s: nodes must map each compute node to its fabric addresses" % source)
    out = {}
    for name, addresses in data.items():
        if not isinstance(name, str) or not _NODE.match(name):
            raise PathError("%s: nodes: %r is not a node name" % (source, name))
        if not isinstance(addresses, dict):
            raise PathError("%s: nodes.%s must map fabrics to addresses" % (source, name))
        checked = {}
        for fabric, addr in addresses.items():
            if not isinstance(fabric, str) or not _FABRIC.match(fabric):
                raise PathError("%s: nodes.%s: %r is not a fabric name" % (source, name, fabric))
            checked[fabric] = _address(addr, "%s: nodes.%s.%s" % (source, name, fabric))
        out[name] = checked
    return out


def gateway_fabrics(gateway):
    """``(cluster fabric, booster fabric)`` of a pool gateway: the one whose address goes into routing files first."""
    addresses = gateway["addresses"]
    cluster = [f for f, a in sorted(addresses.items()) if a == gateway["route_address"]]
    others = [f for f in sorted(addresses) if f not in cluster]
    if len(cluster) != 1 or len(others) != 1:
        raise PathError("gateway %s must have one address on each of two fabrics, not %s"
                        % (gateway["name"], addresses))
    return cluster[0], others[0]


def node_address(nodes, node, fabric):
    try:
        return nodes[node][fabric]
    except KeyError:
        raise PathError("node %s has no %s address in the pool file's nodes (the gateway role writes them from "
                        "the inventory)" % (node, fabric)) from None


def gateway_pairs(routes, gateways, endpoints, nodes):
    """``{gateway name: [[cluster addr, booster addr], ...]}`` (sorted) from routing-file ``routes``.

    ``routes``: ``(endpoint, cluster node, booster node)`` triples; ``gateways`` and ``endpoints``: the job's pool
    gateways and their ``addr:port`` in the same order; ``nodes``: the pool file's node addresses."""
    by_endpoint = dict(zip(endpoints, gateways))
    out = {gw["name"]: set() for gw in gateways}
    for endpoint, cluster, booster in routes:
        gw = by_endpoint.get(endpoint)
        if gw is None:
            raise PathError("route %s %s %s names no gateway of the job" % (endpoint, cluster, booster))
        c_fabric, b_fabric = gateway_fabrics(gw)
        out[gw["name"]].add((node_address(nodes, cluster, c_fabric), node_address(nodes, booster, b_fabric)))

    def key(pair):
        return ipaddress.ip_address(pair[0]), ipaddress.ip_address(pair[1])
    return {name: [list(p) for p in sorted(pairs, key=key)] for name, pairs in out.items()}


def node_routes(address, pairs, gateway_addresses, fabrics):
    """The host routes one node needs: ``[(peer address, via address), ...]`` sorted by peer.

    ``address``: the node's own address on its fabric; ``pairs``: ``{gateway: [[cluster, booster], ...]}``;
    ``gateway_addresses``: ``{gateway: {fabric: address}}``; ``fabrics``: ``(cluster fabric, booster fabric)``.
    A peer reached through two gateways (no strategy does that) is refused rather than routed one way."""
    address = _address(address, "node address")
    routes = {}
    for gw, gw_pairs in sorted(pairs.items()):
        for c, b in gw_pairs:
            if address == c:
                peer, via = b, gateway_addresses[gw][fabrics[0]]
            elif address == b:
                peer, via = c, gateway_addresses[gw][fabrics[1]]
            else:
                continue
            peer, via = _address(peer, "peer"), _address(via, "gateway %s" % gw)
            if routes.get(peer, via) != via:
                raise PathError("peer %s of %s is reached through two gateways (%s and %s)"
                                % (peer, address, routes[peer], via))
            routes[peer] = via
    return sorted(routes.items(), key=lambda r: ipaddress.ip_address(r[0]))
