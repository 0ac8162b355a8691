# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

"""The EXTOLL filters: .td from the system layer's topology and the inventory GUIDs, node ids, routes walked."""

import copy

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.msa.hpc.plugins.filter.extoll import extoll_node_ids, extoll_route, extoll_td
from ansible_collections.msa.hpc.plugins.module_utils.extoll import plan as P
from ansible_collections.msa.hpc.plugins.module_utils.extoll import routing as R
from ansible_collections.msa.hpc.plugins.module_utils.extoll import topology as T
from ansible_collections.msa.hpc.plugins.module_utils._system import SystemError_, expand

# The EXTOLL part of the bundle's `mini` system (inventories/systems/mini/system.msa.yml).
MINI = {
    "system": "mini",
    "fabrics": {"mgmt": {"kind": "ethernet", "cidr": "10.42.0.0/24"},
                "ib": {"kind": "infiniband", "cidr": "10.43.0.0/24"},
                "extoll": {"kind": "extoll", "cidr": "10.44.0.0/24",
                           "topology": {"type": "Torus", "dims": [5, 2], "routing": "DimensionOrder"}}},
    "modules": {
        "mgmt": {"role": "management", "count": 1, "offset": 10, "fabrics": ["mgmt"]},
        "cm": {"role": "compute", "count": 2, "offset": 20, "fabrics": ["mgmt", "ib"]},
        "esb": {"role": "compute", "count": 4, "offset": 40, "fabrics": ["mgmt", "extoll"]},
        "dam": {"role": "compute", "count": 2, "offset": 60, "fabrics": ["mgmt", "extoll"]},
        "gw": {"role": "mpi_gateway", "count": 2, "offset": 80, "fabrics": ["mgmt", "ib", "extoll"]},
        "nam": {"role": "nam", "count": 1, "offset": 100, "fabrics": ["mgmt", "extoll"], "guid_base": 0xf00001},
        "gce": {"role": "gce", "count": 1, "offset": 110, "fabrics": ["mgmt", "extoll"], "guid_base": 0xe00001},
    },
}


def mini():
    return copy.deepcopy(MINI)


def fabric_hosts(model, fabric="extoll"):
    return model["groups"]["fabric_" + fabric], model["hosts"], model["fabrics"][fabric]["topology"]


def test_mini_torus_td_lists_every_extoll_host_by_guid_in_address_order_with_nam_and_gce_marked():
    model = expand(mini())
    hosts, hostvars, topology = fabric_hosts(model)
    topo = T.parse_td(extoll_td(list(reversed(hosts)), hostvars, topology), "mini.td")
    ids = extoll_node_ids(hosts, hostvars, topology)
    assert ids == {"esb01": 1, "esb02": 2, "esb03": 3, "esb04": 4, "dam01": 5, "dam02": 6, "gw01": 7, "gw02": 8,
                   "nam01": 9, "gce01": 10}
    for host, nid in ids.items():
        assert topo.nodes[nid].guid == int(hostvars[host]["msa_extoll_guid"], 16)
    assert topo.nodes[9].marker == "NAM1" and topo.nodes[9].type == "NAM"
    assert topo.nodes[10].marker == "GCE1" and topo.nodes[10].type == "GCE"
    assert topo.nodes[1].marker is None
    kind, sizes, coords = topo.regular()
    assert (kind, sizes, topo.routing) == ("Torus", (5, 2), "DimensionOrder")
    assert coords[1] == (0, 0) and coords[4] == (3, 0) and coords[7] == (1, 1)
    assert len(topo.links) == 20  # 5-rings in dimension 0, a double link per column in dimension 1


def test_a_topology_that_does_not_hold_the_fabric_hosts_fails_naming_the_field():
    model = expand(mini())
    hosts, hostvars = fabric_hosts(model)[:2]
    with pytest.raises(AnsibleFilterError, match=r"msa_fabrics.extoll.topology:dims: .*4x2 holds 8 nodes but the fabric has 10"):
        extoll_td(hosts, hostvars, {"type": "Torus", "dims": [4, 2]})
    with pytest.raises(AnsibleFilterError, match="routing 'Random' is not one of"):
        extoll_td(hosts, hostvars, {"type": "Torus", "dims": [5, 2], "routing": "Random"})
    broken = {h: dict(v) for h, v in hostvars.items()}
    broken["esb02"].pop("msa_extoll_guid")
    with pytest.raises(AnsibleFilterError, match="host esb02 has no msa_extoll_guid"):
        extoll_td(hosts, broken, {"type": "Torus", "dims": [5, 2]})
    broken["esb02"]["msa_extoll_guid"] = hostvars["esb01"]["msa_extoll_guid"]
    with pytest.raises(AnsibleFilterError, match="esb01 and esb02 have the same msa_extoll_guid"):
        extoll_td(hosts, broken, {"type": "Torus", "dims": [5, 2]})


def test_a_td_file_must_list_exactly_the_inventory_guids(tmp_path):
    model = expand(mini())
    hosts, hostvars, topology = fabric_hosts(model)
    good = tmp_path / "good.td"
    good.write_text(extoll_td(hosts, hostvars, topology))
    assert extoll_node_ids(hosts, hostvars, {"file": str(good)})["gw02"] == 8
    bad = tmp_path / "bad.td"
    bad.write_text(good.read_text().replace("0x%x 1\n" % int(hostvars["esb01"]["msa_extoll_guid"], 16), "0x999 1\n"))
    with pytest.raises(AnsibleFilterError, match=r"missing 0x128 \(esb01\); not in the inventory 0x999"):
        extoll_td(hosts, hostvars, {"file": str(bad)})
    broken = tmp_path / "broken.td"
    broken.write_text("inventory\n0x1 1\n")
    with pytest.raises(AnsibleFilterError, match=r"broken.td:1: section inventory .* never closed"):
        extoll_td(hosts, hostvars, {"file": str(broken)})


@pytest.mark.parametrize("algorithm", ["DimensionOrder", "ShortestPath", "UpDown"])
def test_extoll_route_walks_the_tables_like_the_routing_engine(algorithm):
    model = expand(mini())
    td = extoll_td(*fabric_hosts(model))
    fab = R.Fabric.from_topology(T.parse_td(td))
    port = P.plan(fab, algorithm)[0]
    tables = {str(s): {str(d): p for d, p in row.items()} for s, row in R.tables(fab, port).items()}
    for src, dst in ((1, 3), (4, 2), (1, 9), (10, 1)):
        assert extoll_route(tables, td, src, dst) == R.route(fab, port, src, dst)


def test_extoll_route_reports_a_missing_entry_and_a_loop():
    td = T.to_td(T.generate("torus", [4]))
    with pytest.raises(AnsibleFilterError, match="node 1 has no route to 3"):
        extoll_route({"1": {}}, td, 1, 3)
    looping = {"1": {"3": 1}, "2": {"3": 0}}  # 1 → 2 → 1 → ...
    with pytest.raises(AnsibleFilterError, match="loops"):
        extoll_route(looping, td, 1, 3)


def test_only_an_extoll_fabric_may_carry_a_topology():
    description = copy.deepcopy(mini())
    description["fabrics"]["ib"]["topology"] = {"type": "Torus", "dims": [2]}
    with pytest.raises(SystemError_, match=r"fabrics.ib.topology: only an extoll fabric"):
        expand(description)
