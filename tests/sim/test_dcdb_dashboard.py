# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

"""The shipped Grafana dashboard (roles/dcdb_collectagent/files/system_overview.json) against the data source API
it queries: the Collect Agent's SimpleJSON ``/search`` and ``/query``, over HTTP with basic authentication.

The agent runs with the role's default analytics operators and is fed the sensors the roles configure: the
dcdb_pusher role's procfs groups (read from its tasks), its sysfs thermal group (defaults), the slurm plugin's jobid
and the Pushers' own counters; plus power/node, which the Pusher's redfish plugin publishes where a site configures
it. Every template variable is resolved as Grafana does (``/search`` with the variable's query, multi values as
``{a,b}``, "All" as the variable's allValue) and every panel's every target must answer with at least one series
that has data points.
"""

import base64
import json
import os
import re
import threading
import urllib.request

import pytest
import yaml

from msa_sim.dcdb import payload as wire
from msa_sim.dcdb.api import make_server
from msa_sim.dcdb.collectagent import AgentConfig, CollectAgent

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ROLES = os.path.join(ROOT, "collections", "ansible_collections", "msa", "hpc", "roles")
S = 10 ** 9
SYSTEM, MODULE, NODES, JOB = "msa", "cm", ("n1", "n2"), "4711"


def _role_sensors():
    """<group>/<sensor> names the dcdb_pusher role configures by default."""
    with open(os.path.join(ROLES, "dcdb_pusher", "vars", "main.yml")) as handle:
        plugins = yaml.safe_load(handle)["dcdb_pusher_plugins"]
    with open(os.path.join(ROLES, "dcdb_pusher", "defaults", "main.yml")) as handle:
        defaults = yaml.safe_load(handle)
    names = []
    for plugin in plugins:
        if plugin["plugin"] == "procfs":
            names += ["%s/%s" % (g["name"], s["name"]) for g in plugin["groups"] for s in g["sensors"]]
    for group in defaults["dcdb_pusher_sysfs_groups"]:  # a glob path expands to <name>0..n
        names += ["%s/%s0" % (group["name"], s["name"]) for s in group["sensors"]]
    assert "cpu/util" in names and "thermal/temp0" in names, names
    return names + ["slurm/jobid", "pusher/dropped", "pusher/queued", "power/node"]


def _analytics_section():
    with open(os.path.join(ROLES, "dcdb_collectagent", "defaults", "main.yml")) as handle:
        operators = yaml.safe_load(handle)["dcdb_collectagent_operators"]
    lines = ["analytics {"]
    for op in operators:  # as templates/collectagent.conf.j2 writes them
        lines.append("    operator %s {" % op["name"])
        lines += ["        %s %s" % (k, str(v).replace("{{ msa_system }}", SYSTEM)) for k, v in op.items() if k != "name"]
        lines.append("    }")
    return "\n".join(lines + ["}"])


@pytest.fixture
def api(tmp_path):
    conf = tmp_path / "collectagent.conf"
    conf.write_text("global {\n    mqttprefix /%s\n    sacct none\n    jobGrace 1000\n}\nstorage {\n    path %s\n}\n"
                    "restAPI {\n    address 127.0.0.1:0\n    user grafana {\n        password s3cret\n    }\n}\n%s\n"
                    % (SYSTEM, tmp_path / "dcdb.sqlite", _analytics_section()))
    agent = CollectAgent(AgentConfig(str(conf)))
    agent.start_writer()
    for node in NODES:
        prefix = "/%s/%s/%s/" % (SYSTEM, MODULE, node)
        for name in _role_sensors():
            if name == "slurm/jobid":
                readings = [(t * S, int(JOB)) for t in range(3, 7)]
            else:
                readings = [(t * S, 100 + t) for t in range(1, 11)]
            assert agent.ingest(prefix + name, wire.encode(readings)) == len(readings)
    assert agent.wait_idle()
    server = make_server(agent, "127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield "http://127.0.0.1:%d" % server.server_address[1]
    server.shutdown()
    agent.stop()


def _post(url, path, body):
    req = urllib.request.Request(url + path, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json",
                                          "Authorization": "Basic " + base64.b64encode(b"grafana:s3cret").decode()})
    with urllib.request.urlopen(req, timeout=10) as resp:
        assert resp.status == 200, path
        return json.loads(resp.read())


def _dashboard():
    with open(os.path.join(ROLES, "dcdb_collectagent", "files", "system_overview.json")) as handle:
        return json.load(handle)


def _fill(text, values):
    return re.sub(r"\$(\w+)", lambda m: values[m.group(1)], text)


@pytest.mark.parametrize("node_choice", ["multi", "all"])
def test_every_panel_of_the_dashboard_is_answered_by_the_collect_agent(api, node_choice):
    dashboard = _dashboard()
    assert [d["id"] for d in dashboard["__requires"] if d["type"] == "datasource"] == ["grafana-simple-json-datasource"]
    values = {}
    for var in dashboard["templating"]["list"]:  # in order: each query may use the variables before it
        if var["type"] == "textbox":
            values[var["name"]] = JOB
            continue
        assert var["datasource"]["type"] == "grafana-simple-json-datasource", var["name"]
        options = _post(api, "/search", {"target": _fill(var["query"], values)})
        assert options, "variable %s: /search %r answered no options" % (var["name"], var["query"])
        if var.get("multi"):
            assert sorted(options) == sorted(NODES), options
            values[var["name"]] = var["allValue"] if node_choice == "all" else "{%s}" % ",".join(options)
        else:
            values[var["name"]] = options[0]
    assert values == {"system": SYSTEM, "module": MODULE, "node": values["node"], "job": JOB}
    unanswered = []
    for panel in dashboard["panels"]:
        assert panel["datasource"]["type"] == "grafana-simple-json-datasource", panel["title"]
        assert panel["targets"], "panel %r has no query" % panel["title"]
        for target in panel["targets"]:
            body = {"range": {"from": "1970-01-01T00:00:00Z", "to": "1970-01-01T00:00:20Z"}, "maxDataPoints": 500,
                    "intervalMs": 1000, "targets": [{"target": _fill(target["target"], values),
                                                     "refId": target["refId"], "type": target["type"]}]}
            series = _post(api, "/query", body)
            if not series or not all(s["datapoints"] for s in series):
                unanswered.append("%s: %s -> %r" % (panel["title"], body["targets"][0]["target"], series))
                continue
            assert len(series) == len(NODES), (panel["title"], [s["target"] for s in series])
            assert all(isinstance(v, (int, float)) and isinstance(ms, int) for s in series
                       for v, ms in s["datapoints"])
    assert not unanswered, "panels without data:\n" + "\n".join(unanswered)
