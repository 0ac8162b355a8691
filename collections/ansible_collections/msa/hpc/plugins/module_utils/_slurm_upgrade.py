# SPDX-License-Identifier: GPL-3.0-or-later
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Slurm's upgrade rules, as plain data: which jump is allowed, in which order the daemons go.

Slurm's upgrade guide: daemons accept RPCs and state files from the two previous major releases (three from 24.11
on), so a jump may cross at most that many releases; there is no downgrade; slurmdbd goes first, then slurmctld,
then slurmd and the commands, because a daemon must never be older than the ones that talk to it
(slurmdbd >= slurmctld >= slurmd).
"""
from __future__ import annotations

import re

# Slurm's major releases in order (YY.MM). A version whose major is not here is refused: its distance is unknown.
MAJORS = ("17.02", "17.11", "18.08", "19.05", "20.02", "20.11", "21.08", "22.05", "23.02", "23.11", "24.05",
          "24.11", "25.05", "25.11")
# The daemons in upgrade order, each with the Debian package that carries it.
ORDER = (("slurmdbd", "slurmdbd"), ("slurmctld", "slurmctld"), ("slurmd", "slurmd"))
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
    return 3 if parse(target)[0] >= MAJORS.index("24.11") else 2


def plan(installed, target):
    """The ordered upgrade of `installed` ({host: {daemon: version}}) to `target`, or UpgradeError saying why not.

    Returns a list of steps {daemon, package, hosts, from}, one per daemon that has a host below the target, in
    Slurm's order; a daemon already at the target on every host has no step.
    """
    want = parse(target, "target")
    window = releases_back(target)
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
                    "target=%s: %s on %s has %s, %d major releases back; Slurm %s accepts at most %d (%s); upgrade "
                    "through %s first" % (target, daemon, host, version, want[0] - have[0], MAJORS[want[0]], window,
                                          ", ".join(MAJORS[want[0] - window:want[0]]), MAJORS[have[0] + window]))
            found.setdefault(daemon, []).append((have, host, version))
    _check_order(found)
    steps = []
    for daemon, package in ORDER:
        below = [(host, version) for have, host, version in found.get(daemon, []) if have < want]
        if below:
            steps.append({"daemon": daemon, "package": package, "hosts": [h for h, _v in below],
                          "from": sorted({v for _h, v in below})})
    return steps


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
