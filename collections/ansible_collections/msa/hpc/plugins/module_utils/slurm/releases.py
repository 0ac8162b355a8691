# SPDX-License-Identifier: GPL-3.0-or-later
"""The Slurm releases this collection supports, in one place, and what each one speaks.

22.05 (Debian 12 bookworm) is still deployed, but only as the source of an upgrade: Slurm 24.11 does not upgrade
from it directly (24.11 takes state and RPCs from 24.05, 23.11 and 23.02), so a 22.05 site goes through 23.02 or
23.11 first. 24.11 (Debian 13 trixie) is the default of new sites; 25.05, 25.11 and 26.05 (forky) follow it.

Each supported release has the REST/JSON data_parser version the collection speaks to it: 22.05 serves only
openapi v0.0.36-v0.0.38; 24.11 serves data_parser v0.0.40-v0.0.42, 25.05 v0.0.40-v0.0.43, 25.11 v0.0.41-v0.0.44 and
26.05 v0.0.42-v0.0.45 (Slurm's src/plugins/data_parser at tags slurm-24-11-5-1, slurm-25-05-8-1, slurm-25-11-7-1
and slurm-26-05-3-1), so v0.0.42 is the one version every release from 24.11 to 26.05 serves.
Standard library only: node programs import it."""
from __future__ import annotations

import re

# Supported releases (YY.MM), oldest first. UPGRADE_SOURCE_ONLY may be installed, and upgraded from, but is no target.
SUPPORTED = ("22.05", "24.11", "25.05", "25.11", "26.05")
UPGRADE_SOURCE_ONLY = ("22.05",)
# Releases the collection never deploys but an upgrade from 22.05 must pass through (24.11 takes 23.02, 23.11 and
# 24.05 only): msa.hpc.slurm_upgrade_plan accepts them as the target of one step of such an upgrade.
STEPPING_STONES = ("23.02", "23.11", "24.05")
DEFAULT = "24.11"
# The slurmrestd API version (URL path /slurm/<v>/..., /slurmdb/<v>/...) and data_parser each release is spoken to in.
API_VERSIONS = {"22.05": "v0.0.38", "24.11": "v0.0.42", "25.05": "v0.0.42", "25.11": "v0.0.42", "26.05": "v0.0.42"}
# The order a client tries them in when it does not know the release (newest first; a 404 means "not served").
API_PROBE_ORDER = ("v0.0.42", "v0.0.38")
# What a newer release gives an MSA, by the first supported release that has it (docs/slurm_releases.md
# "Release-gated features"; sources there):
# - topology_yaml: topology.yaml with one topology per partition (PartitionName ... Topology=), 25.05; slurmctld
#   sends topology.yaml to a configless slurmd from 25.05.2 (src/common/fetch_config.c).
# - metrics_auth: slurmctld's OpenMetrics endpoint (MetricsType=metrics/openmetrics, /metrics/* on SlurmctldPort)
#   behind JWT authentication (MetricsAuthUsers, SlurmctldHttpAuthParameters), 26.05. 25.11 serves the endpoint
#   to anyone who reaches the port, so the collection does not switch it on there.
RELEASE_FEATURES = {"topology_yaml": "25.05", "metrics_auth": "26.05"}
_VERSION = re.compile(r"^(?:\d+:)?(\d{2}\.\d{2})(?:\.\d+(?:[-+~][0-9A-Za-z.+~-]*)?)?$")


class ReleaseError(ValueError):
    """A Slurm version that cannot be read or that this collection does not support; the message names both."""


def major(version, field="version"):
    """``YY.MM`` of a Slurm version: ``24.11``, upstream ``24.11.5``, Debian ``24.11.5-4+deb13u1``, ``1:22.05.8``."""
    match = _VERSION.match(str(version).strip())
    if not match:
        raise ReleaseError("%s=%r: not a Slurm version (YY.MM or YY.MM.N, optionally a Debian revision)"
                           % (field, version))
    return match.group(1)


def check_supported(version, field="version", target=False):
    """The release of ``version`` when the collection supports it (as a ``target`` of a deployment or upgrade:
    not 22.05); ReleaseError naming the field, the version and the supported releases otherwise."""
    release = major(version, field)
    allowed = [r for r in SUPPORTED if not (target and r in UPGRADE_SOURCE_ONLY)]
    if release not in allowed:
        raise ReleaseError("%s=%s: Slurm %s is not a release this collection supports%s (supported: %s)"
                           % (field, version, release, " as a target" if target else "", ", ".join(allowed)))
    return release


def api_version(version, field="slurm release"):
    """The slurmrestd API / data_parser version the collection speaks to Slurm ``version``."""
    return API_VERSIONS[check_supported(version, field)]


def has_feature(version, feature, field="slurm_release"):
    """Whether Slurm ``version`` (a supported release) has ``feature`` of RELEASE_FEATURES; ReleaseError naming the
    field and value for an unsupported release, ValueError naming the feature for an unknown one."""
    if feature not in RELEASE_FEATURES:
        raise ValueError("feature %r is not one of %s" % (feature, ", ".join(sorted(RELEASE_FEATURES))))
    release = check_supported(version, field)
    return SUPPORTED.index(release) >= SUPPORTED.index(RELEASE_FEATURES[feature])


def features(version, field="slurm_release"):
    """The RELEASE_FEATURES Slurm ``version`` has, sorted."""
    return sorted(f for f in RELEASE_FEATURES if has_feature(version, f, field))
