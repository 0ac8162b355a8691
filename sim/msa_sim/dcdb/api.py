# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

"""Grafana SimpleJSON-compatible HTTP API of the Collect Agent, with DCDB's hierarchical /search and job queries.

- Served over TLS only when restAPI names a ``certificate`` and ``privateKey`` (as DCDB's own REST API is).
- ``GET /``: health (Grafana's "Test" button); basic auth when restAPI users are configured, as on every endpoint.
- ``POST /search`` ``{"target": t}``: t ending in ``/`` lists the children of that level; else the sensors matching t
  (a name, a pattern with ``+``/``*``/``{a,b}``, or a substring); ``""`` lists every sensor.
- ``GET /search`` and ``GET|POST /search/<l1>/…/<ln>``: the children (sub-levels and sensors) at that level, so a client walks
  system → module → node → group → sensor; ``/search/<l1>/…/<ln>/sensor`` lists the full names of the sensors at that
  level (DCDB's ``[sensor]`` keyword, so a level called ``sensor`` cannot be listed that way).
- ``POST /query``: SimpleJSON request (``range.from/to``, ``targets[].target``, ``maxDataPoints``, ``intervalMs``) →
  ``[{"target", "datapoints": [[value, ms], …]}]``; targets may be patterns or ``job:<id>/<group>/<sensor>`` (that
  sensor on every node of the job, limited to the job's run time).
- ``GET /job/<id>[?sensors=g/s,…&maxDataPoints=n]``: the job's nodes, window, energy and sensors (data if asked).
- ``GET /jobs``, ``GET /status``, ``GET /metrics`` (Prometheus text format: readings received, stored, dropped, pending,
  lag); ``POST /annotations``, ``/tag-keys``, ``/tag-values`` answer empty lists.
"""

import base64
import datetime
import hmac
import json
import logging
import time
import urllib.parse

from ansible_collections.msa.hpc.plugins.module_utils.node.tlsserver import BodyError, TLSThreadingHTTPServer, \
    dispatching

LOG = logging.getLogger("dcdb.api")
MAX_SERIES = 1000


class ApiError(Exception):
    def __init__(self, status, message):
        super().__init__(message)
        self.status = status


def to_ns(value, field):
    """Grafana time (ISO 8601 string or epoch milliseconds) → ns."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return int(value) * 1000000
    if isinstance(value, str):
        text = value.strip()
        if text.isdigit():
            return int(text) * 1000000
        try:
            stamp = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            pass
        else:
            if stamp.tzinfo is None:
                stamp = stamp.replace(tzinfo=datetime.timezone.utc)
            return int(round(stamp.timestamp() * 1000)) * 1000000
    raise ApiError(400, "%s %r is not an ISO 8601 time or epoch milliseconds" % (field, value))


def series(store, topic, t0, t1, max_points):
    return {"target": topic, "datapoints": [[value, ts // 1000000] for ts, value in store.query(topic, t0, t1,
                                                                                                  max_points)]}


def resolve_targets(agent, target, t0, t1):
    """A query target → [(topic, t0, t1)] (job targets narrow the window to the job's run time)."""
    if target.startswith("job:"):
        jobid, _, rest = target[4:].partition("/")
        job = agent.resolve_job(jobid)
        if job is None:
            raise ApiError(404, "job %r is unknown (not in the job table%s)" % (
                jobid, " nor in sacct" if agent.config.sacct else ""))
        lo, hi = max(t0, job["start"]), min(t1, job["end"])
        out = []
        for node in sorted(job["nodes"]):
            for topic in agent.tree.expand(node + "/" + rest.strip("/")):
                out.append((topic, lo, hi))
        return out
    return [(topic, t0, t1) for topic in agent.tree.expand(target, MAX_SERIES)]


def query(agent, body):
    if not isinstance(body, dict):
        raise ApiError(400, "the /query body must be a JSON object")
    rng = body.get("range") or {}
    now = time.time_ns()
    t0 = to_ns(rng.get("from"), "range.from") if rng.get("from") is not None else now - 3600 * 10 ** 9
    t1 = to_ns(rng.get("to"), "range.to") if rng.get("to") is not None else now
    max_points = body.get("maxDataPoints") or None
    if max_points is not None and (not isinstance(max_points, int) or max_points < 1):
        raise ApiError(400, "maxDataPoints %r must be a positive integer" % (max_points,))
    targets = body.get("targets")
    if not isinstance(targets, list):
        raise ApiError(400, "targets must be a list of {\"target\": <sensor>}")
    out = []
    for i, entry in enumerate(targets):
        if not isinstance(entry, dict) or not isinstance(entry.get("target"), str):
            raise ApiError(400, "targets[%d] %r has no target string" % (i, entry))
        if entry.get("hide"):
            continue
        for topic, lo, hi in resolve_targets(agent, entry["target"].strip(), t0, t1)[:MAX_SERIES]:
            out.append(series(agent.store, topic, lo, hi, max_points))
    return out


def search(agent, levels, body):
    if levels is not None:
        if levels and levels[-1] == "sensor":
            found = agent.tree.sensors_at(levels[:-1])
        else:
            found = agent.tree.children(levels)
        if found is None:
            raise ApiError(404, "no level /%s in the sensor hierarchy" % "/".join(levels))
        return found
    target = (body or {}).get("target", "") if isinstance(body, dict) else ""
    target = target.strip() if isinstance(target, str) else ""
    if target.endswith("/"):
        parts = [p for p in target.strip("/").split("/") if p]
        if any(p in ("*", "+") for p in parts):  # template variable queries such as /msa/*/
            names = set()
            for topic in agent.tree.expand("/" + "/".join(parts + ["#"]), 10 ** 6):
                levels = topic.strip("/").split("/")
                if len(levels) > len(parts):
                    names.add(levels[len(parts)])
            return sorted(names)
        return agent.tree.children(parts) or []
    if not target:
        return agent.tree.topics()[:10000]
    if target.startswith("/") or any(c in target for c in "*+{"):
        found = agent.tree.expand(target if target.startswith("/") else "/" + target, 10000)
        if found:
            return found
    return [t for t in agent.tree.topics() if target in t][:10000]


def job_info(agent, jobid, params):
    job = agent.resolve_job(jobid)
    if job is None:
        raise ApiError(404, "job %r is unknown" % jobid)
    sensors = []
    for node in sorted(job["nodes"]):
        sensors.extend(t for t in agent.tree.expand(node + "/#", 10 ** 6))
    result = {"jobid": job["jobid"], "source": job["source"], "nodes": sorted(job["nodes"]),
              "start_ms": job["start"] // 1000000, "end_ms": job["end"] // 1000000,
              "energy_j": round(sum(job["energy_j"].values()), 3), "energy_by_node_j": job["energy_j"],
              "sensors": sensors}
    wanted = [s for s in params.get("sensors", [""])[0].split(",") if s]
    if wanted:
        max_points = int(params.get("maxDataPoints", ["0"])[0] or 0) or None
        result["data"] = []
        for rest in wanted:
            for topic, lo, hi in resolve_targets(agent, "job:%s/%s" % (jobid, rest), 0, 2 ** 63 - 1):
                result["data"].append(series(agent.store, topic, lo, hi, max_points))
    return result


class Handler(dispatching("GET", "POST", handler="_handle")):
    server_version = "dcdb-collectagent/1"
    protocol_version = "HTTP/1.1"
    agent = None
    max_body = 64 << 10  # a Grafana /search or /query document

    def log_message(self, fmt, *args):
        LOG.debug("%s " + fmt, self.address_string(), *args)

    def _send(self, status, data, headers=None, content_type="application/json"):
        raw = data.encode() if isinstance(data, str) else json.dumps(data).encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(raw)))
        self.send_header("Access-Control-Allow-Origin", "*")
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(raw)

    def _authorized(self):
        users = self.agent.config.users
        if not users:
            return True
        header = self.headers.get("Authorization", "")
        if not header.startswith("Basic "):
            return False
        try:
            user, _, password = base64.b64decode(header[6:]).decode().partition(":")
        except (ValueError, UnicodeDecodeError):
            return False
        expected = users.get(user)
        return expected is not None and hmac.compare_digest(expected.encode(), password.encode())

    def _body(self):
        raw = self.read_body()
        if not raw:
            return {}
        try:
            return json.loads(raw)
        except ValueError as exc:
            raise ApiError(400, "request body is not JSON: %s" % exc)

    def _handle(self, method):
        url = urllib.parse.urlsplit(self.path)
        parts = [urllib.parse.unquote(p) for p in url.path.split("/") if p]
        params = urllib.parse.parse_qs(url.query)
        try:
            if not self._authorized():
                self._send(401, {"error": "authentication required"}, {"WWW-Authenticate": 'Basic realm="dcdb"'})
                return
            body = self._body() if method == "POST" else {}
            agent = self.agent
            if not parts:
                self._send(200, {"status": "ok", "sensors": len(agent.tree), "connected": agent.connected})
            elif parts[0] == "search":
                hierarchical = len(parts) > 1 or method == "GET"  # GET /search: the top level of the hierarchy
                self._send(200, search(agent, parts[1:] if hierarchical else None, body))
            elif parts[0] == "query" and method == "POST":
                self._send(200, query(agent, body))
            elif parts[0] in ("annotations", "tag-keys", "tag-values") and method == "POST":
                self._send(200, [])
            elif parts[0] == "job" and len(parts) == 2:
                self._send(200, job_info(agent, parts[1], params))
            elif parts[0] == "jobs" and method == "GET":
                self._send(200, agent.store.jobs())
            elif parts[0] == "status" and method == "GET":
                self._send(200, agent.status())
            elif parts == ["metrics"] and method == "GET":  # Prometheus scrapes this
                self._send(200, agent.metrics(), content_type="text/plain; version=0.0.4; charset=utf-8")
            else:
                raise ApiError(404, "no such endpoint: %s %s" % (method, url.path))
        except ApiError as exc:
            self._send(exc.status, {"error": str(exc)})
        except BodyError as exc:
            self._send(exc.status, exc.document())
        except Exception as exc:  # a bug must answer 500, not kill the connection
            LOG.exception("request %s %s failed", method, self.path)
            self._send(500, {"error": "internal error: %s" % exc})

    def do_OPTIONS(self):
        self.send_response(204)
        self.send_header("Access-Control-Allow-Origin", "*")
        self.send_header("Access-Control-Allow-Headers", "accept, content-type, authorization")
        self.send_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS")
        self.send_header("Content-Length", "0")
        self.end_headers()


def make_server(agent, host, port, tls=None):
    """The API of ``agent`` on host:port; ``tls`` (cert, key) makes it TLS only."""
    handler = type("BoundHandler", (Handler,), {"agent": agent})
    server = TLSThreadingHTTPServer((host, port), handler, tls=tls)
    server.daemon_threads = True
    return server
