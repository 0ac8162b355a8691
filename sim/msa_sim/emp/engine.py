# SPDX-License-Identifier: GPL-3.0-or-later
"""EMP master logic: discovery from slave reports, comparison with the .td file, routing runs, network state."""
from __future__ import annotations

import ipaddress
import threading
import time

from ansible_collections.msa.hpc.plugins.module_utils.extoll import deadlock as D
from ansible_collections.msa.hpc.plugins.module_utils.extoll import plan as P
from ansible_collections.msa.hpc.plugins.module_utils.extoll import routing as R
from ansible_collections.msa.hpc.plugins.module_utils.extoll import topology as T

MODES = ("auto", "topology")


class EmpError(Exception):
    """A request the master refuses; ``status`` is the HTTP status to answer with."""

    def __init__(self, message, status=400):
        super().__init__(message)
        self.status = status


class Master:
    def __init__(self, conf, store, clock=time.time, sleep=time.sleep):
        self.conf = conf
        self.store = store
        self.clock = clock
        self.sleep = sleep
        self.cidr = ipaddress.ip_network(conf["extoll_cidr"])
        self.lock = threading.RLock()
        self._generation = 0
        self._thread = None
        self._cache_hit = False
        self._plans = {}  # routing cache: (discovered topology, algorithm, options) -> (port, certificate)
        if conf.get("topology_file") and self.store.get("topology_td") is None:
            topo = T.load_td(conf["topology_file"])
            self.store.set(topology_td=T.to_td(topo), topology_source=conf["topology_file"])
        if self.store.get("network") is None:
            self.store.set(network={"configured": False, "up": False})

    # -- expected topology ------------------------------------------------------------------
    def expected(self):
        text = self.store.get("topology_td")
        return T.parse_td(text, self.store.get("topology_source") or "<stored>") if text else None

    def set_topology(self, td=None, data=None, source="<api>"):
        """Validate and store a topology (.td text or the YAML/dict form); returns (changed, topology)."""
        try:
            topo = T.parse_td(td, source) if td is not None else T.from_dict(data, source)
        except T.TopologyError as exc:
            raise EmpError(str(exc), 400)
        text = T.to_td(topo)
        changed = text != self.store.get("topology_td")
        if changed:
            self.store.set(topology_td=text, topology_source=source)
            self.store.log("topology definition replaced (%d nodes, %d links, routing %s)"
                           % (len(topo.nodes), len(topo.links), topo.routing))
        return changed, topo

    # -- slaves -----------------------------------------------------------------------------
    def address_of(self, node_id):
        return str(self.cidr.network_address + int(node_id))

    def _node_id_for(self, guid, wanted, taken):
        expected = self.expected()
        if expected is not None:
            node = expected.by_guid().get(guid)
            if node is not None:
                return node.id
        if wanted not in (None, "") and int(wanted) not in taken:
            return int(wanted)
        return max(list(taken) + [0]) + 1

    def report(self, body):
        """A slave's periodic report: GUID, ports (peer GUID/port per up port), installed routes version."""
        try:
            guid = int(str(body["guid"]), 0)
        except (KeyError, TypeError, ValueError):
            raise EmpError("report needs guid, got %r" % (body.get("guid") if isinstance(body, dict) else body,))
        with self.lock:
            known = {s["guid"]: s for s in self.store.slaves()}
            taken = {s["node_id"] for g, s in known.items() if g != guid and s["node_id"] is not None}
            node_id = self._node_id_for(guid, body.get("node_id"), taken)
            address = body.get("address") or self.address_of(node_id)
            ports = {str(p): v for p, v in (body.get("ports") or {}).items()}
            self.store.upsert_slave(guid, node_id, address, ports, body.get("counters") or {},
                                    int(body.get("routes_version") or 0), body.get("network") or "down", self.clock())
            version = self.store.get("routes_version", 0)
            reply = {"node_id": node_id, "address": address, "routes_version": version,
                     "network": "up" if self.store.get("network")["up"] else "down"}
            if int(body.get("routes_version") or 0) != version:
                entries = self.store.routes_for(version, guid)
                if entries is None:
                    reply["routes_version"] = 0
                    entries = []
                reply["routes"] = entries
            return reply

    def fresh_slaves(self):
        limit = self.clock() - float(self.conf["slave_timeout"])
        return [s for s in self.store.slaves() if s["last_seen"] >= limit]

    # -- discovery --------------------------------------------------------------------------
    def discover(self, log=True):
        """The fabric as it is now: a Topology (inventory + links) plus node addresses by id."""
        if self.conf["discovery"] == "file":
            topo = T.load_td(self.conf["discovery_file"])
            addresses = {nid: self.address_of(nid) for nid in topo.nodes}
        else:
            slaves = self.fresh_slaves()
            fresh = {s["guid"] for s in slaves}
            links = []
            for s in slaves:
                for port, info in s["ports"].items():
                    peer = info.get("peer_guid")
                    if info.get("state") == "up" and peer is not None and int(str(peer), 0) in fresh:
                        links.append((s["guid"], int(port), int(str(peer), 0), int(info["peer_port"])))
            topo = T.from_discovery([{"guid": s["guid"], "id": s["node_id"]} for s in slaves], links)
            addresses = {s["node_id"]: s["address"] for s in slaves}
        self.store.set(discovered_td=T.to_td(topo), discovered_at=self.clock(),
                       discovered_addresses={str(k): v for k, v in addresses.items()})
        if log:
            self.store.log("discovery found %d nodes and %d links" % (len(topo.nodes), len(topo.links)))
        return topo

    def discovered(self):
        text = self.store.get("discovered_td")
        return T.parse_td(text, "<discovered>") if text else self.discover(log=False)

    def comparison(self, discovered=None):
        expected = self.expected()
        if expected is None:
            return None
        return T.compare(expected, discovered if discovered is not None else self.discover(log=False))

    # -- routing ----------------------------------------------------------------------------
    def routing_options(self, fallback=None, virtual_channels=None):
        """``(fallback engines, VCs)`` of a request, else of master.conf; validated (field and value named)."""
        if fallback is None:
            fallback = [e for e in self.conf.get("routing_fallback", "").replace(",", " ").split() if e]
        if not isinstance(fallback, list):
            raise EmpError("fallback must be a list of routing algorithms, got %r" % (fallback,))
        try:
            fallback = [R.algorithm_name(e) for e in fallback]
        except R.RoutingError as exc:
            raise EmpError("fallback: %s" % exc)
        vcs = virtual_channels if virtual_channels is not None else (self.conf.get("virtual_channels")
                                                                     or D.MODEL_VCS)
        try:
            vcs = int(vcs)
        except (TypeError, ValueError):
            vcs = None
        if vcs is None or not 1 <= vcs <= D.MODEL_VCS:
            raise EmpError("virtual_channels must be an integer from 1 to %d (an EXTOLL link offers %d VCs in "
                           "the model), got %r" % (D.MODEL_VCS, D.MODEL_VCS, virtual_channels))
        return fallback, vcs

    def _route(self, topo, algorithm, fallback, vcs, root):
        """plan.route_topology, cached on the topology's .td text and the options; remembers whether it hit."""
        key = (T.to_td(topo), algorithm, tuple(fallback), vcs, root)
        cached = self._plans.get(key)
        self._cache_hit = cached is not None
        if cached is None:
            cached = P.route_topology(topo, algorithm, fallback, vcs, root)
            if len(self._plans) >= 4:
                self._plans.pop(next(iter(self._plans)))
            self._plans[key] = cached
        return cached

    def plan(self, routing=None, mode="auto", discovered=None, expected=None, fallback=None, virtual_channels=None):
        """Compute (without installing) tables for the discovered fabric with the collection's plan.fabric_plan: a
        dict with summary, tables, dot, plus the discovered fabric (.td) and the options the plan used, so a client
        can compute and prove the same plan itself. ``expected`` replaces the stored topology definition for this
        computation only."""
        discovered = discovered if discovered is not None else self.discover(log=False)
        expected = expected if expected is not None else self.expected()
        fallback, vcs = self.routing_options(fallback, virtual_channels)
        root = self.conf.get("updown_root") or None
        options = {"routing": self.conf.get("routing") or None, "fallback": fallback, "virtual_channels": vcs,
                   "updown_root": int(root) if root else None}
        self._cache_hit = False
        try:
            plan = P.fabric_plan(expected, discovered, routing, mode, fallback, vcs, options["updown_root"],
                                 configured=options["routing"], route=self._route)
        except P.PlanRefused as exc:
            raise EmpError(str(exc), 409)
        plan.update(cached=self._cache_hit, options=options, discovered=T.to_td(discovered))
        return plan

    def _entries(self, plan, addresses):
        fab, port = plan["fabric"], plan["port"]
        per_guid = {}
        by_id = plan["topology"].nodes
        for i, src in enumerate(fab.ids.tolist()):
            entries = []
            for t, dst in enumerate(fab.ids.tolist()):
                p = int(port[i, t])
                if t == i or p < 0:
                    continue
                nbr = int(fab.ids[fab.nbr[i, p]])
                entries.append({"dst": addresses.get(str(dst), self.address_of(dst)), "port": p,
                                "via": addresses.get(str(nbr), self.address_of(nbr))})
            per_guid[by_id[src].guid] = entries
        return per_guid

    def install(self, plan, discovered, settings):
        """Store a plan's tables as the next routes version (slaves fetch it with their next report); remember
        the discovered fabric it was computed for and the run's settings, which surveillance re-routes with."""
        version = self.store.get("routes_version", 0) + 1
        self.store.save_routes(version, self._entries(plan, self.store.get("discovered_addresses") or {}))
        self.store.set(routes_version=version, routes_installed_at=time.time(), routes_tables=plan["tables"],
                       routes_dot=plan["dot"], routes_summary=plan["summary"], routes_algorithm=plan["algorithm"],
                       routes_fabric=T.to_td(discovered), surveyed_fabric=T.to_td(discovered), run_settings=settings)
        return version

    def run(self, routing=None, mode="topology", dry_run=False, timeout=None, td=None, topology=None,
            fallback=None, virtual_channels=None):
        """emp/run: dry-run answers the plan at once; otherwise a background job discovers (in topology mode
        until the fabric matches the definition), computes, installs and waits for every slave's ack."""
        if mode not in MODES:
            raise EmpError("mode must be one of %s, got %r" % (", ".join(MODES), mode))
        if routing:
            try:
                R.algorithm_name(routing)
            except R.RoutingError as exc:
                raise EmpError(str(exc))
        options = self.routing_options(fallback, virtual_channels)
        if dry_run:
            expected = None
            try:
                if td is not None:
                    expected = T.parse_td(td, "<request>")
                elif topology is not None:
                    expected = T.from_dict(topology, "<request>")
            except T.TopologyError as exc:
                raise EmpError(str(exc))
            plan = self.plan(routing, mode, expected=expected, fallback=fallback, virtual_channels=virtual_channels)
            return {k: v for k, v in plan.items() if k not in ("fabric", "port", "topology")}
        with self.lock:
            self._generation += 1
            generation = self._generation
            self._set_status(state="starting", mode=mode, routing=routing, message="run requested")
            self._thread = threading.Thread(target=self._job, args=(generation, routing, mode, timeout, options), daemon=True)
            self._thread.start()
        return self.status()

    def _set_status(self, **fields):
        status = dict(self.store.get("emp_status") or {})
        status.update(fields, updated=self.clock())
        self.store.set(emp_status=status)

    def _job(self, generation, routing, mode, timeout, options=(None, None)):
        start = self.clock()
        interval = float(self.conf["discovery_interval"])
        try:
            while True:
                if generation != self._generation:
                    return
                discovered = self.discover()
                comparison = self.comparison(discovered)
                if mode == "topology" and comparison is not None and (
                        comparison["missing_nodes"] or comparison["missing_links"]):
                    self._set_status(state="waiting", message="waiting for %d nodes and %d links of the topology"
                                     % (len(comparison["missing_nodes"]), len(comparison["missing_links"])),
                                     missing_nodes=comparison["missing_nodes"],
                                     missing_links=comparison["missing_links"])
                    if timeout is not None and self.clock() - start > timeout:
                        raise EmpError("the fabric did not match the topology within %ss" % timeout, 504)
                    self.sleep(interval)
                    continue
                break
            self._set_status(state="computing", message="computing routes", missing_nodes=[], missing_links=[])
            plan = self.plan(routing, mode, discovered, fallback=options[0], virtual_channels=options[1])
            with self.lock:
                if generation != self._generation:
                    return
                version = self.install(plan, discovered, {"routing": routing, "mode": mode, "fallback": options[0],
                                                          "virtual_channels": options[1]})
            self._set_status(state="installing", version=version, algorithm=plan["algorithm"],
                             summary=plan["summary"], message="installing routing tables version %d" % version)
            self.store.log("routing %s computed for %d nodes (max %d hops, deadlock free: %s), version %d"
                           % (plan["algorithm"], plan["summary"]["nodes"], plan["summary"]["max_hops"],
                              plan["summary"]["deadlock_free"], version))
            guids = {node.guid for node in plan["topology"].nodes.values()}
            while self.conf["discovery"] != "file":
                if generation != self._generation:
                    return
                acked = {s["guid"] for s in self.store.slaves() if s["installed_version"] == version}
                pending = sorted(guids - acked)
                if not pending:
                    break
                if self.clock() - start > (timeout or 60):
                    raise EmpError("slaves %s did not install routing version %d"
                                   % (", ".join("0x%x" % g for g in pending), version), 504)
                self._set_status(pending=["0x%x" % g for g in pending])
                self.sleep(0.1)
            net = self.store.get("network")
            self.store.set(network=dict(net, configured=True))
            self._set_status(state="done", pending=[], message="routing tables version %d installed" % version)
            self.store.log("routing tables version %d installed on %d nodes" % (version, len(guids)))
        except (EmpError, T.TopologyError, OSError) as exc:
            self._set_status(state="failed", message=str(exc))
            self.store.log("emp run failed: %s" % exc, "error")

    def wait(self, timeout=30.0):
        deadline = self.clock() + timeout
        while self.status()["state"] in ("starting", "waiting", "computing", "installing"):
            if self.clock() > deadline:
                break
            self.sleep(0.05)
        return self.status()

    def status(self):
        status = dict(self.store.get("emp_status") or {"state": "idle", "message": "no run yet"})
        status.setdefault("version", self.store.get("routes_version", 0))
        return status

    # -- network ----------------------------------------------------------------------------
    def network_status(self):
        net = self.store.get("network")
        state = "up" if net["up"] else ("configured" if net["configured"] and not net.get("stopped") else
                                        "down" if net["configured"] else "un-configured")
        return {"status": state, "configured": net["configured"], "up": net["up"],
                "routes_version": self.store.get("routes_version", 0), "fabric": self.store.get("fabric_state")}

    def network_start(self):
        net = self.store.get("network")
        if not net["configured"]:
            raise EmpError("the network is not configured: run emp/run first", 409)
        changed = not net["up"]
        self.store.set(network=dict(net, up=True, stopped=False))
        if changed:
            self.store.log("network started")
        return dict(self.network_status(), changed=changed)

    def network_stop(self):
        net = self.store.get("network")
        changed = net["up"]
        self.store.set(network=dict(net, up=False, stopped=True))
        if changed:
            self.store.log("network stopped")
        return dict(self.network_status(), changed=changed)

    def network_info(self):
        expected = self.expected()
        discovered = self.discovered()
        return {"topology": ({"root": expected.root, "type": expected.blocks[expected.root].type if expected.root
                              else None, "routing": expected.routing, "nodes": len(expected.nodes),
                              "links": len(expected.links), "source": self.store.get("topology_source")}
                             if expected is not None else None),
                "discovered": {"nodes": len(discovered.nodes), "links": len(discovered.links)},
                "routing": {"algorithm": self.store.get("routes_algorithm"),
                            "version": self.store.get("routes_version", 0),
                            "summary": self.store.get("routes_summary")},
                "extoll_cidr": str(self.cidr), "auto_configuration": self.conf["auto_configuration"],
                "network": self.network_status()}

    # -- nodes ------------------------------------------------------------------------------
    def nodes(self):
        slaves = {s["node_id"]: s for s in self.store.slaves()}
        limit = self.clock() - float(self.conf["slave_timeout"])
        discovered = self.discovered()
        addresses = self.store.get("discovered_addresses") or {}
        out = []
        for nid in sorted(discovered.nodes):
            node = discovered.nodes[nid]
            s = slaves.get(nid)
            out.append({"id": nid, "guid": "0x%x" % node.guid, "type": node.type,
                        "address": addresses.get(str(nid), self.address_of(nid)),
                        "state": "up" if (s is None and self.conf["discovery"] == "file")
                        or (s is not None and s["last_seen"] >= limit) else "gone",
                        "routes_version": s["installed_version"] if s else self.store.get("routes_version", 0)})
        return out

    def node(self, node_id):
        for node in self.nodes():
            if node["id"] == node_id:
                return node
        raise EmpError("node %s is unknown" % node_id, 404)

    def node_links(self, node_id):
        self.node(node_id)
        topo = self.discovered()
        adj = topo.adjacency().get(node_id, {})
        expected = self.expected()
        exp_adj = expected.adjacency().get(node_id, {}) if expected is not None and node_id in expected.nodes else {}
        ports = sorted(set(adj) | set(exp_adj))
        return [{"port": p, "state": "up" if p in adj else "down",
                 "peer": {"id": adj[p][0], "port": adj[p][1]} if p in adj else None,
                 "expected_peer": {"id": exp_adj[p][0], "port": exp_adj[p][1]} if p in exp_adj else None}
                for p in ports]

    def node_xbar(self, node_id):
        self.node(node_id)
        table = (self.store.get("routes_tables") or {}).get(str(node_id), {})
        used = {}
        for port in table.values():
            used[str(port)] = used.get(str(port), 0) + 1
        return {"routes_version": self.store.get("routes_version", 0), "entries": len(table),
                "destinations_per_port": used, "table": table}

    def node_coordinate(self, node_id):
        """The node's place in the topology definition: its block, coordinate and the blocks above it."""
        self.node(node_id)
        expected = self.expected()
        placed = expected.leaf_coordinates().get(node_id) if expected is not None else None
        if placed is None:
            return {"id": node_id, "block": None, "coordinate": None, "path": []}
        block, coord = placed
        parents = {m: b.name for b in expected.blocks.values() for c, m in b.members if isinstance(m, str)}
        path = [block]
        while path[-1] in parents:
            path.append(parents[path[-1]])
        return {"id": node_id, "block": block, "type": expected.blocks[block].type, "coordinate": list(coord),
                "path": list(reversed(path))}

    def node_unit(self, node_id, unit):
        """PCIe, VELO and RMA status from the node's state: the slave's last report (freshness, its links, the
        routes version it installed, its EXTOLL interface counters) and the network state."""
        node = self.node(node_id)
        slave = {s["node_id"]: s for s in self.store.slaves()}.get(node_id) or {}
        ports = slave.get("ports") or {}
        links_up = sorted(int(p) for p, info in ports.items() if info.get("state") == "up")
        counters = slave.get("counters") or {}
        version = self.store.get("routes_version", 0)
        in_sync = node["state"] == "up" and slave.get("installed_version") == version and version > 0
        if unit == "pcie":
            return {"unit": "pcie", "state": "up" if node["state"] == "up" else "down",
                    "device": "0x%s" % node["guid"][2:], "type": node["type"], "links_up": links_up,
                    "last_report": slave.get("last_seen")}
        enabled = bool(self.store.get("network")["up"] and in_sync and slave.get("network") == "up")
        total = {key: sum(c.get(key, 0) for c in counters.values())
                 for key in ("rx_packets", "tx_packets", "rx_bytes", "tx_bytes", "rx_dropped", "tx_dropped")}
        return {"unit": unit, "state": "enabled" if enabled else "disabled", "routes_version": slave.get(
                "installed_version"), "routes_in_sync": in_sync, "links_up": links_up, "counters": total,
                "per_link": counters}
