# SPDX-License-Identifier: GPL-3.0-or-later
"""The extoll_fabric states (started, stopped, discovered) over the EMP client, with the plan computed and proved here."""
from __future__ import annotations

import time

from ansible_collections.msa.hpc.plugins.module_utils.extoll import plan as P
from ansible_collections.msa.hpc.plugins.module_utils.extoll import routing as R
from ansible_collections.msa.hpc.plugins.module_utils.extoll import topology as T
from ansible_collections.msa.hpc.plugins.module_utils.extoll.emp import COMPARISON_KEYS, EmpClient, FabricError

DIFF_HEADER = "EMP topology, routing tables and certificate"
CERTIFICATE_KEYS = ("algorithm", "scheme", "virtual_channels", "virtual_channels_available", "deadlock_free",
                    "max_hops", "nodes")


def load_definition(params):
    """The definition as .td text (normalised by the writer), or None."""
    if params.get("topology_file"):
        return T.to_td(T.load_td(params["topology_file"]))
    if params.get("topology"):
        return T.to_td(T.from_dict(params["topology"], "topology"))
    return None


def table_lines(tables):
    return "".join("node %s dst %s port %s\n" % (s, d, p)
                   for s in sorted(tables, key=int) for d, p in sorted(tables[s].items(), key=lambda e: int(e[0])))


def certificate_lines(cert):
    """The certificate's headline keys, one ``certificate KEY VALUE`` line each (nothing without a certificate)."""
    return "".join("certificate %s %s\n" % (k, cert[k]) for k in CERTIFICATE_KEYS if (cert or {}).get(k) is not None)


def routing_options(params):
    """Only the options given: a master that predates them (the seed's endpoint list) is not sent them."""
    return {k: params[k] for k in ("fallback", "virtual_channels") if params.get(k) is not None}


def own_plan(td, discovered_td, params, mode, options=None):
    """The collection's plan of the discovered fabric: engine + deadlock proof here, not on the master.

    ``options`` are the master's (routing, fallback, virtual_channels, updown_root) where it says them; the
    module's own options win, as they do when the master is sent them."""
    options = options or {}
    fallback = params.get("fallback")
    vcs = params.get("virtual_channels")
    try:
        expected = T.parse_td(td, params.get("topology_file") or "topology") if td else None
        discovered = T.parse_td(discovered_td, "<discovered>")
        plan = P.fabric_plan(expected, discovered, params.get("routing"), mode,
                             fallback if fallback is not None else options.get("fallback") or (),
                             vcs if vcs is not None else options.get("virtual_channels"),
                             options.get("updown_root"), configured=options.get("routing"))
    except R.RoutingError as exc:
        raise FabricError("the collection's routing plan: %s" % exc)
    if plan.get("waiting"):
        return None
    return plan


def _plan_result(plan, before_tables, emp_plan=None, computed_by="collection"):
    """``plan`` return value: algorithm, certificate, the per-node changes, who computed them and whether the
    EMP's dry run (``emp_plan``, when there is one to compare with) plans the same tables."""
    changes = R.table_changes(before_tables, plan["tables"])
    same = None
    if emp_plan is not None:
        same = emp_plan.get("tables") == plan["tables"] and emp_plan.get("algorithm") == plan["algorithm"]
    return changes, {"algorithm": plan["algorithm"], "certificate": plan.get("certificate") or plan.get("summary"),
                     "changes": changes, "computed_by": computed_by, "matches_emp": same}


def started_seed_only(emp, params, check_mode, mode):
    """Against a master with only the seed's endpoints: it reads its topology definition itself (master.conf), so
    there is nothing to upload or dry-run; a network that is up after a finished run is left alone. The plan is
    computed here from the discovered fabric (emp/getTD) with the module's own options."""
    td = load_definition(params)  # validated, with line numbers
    status = emp.get("emp/status")
    net = emp.network_status()
    plan = own_plan(td, emp.discovered_td(), params, mode)
    changed = not (net == "up" and status.get("state") == "done")
    if changed and not check_mode:
        body = dict(routing_options(params), mode=mode, timeout=params["wait_timeout"])
        if params.get("routing"):
            body["routing"] = params["routing"]
        emp.run(body)
        status = emp.wait_for_run(params["wait_timeout"])
        if emp.network_status() != "up":
            emp.start_network()
    info = emp.get("network/info")
    certificate = dict(status.get("summary") or (info.get("routing") or {}).get("summary") or {},
                       algorithm=status.get("algorithm") or (info.get("routing") or {}).get("algorithm"))
    result = {"changed": changed, "status": "up" if check_mode else emp.network_status(),
              "routing": certificate, "certificate": certificate, "dot": None, "table_changes": 0,
              "seed_endpoints_only": True,
              "diff": {"before": "network %s\n" % net, "after": "network up\n"}}
    if plan is not None:
        result["plan"] = _plan_result(plan, {})[1]
        if check_mode:
            result["routing"] = result["certificate"] = plan["certificate"]
        result["diff"]["after"] += table_lines(plan["tables"]) + certificate_lines(plan["certificate"])
    return result


def started(emp, params, check_mode):
    td = load_definition(params)
    mode = params.get("mode") or ("topology" if td is not None else "auto")
    stored = emp.topology()
    if stored is None:
        return started_seed_only(emp, params, check_mode, mode)
    before_td = stored.get("td")
    if td is None:
        td = before_td
    topology_changed = td is not None and td != before_td
    before_routes = emp.routes()
    before_tables = before_routes.get("tables") or {}
    before_net = emp.network_status()
    body = {"mode": mode, "routing": params.get("routing"), "td": td}
    body.update(routing_options(params))
    emp_plan = emp.wait_for_match(body, params["wait_timeout"], params["poll_interval"])
    own = None
    if emp_plan.get("discovered") is not None:
        own = own_plan(td, emp_plan["discovered"], params, mode, emp_plan.get("options"))
    plan = own or emp_plan
    changes, plan_rv = _plan_result(plan, before_tables, *((emp_plan,) if own else (None, "emp")))
    if plan_rv["matches_emp"] is False:
        raise FabricError("the EMP master would install other routing tables (%s) than the collection's plan (%s) "
                          "for the same fabric and options; nothing was installed"
                          % (emp_plan.get("algorithm"), plan["algorithm"]), plan=plan_rv)
    routes_changed = bool(changes) or not before_routes.get("version") or \
        before_routes.get("algorithm") != plan["algorithm"]
    start_network = before_net != "up"
    if not check_mode:
        if topology_changed:
            emp.put_topology(td, params.get("topology_file") or "topology")
        if routes_changed:
            emp.run(dict(routing_options(params), mode=mode, routing=params.get("routing"),
                         timeout=params["wait_timeout"]))
            emp.wait_for_run(params["wait_timeout"])
        if start_network:
            emp.start_network()
    certificate = dict(plan["summary"], algorithm=plan["algorithm"])
    result = {"changed": topology_changed or routes_changed or start_network,
              "status": "up" if check_mode else emp.network_status(),
              "routing": certificate, "certificate": certificate, "dot": plan["dot"], "plan": plan_rv,
              "table_changes": len(changes)}
    result.update({k: (plan.get("comparison") or {}).get(k, []) for k in COMPARISON_KEYS})
    result["diff"] = {"before": (before_td or "") + table_lines(before_tables)
                      + certificate_lines(before_routes.get("certificate")),
                      "after": (td or "") + table_lines(plan["tables"]) + certificate_lines(certificate),
                      "before_header": DIFF_HEADER, "after_header": DIFF_HEADER}
    return result


def stopped(emp, check_mode):
    before = emp.network_status()
    changed = before == "up"
    if changed and not check_mode:
        emp.stop_network()
    after = "down" if changed else before
    diff = {"before": "network %s\n" % before, "after": "network %s\n" % after}
    return {"changed": changed, "status": after, "diff": diff}


def discovered(emp, params):
    found = emp.discover()
    result = {"changed": False, "nodes": found["nodes"], "links": found["links"], "status": emp.network_status()}
    td = load_definition(params)
    comparison = found.get("comparison")
    if td is not None:
        expected = T.parse_td(td, params.get("topology_file") or "topology")
        disc = T.from_discovery([{"guid": n["guid"], "id": n["id"]} for n in found["nodes"]],
                                [_link_guids(link, found["nodes"]) for link in found["links"]])
        comparison = T.compare(expected, disc)
    if comparison:
        result.update({k: comparison.get(k, []) for k in COMPARISON_KEYS})
    return result


def _link_guids(text, nodes):
    guid = {n["id"]: n["guid"] for n in nodes}
    a, pa, _arrow, pb, b = text.split()
    return guid[int(a)], int(pa), guid[int(b)], int(pb)


def apply(client, params, check_mode=False, sleep=time.sleep):
    """Bring the fabric to ``params["state"]``; ``client`` is an EmpClient or the RestClient of the master."""
    emp = client if isinstance(client, EmpClient) else EmpClient(client, sleep=sleep)
    if params["state"] == "stopped":
        return stopped(emp, check_mode)
    if params["state"] == "discovered":
        return discovered(emp, params)
    return started(emp, params, check_mode)
