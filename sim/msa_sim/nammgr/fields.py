# SPDX-License-Identifier: GPL-3.0-or-later
"""The manager API's checks of a request's fields: each refusal an ApiError (400) naming the field and the value."""
from __future__ import annotations

import re

from ansible_collections.msa.hpc.plugins.module_utils import _gce as G
from msa_sim.nammgr.store import StoreError

ID_RE = re.compile(r"^[A-Za-z0-9_.:@+-]{1,128}$")


class ApiError(StoreError):
    pass


def ident(value, field, required=False):
    if value is None:
        if required:
            raise ApiError(400, "invalid", "%s is required" % field)
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int)) or not ID_RE.match(str(value)):
        raise ApiError(400, "invalid", "%s %r is not a name (letters, digits and _.:@+-, at most 128)" % (field, value))
    return str(value)


def bool_(value, field, default):
    if value is None:
        return default
    if not isinstance(value, bool):
        raise ApiError(400, "invalid", "%s %r is not true or false" % (field, value))
    return value


def process(value, field):
    try:
        return G.normalise_process(value, field)
    except ValueError as exc:
        raise ApiError(400, "invalid", str(exc)) from None


def count(value, field, minimum):
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ApiError(400, "invalid", "%s %r is not an integer of at least %d" % (field, value, minimum))
    return value
