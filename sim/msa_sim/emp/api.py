# SPDX-License-Identifier: GPL-3.0-or-later
"""The EMP master's REST API (seed 004 §2.1 endpoints) over http.server (TLS only when given a certificate), with
bearer-token auth on every endpoint but ``GET /health``."""
from __future__ import annotations

import json
import logging
import re

from ansible_collections.msa.hpc.plugins.module_utils.node.tlsserver import BodyError, TLSThreadingHTTPServer, \
    dispatching
from .auth import identify
from .engine import EmpError

log = logging.getLogger("emp.api")
NODE_RE = re.compile(r"^nodes/(\d+)(?:/(link|xbar|pcie|velo|rma|coordinate))?$")
# The endpoints seed 004 §2.1 lists; everything else this master answers is an extra a client must not rely on.
SEED_ENDPOINTS = {("GET", "emp/getTD"), ("POST", "emp/run"), ("GET", "emp/status"), ("POST", "emp/discover"),
                  ("GET", "log"), ("GET", "network/status"), ("POST", "network/stop"), ("POST", "network/start"),
                  ("GET", "network/info"), ("GET", "nodes"), ("POST", "slaves/report")}
SEED_NODE_UNITS = (None, "link", "xbar", "pcie", "velo", "rma")


def make_server(master, address, port, token=None, seed_only=False, tls=None, slaves=None):
    """A ThreadingHTTPServer serving ``master`` (an engine.Master); ``port`` 0 picks a free port. ``seed_only``
    answers only the seed's endpoint list (404 for the extras), as a master that has nothing more would. ``tls``
    (cert, key) makes the socket TLS only. ``slaves`` maps the SHA-256 of each slave's token to its (GUID, node id)
    (msa_sim.emp.auth): those tokens may only report for their own node."""

    class Handler(dispatching("GET", "POST", "PUT")):
        server_version = "emp-master/1"
        protocol_version = "HTTP/1.1"
        max_body = 1 << 20  # a topology (.td text or its mapping) for PUT emp/topology and emp/run; a slave report

        def log_message(self, fmt, *args):  # the master keeps its own log
            pass

        def _send(self, status, payload, content_type="application/json"):
            if content_type == "application/json":
                body = json.dumps(payload, sort_keys=True).encode()
            else:
                body = payload.encode()
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            try:
                self.wfile.write(body)
            except (BrokenPipeError, ConnectionResetError):
                # the client gave up waiting (its timeout): nothing to answer, and no traceback in the journal
                self.close_connection = True

        def _body(self):
            raw = self.read_body()
            if not raw:
                return {}
            try:
                data = json.loads(raw.decode())
            except ValueError:
                raise EmpError("request body is not JSON")
            if not isinstance(data, dict):
                raise EmpError("request body must be a JSON object")
            return data

        def _principal(self):
            return identify(self.headers.get("Authorization", ""), token, slaves or {})

        def _dispatch(self, method):
            path = self.path.split("?", 1)[0].strip("/")
            if path.startswith("api/"):
                path = path[4:]
            if method == "GET" and path == "health":
                return self._send(200, {"ok": True})
            who = self._principal()
            if who is None:
                return self._send(401, {"error": {"message": "missing or wrong bearer token"}})
            try:
                who.check_endpoint(method, path)  # a slave's token: refused before its body is read
                body = self._body() if method in ("POST", "PUT") else {}
                who.authorise(method, path, body)
                result = route(method, path, body)
            except EmpError as exc:
                return self._send(exc.status, {"error": {"message": str(exc)}})
            except BodyError as exc:
                return self._send(exc.status, exc.document())
            except Exception as exc:  # a bug must answer 500 and be logged, not drop the client's connection
                log.exception("%s /%s failed", method, path)
                return self._send(500, {"error": {"message": "internal error: %s: %s" % (type(exc).__name__, exc)}})
            if isinstance(result, tuple):
                return self._send(200, result[1], result[0])
            return self._send(200, result)

    def route(method, path, body):
        m = master
        text = "text/plain; charset=utf-8"
        table = {
            ("GET", "emp/getTD"): lambda: (text, _td(m.discovered())),
            ("GET", "emp/getdot"): lambda: (text, m.store.get("routes_dot") or m.plan("UpDown", "auto")["dot"]),
            ("POST", "emp/run"): lambda: m.run(body.get("routing"), body.get("mode", "topology"),
                                               bool(body.get("dry_run")), body.get("timeout"),
                                               body.get("td"), body.get("topology"), body.get("fallback"),
                                               body.get("virtual_channels")),
            ("GET", "emp/status"): m.status,
            ("POST", "emp/discover"): lambda: _discover(m),
            ("GET", "emp/topology"): lambda: {"td": m.store.get("topology_td"),
                                              "source": m.store.get("topology_source")},
            ("PUT", "emp/topology"): lambda: _put_topology(m, body),
            ("GET", "emp/routes"): lambda: {"version": m.store.get("routes_version", 0),
                                            "installed_at": m.store.get("routes_installed_at"),
                                            "algorithm": m.store.get("routes_algorithm"),
                                            "summary": m.store.get("routes_summary"),
                                            "certificate": m.store.get("routes_summary"),
                                            "tables": m.store.get("routes_tables") or {}},
            ("GET", "log"): lambda: (text, "\n".join(m.store.log_lines()) + "\n"),
            ("GET", "network/status"): m.network_status,
            ("POST", "network/start"): m.network_start,
            ("POST", "network/stop"): m.network_stop,
            ("GET", "network/info"): m.network_info,
            ("GET", "network/missinglinks"): lambda: (m.comparison() or {}).get("missing_links", []),
            ("GET", "network/missingnodes"): lambda: (m.comparison() or {}).get("missing_nodes", []),
            ("GET", "nodes"): m.nodes,
            ("POST", "slaves/report"): lambda: m.report(body),
        }
        handler = table.get((method, path))
        if seed_only and (method, path) not in SEED_ENDPOINTS:
            handler = None
        if seed_only and method == "POST" and path == "emp/run" and body.get("dry_run"):
            raise EmpError("dry_run is not a parameter of this master's emp/run", 400)
        if handler is not None:
            return handler()
        match = NODE_RE.match(path)
        if match and method == "GET" and not (seed_only and match.group(2) not in SEED_NODE_UNITS):
            node_id, unit = int(match.group(1)), match.group(2)
            if unit is None:
                return m.node(node_id)
            if unit == "link":
                return m.node_links(node_id)
            if unit == "xbar":
                return m.node_xbar(node_id)
            if unit == "coordinate":
                return m.node_coordinate(node_id)
            return m.node_unit(node_id, unit)
        raise EmpError("no endpoint %s %s" % (method, path), 404)

    return TLSThreadingHTTPServer((address, int(port)), Handler, tls=tls)


def _td(topo):
    from ansible_collections.msa.hpc.plugins.module_utils.extoll import topology as T
    return T.to_td(topo)


def _discover(m):
    topo = m.discover()
    from ansible_collections.msa.hpc.plugins.module_utils.extoll import topology as T
    return {"nodes": [n.as_dict() for n in (topo.nodes[i] for i in sorted(topo.nodes))],
            "links": [T.format_link(link) for link in topo.links], "comparison": m.comparison(topo)}


def _put_topology(m, body):
    if "td" in body:
        changed, topo = m.set_topology(td=body["td"], source=body.get("source") or "<api>")
    elif "topology" in body:
        changed, topo = m.set_topology(data=body["topology"], source=body.get("source") or "<api>")
    else:
        raise EmpError("PUT emp/topology needs td (text) or topology (mapping)")
    return {"changed": changed, "nodes": len(topo.nodes), "links": len(topo.links), "routing": topo.routing}
