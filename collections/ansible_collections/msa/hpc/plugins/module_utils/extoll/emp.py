# SPDX-License-Identifier: GPL-3.0-or-later
"""Client of the EMP master's REST API (seed 004 section 2.1): the seed's endpoints plus the optional extras."""
from __future__ import annotations

import time

from ansible_collections.msa.hpc.plugins.module_utils._rest import RestClient, RestError, send_again

COMPARISON_KEYS = ("missing_nodes", "missing_links", "unexpected_nodes", "unexpected_links")


class FabricError(Exception):
    """The fabric did not reach the wanted state; ``result`` holds what a caller reports with the message."""

    def __init__(self, message, **result):
        super().__init__(message)
        self.result = result


class EmpClient:
    """The EMP master over a RestClient. Its POSTs set a state (run, network start/stop, discover): sending one
    again whose answer was lost cannot duplicate anything, so each is retried as not done (send_again)."""

    def __init__(self, rest, sleep=time.sleep, clock=time.monotonic):
        self.rest = rest
        self.sleep = sleep
        self.clock = clock

    @classmethod
    def connect(cls, endpoint, token=None, validate_certs=True, ca_path=None, timeout=10, **kw):
        return cls(RestClient(endpoint, token=token, validate_certs=validate_certs, ca_path=ca_path,
                              timeout=timeout), **kw)

    def get(self, path):
        return self.rest.get(path) or {}

    def post(self, path, body=None):
        return self.rest.post(path, body if body is not None else {}, lookup=send_again)

    def extra(self, path):
        """GET an endpoint beyond the seed's list; None when the master does not have it (HTTP 404)."""
        try:
            return self.get(path)
        except RestError as exc:
            if exc.status == 404:
                return None
            raise

    # -- seed endpoints ---------------------------------------------------------------------------
    def network_status(self):
        return self.get("network/status").get("status")

    def start_network(self):
        return self.post("network/start")

    def stop_network(self):
        return self.post("network/stop")

    def discover(self):
        return self.post("emp/discover")

    def discovered_td(self):
        """The discovered fabric as .td text (emp/getTD)."""
        return self.rest.get("emp/getTD")

    def run(self, body):
        return self.post("emp/run", body)

    def wait_for_run(self, wait_timeout):
        """Poll emp/status until the run is done; FabricError when it failed or took longer than wait_timeout."""
        deadline = self.clock() + wait_timeout
        while True:
            status = self.get("emp/status")
            if status.get("state") == "done":
                return status
            if status.get("state") == "failed":
                raise FabricError("emp run failed: %s" % status.get("message"))
            if self.clock() >= deadline:
                raise FabricError("emp run did not finish within %ss (state %s: %s)"
                                  % (wait_timeout, status.get("state"), status.get("message")))
            self.sleep(0.2)

    # -- extras: upload, dry run, installed tables --------------------------------------------------
    def topology(self):
        """``{"td": ...}`` of the stored definition, or None when the master has only the seed's endpoints."""
        return self.extra("emp/topology")

    def put_topology(self, td, source):
        return self.rest.request("PUT", "emp/topology", body={"td": td, "source": source})[1]

    def routes(self):
        return self.get("emp/routes")

    def wait_for_match(self, body, wait_timeout, poll_interval):
        """Dry-run emp/run until, in topology mode, the discovered fabric holds the whole definition; returns the
        master's plan (tables, certificate, comparison, and with the stand-in the discovered fabric and options)."""
        deadline = self.clock() + wait_timeout
        while True:
            plan = self.run(dict(body, dry_run=True))
            comparison = plan.get("comparison") or {}
            if body["mode"] != "topology" or not (comparison.get("missing_nodes") or comparison.get("missing_links")):
                return plan
            if self.clock() >= deadline:
                raise FabricError("the discovered fabric still lacks %d nodes and %d links of the topology after %ss"
                                  % (len(comparison["missing_nodes"]), len(comparison["missing_links"]),
                                     wait_timeout), **{k: comparison.get(k, []) for k in COMPARISON_KEYS})
            self.sleep(poll_interval)
