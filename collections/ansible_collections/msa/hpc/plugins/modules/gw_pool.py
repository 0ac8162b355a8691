# SPDX-License-Identifier: GPL-3.0-or-later
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

"""Ansible module: the gateway pool as a global resource (allocate, release, list, mark down) and routing files."""

DOCUMENTATION = r"""
---
module: gw_pool
short_description: Allocate gateway nodes to jobs and write their routing files
description:
  - Manages the pool of MPI gateway nodes of a Modular Supercomputing Architecture system as a global,
    job-exclusive resource (seed 004 sections 3 and 4.2-4.3). The pool lives in an SQLite database on the
    Slurm controller, the same one the gateway prolog and epilog hooks use.
  - V(allocated) gives O(count) free gateways to O(job_id), all or nothing, and writes the job's routing file
    (one line C(<gateway address>:<port> <cluster node> <booster node>) per node pair) when O(routing_file),
    O(cluster_nodes) and O(booster_nodes) are given. Asking again for the same job changes nothing.
  - When too few gateways are free the module fails with C(reason=busy) (the job must wait or be requeued);
    asking for more gateways than the pool has fails with C(reason=too_small).
  - V(released) frees the job's gateways (idempotent) and removes its routing file when O(routing_file) is given.
  - V(query) lists the gateways, their state and holders. V(down), V(drain) and V(up) mark O(gateways).
version_added: "0.1.0"
author:
  - msa.hpc maintainers (@msa-hpc)
extends_documentation_fragment:
  - msa.hpc.attributes
options:
  state:
    description: What to do.
    type: str
    choices: [allocated, released, query, up, down, drain]
    default: query
  db:
    description: Path of the pool database on the controller.
    type: path
    default: /var/lib/msa-gw/pool.db
  pool_file:
    description:
      - Pool description (YAML or JSON) written from the inventory; its gateways are synchronised into the
        database first. Gateways no longer listed are never allocated again.
    type: path
  pool:
    description: The same pool description as a mapping (C(gateways) list with C(name), C(addresses), C(agent)).
    type: dict
  job_id:
    description: Slurm job id (of the heterogeneous job's leader).
    type: str
  count:
    description: Number of gateways the job needs (C(--gw_num)).
    type: int
  selection:
    description: Which free gateways to give; V(lru) takes the least recently used, V(round_robin) rotates.
    type: str
    choices: [lru, round_robin]
  strategy:
    description:
      - Routing strategy (C(--gw_plugin)) by bare name (letters, digits, C(_), C(-)) - V(balance), V(booster),
        V(cluster), or a site plugin C(<name>.py) found in O(plugin_dirs) or C(/etc/msa-gw/routing.d).
      - A plugin directory and file must be owned by root and writable by no one else, or the plugin is refused.
        Paths, C(..) and C(package.module:function) are refused.
    type: str
    default: balance
  plugin_dirs:
    description: Directories searched for site routing strategies (C(<name>.py)).
    type: list
    elements: path
    default: []
  cluster_nodes:
    description: Nodes of the job on the cluster side of the gateways.
    type: list
    elements: str
  booster_nodes:
    description: Nodes of the job on the booster side of the gateways.
    type: list
    elements: str
  routing_file:
    description: Where to write the routing file (C(--gw_file)); removed again with O(state=released).
    type: path
  routing_file_mode:
    description: Permissions of the routing file.
    type: raw
    default: "0644"
  port:
    description:
      - psgwd port used for gateways whose daemon has not reported one yet (the prolog records the ports
        the agents report). Defaults to C(port) of the pool description.
    type: int
  gateways:
    description: Gateway names for O(state=up), O(state=down) and O(state=drain).
    type: list
    elements: str
  reason:
    description: Why gateways are marked down or drained (shown by O(state=query)).
    type: str
    default: ""
  return_content:
    description: Return the routing file in RV(content) (only when it is at most 1 MiB).
    type: bool
    default: false
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
    details: The diff shows the routing file (up to 64 KiB of each side) and the allocation.
notes:
  - Runs on the Slurm controller (delegate to it). Needs numpy on that host to write routing files.
"""

EXAMPLES = r"""
- name: Register the gateways of the inventory and show the pool
  msa.hpc.gw_pool:
    pool_file: /etc/msa-gw/pool.yml
    state: query
  delegate_to: "{{ groups['slurm_controller'][0] }}"

- name: Give job 4711 two gateways and write its routing file
  msa.hpc.gw_pool:
    pool_file: /etc/msa-gw/pool.yml
    state: allocated
    job_id: "4711"
    count: 2
    strategy: booster
    port: 40158
    cluster_nodes: [cluster015, cluster016]
    booster_nodes: [booster003, booster010]
    routing_file: /home/alice/psgw-route-4711

- name: Free them again and remove the routing file
  msa.hpc.gw_pool:
    state: released
    job_id: "4711"
    routing_file: /home/alice/psgw-route-4711

- name: Take a gateway out of service
  msa.hpc.gw_pool:
    state: down
    gateways: [gw02]
    reason: InfiniBand HCA replaced
"""

RETURN = r"""
gateways:
  description: The job's gateways (V(allocated), V(released)) or all gateways (V(query), V(up), V(down), V(drain)).
  returned: always
  type: list
  elements: dict
  sample: [{"name": "gw01", "route_address": "10.1.0.201", "port": 40158, "state": "up", "job_id": "4711"}]
free:
  description: Gateways free for allocation (up and not held) after the change.
  returned: always
  type: int
  sample: 2
counts:
  description: Gateways in the pool, up, free and allocated.
  returned: always
  type: dict
  sample: {"total": 4, "up": 4, "free": 2, "allocated": 2}
jobs:
  description: Every allocation (job id, count, gateways) for O(state=query).
  returned: when state is query
  type: list
  elements: dict
routing:
  description: The routing file written - path, number of lines (node pairs), pairs per gateway.
  returned: when a routing file was written or checked
  type: dict
  sample: {"path": "/home/alice/psgw-route-4711", "lines": 4, "load": {"10.1.0.201:40158": 2}}
content:
  description: The routing file text.
  returned: when return_content is true and the file is at most 1 MiB
  type: str
reason:
  description: On failure, why - V(busy) (wait or requeue), V(too_small), V(conflict), V(unknown), V(invalid).
  returned: failure
  type: str
"""

import os
import shutil
import sqlite3
import tempfile

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.msa.hpc.plugins.module_utils import _gw_pool as P
from ansible_collections.msa.hpc.plugins.module_utils import _gw_routing as R

DIFF_LIMIT = 64 * 1024
CONTENT_LIMIT = 1 << 20


def _read(path):
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except FileNotFoundError:
        return None


def _diff_text(data):
    if data is None:
        return ""
    if len(data) > DIFF_LIMIT:
        return "(%d bytes, %d lines: too large to show)\n" % (len(data), data.count(b"\n"))
    return data.decode("utf-8", "replace")


def _mode(value):
    return int(value, 8) if isinstance(value, str) else int(value)


def write_routing(params, allocation, settings, check_mode, result):
    """Build the job's routing file from its gateways; write it only when the content differs."""
    port = params["port"] if params["port"] is not None else settings.get("port", 0)
    endpoints = P.endpoints(allocation, default_port=port)
    strategy = R.resolve_strategy(params["strategy"], params["plugin_dirs"], field="strategy")
    table = R.build_routing(params["cluster_nodes"], params["booster_nodes"], endpoints, strategy)
    data = table.to_bytes()
    path = params["routing_file"]
    before = _read(path)
    changed = before != data
    if changed and not check_mode:
        R.write_routing_file(path, table, mode=_mode(params["routing_file_mode"]))
    result["routing"] = {"path": path, "lines": len(table), "load": table.load(), "changed": changed}
    if params["return_content"] and len(data) <= CONTENT_LIMIT:
        result["content"] = data.decode("utf-8")
    result["diff"].append({"before_header": path, "after_header": path,
                           "before": _diff_text(before), "after": _diff_text(data)})
    return changed


class _Scratch(P.GatewayPool):
    """A throw-away copy of the pool database: check mode runs every step for real on it, then drops it."""

    def __init__(self, db_path):
        self._tmpdir = tempfile.mkdtemp(prefix="gw_pool-check-")
        copy = os.path.join(self._tmpdir, "pool.db")
        if os.path.exists(db_path):
            src = sqlite3.connect("file:%s?mode=ro" % db_path, uri=True)
            dst = sqlite3.connect(copy)
            with dst:
                src.backup(dst)
            src.close()
            dst.close()
        super().__init__(copy)

    def close(self):
        super().close()
        shutil.rmtree(self._tmpdir, ignore_errors=True)


def _open_pool(db_path, check_mode):
    return _Scratch(db_path) if check_mode else P.GatewayPool(db_path)


def apply(params, check_mode=False):
    """Carry out ``params`` (the module's options) on the pool; return the module result."""
    state = params["state"]
    result = {"changed": False, "diff": []}
    settings = {}
    gateways = None
    if params["pool_file"]:
        gateways, settings = P.load_pool_file(params["pool_file"])
    elif params["pool"]:
        gateways, settings = P.parse_pool(params["pool"], source="pool")
    with _open_pool(params["db"], check_mode) as pool:
        if gateways is not None:
            result["changed"] |= bool(pool.sync(gateways))
        if state == "allocated":
            if bool(params["cluster_nodes"]) != bool(params["booster_nodes"]):
                raise P.PoolError("cluster_nodes and booster_nodes must be given together")
            if params["routing_file"] and params["cluster_nodes"]:  # fail before allocating, not after
                R.resolve_strategy(params["strategy"], params["plugin_dirs"], field="strategy")
            before = pool.allocation(params["job_id"])
            selection = params["selection"] or settings.get("selection", "lru")
            allocation, changed = pool.allocate(params["job_id"], params["count"], selection)
            result["changed"] |= changed
            result["gateways"] = allocation["gateways"]
            result["diff"].append({"before_header": "job %s" % params["job_id"],
                                   "after_header": "job %s" % params["job_id"],
                                   "before": _names(before), "after": _names(allocation)})
            if params["routing_file"] and params["cluster_nodes"]:
                result["changed"] |= write_routing(params, allocation, settings, check_mode, result)
        elif state == "released":
            released = pool.release(params["job_id"])
            result["changed"] |= released is not None
            result["gateways"] = released["gateways"] if released else []
            result["diff"].append({"before_header": "job %s" % params["job_id"],
                                   "after_header": "job %s" % params["job_id"],
                                   "before": _names(released), "after": ""})
            path = params["routing_file"]
            if path and os.path.exists(path):
                result["changed"] = True
                result["diff"].append({"before_header": path, "after_header": path,
                                       "before": _diff_text(_read(path)), "after": ""})
                if not check_mode:
                    os.unlink(path)
        elif state in ("up", "down", "drain"):
            changed = pool.set_state(params["gateways"], state, params["reason"])
            result["changed"] |= bool(changed)
            result["marked"] = changed
            result["gateways"] = pool.gateways()
        else:
            result["gateways"] = pool.gateways()
            result["jobs"] = pool.jobs() if not params["job_id"] else [a for a in [pool.allocation(params["job_id"])]
                                                                       if a]
        result["counts"] = pool.counts()
        result["free"] = result["counts"]["free"]
    return result


def _names(allocation):
    if not allocation:
        return ""
    return "".join("%s\n" % g["name"] for g in allocation["gateways"])


def main():
    module = AnsibleModule(
        argument_spec=dict(
            state=dict(type="str", default="query", choices=["allocated", "released", "query", "up", "down", "drain"]),
            db=dict(type="path", default=P.DEFAULT_DB),
            pool_file=dict(type="path"),
            pool=dict(type="dict"),
            job_id=dict(type="str"),
            count=dict(type="int"),
            selection=dict(type="str", choices=list(P.SELECTIONS)),
            strategy=dict(type="str", default="balance"),
            plugin_dirs=dict(type="list", elements="path", default=[]),
            cluster_nodes=dict(type="list", elements="str"),
            booster_nodes=dict(type="list", elements="str"),
            routing_file=dict(type="path"),
            routing_file_mode=dict(type="raw", default="0644"),
            port=dict(type="int"),
            gateways=dict(type="list", elements="str"),
            reason=dict(type="str", default=""),
            return_content=dict(type="bool", default=False),
        ),
        mutually_exclusive=[("pool_file", "pool")],
        required_if=[("state", "allocated", ("job_id", "count")), ("state", "released", ("job_id",)),
                     ("state", "up", ("gateways",)), ("state", "down", ("gateways",)),
                     ("state", "drain", ("gateways",))],
        supports_check_mode=True,
    )
    try:
        result = apply(module.params, module.check_mode)
    except P.PoolError as exc:
        module.fail_json(msg=_message(module.params, exc), reason=exc.code, **exc.details)
    except R.RoutingError as exc:
        text = str(exc)
        module.fail_json(msg=text if text.startswith("strategy: ") else "cluster_nodes/booster_nodes: %s" % text,
                         reason="invalid")
    except (OSError, ValueError) as exc:
        module.fail_json(msg="gateway pool %s: %s" % (module.params["db"], exc), reason="invalid")
    if not module._diff:
        result.pop("diff", None)
    module.exit_json(**result)


def _message(params, exc):
    if exc.code == "busy":
        return "%s; the job must wait (or be requeued) until gateways are released" % exc
    if exc.code == "too_small":
        return "count=%s: %s" % (params.get("count"), exc)
    return str(exc)


if __name__ == "__main__":
    main()
