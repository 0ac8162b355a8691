# SPDX-License-Identifier: GPL-3.0-or-later
"""Who a bearer token is at the EMP master, and what it may do: the master's own token administers the fabric; a
slave's token (one per node, listed by SHA-256 in ``slave_tokens_file``) may only report, and only for the GUID and
node id it was issued for, so root on one node can neither stop the network nor speak for another node."""
from __future__ import annotations

import hashlib
import hmac
import re

from .config import ConfigError
from .engine import EmpError

_LINE = re.compile(r"^(0x[0-9a-fA-F]+|\d+)\s+(\d+|-)\s+([0-9a-f]{64})$")
SLAVE_ENDPOINT = ("POST", "slaves/report")
# what a slave may read: the nodes' list, a node, and a node's units (link, xbar, ...): no writes, no network control
_NODE_READ = re.compile(r"^nodes(/\d+(/[a-z]+)?)?$")


class Principal:
    """The administrator (``guid`` None) or the slave of one GUID and, when the inventory fixes it, node id."""

    def __init__(self, guid=None, node_id=None):
        self.guid = guid
        self.node_id = node_id

    @property
    def admin(self):
        return self.guid is None

    def __str__(self):
        return "the administrator" if self.admin else "the slave token of GUID %#x (node %s)" % (
            self.guid, "-" if self.node_id is None else self.node_id)

    def check_endpoint(self, method, path):
        """Raise EmpError 403 unless this principal may call the endpoint at all (before its body is read). A slave
        may report, and read the nodes' state (the node's health check asks for its own node and its neighbours')."""
        if self.admin or (method, path) == SLAVE_ENDPOINT or (method == "GET" and _NODE_READ.match(path)):
            return
        raise EmpError("%s may only report (POST slaves/report) and read nodes, not %s %s" % (self, method, path), 403)

    def authorise(self, method, path, body):
        """Raise EmpError 403 unless this principal may make the request (body already parsed)."""
        self.check_endpoint(method, path)
        if self.admin or (method, path) != SLAVE_ENDPOINT:
            return  # the administrator, or a slave's read of the nodes
        try:
            guid = int(str(body.get("guid")), 0)
        except (TypeError, ValueError):
            guid = None
        if guid != self.guid:
            raise EmpError("%s cannot report for GUID %r" % (self, body.get("guid")), 403)
        wanted = body.get("node_id")
        if self.node_id is not None and wanted not in (None, "") and str(wanted) != str(self.node_id):
            raise EmpError("%s cannot report for node id %r" % (self, wanted), 403)


def load_slave_tokens(path):
    """``{sha256 hex of token: (guid, node id or None)}`` from lines ``<guid> <node id|-> <sha256 hex>``."""
    if not path:
        return {}
    slaves = {}
    with open(path, encoding="utf-8") as handle:
        for lineno, raw in enumerate(handle, 1):
            line = raw.split("#", 1)[0].strip()
            if not line:
                continue
            match = _LINE.match(line)
            if not match:
                raise ConfigError("%s:%d: expected '<guid> <node id|-> <sha256 of the token>', got %r"
                                  % (path, lineno, line[:80]))
            guid, node_id, digest = match.groups()
            slaves[digest] = (int(guid, 0), None if node_id == "-" else int(node_id))
    return slaves


def identify(authorization, admin_token, slaves):
    """The principal of an ``Authorization`` header, or None. Without an admin token (tests) everyone is admin."""
    if not admin_token:
        return Principal()
    if not authorization.startswith("Bearer "):
        return None
    given = authorization[7:].strip()
    if hmac.compare_digest(given.encode(), admin_token.encode()):
        return Principal()
    slave = slaves.get(hashlib.sha256(given.encode()).hexdigest())
    return Principal(*slave) if slave else None
