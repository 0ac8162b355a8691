# SPDX-License-Identifier: GPL-3.0-or-later
"""The manager's side of the boards' data paths: it signs the capabilities a job presents to a NAM or GCE board
(msa_sim.rma) and tells a NAM board to scrub an allocation it freed."""
from __future__ import annotations

import http.client
import logging
import time
import urllib.parse

from ansible_collections.msa.hpc.plugins.module_utils._rest import RestError, tls_context
from msa_sim.rma import capability as C
from msa_sim.nammgr.store import StoreError

log = logging.getLogger("nam-manager")
RETIRE_TIMEOUT = 5.0


class DataPath:
    def __init__(self, key, urls, ca_path=None, ttl=86400):
        self.key = key
        self.urls = dict(urls)
        self.ca_path = ca_path or None
        self.ttl = int(ttl)

    @classmethod
    def from_config(cls, cfg):
        if not cfg.device_key_file:
            return None
        urls = {d["name"]: d.get("data_url") for d in list(cfg.nam_devices) + list(cfg.gce_devices)
                if d.get("data_url")}
        return cls(C.load_key(cfg.device_key_file), urls, cfg.device_ca_path, cfg.capability_ttl)

    def _url(self, device, what):
        url = self.urls.get(device)
        if not url:
            raise StoreError(409, "no_data_path", "%s lives on board %s, which has no data_url in the manager's "
                             "configuration" % (what, device))
        return url

    def ttl_for(self, principal):
        """A capability lives no longer than the token it was asked with (a job's: its job's time limit)."""
        if principal.expires is None:
            return self.ttl
        return max(1, min(self.ttl, int(principal.expires - time.time())))

    def nam_access(self, alloc, principal):
        url = self._url(alloc["device"], "NAM allocation %s" % alloc["id"])
        claims = {"kind": "nam", "device": alloc["device"], "alloc": alloc["id"], "created": alloc["created"],
                  "address": alloc["address"], "size": alloc["size"], "volatile": alloc["volatile"],
                  "owner": alloc["owner"], "job": principal.job}
        ttl = self.ttl_for(principal)
        return {"capability": C.sign(self.key, claims, ttl), "url": url, "device": alloc["device"],
                "allocation": alloc["id"], "name": alloc["name"], "size": alloc["size"], "volatile": alloc["volatile"],
                "owner": alloc["owner"], "expires_in": ttl}

    def gce_access(self, comm, principal):
        url = self._url(comm["device"], "GCE communicator %s" % comm["id"])
        claims = {"kind": "gce", "device": comm["device"], "comm": comm["id"], "comm_id": comm["comm_id"],
                  "created": comm["created"], "size": comm["size"], "owner": comm["owner"], "job": principal.job}
        ttl = self.ttl_for(principal)
        return {"capability": C.sign(self.key, claims, ttl), "url": url, "device": comm["device"],
                "communicator": comm["id"], "comm_id": comm["comm_id"], "size": comm["size"], "expires_in": ttl}

    def retire(self, alloc):
        """Scrub a freed allocation on its board now (best effort: the board also scrubs at the range's next use)."""
        url = self.urls.get(alloc["device"])
        if not url:
            return None
        claims = {"kind": "nam", "device": alloc["device"], "alloc": alloc["id"], "created": alloc["created"],
                  "address": alloc["address"], "size": alloc["size"], "volatile": alloc["volatile"],
                  "owner": alloc["owner"], "retire": True}
        parts = urllib.parse.urlsplit(url)
        try:
            if parts.scheme == "https":
                conn = http.client.HTTPSConnection(parts.hostname, parts.port or 443, timeout=RETIRE_TIMEOUT,
                                                   context=tls_context(True, self.ca_path))
            else:
                conn = http.client.HTTPConnection(parts.hostname, parts.port or 80, timeout=RETIRE_TIMEOUT)
            try:
                conn.request("POST", "/v1/nam/%d/retire" % alloc["id"], body=b"",
                             headers={"Authorization": "Capability " + C.sign(self.key, claims, 300)})
                resp = conn.getresponse()
                resp.read()
            finally:
                conn.close()
        except (OSError, http.client.HTTPException, RestError) as exc:
            log.warning("NAM allocation %s freed, but board %s was not told to scrub it now (%s); it scrubs the "
                        "range at its next use", alloc["id"], alloc["device"], exc)
            return False
        if resp.status != 200:
            log.warning("board %s answered %d to the scrub of allocation %s", alloc["device"], resp.status, alloc["id"])
            return False
        return True
