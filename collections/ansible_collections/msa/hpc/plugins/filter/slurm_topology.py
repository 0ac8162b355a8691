# SPDX-License-Identifier: GPL-3.0-or-later
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

"""Filter msa.hpc.slurm_topology: Slurm's topology.yaml (25.05 and later) and each partition's topology, from the
inventory's modules and fabrics (an EXTOLL module: a block topology cut from its torus coordinates; an InfiniBand
module: a tree of the fabric's switches, or one switch)."""

from ansible.errors import AnsibleFilterError

from ansible_collections.msa.hpc.plugins.filter.extoll import build as extoll_build
from ansible_collections.msa.hpc.plugins.module_utils._hostlist import natural_key
from ansible_collections.msa.hpc.plugins.module_utils.slurm import topology as T


def _coordinates(fabric, spec, groups, hostvars):
    """Host → torus coordinate on an EXTOLL fabric; with several .td blocks the block's rank leads the tuple."""
    topo, ids = extoll_build(groups.get("fabric_" + fabric, []), hostvars, spec["topology"], fabric)
    placed = topo.leaf_coordinates()
    rank = {name: i for i, name in enumerate(topo.block_order)}
    out = {}
    for host, node_id in ids.items():
        if node_id in placed:
            block, coord = placed[node_id]
            out[host] = ((rank[block],) if len(topo.blocks) > 1 else ()) + tuple(coord)
    return out


def topology_groups(partitions, modules, fabrics, groups, hostvars, slurm_nodes, block_size=4):
    """The groups of module_utils.slurm.topology.build for the inventory: one per compute module on an EXTOLL
    fabric with a topology (block) or on an InfiniBand fabric (tree), named after the module, used by its
    partitions. A module on both takes the EXTOLL block. Other modules' partitions keep the flat default."""
    wanted, by_module = set(slurm_nodes or []), {}
    for name, part in sorted((partitions or {}).items()):
        by_module.setdefault((part or {}).get("module", name), []).append(name)
    out, coordinates = [], {}
    for module, parts in sorted(by_module.items()):
        if module not in (modules or {}):
            raise AnsibleFilterError("msa.hpc.slurm_topology: partitions.%s.module: %r is not a module of the system"
                                     % (parts[0], module))
        hosts = sorted((h for h in groups.get(module, []) if h in wanted), key=natural_key)
        kinds = {f: (fabrics.get(f) or {}) for f in modules[module].get("fabrics") or []}
        extoll = [f for f, spec in sorted(kinds.items()) if spec.get("kind") == "extoll" and spec.get("topology")]
        infiniband = [f for f, spec in sorted(kinds.items()) if spec.get("kind") == "infiniband"]
        if not hosts:
            continue
        if extoll:
            if extoll[0] not in coordinates:
                coordinates[extoll[0]] = _coordinates(extoll[0], kinds[extoll[0]], groups, hostvars)
            unplaced = [h for h in hosts if h not in coordinates[extoll[0]]]
            if unplaced:
                raise AnsibleFilterError("msa.hpc.slurm_topology: msa_fabrics.%s.topology places no coordinate for %s"
                                         " (module %s)" % (extoll[0], ", ".join(unplaced), module))
            out.append({"name": module, "partitions": parts, "kind": "block", "block_size": block_size,
                        "nodes": {h: coordinates[extoll[0]][h] for h in hosts}})
        elif infiniband:
            out.append({"name": module, "partitions": parts, "kind": "tree", "nodes": hosts,
                        "switches": kinds[infiniband[0]].get("switches"),
                        "fabric_hosts": groups.get("fabric_" + infiniband[0], [])})
    return out


def slurm_topology(partitions, modules, fabrics, groups, hostvars, slurm_nodes, block_size=4):
    """``{"text": topology.yaml, "partitions": {partition: topology}}`` for the system (see topology_groups)."""
    try:
        # -e and inventories hand numbers over as text: the builder itself takes integers only
        block_size = int(block_size) if isinstance(block_size, str) and block_size.strip().isdigit() else block_size
        return T.build(topology_groups(partitions, modules, fabrics, groups, hostvars, slurm_nodes,
                                       block_size))
    except T.TopologyError as exc:
        raise AnsibleFilterError("msa.hpc.slurm_topology: %s" % exc)


class FilterModule:
    """Slurm topology.yaml filter."""

    def filters(self):
        return {"slurm_topology": slurm_topology}
