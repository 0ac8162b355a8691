# SPDX-License-Identifier: GPL-3.0-or-later
"""The one reader of Slurm's licence and reservation records; licence-only reservations that take a service's
licences out of scheduling while the service is down.

A reservation ``flags=any_nodes users=root licenses=<name>:<count>,...`` holds licences no user job may be given:
Slurm starts a job that asks for them only when enough remain outside the reservation, so such a job waits
(``Reason=Licenses``) instead of starting and failing in its prolog; jobs that ask for none run as usual. The MPI
gateways' health check (module_utils/node/gw_hooks) holds the licences of the gateways no job may be given, the NAM/GCE
manager's (module_utils/node/nam_hooks) all NAM and GCE licences while the manager does not answer.
"""
from __future__ import annotations

import subprocess

from ansible_collections.msa.hpc.plugins.module_utils.slurm import jobs as S


class ReservationError(Exception):
    """scontrol failed or answered what cannot be read; the message names the command and the reservation."""


def scontrol_run(scontrol, *args):
    """(exit status, stdout and stderr) of ``scontrol args``; a command that cannot run raises ReservationError."""
    try:
        proc = subprocess.run([scontrol] + list(args), capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        raise ReservationError("%s %s failed: %s" % (scontrol, " ".join(args), exc)) from None
    return proc.returncode, (proc.stdout + proc.stderr).strip()


def parse_reservations(text):
    """``scontrol [-o] show reservation`` → ``{name: {field: value}}``, the one reader of reservation records."""
    return {fields["ReservationName"]: fields for fields in S.scontrol_records(text, "ReservationName")}


def parse_licenses(text):
    """``scontrol [-o] show licenses`` → ``{name: {total, used, free}}``, the one reader of licence records (a
    licence without a whole Total is left out; Used defaults to 0, Free to what is not used)."""
    out = {}
    for fields in S.scontrol_records(text, "LicenseName"):
        total, used, free = (fields.get(key, "") for key in ("Total", "Used", "Free"))
        if total.isdigit():
            used = int(used) if used.isdigit() else 0
            out[fields["LicenseName"]] = {"total": int(total), "used": used,
                                          "free": int(free) if free.isdigit() else max(int(total) - used, 0)}
    return out


def reserved_licenses(scontrol, name):
    """{licence: count} held by reservation ``name``; None when there is no such reservation."""
    code, out = scontrol_run(scontrol, "-o", "show", "reservation", name)
    fields = parse_reservations(out).get(name) if code == 0 else None
    if fields is None:
        return None
    try:
        return S.parse_licenses(fields.get("Licenses", ""))
    except S.JobRecordError as exc:
        raise ReservationError("reservation %s: %s" % (name, exc)) from None


def license_totals(scontrol):
    """{licence: total} of the cluster's licences, as slurmctld counts them (``scontrol -o show licenses``)."""
    code, out = scontrol_run(scontrol, "-o", "show", "licenses")
    if code != 0:
        raise ReservationError("%s -o show licenses: %s" % (scontrol, out or "exit status %d" % code))
    return {name: lic["total"] for name, lic in parse_licenses(out).items()}


def sync_reservation(scontrol, name, wanted):
    """Make reservation ``name`` hold exactly ``wanted`` ({licence: count}; counts of 0 are left out, nothing left:
    no reservation). Returns whether anything changed."""
    wanted = {lic: count for lic, count in sorted(wanted.items()) if count > 0}
    current = reserved_licenses(scontrol, name)
    if (current or {}) == wanted:
        return False
    lic = "licenses=" + ",".join("%s:%d" % item for item in wanted.items())
    if not wanted:
        args = ["delete", "reservation=%s" % name]
    elif current is None:
        args = ["create", "reservation=%s" % name, "starttime=now", "duration=infinite", "users=root",
                "flags=any_nodes", lic]
    else:
        args = ["update", "reservation=%s" % name, lic]
    code, out = scontrol_run(scontrol, *args)
    if code != 0:
        raise ReservationError("cannot hold %s in reservation %s: %s" % (
            ", ".join("%d %s licence%s" % (n, lic_name, "" if n == 1 else "s") for lic_name, n in wanted.items())
            or "nothing", name, out))
    return True
