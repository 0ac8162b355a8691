# SPDX-License-Identifier: GPL-3.0-or-later
"""How every msa.hpc module ends: run its action, turn the errors it expects into a ``fail_json`` that names what
failed, keep the ``diff`` only under --diff, and exit with the result. The module passes in what it is; nothing here
imports Ansible."""
from __future__ import annotations


def _classes(entry):
    return entry if isinstance(entry, tuple) else (entry,)


def rest_failure(what, endpoint):
    """The failure of a REST service that answered an error or not at all: ``<what> at <endpoint>: <error>``."""
    return lambda exc: {"msg": "%s at %s: %s" % (what, endpoint, exc), "status": getattr(exc, "status", None)}


def run_module(module, action, failures):
    """End ``module`` with ``action()``'s result, or with the failure of the first ``(classes, failure)`` pair of
    ``failures`` whose classes the raised error is one of (``failure(exc)`` gives the keyword arguments of
    ``fail_json``). An error no pair names is not caught: it is a bug, and Ansible shows its traceback."""
    expected = ()
    for classes, dummy in failures:
        expected += _classes(classes)
    try:
        result = action()
    except expected as exc:
        failure = next(make for classes, make in failures if isinstance(exc, _classes(classes)))
        module.fail_json(**failure(exc))
        raise  # fail_json exits; this is only reached by a stand-in module that does not
    if not module._diff:
        result.pop("diff", None)
    module.exit_json(**result)
