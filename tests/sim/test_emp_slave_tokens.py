# SPDX-License-Identifier: GPL-3.0-or-later
"""Per-node EMP slave tokens: a slave's token reports for its own GUID and node id and does nothing else; the
master's token stays the only one that administers the fabric."""
from __future__ import annotations

import hashlib
import threading

import pytest

from ansible_collections.msa.hpc.plugins.module_utils.extoll import topology as T
from msa_sim.emp import config, ctrl
from msa_sim.emp.api import make_server
from msa_sim.emp.auth import load_slave_tokens
from msa_sim.emp.engine import Master
from msa_sim.emp.store import Store

ADMIN = "adm1n-t0ken"


@pytest.fixture()
def fabric(tmp_path):
    """A master with a 3-node ring's topology and a token file for its slaves (node n holds token slave-n)."""
    topo = T.generate("torus", [3], routing="UpDown")
    guid = {n.id: n.guid for n in topo.nodes.values()}
    lines = ["# guid node sha256"] + ["%#x %d %s" % (guid[n], n, hashlib.sha256(b"slave-%d" % n).hexdigest())
                                      for n in guid]
    (tmp_path / "slaves").write_text("\n".join(lines) + "\n")
    conf = dict(config.MASTER_DEFAULTS, state_dir=str(tmp_path), topology_file="")
    master = Master(conf, Store(":memory:"))
    master.set_topology(td=T.to_td(topo))
    # the network as a configured fabric has it (emp/run done, network/start called)
    master.store.set(network=dict(master.store.get("network"), configured=True))
    master.network_start()
    server = make_server(master, "127.0.0.1", 0, ADMIN, slaves=load_slave_tokens(str(tmp_path / "slaves")))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield master, "http://127.0.0.1:%d" % server.server_address[1], guid
    server.shutdown()
    server.server_close()
    master.store.close()


def fabric_state(master):
    return (master.network_status(), master.store.get("topology_td"), sorted(
        (s["guid"], s["node_id"], s["address"]) for s in master.store.slaves()))


def test_a_slave_reports_for_its_own_node(fabric):
    master, url, guid = fabric
    reply = ctrl.call(url, "POST", "slaves/report", {"guid": hex(guid[1]), "node_id": 1}, "slave-1")
    assert reply["node_id"] == 1
    assert [s["guid"] for s in master.store.slaves()] == [guid[1]]


@pytest.mark.parametrize("method,path,body,refusal", [
    ("POST", "slaves/report", {"guid": "GUID2"}, "cannot report for GUID"),
    ("POST", "slaves/report", {"guid": "GUID1", "node_id": 2}, "cannot report for node id 2"),
    ("POST", "network/stop", {}, "may only report"),
    ("PUT", "emp/topology", {"td": "x"}, "may only report"),
    ("POST", "emp/run", {"routing": "UpDown"}, "may only report"),
    ("GET", "network/status", None, "may only report"),
    ("GET", "nodes/1/../../network/status", None, "may only report"),
    ("PUT", "nodes/1", {}, "may only report"),
])
def test_a_slave_token_is_refused_everything_else(fabric, method, path, body, refusal):
    master, url, guid = fabric
    if body and body.get("guid"):
        body = dict(body, guid=hex(guid[int(body["guid"][-1])]))
    before = fabric_state(master)
    with pytest.raises(ctrl.CtrlError, match="HTTP 403.*%s" % refusal):
        ctrl.call(url, method, path, body, "slave-1")
    assert fabric_state(master) == before


def test_a_slave_token_reads_the_nodes_state_for_its_health_check(fabric):
    """What msa-hpc-healthcheck asks with the node's own token: its node, its links, a neighbour's state."""
    dummy, url, guid = fabric
    ctrl.call(url, "POST", "slaves/report", {"guid": hex(guid[1]), "node_id": 1}, "slave-1")
    assert isinstance(ctrl.call(url, "GET", "nodes", None, "slave-1"), list)
    for path in ("nodes/1", "nodes/1/link", "nodes/2"):
        try:
            ctrl.call(url, "GET", path, None, "slave-1")
        except ctrl.CtrlError as exc:  # a node the fabric does not know yet is 404, never a refusal
            assert "HTTP 404" in str(exc), exc


def test_the_masters_token_still_administers_and_unknown_tokens_get_401(fabric):
    master, url, guid = fabric
    with pytest.raises(ctrl.CtrlError, match="HTTP 401"):
        ctrl.call(url, "POST", "network/stop", {}, "slave-9")
    assert master.network_status()["up"] is True
    ctrl.call(url, "POST", "slaves/report", {"guid": hex(guid[2])}, ADMIN)
    ctrl.call(url, "POST", "network/stop", {}, ADMIN)
    assert master.network_status()["up"] is False


def test_the_slave_token_file_names_a_bad_line(tmp_path):
    (tmp_path / "slaves").write_text("0x10 1 %s\n0x11 one deadbeef\n" % ("a" * 64))
    with pytest.raises(config.ConfigError, match=r"slaves:2: expected '<guid> <node id\|-> <sha256"):
        load_slave_tokens(str(tmp_path / "slaves"))
