# SPDX-License-Identifier: GPL-3.0-or-later
"""EMP surveillance: a periodic sweep over the slaves' reports notices link and node loss and return.

After the first successful ``emp/run`` the master keeps the discovered fabric its tables were computed for. Each
sweep compares the fabric discovered now with it:

* every lost or returned link and node is an event: a line in the master's log (``GET log``), one on stdout (the
  journal of the emp-master unit) and a count in the sensor files;
* in auto mode (the last run's mode) the master re-routes the fabric as it is and installs the tables at once (the
  slaves pick them up with their next report, within a second or two): no Ansible run. The routing cache makes a
  return to a fabric seen before cost nothing;
* in topology mode it keeps the last good tables and reports the fabric degraded, naming the missing links and
  nodes of the definition (``network/status``, ``network/missinglinks``).

Sensor files (``sensor_dir``, one number each, read by a DCDB Pusher sysfs group): ``fabric_degraded``,
``fabric_missing_links``, ``fabric_missing_nodes``, ``fabric_events``, ``fabric_reroutes``.
"""
from __future__ import annotations

import os
import sys
import threading

from ansible_collections.msa.hpc.plugins.module_utils.extoll import topology as T

from .engine import EmpError


def _links(topo):
    return {T.format_link(link) for link in topo.links}


class Monitor:
    def __init__(self, master, interval=1.0, sensor_dir="", out=None):
        self.master = master
        self.interval = float(interval)
        self.sensor_dir = sensor_dir
        self.out = out or sys.stdout
        self.stop = threading.Event()
        self.counts = {"events": 0, "reroutes": 0}

    def event(self, message, level="info"):
        self.counts["events"] += 1
        self.master.store.log("surveillance: %s" % message, level)
        print("emp-master: surveillance: %s" % message, file=self.out, flush=True)

    def sweep(self):
        """One comparison of the fabric with the one the installed tables were computed for."""
        m = self.master
        with m.lock:
            base_td = m.store.get("routes_fabric")
            settings = m.store.get("run_settings")
            if not base_td or not settings or m.status().get("state") in ("starting", "waiting", "computing",
                                                                           "installing"):
                return None
            now = m.discover(log=False)
            now_td = T.to_td(now)
            last_td = m.store.get("surveyed_fabric") or base_td
            if now_td != last_td:
                self._report_changes(T.parse_td(last_td, "<surveyed>"), now)
                m.store.set(surveyed_fabric=now_td)
            comparison = m.comparison(now)
            missing = {"links": (comparison or {}).get("missing_links", []),
                       "nodes": (comparison or {}).get("missing_nodes", [])}
            state = "ok"
            if settings.get("mode") == "auto":
                if now_td != base_td:
                    self._reroute(now, settings)
            elif missing["links"] or missing["nodes"]:
                state = "degraded"
            fabric = {"state": state, "missing_links": missing["links"], "missing_nodes": missing["nodes"],
                      "mode": settings.get("mode"), "routes_version": m.store.get("routes_version", 0)}
            if fabric != m.store.get("fabric_state"):
                if state == "degraded":
                    self.event("fabric degraded: %d links and %d nodes of the topology missing (%s); the last "
                               "good routing tables stay installed" % (len(missing["links"]), len(missing["nodes"]),
                                                                       ", ".join(missing["links"]) or "-"), "warn")
                elif (m.store.get("fabric_state") or {}).get("state") == "degraded":
                    self.event("fabric complete again")
                m.store.set(fabric_state=fabric)
            self._write_sensors(fabric)
            return fabric

    def _report_changes(self, before, after):
        lost, back = _links(before) - _links(after), _links(after) - _links(before)
        for link in sorted(lost):
            self.event("link %s lost" % link, "warn")
        for link in sorted(back):
            self.event("link %s up" % link)
        for nid in sorted(set(before.nodes) - set(after.nodes)):
            self.event("node %d (0x%x) lost" % (nid, before.nodes[nid].guid), "warn")
        for nid in sorted(set(after.nodes) - set(before.nodes)):
            self.event("node %d (0x%x) joined" % (nid, after.nodes[nid].guid))

    def _reroute(self, now, settings):
        m = self.master
        try:
            plan = m.plan(settings.get("routing"), "auto", now, fallback=settings.get("fallback"),
                          virtual_channels=settings.get("virtual_channels"))
        except EmpError as exc:
            self.event("re-routing failed, the last tables stay installed: %s" % exc, "error")
            m.store.set(routes_fabric=T.to_td(now))  # do not retry the same fabric every sweep
            return
        version = m.install(plan, now, settings)
        self.counts["reroutes"] += 1
        self.event("re-routed %d nodes and %d links with %s (%s on %d VCs%s): routing tables version %d installed"
                   % (len(now.nodes), len(now.links), plan["algorithm"], plan["summary"]["scheme"],
                      plan["summary"]["virtual_channels"], ", cached" if plan.get("cached") else "", version))

    def _write_sensors(self, fabric):
        if not self.sensor_dir:
            return
        values = {"fabric_degraded": int(fabric["state"] == "degraded"),
                  "fabric_missing_links": len(fabric["missing_links"]),
                  "fabric_missing_nodes": len(fabric["missing_nodes"]),
                  "fabric_events": self.counts["events"], "fabric_reroutes": self.counts["reroutes"]}
        os.makedirs(self.sensor_dir, exist_ok=True)
        for name, value in values.items():
            path = os.path.join(self.sensor_dir, name)
            with open(path + ".tmp", "w", encoding="utf-8") as handle:
                handle.write("%d\n" % value)
            os.replace(path + ".tmp", path)

    def run(self):
        while not self.stop.wait(self.interval):
            try:
                self.sweep()
            except (EmpError, T.TopologyError, OSError, ValueError) as exc:
                print("emp-master: surveillance sweep failed: %s" % exc, file=self.out, flush=True)
