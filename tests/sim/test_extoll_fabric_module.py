# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

"""The extoll_fabric module against the stand-in EMP master (file discovery) on 127.0.0.1 (moved out of the
collection's unit tests, which must not import the simulation)."""

import json
import threading

import pytest
from ansible.module_utils.testing import patch_module_args

from ansible_collections.msa.hpc.plugins.module_utils.extoll import topology as T
from ansible_collections.msa.hpc.plugins.module_utils._rest import RestClient
from ansible_collections.msa.hpc.plugins.modules import extoll_fabric
from msa_sim.emp import config
from msa_sim.emp.api import make_server
from msa_sim.emp.engine import Master
from msa_sim.emp.store import Store

TOKEN = "module-t0ken"


@pytest.fixture()
def emp(tmp_path):
    topo = T.generate("torus", [4, 3], routing="DimensionOrder")
    (tmp_path / "physical.td").write_text(T.to_td(topo))
    (tmp_path / "topology.td").write_text(T.to_td(topo))
    conf = dict(config.MASTER_DEFAULTS, state_dir=str(tmp_path), discovery="file",
                discovery_file=str(tmp_path / "physical.td"), discovery_interval="0.05")
    master = Master(conf, Store(str(tmp_path / "master.sqlite")))
    server = make_server(master, "127.0.0.1", 0, TOKEN)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = "http://127.0.0.1:%d" % server.server_address[1]
    yield url, tmp_path, topo
    server.shutdown()
    server.server_close()
    master.store.close()


def params(url, tmp_path, **extra):
    base = dict(endpoint=url, token=TOKEN, validate_certs=True, timeout=5, state="started",
                topology_file=str(tmp_path / "topology.td"), topology=None, routing=None, mode=None,
                wait_timeout=5, poll_interval=0.05)
    base.update(extra)
    return base


def client(url):
    return RestClient(url, token=TOKEN, retries=0)


def test_started_installs_routes_starts_network_and_second_run_changes_nothing(emp):
    url, tmp_path = emp[:2]
    first = extoll_fabric.apply(client(url), params(url, tmp_path))
    assert first["changed"] and first["status"] == "up"
    assert first["routing"]["algorithm"] == "DimensionOrder" and first["routing"]["deadlock_free"]
    assert first["routing"]["max_hops"] == 3 and first["missing_links"] == [] and first["table_changes"] == 132
    assert "node 1 dst 2 port 1" in first["diff"]["after"] and first["dot"].startswith("graph extoll")
    second = extoll_fabric.apply(client(url), params(url, tmp_path))
    assert not second["changed"] and second["table_changes"] == 0


def test_check_mode_computes_tables_without_installing_them(emp):
    url, tmp_path = emp[:2]
    result = extoll_fabric.apply(client(url), params(url, tmp_path, routing="UpDown"), check_mode=True)
    assert result["changed"] and result["routing"]["algorithm"] == "UpDown" and result["table_changes"] == 132
    assert client(url).get("emp/routes")["version"] == 0
    assert client(url).get("network/status")["status"] == "un-configured"
    assert client(url).get("emp/topology")["td"] is None


def test_routing_override_shows_table_changes_in_the_diff(emp):
    url, tmp_path = emp[:2]
    extoll_fabric.apply(client(url), params(url, tmp_path))
    result = extoll_fabric.apply(client(url), params(url, tmp_path, routing="UpDown"))
    assert result["changed"] and result["routing"]["algorithm"] == "UpDown"
    assert result["diff"]["before"] != result["diff"]["after"]


def test_topology_mode_times_out_naming_missing_links_and_auto_mode_routes_around(emp):
    url, tmp_path, topo = emp
    broken = T.parse_td(T.to_td(topo))
    lost = broken.links.pop(3)
    (tmp_path / "physical.td").write_text(T.to_td(broken))
    with pytest.raises(extoll_fabric.FabricError) as info:
        extoll_fabric.apply(client(url), params(url, tmp_path, wait_timeout=0), sleep=lambda s: None)
    assert "lacks 0 nodes and 1 links" in str(info.value)
    assert info.value.result["missing_links"] == [T.format_link(lost)]
    result = extoll_fabric.apply(client(url), params(url, tmp_path, mode="auto"))
    assert result["routing"]["algorithm"] == "UpDown" and result["routing"]["deadlock_free"]
    assert result["missing_links"] == [T.format_link(lost)] and result["status"] == "up"


def test_stopped_stops_a_running_network_once(emp):
    url, tmp_path = emp[:2]
    extoll_fabric.apply(client(url), params(url, tmp_path))
    assert extoll_fabric.apply(client(url), params(url, tmp_path, state="stopped"), check_mode=True)["changed"]
    assert client(url).get("network/status")["status"] == "up"
    first = extoll_fabric.apply(client(url), params(url, tmp_path, state="stopped"))
    assert first["changed"] and first["status"] == "down"
    assert not extoll_fabric.apply(client(url), params(url, tmp_path, state="stopped"))["changed"]


def test_discovered_compares_with_an_inline_yaml_topology(emp):
    url, tmp_path, topo = emp
    data = topo.as_dict()
    data["inventory"].append({"guid": "0xf00001", "id": 129, "t": "NAM1"})
    data["links"].append("1 5 <-> 0 129")
    result = extoll_fabric.apply(client(url), params(url, tmp_path, state="discovered", topology_file=None,
                                                     topology=data))
    assert not result["changed"] and len(result["nodes"]) == 12
    assert result["missing_nodes"] == [{"id": 129, "guid": "0xf00001"}]
    assert result["missing_links"] == ["1 5 <-> 0 129"]


def run_main(args, capsys):
    with patch_module_args(args):
        with pytest.raises(SystemExit):
            extoll_fabric.main()
    return json.loads(capsys.readouterr().out)


def test_module_fails_with_file_line_and_reason_for_a_bad_td(emp, tmp_path, capsys):
    url = emp[0]
    bad = tmp_path / "bad.td"
    bad.write_text("inventory\n0x100 1\n0x100 2\ninventoryend\n")
    result = run_main({"endpoint": url, "token": TOKEN, "topology_file": str(bad)}, capsys)
    assert result["failed"] and result["msg"] == "topology_file: %s:3: GUID 0x100 is already in the inventory at line 2" % bad
    assert result["line"] == 3


def test_module_reports_a_wrong_token_without_a_traceback(emp, capsys):
    url, tmp_path = emp[:2]
    result = run_main({"endpoint": url, "token": "nope", "state": "stopped"}, capsys)
    assert result["failed"] and "authentication failed" in result["msg"] and "Traceback" not in result["msg"]
    assert result["status"] == 401


def test_check_mode_diff_shows_the_modules_own_tables_and_certificate_before_anything_is_installed(emp):
    url, tmp_path = emp[:2]
    result = extoll_fabric.apply(client(url), params(url, tmp_path), check_mode=True)
    plan = result["plan"]
    assert plan["computed_by"] == "collection" and plan["matches_emp"] is True
    assert plan["algorithm"] == "DimensionOrder" and plan["certificate"]["deadlock_free"]
    assert plan["certificate"]["scheme"] == "dateline" and len(plan["changes"]) == 132
    assert "node 1: dst 2 port - -> 1" in plan["changes"]
    assert "node 1 dst 2 port 1\n" in result["diff"]["after"] and "node 1 dst" not in result["diff"]["before"]
    assert "certificate deadlock_free True\n" in result["diff"]["after"]
    assert "certificate algorithm DimensionOrder\n" in result["diff"]["after"]
    assert client(url).get("emp/routes")["version"] == 0


@pytest.mark.parametrize("routing", [None, "UpDown", "ShortestPath"])
def test_the_modules_plan_equals_what_the_emp_computes_and_installs(emp, routing):
    url, tmp_path = emp[:2]
    checked = extoll_fabric.apply(client(url), params(url, tmp_path, routing=routing), check_mode=True)
    dry = client(url).post("emp/run", {"dry_run": True, "mode": "topology", "routing": routing,
                                       "td": (tmp_path / "topology.td").read_text()})
    assert checked["plan"]["certificate"] == dry["certificate"] and checked["plan"]["algorithm"] == dry["algorithm"]
    applied = extoll_fabric.apply(client(url), params(url, tmp_path, routing=routing))
    installed = client(url).get("emp/routes")
    assert applied["plan"]["changes"] == checked["plan"]["changes"]
    assert installed["certificate"] == checked["certificate"] and installed["algorithm"] == checked["plan"]["algorithm"]
    expected = {}
    for line in checked["plan"]["changes"]:
        src, rest = line[len("node "):].split(": dst ")
        dst, ports = rest.split(" port ")
        expected.setdefault(src, {})[dst] = int(ports.split(" -> ")[1])
    assert installed["tables"] == expected
    assert not extoll_fabric.apply(client(url), params(url, tmp_path, routing=routing))["plan"]["changes"]


class _DisagreeingMaster(RestClient):
    """A master whose dry run answers other tables than it discovered would route to."""

    def post(self, path, body=None, **kw):
        answer = super().post(path, body, **kw)
        if path == "emp/run" and (body or {}).get("dry_run"):
            first = sorted(answer["tables"], key=int)[0]
            dst = sorted(answer["tables"][first], key=int)[0]
            answer["tables"][first][dst] = 11
        return answer


def test_the_module_refuses_and_installs_nothing_when_the_emp_plans_other_tables(emp):
    url, tmp_path = emp[:2]
    with pytest.raises(extoll_fabric.FabricError) as info:
        extoll_fabric.apply(_DisagreeingMaster(url, token=TOKEN, retries=0), params(url, tmp_path))
    assert "other routing tables" in str(info.value) and info.value.result["plan"]["matches_emp"] is False
    assert client(url).get("emp/routes")["version"] == 0
    assert client(url).get("emp/topology")["td"] is None
