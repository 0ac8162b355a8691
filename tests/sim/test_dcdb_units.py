# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

"""DCDB stand-in without a broker: INFO files, payloads, plugins, the bounded queue, store, operators and the API."""

import base64
import json
import os
import socket
import stat
import threading
import urllib.error
import urllib.request

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from msa_sim.dcdb import payload as wire
from msa_sim.dcdb.analytics import JobEnergy, MovingAverage, load_operators
from msa_sim.dcdb.api import make_server
from msa_sim.dcdb.collectagent import AgentConfig, CollectAgent, expand_hostlist
from msa_sim.dcdb.info import InfoNode, dump_info, parse_info
from msa_sim.dcdb.plugins import load_plugin
from msa_sim.dcdb.pusher import Pusher, PusherConfig, ReadingQueue
from msa_sim.dcdb.store import SqliteStore
from msa_sim.dcdb.tree import SensorTree

S = 10 ** 9

# ---- INFO format -----------------------------------------------------------------------------------------------------
_words = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00\r\n\x0b\x0c\x1c\x1d\x1e\x85"
                                                                                    "\u2028\u2029"), max_size=12)
_keys = _words.filter(lambda w: w != "")


def _trees(depth):
    if depth == 0:
        return st.builds(InfoNode, _keys, _words, st.just([]))
    return st.builds(InfoNode, _keys, _words, st.lists(_trees(depth - 1), max_size=3))


@settings(max_examples=60, deadline=None)
@given(st.lists(_trees(2), max_size=4))
def test_info_tree_survives_dump_and_parse(children):
    root = InfoNode("", "", children)
    assert parse_info(dump_info(root)) == root


def test_info_reads_dcdb_style_sections_comments_and_next_line_braces():
    text = """; DCDB pusher
global {
\tmqttBroker 127.0.0.1:1883   ; the broker
\tmqttprefix /test
}
plugins {
    plugin procfs
    {
        path    /usr/lib/dcdb
        config
    }
}
"""
    root = parse_info(text)
    assert root.get("global").value_of("mqttbroker") == "127.0.0.1:1883"
    plugin = root.get("plugins").get("plugin")
    assert (plugin.value, plugin.value_of("path"), plugin.value_of("config")) == ("procfs", "/usr/lib/dcdb", "")


@pytest.mark.parametrize("text, line", [("a {\n b 1\n", 3), ("}\n", 1), ("a b c\n", 1), ('a "open\n', 1)])
def test_info_errors_name_the_line(text, line):
    with pytest.raises(ValueError) as err:
        parse_info(text, "x.conf")
    assert err.value.line == line and "x.conf:%d" % line in str(err.value)


# ---- payloads and topics ---------------------------------------------------------------------------------------------
@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 2 ** 63 - 1), st.integers(-2 ** 63, 2 ** 63 - 1)), min_size=1, max_size=20),
       st.sampled_from(["json", "binary"]))
def test_payload_formats_round_trip_integer_readings(readings, fmt):
    assert wire.decode(wire.encode(readings, fmt)) == readings


@pytest.mark.parametrize("readings", [[(0x18_7B00_0000_0000_5B, 42)], [(0x5B, 7), (0x5B5D, -1)],
                                      [(0x18_7B00_0000_00E0_5B, 0), (2, 0x5D)]])
def test_binary_payload_starting_with_a_bracket_is_not_read_as_json(readings):
    # the first byte of a binary payload is a timestamp's low byte: '[' once in 256 messages at random
    raw = wire.encode(readings, "binary")
    assert raw[:1] == b"["
    assert wire.decode(raw) == readings


@pytest.mark.parametrize("raw", [b"", b"[]", b"[[1]]", b'[["1", 2]]', b"[[0, 1]]", b"[[1, NaN]]", b"{}", b"abc",
                                 b"[[1, true]]", b"\x00" * 16])
def test_malformed_payloads_are_rejected(raw):
    with pytest.raises(wire.PayloadError):
        wire.decode(raw)


@pytest.mark.parametrize("topic", ["msa/cm/n1/g/s", "/msa/cm", "/msa//n1/g/s", "/msa/cm/n 1/g/s", "/msa/+/n1/g/s"])
def test_malformed_topics_are_rejected(topic):
    with pytest.raises(wire.PayloadError):
        wire.check_topic(topic)


def test_topic_patterns_match_levels_alternatives_and_rest():
    match = lambda p, t: wire.TopicPattern(p).match(t)  # noqa: E731
    assert match("/msa/+/n1/cpu/util", "/msa/cm/n1/cpu/util")
    assert not match("/msa/+/n1/cpu/util", "/msa/cm/n1/cpu/util/x")
    assert match("/msa/cm/n{1,2}/#", "/msa/cm/n2/mem/free")
    assert not match("/msa/cm/n{1,2}/#", "/msa/cm/n3/mem/free")
    assert match("/msa/*/n?/cpu/util", "/msa/esb/n7/cpu/util")


# ---- plugins ---------------------------------------------------------------------------------------------------------
def _write(path, text):
    path.write_text(text)
    return str(path)


def test_procfs_reads_meminfo_loadavg_and_cpu_utilisation(tmp_path):
    meminfo = _write(tmp_path / "meminfo", "MemTotal:  1000 kB\nMemFree:  400 kB\nMemAvailable: 600 kB\n")
    loadavg = _write(tmp_path / "loadavg", "0.50 0.25 0.10 3/120 999\n")
    statf = tmp_path / "stat"
    _write(statf, "cpu  100 0 100 800 0 0 0 0 0 0\nctxt 5\n")
    conf = _write(tmp_path / "procfs.conf", """
group mem {
    interval 1000
    type meminfo
    path %s
    sensor used {
        type MemUsed
        factor 1024
    }
}
group load {
    type loadavg
    path %s
    sensor load1 { type load1 }
    sensor running { type running }
}
group cpu {
    type stat
    path %s
    sensor util { type utilization }
}
""" % (meminfo, loadavg, statf))
    mem, load, cpu = load_plugin("procfs", conf)
    assert mem.read(5) == [("/mem/used", 5, 400 * 1024)]
    assert load.read(5) == [("/load/load1", 5, 0.5), ("/load/running", 5, 3)]
    assert cpu.read(5) == []  # utilisation needs two samples
    _write(statf, "cpu  150 0 150 900 0 0 0 0 0 0\nctxt 9\n")
    assert cpu.read(6) == [("/cpu/util", 6, 50.0)]


def test_sysfs_scales_expands_globs_and_skips_absent_files(tmp_path):
    for i, milli in enumerate((41000, 55500)):
        (tmp_path / ("zone%d" % i)).mkdir()
        _write(tmp_path / ("zone%d" % i) / "temp", "%d\n" % milli)
    conf = _write(tmp_path / "sysfs.conf", """
group thermal {
    interval 500
    sensor temp {
        path %s/zone*/temp
        factor 0.001
    }
    sensor power {
        path /sys/class/nonexistent/power1_average
    }
}""" % tmp_path)
    (group,) = load_plugin("sysfs", conf)
    assert group.read(7) == [("/thermal/temp0", 7, 41.0), ("/thermal/temp1", 7, 55.5)]


def test_slurm_group_publishes_each_running_job_at_distinct_timestamps(tmp_path):
    script = tmp_path / "jobs.sh"
    _write(script, "#!/bin/sh\necho 1234\necho 77_3\necho 1234+1\n")
    script.chmod(0o755)
    conf = _write(tmp_path / "slurm.conf", "group slurm {\n interval 1000\n method command\n command %s\n}\n" % script)
    (group,) = load_plugin("slurm", conf)
    assert group.read(100) == [("/slurm/njobs", 100, 2), ("/slurm/jobid", 100, 77), ("/slurm/jobid", 101, 1234)]


def test_slurm_group_publishes_a_het_component_under_its_own_and_its_leaders_id(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    squeue = _write(bin_dir / "squeue", "#!/bin/sh\n[ \"$5\" = '%A %i' ] || exit 9\necho '4712 4711+1'\necho '90 90'\n")
    os.chmod(squeue, 0o755)
    monkeypatch.setenv("PATH", "%s:%s" % (bin_dir, os.environ["PATH"]))
    conf = _write(tmp_path / "slurm.conf", "group slurm {\n method squeue\n nodename n2\n}\n")
    (group,) = load_plugin("slurm", conf)
    assert group.read(5) == [("/slurm/njobs", 5, 3), ("/slurm/jobid", 5, 90), ("/slurm/jobid", 6, 4711),
                             ("/slurm/jobid", 7, 4712)]


def test_slurm_group_spool_method_reads_the_step_sockets_of_its_own_node(tmp_path):
    spool = tmp_path / "spool"
    spool.mkdir()
    socks = []
    for name in ("n1_12.4294967291", "n1_12.0", "n1_15.4294967292", "n10_99.0", "n2_98.0"):
        sock = socket.socket(socket.AF_UNIX)
        sock.bind(str(spool / name))
        socks.append(sock)
    _write(spool / "n1_77.0", "a stale regular file, not a step\n")
    (spool / "n1_cred_state").mkdir()
    conf = _write(tmp_path / "slurm.conf",
                  "group slurm {\n method spool\n nodename n1\n spoolDir %s\n}\n" % spool)
    (group,) = load_plugin("slurm", conf)
    try:
        assert group.read(3) == [("/slurm/njobs", 3, 2), ("/slurm/jobid", 3, 12), ("/slurm/jobid", 4, 15)]
    finally:
        for sock in socks:
            sock.close()


def test_slurm_group_spool_method_without_the_spool_dir_publishes_nothing(tmp_path):
    conf = _write(tmp_path / "slurm.conf",
                  "group slurm {\n method spool\n nodename n1\n spoolDir %s\n}\n" % (tmp_path / "absent"))
    (group,) = load_plugin("slurm", conf)
    assert group.read(1) == [] and group.read(2) == []


def test_slurm_group_without_slurm_tools_publishes_nothing(tmp_path):
    conf = _write(tmp_path / "slurm.conf", "group slurm {\n method command\n command /nonexistent/squeue\n}\n")
    (group,) = load_plugin("slurm", conf)
    assert group.read(1) == []


def test_redfish_group_tolerates_an_absent_bmc(tmp_path):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    conf = _write(tmp_path / "redfish.conf", "group power {\n endpoint http://127.0.0.1:%d\n timeout 0.5\n}\n" % port)
    (group,) = load_plugin("redfish", conf)
    assert group.read(1) == [] and group.read(2) == []


def test_redfish_group_reads_node_power_from_the_bmc_with_basic_auth(tmp_path):
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    seen = []

    class Bmc(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            seen.append((self.path, self.headers.get("Authorization")))
            body = {"/redfish/v1/Chassis": {"Members": [{"@odata.id": "/redfish/v1/Chassis/Self"}]},
                    "/redfish/v1/Chassis/Self/Power": {"PowerControl": [{"PowerConsumedWatts": 212,
                                                                         "PowerMetrics": {"AverageConsumedWatts": 200}}]}
                    }.get(self.path)
            raw = json.dumps(body).encode()
            self.send_response(200 if body else 404)
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Bmc)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        _write(tmp_path / "bmc.secret", "calvin\n")
        conf = _write(tmp_path / "redfish.conf", "group power {\n endpoint http://127.0.0.1:%d\n username root\n"
                      " passwordFile %s\n sensor node {\n  type power\n }\n sensor avg {\n  type average\n }\n}\n"
                      % (server.server_address[1], tmp_path / "bmc.secret"))
        (group,) = load_plugin("redfish", conf)
        assert group.read(9) == [("/power/node", 9, 212), ("/power/avg", 9, 200)]
    finally:
        server.shutdown()
        server.server_close()
    assert seen[-1] == ("/redfish/v1/Chassis/Self/Power", "Basic " + base64.b64encode(b"root:calvin").decode())


# ---- the bounded queue -----------------------------------------------------------------------------------------------
def test_reading_queue_drops_the_oldest_and_counts_them():
    q = ReadingQueue(5)
    q.put_many([("/a/b/c", i, i) for i in range(8)])
    assert len(q) == 5 and q.dropped == 3 and [r[1] for r in q.pop(10)] == [3, 4, 5, 6, 7]
    q.put_many([("/a/b/c", i, i) for i in range(10, 14)])
    q.push_front([("/a/b/c", i, i) for i in range(3)])  # 3 returned readings but room for 1: keep the newest
    assert [r[1] for r in q.pop(10)] == [2, 10, 11, 12, 13] and q.dropped == 5


def _pusher_conf(tmp_path, port, limit, extra=""):
    _write(tmp_path / "tester.conf", "group t {\n interval 100\n numSensors 7\n}\n")
    return _write(tmp_path / "dcdbpusher.conf", """
global {
    mqttBroker 127.0.0.1:%d
    mqttprefix /msa/cm/n01
    maxQueuedReadings %d
    flushTimeout 0
    statusFile %s/pusher.status
    %s
}
plugins {
    plugin tester {
        config tester.conf
    }
}
""" % (port, limit, tmp_path, extra))


def test_pusher_queue_stays_bounded_while_the_broker_is_away(tmp_path):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again: nothing listens there
    bound = 50
    pusher = Pusher(PusherConfig(_pusher_conf(tmp_path, port, bound)))
    pusher.start()
    try:
        lengths = []
        for step in range(40):
            pusher.sample_all(now_ns=(step + 1) * S)
            lengths.append(len(pusher.queue))
        produced = 40 * 7
        assert max(lengths) <= bound
        assert pusher.queue.produced == produced
        assert pusher.queue.dropped == produced - bound
        assert not pusher.connected and pusher.published == 0
        oldest = pusher.queue.pop(1)[0]
        assert oldest[1] == (produced - bound) // 7 * S + S  # the oldest kept reading is the newest that fits
    finally:
        pusher.stop()
    status = json.loads((tmp_path / "pusher.status").read_text())
    assert status["dropped"] == produced - bound and status["connected"] is False


def test_pusher_reload_keeps_the_old_configuration_when_the_new_one_is_broken(tmp_path):
    conf = _pusher_conf(tmp_path, 1, 10)
    pusher = Pusher(PusherConfig(conf))
    _write(tmp_path / "tester.conf", "group t {\n interval 100\n numSensors 3\n}\ngroup u {\n numSensors 2\n}\n")
    assert pusher.reload() and len(pusher.groups) == 2 and pusher.reloads == 1
    _write(tmp_path / "tester.conf", "group t {\n")
    assert not pusher.reload() and len(pusher.groups) == 2


def test_pusher_says_ready_after_its_sighup_handler_is_installed_and_survives_a_reload(tmp_path):
    """Type=notify: READY=1 reaches $NOTIFY_SOCKET, and a SIGHUP sent as soon as it arrives reloads, not ends, it."""
    import signal
    import subprocess
    import sys
    conf = _pusher_conf(tmp_path, 1, 10)
    address = str(tmp_path / "notify")
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as listener:
        listener.bind(address)
        listener.settimeout(30)
        env = dict(os.environ, NOTIFY_SOCKET=address, PYTHONPATH=os.pathsep.join(sys.path))
        proc = subprocess.Popen([sys.executable, "-m", "msa_sim.dcdb.pusher", "--config", conf], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            assert listener.recv(256) == b"READY=1"
            proc.send_signal(signal.SIGHUP)
            with pytest.raises(subprocess.TimeoutExpired):
                proc.wait(1.5)
        finally:
            proc.terminate()
            output = proc.communicate(timeout=30)[0]
    assert proc.returncode == 0, output
    assert "configuration reloaded (1)" in output


# ---- store, tree and operators ----------------------------------------------------------------------------------------
def test_store_ignores_duplicates_and_downsamples_to_max_points(tmp_path):
    store = SqliteStore(str(tmp_path / "db.sqlite"))
    rows = [("/msa/cm/n1/g/s", i * S, float(i)) for i in range(100)]
    assert store.add(rows) == ["/msa/cm/n1/g/s"]
    store.add(rows[:10])
    assert store.count() == 100
    assert len(store.query("/msa/cm/n1/g/s", 0, 99 * S)) == 100
    buckets = store.query("/msa/cm/n1/g/s", 0, 99 * S, max_points=10)
    assert len(buckets) == 10 and buckets[0] == (0, 4.5) and buckets[-1][1] == 94.5
    assert store.query("/msa/cm/n1/g/none", 0, S) == []


def test_tree_lists_children_level_by_level():
    tree = SensorTree(["/msa/cm/n1/cpu/util", "/msa/cm/n1/mem/free", "/msa/cm/n2/cpu/util", "/msa/esb/e1/cpu/util"])
    assert tree.children([]) == ["msa"]
    assert tree.children(["msa"]) == ["cm", "esb"]
    assert tree.children(["msa", "cm"]) == ["n1", "n2"]
    assert tree.children(["msa", "cm", "n1"]) == ["cpu", "mem"]
    assert tree.sensors_at(["msa", "cm", "n1", "cpu"]) == ["/msa/cm/n1/cpu/util"]
    assert tree.children(["msa", "dam"]) is None
    assert tree.expand("/msa/+/+/cpu/util") == ["/msa/cm/n1/cpu/util", "/msa/cm/n2/cpu/util", "/msa/esb/e1/cpu/util"]


def _operators(text):
    return load_operators(parse_info(text).get("analytics"))


def test_moving_average_over_a_time_window():
    (op,) = _operators("analytics {\n operator avg {\n type average\n input /+/+/+/cpu/util\n window 3000\n}\n}\n")
    assert isinstance(op, MovingAverage)
    outs = [op.feed("/m/cm/n1/cpu/util", i * S, v, None)[0][0] for i, v in enumerate([10, 20, 30, 40, 50], 1)]
    assert [o[2] for o in outs] == [10, 15, 20, 30, 40]  # the last three seconds only
    assert outs[0][0] == "/m/cm/n1/analytics/avg"


def test_job_energy_integrates_power_while_the_job_runs():
    (op,) = _operators("analytics {\n operator energy {\n type jobenergy\n input /+/+/+/power/node\n"
                       " output job_energy\n}\n}\n")
    assert isinstance(op, JobEnergy)
    jobs = lambda node, ts: ["42"] if 2 * S <= ts <= 5 * S else []  # noqa: E731
    energy = []
    outputs = []
    for t, watts in enumerate([100, 100, 200, 200, 300, 300, 300], 1):
        out, rows = op.feed("/m/cm/n1/power/node", t * S, watts, jobs)
        outputs += out
        energy += rows
    # the intervals with both ends inside the job: 2-3 s, 3-4 s, 4-5 s → 150 + 200 + 250 J
    assert sum(e[2] for e in energy) == pytest.approx(600.0)
    assert outputs[-1] == ("/m/cm/n1/analytics/job_energy", 5 * S, 600.0)


def test_hostlists_expand_like_slurm():
    assert expand_hostlist("cm[01-03,7],esb1") == ["cm01", "cm02", "cm03", "cm7", "esb1"]


# ---- the Collect Agent without MQTT: validation, jobs, HTTP API ------------------------------------------------------
@pytest.fixture
def agent(tmp_path):
    _write(tmp_path / "collectagent.conf", """
global {
    mqttprefix /msa
    sacct none
    jobGrace 1000
}
storage {
    backend sqlite
    path %s/dcdb.sqlite
}
restAPI {
    address 127.0.0.1:0
    user grafana {
        password s3cret
    }
}
analytics {
    operator energy {
        type jobenergy
        input /msa/+/+/power/node
        output job_energy
    }
}
""" % tmp_path)
    agent = CollectAgent(AgentConfig(str(tmp_path / "collectagent.conf")))
    agent.start_writer()
    server = make_server(agent, "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    agent.url = "http://127.0.0.1:%d" % server.server_address[1]
    yield agent
    server.shutdown()
    server.server_close()
    agent.stop()


def _call(agent, path, body=None, auth=("grafana", "s3cret")):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(agent.url + path, data=data, method="POST" if data is not None else "GET")
    if auth:
        req.add_header("Authorization", "Basic " + base64.b64encode(("%s:%s" % auth).encode()).decode())
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def _feed_job(agent):
    for node in ("n1", "n2"):
        for t in range(1, 11):
            agent.ingest("/msa/cm/%s/power/node" % node, wire.encode([(t * S, 100)]))
            agent.ingest("/msa/cm/%s/cpu/util" % node, wire.encode([(t * S, t)], "binary"))
            if 3 <= t <= 6:
                agent.ingest("/msa/cm/%s/slurm/jobid" % node, wire.encode([(t * S, 4711)]))
    assert agent.wait_idle()


def test_agent_rejects_and_counts_malformed_messages(agent):
    assert agent.ingest("/msa/cm/n1/cpu/util", b"not json") == 0
    assert agent.ingest("no-slash", wire.encode([(1, 1)])) == 0
    assert agent.ingest("/msa/cm/n1/cpu/util", wire.encode([(S, 5)])) == 1
    assert agent.wait_idle()
    assert agent.counters["rejected"] == 2 and agent.store.count() == 1


def test_api_requires_basic_auth(agent):
    assert _call(agent, "/", auth=None)[0] == 401
    assert _call(agent, "/", auth=("grafana", "wrong"))[0] == 401
    assert _call(agent, "/")[0] == 200


def test_api_search_walks_the_hierarchy_and_query_returns_grafana_series(agent):
    _feed_job(agent)
    assert _call(agent, "/search")[1] == ["msa"]
    assert _call(agent, "/search/msa", {})[1] == ["cm"]
    assert _call(agent, "/search/msa/cm")[1] == ["n1", "n2"]
    assert _call(agent, "/search/msa/cm/n1")[1] == ["analytics", "cpu", "power", "slurm"]
    assert _call(agent, "/search/msa/cm/n1/cpu/sensor")[1] == ["/msa/cm/n1/cpu/util"]
    assert _call(agent, "/search/msa/dam")[0] == 404
    assert _call(agent, "/search", {"target": "/msa/cm/"})[1] == ["n1", "n2"]
    status, result = _call(agent, "/query", {"range": {"from": "1970-01-01T00:00:02Z", "to": "1970-01-01T00:00:04Z"},
                                             "targets": [{"target": "/msa/cm/+/cpu/util", "refId": "A"}],
                                             "maxDataPoints": 100, "intervalMs": 1000})
    assert status == 200
    assert result == [{"target": "/msa/cm/n1/cpu/util", "datapoints": [[2, 2000], [3, 3000], [4, 4000]]},
                      {"target": "/msa/cm/n2/cpu/util", "datapoints": [[2, 2000], [3, 3000], [4, 4000]]}]
    assert _call(agent, "/query", {"targets": "x"})[0] == 400


def test_job_queries_return_the_sensors_of_the_job_nodes_during_the_run(agent):
    _feed_job(agent)
    status, result = _call(agent, "/query", {"range": {"from": 0, "to": 20000},
                                             "targets": [{"target": "job:4711/cpu/util"}]})
    assert status == 200 and [s["target"] for s in result] == ["/msa/cm/n1/cpu/util", "/msa/cm/n2/cpu/util"]
    # the job ran from 3 s to 6 s, widened by jobGrace (1 s)
    assert [p[1] for p in result[0]["datapoints"]] == [2000, 3000, 4000, 5000, 6000, 7000]
    status, job = _call(agent, "/job/4711?sensors=cpu/util")
    assert status == 200 and job["nodes"] == ["/msa/cm/n1", "/msa/cm/n2"]
    assert "/msa/cm/n1/power/node" in job["sensors"] and len(job["data"]) == 2
    # 100 W on two nodes over the job's 3..6 s widened by the 1 s grace: 2..7 s = 5 s each
    assert job["energy_j"] == pytest.approx(2 * 100 * 5)
    assert _call(agent, "/job/999")[0] == 404


def test_unknown_jobs_fall_back_to_sacct(agent, tmp_path):
    _feed_job(agent)
    sacct = tmp_path / "sacct"
    _write(sacct, "#!/bin/sh\necho '{\"jobs\": [{\"job_id\": 55, \"nodes\": \"n[1-2]\", "
                  "\"time\": {\"start\": 8, \"end\": 9}}]}'\n")
    sacct.chmod(sacct.stat().st_mode | stat.S_IXUSR)
    agent.config.sacct = str(sacct)
    job = agent.resolve_job("55")
    assert job["source"] == "sacct" and sorted(job["nodes"]) == ["/msa/cm/n1", "/msa/cm/n2"]
    assert (job["start"], job["end"]) == (8 * S, 9 * S)


def test_a_het_job_spans_every_component_from_the_job_table_and_sacct(agent, tmp_path):
    _feed_job(agent)
    sacct = tmp_path / "sacct"
    _write(sacct, "#!/bin/sh\necho '{\"jobs\": ["
                  "{\"job_id\": 60, \"het\": {\"job_id\": 60}, \"nodes\": \"n1\", \"time\": {\"start\": 8, \"end\": 9}},"
                  "{\"job_id\": 61, \"het\": {\"job_id\": 60}, \"nodes\": \"n2\", \"time\": {\"start\": 8, \"end\": 12}},"
                  "{\"job_id\": 62, \"het\": {\"job_id\": 0}, \"nodes\": \"n3\", \"time\": {\"start\": 1, \"end\": 2}}"
                  "]}'\n")
    sacct.chmod(sacct.stat().st_mode | stat.S_IXUSR)
    agent.config.sacct = str(sacct)
    job = agent.resolve_job("60")
    assert sorted(job["nodes"]) == ["/msa/cm/n1", "/msa/cm/n2"] and (job["start"], job["end"]) == (8 * S, 12 * S)
    assert job["source"] == "sacct"
    # the leader's component ran on n1 and the Pushers saw it there (3..6 s): the table wins for that part
    for t in (3, 4):
        agent.ingest("/msa/cm/n1/slurm/jobid", wire.encode([(t * S, 60)]))
    assert agent.wait_idle()
    job = agent.resolve_job("60")
    assert job["source"] == "pusher" and sorted(job["nodes"]) == ["/msa/cm/n1", "/msa/cm/n2"]
    assert (job["start"], job["end"]) == (2 * S, 12 * S)  # 3 s less the 1 s grace; component 61's end from sacct


def test_grafana_dashboard_variables_and_targets_resolve_through_the_api(agent):
    _feed_job(agent)
    path = os.path.join(os.path.dirname(__file__), "..", "..", "collections", "ansible_collections", "msa", "hpc",
                        "roles", "dcdb_collectagent", "files", "system_overview.json")
    with open(path) as handle:
        dashboard = json.load(handle)
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    values = {"system": "msa", "module": "cm", "node": "{n1,n2}", "job": "4711"}

    def fill(text):
        for name, value in values.items():
            text = text.replace("$" + name, value)
        return text
    assert _call(agent, "/search", {"target": fill(variables["system"]["query"])})[1] == ["msa"]
    assert _call(agent, "/search", {"target": fill(variables["module"]["query"])})[1] == ["cm"]
    assert _call(agent, "/search", {"target": fill(variables["node"]["query"])})[1] == ["n1", "n2"]
    targets = {t["target"] for p in dashboard["panels"] for t in p["targets"]}
    found = {}
    for target in targets:
        status, result = _call(agent, "/query", {"range": {"from": 0, "to": 20000}, "targets": [{"target": fill(target)}]})
        assert status == 200
        found[target] = [s["target"] for s in result]
    assert found["/$system/$module/$node/cpu/util"] == ["/msa/cm/n1/cpu/util", "/msa/cm/n2/cpu/util"]
    assert found["job:$job/power/node"] == ["/msa/cm/n1/power/node", "/msa/cm/n2/power/node"]
    assert found["/$system/$module/$node/analytics/job_energy"] == ["/msa/cm/n1/analytics/job_energy",
                                                                  "/msa/cm/n2/analytics/job_energy"]
