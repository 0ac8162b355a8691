# SPDX-License-Identifier: GPL-3.0-or-later
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Slurm's upgrade rules, as plain data: which jump is allowed, in which order the daemons go.

Slurm's upgrade guide: daemons accept RPCs and state files from the two previous major releases (three from 24.11
on: 26.05 upgrades from 25.11, 25.05 and 24.11; 24.11 from 24.05, 23.11 and 23.02), so a jump may cross at most that
many releases; there is no downgrade; slurmdbd goes first, then slurmctld, then slurmd and the commands, because a
daemon must never be older than the ones that talk to it (slurmdbd >= slurmctld >= slurmd). Running jobs survive
only when StateSaveLocation and SlurmdSpoolDir stay where they are. The target must be a release the collection
supports (module_utils/slurm/releases), one an upgrade from 22.05 passes through, or a newer micro release of
the one installed. Every refusal comes before anything changes and names the installed and target releases.
"""
from __future__ import annotations

import re

from ansible_collections.msa.hpc.plugins.module_utils.slurm import releases as R

# Slurm's major releases in order (YY.MM). A version whose major is not here is refused: its distance is unknown.
MAJORS = ("17.02", "17.11", "18.08", "19.05", "20.02", "20.11", "21.08", "22.05", "23.02", "23.11", "24.05",
          "24.11", "25.05", "25.11", "26.05")
# The daemons in upgrade order, each with the Debian package that carries it.
ORDER = (("slurmdbd", "slurmdbd"), ("slurmctld", "slurmctld"), ("slurmd", "slurmd"))
# slurm.conf settings an upgrade must not move: the controller's saved state (jobs, nodes, reservations) and the
# nodes' spool (running job steps' state, cred state); a daemon started on a new path starts empty and loses jobs.
KEPT_SETTINGS = ("StateSaveLocation", "SlurmdSpoolDir")
_VERSION = re.compile(r"^(?:\d+:)?(?P<major>\d{2}\.\d{2})\.(?P<micro>\d+)(?:[-+~][0-9A-Za-z.+~-]*)?$")


class UpgradeError(ValueError):
    """A requested upgrade that Slurm's rules forbid, or a version that cannot be read."""


def parse(version, field="version"):
    """(major index, micro) of a Slurm version, upstream ('22.05.8') or Debian ('22.05.8-4+deb12u3', '1:22.05.8')."""
    match = _VERSION.match(str(version).strip())
    if not match:
        raise UpgradeError("%s=%r: not a Slurm version (YY.MM.N, optionally a Debian revision)" % (field, version))
    major = match.group("major")
    if major not in MAJORS:
        raise UpgradeError("%s=%s: Slurm major release %s is not one this collection knows (%s … %s)"
                           % (field, version, major, MAJORS[0], MAJORS[-1]))
    return MAJORS.index(major), int(match.group("micro"))


def releases_back(target):
    """How many earlier major releases a daemon of version `target` accepts: 2 before 24.11, 3 from 24.11 on."""
    index = parse(target)[0] if isinstance(target, str) else target
    return 3 if index >= MAJORS.index("24.11") else 2


def _through(have, want):
    """The newest release up to `want` that accepts `have` directly (the next step of a too long jump)."""
    return next(MAJORS[i] for i in range(want, have, -1) if i - have <= releases_back(i))


def _summary(found):
    return ", ".join("%s on %s: %s" % (daemon, host, version) for daemon, _pkg in ORDER
                     for _have, host, version in sorted(found.get(daemon, [])))


def plan(installed, target, step=None, settings=None):
    """The ordered upgrade of `installed` ({host: {daemon: version}}) to `target`, or UpgradeError saying why not.

    Returns a list of steps {daemon, package, hosts, from}, one per daemon that has a host below the target, in
    Slurm's order; a daemon already at the target on every host has no step. `step` (a daemon) is the step about
    to run: refused while a daemon before it in Slurm's order still has a host below the target. `settings` maps
    each of KEPT_SETTINGS to {installed, target} paths: refused when one would move.
    """
    try:
        want = parse(target, "target")
    except UpgradeError as exc:
        # name what is installed too, so the refusal says from where to where
        raise UpgradeError("%s; installed: %s" % (exc, ", ".join(
            "%s on %s: %s" % (daemon, host, version) for daemon, _pkg in ORDER
            for host, daemons in sorted(installed.items()) for name, version in sorted(daemons.items())
            if name == daemon))) from None
    window = releases_back(want[0])
    found = {}
    for host, daemons in sorted(installed.items()):
        for daemon, version in sorted(daemons.items()):
            if daemon not in dict(ORDER):
                raise UpgradeError("installed[%s]: unknown daemon %r (one of %s)"
                                   % (host, daemon, ", ".join(d for d, _pkg in ORDER)))
            have = parse(version, "installed[%s][%s]" % (host, daemon))
            if have > want:
                raise UpgradeError("target=%s: %s on %s has %s, newer; Slurm has no downgrade (restore the backup "
                                   "of the database and StateSaveLocation instead)" % (target, daemon, host, version))
            if want[0] - have[0] > window:
                raise UpgradeError(
                    "target=%s: %s on %s has %s, %d major releases back; Slurm %s upgrades directly from the %d "
                    "releases before it only (%s); upgrade through %s first" % (
                        target, daemon, host, version, want[0] - have[0], MAJORS[want[0]], window,
                        ", ".join(MAJORS[want[0] - window:want[0]]), _through(have[0], want[0])))
            found.setdefault(daemon, []).append((have, host, version))
    _check_order(found)
    steps = []
    for daemon, package in ORDER:
        below = [(host, version) for have, host, version in found.get(daemon, []) if have < want]
        if below:
            steps.append({"daemon": daemon, "package": package, "hosts": [h for h, _v in below],
                          "from": sorted({v for _h, v in below})})
    if steps:
        _check_target(target, want, found)
        _check_settings(settings or {}, target, found)
    if step is not None:
        _check_step(step, steps, target, found)
    return steps


def _check_target(target, want, found):
    """Refuse a target the collection does not support, unless it is a step of an upgrade from 22.05 or a newer
    micro release of the release installed."""
    release = MAJORS[want[0]]
    installed = {have[0] for entries in found.values() for have, _h, _v in entries}
    if release in R.STEPPING_STONES or installed == {want[0]}:
        return
    try:
        R.check_supported(target, "target", target=True)
    except R.ReleaseError as exc:
        raise UpgradeError("%s; installed: %s" % (exc, _summary(found))) from None


def _check_settings(settings, target, found):
    for key in KEPT_SETTINGS:
        pair = settings.get(key) or {}
        old, new = (str(pair.get(k) or "").rstrip("/") for k in ("installed", "target"))
        if old and new and old != new:
            raise UpgradeError(
                "%s=%s: the upgrade to %s would move it from %s, where the installed Slurm keeps its state (%s); "
                "running and pending jobs would be lost: keep %s=%s" % (key, new, target, old, _summary(found), key,
                                                                        old))


def _check_step(step, steps, target, found):
    names = [d for d, _pkg in ORDER]
    if step not in names:
        raise UpgradeError("step=%r: not a daemon of the upgrade (one of %s)" % (step, ", ".join(names)))
    for before in names[:names.index(step)]:
        pending = next((s for s in steps if s["daemon"] == before), None)
        if pending:
            raise UpgradeError(
                "step=%s: %s on %s still has %s, below the target %s; Slurm upgrades slurmdbd, then slurmctld, then "
                "slurmd: upgrade %s first" % (step, before, ", ".join(pending["hosts"]), ", ".join(pending["from"]),
                                              target, before))


def _check_order(found):
    """Refuse a system whose daemons already break slurmdbd >= slurmctld >= slurmd: upgrading would not mend it."""
    names = [d for d, _pkg in ORDER]
    for upper, lower in zip(names, names[1:]):
        if upper in found and lower in found:
            oldest_upper = min(found[upper])
            newest_lower = max(found[lower])
            if newest_lower[0][0] > oldest_upper[0][0]:  # RPCs are compatible within a major release
                raise UpgradeError(
                    "installed: %s on %s has %s, newer than %s %s on %s; Slurm needs %s >= %s: upgrade %s first"
                    % (lower, newest_lower[1], newest_lower[2], upper, oldest_upper[2], oldest_upper[1], upper,
                       lower, upper))
