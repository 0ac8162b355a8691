# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

"""The argument spec and RestClient of modules that talk to a manager API (the doc fragment msa.hpc.manager)."""

from ansible_collections.msa.hpc.plugins.module_utils._rest import RestClient

MANAGER_REQUIRED_TOGETHER = [("username", "password")]
MANAGER_MUTUALLY_EXCLUSIVE = [("token", "username")]


def manager_argument_spec(**extra):
    """Options of the ``msa.hpc.manager`` doc fragment, plus the module's own ``extra`` options."""
    spec = dict(
        endpoint=dict(type="str", required=True),
        username=dict(type="str"),
        password=dict(type="str", no_log=True),
        token=dict(type="str", no_log=True),
        validate_certs=dict(type="bool", default=True),
        ca_path=dict(type="path"),
        timeout=dict(type="int", default=10),
    )
    spec.update(extra)
    return spec


def manager_client(params, client_class=RestClient):
    """A client for ``params["endpoint"]`` with the credentials the task gave (bearer token or basic auth)."""
    return client_class(params["endpoint"], username=params.get("username"), password=params.get("password"),
                        token=params.get("token"), validate_certs=params.get("validate_certs", True),
                        ca_path=params.get("ca_path"),
                        timeout=params.get("timeout", 10))
