# SPDX-License-Identifier: GPL-3.0-or-later
"""Which nodes of a software set run an out-of-date image, and the waves ``scontrol reboot`` reimages them in."""
from __future__ import annotations

import re

from ansible_collections.msa.hpc.plugins.module_utils._hostlist import compress, natural_key

REASON_PREFIX = "msa-reimage "
HASH = re.compile(r"[0-9a-f]{64}")
# a Slurm node name: nothing scontrol's host list syntax or a shell would read as more than one name
NODE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,62}")


class PlanError(ValueError):
    """The request is wrong; the message names the field and the value."""


def check_request(image, image_hash, image_pattern, wave_size):
    """Refuse an image off the pattern, a hash that is not the image's tag, a wave size below 1."""
    if not isinstance(image, str) or not re.fullmatch(image_pattern, image):
        raise PlanError("image: %r does not match image_pattern %s" % (image, image_pattern))
    if not isinstance(image_hash, str) or not HASH.fullmatch(image_hash):
        raise PlanError("image_hash: %r is not a sha256 in hex (the image's msa.hpc.image.hash label)" % (image_hash,))
    if image.rpartition(":")[2] != image_hash[:12]:
        raise PlanError("image: %r is not tagged with the first 12 characters of image_hash %s"
                        % (image, image_hash))
    if isinstance(wave_size, bool) or not isinstance(wave_size, int) or wave_size < 1:
        raise PlanError("wave_size: %r is not a whole number of at least 1" % (wave_size,))


def classify(running, image_hash, adopt=False):
    """``(current, stale, unknown)`` node lists: ``running`` maps a node to what it says it booted (its
    /etc/msa-hpc/image.json: ``{"hash": ...}``), empty when it says nothing (a node not booted from an image). With
    ``adopt``, such nodes are stale too, so they boot the set's image."""
    current, stale, unknown = [], [], []
    for node in sorted(running, key=natural_key):
        if not isinstance(node, str) or not NODE.fullmatch(node):
            raise PlanError("nodes: %r is not a node name" % (node,))
        booted = running[node] or {}
        if not isinstance(booted, dict):
            raise PlanError("nodes: %s: %r is not the node's image description (a mapping)" % (node, booted))
        found = booted.get("hash")
        if found is None:
            (stale if adopt else unknown).append(node)
        elif found == image_hash:
            current.append(node)
        else:
            stale.append(node)
    return current, stale, unknown


def partitions_of(slurm_nodes):
    """partition -> its nodes, from ``sinfo --json``'s node records (``name``, ``partitions``)."""
    members = {}
    for record in slurm_nodes or []:
        for partition in record.get("partitions") or []:
            members.setdefault(partition, set()).add(record.get("name"))
    return members


def waves(stale, size, partitions, whole_partition=False):
    """``stale`` in waves of at most ``size`` nodes, in name order. Unless ``whole_partition``, no wave holds every
    node of a partition of two or more nodes, so a partition keeps running jobs while its nodes are reimaged."""
    def empties_a_partition(wave):
        return any(len(members) > 1 and members <= wave for members in partitions.values())

    remaining, found = sorted(stale, key=natural_key), []
    while remaining:
        wave = []
        for node in remaining:
            if len(wave) >= size:
                break
            if whole_partition or not empties_a_partition(set(wave) | {node}):
                wave.append(node)
        found.append(wave)  # never empty: one node alone empties no partition of two or more
        remaining = [n for n in remaining if n not in wave]
    return found


def reboot_command(image, wave):
    """The argv that reimages ``wave``: Slurm drains the nodes (ASAP: a running job finishes first), runs the
    RebootProgram on each, which boots ``image`` (its reason), and resumes them once they register again."""
    return ["scontrol", "reboot", "ASAP", "nextstate=resume", "reason=" + REASON_PREFIX + image, ",".join(wave)]


def plan(running, image, image_hash, image_pattern, wave_size=1, slurm_nodes=None, whole_partition=False,
         adopt=False):
    """The whole plan: which nodes are current, stale or unknown, the waves and their scontrol commands."""
    check_request(image, image_hash, image_pattern, wave_size)
    if not isinstance(running, dict):
        raise PlanError("nodes: %r is not a mapping of node to its image description" % (running,))
    current, stale, unknown = classify(running, image_hash, adopt)
    known = {r.get("name") for r in slurm_nodes or []}
    if slurm_nodes is not None:
        missing = [n for n in stale if n not in known]
        if missing:
            raise PlanError("nodes: %s are not Slurm nodes (sinfo does not list them), so Slurm cannot reimage them"
                            % compress(missing))
    found = waves(stale, wave_size, partitions_of(slurm_nodes), whole_partition)
    return {"current": current, "stale": stale, "unknown": unknown, "waves": found,
            "commands": [reboot_command(image, wave) for wave in found],
            "summary": summary(image, current, stale, unknown, found)}


def summary(image, current, stale, unknown, found):
    parts = ["%d of %d nodes run %s" % (len(current), len(current) + len(stale) + len(unknown), image)]
    if stale:
        parts.append("%s to reimage in %d wave%s (%s)" % (compress(stale), len(found), "" if len(found) == 1 else "s",
                                                          "; ".join(compress(w) for w in found)))
    if unknown:
        parts.append("%s booted no image (left alone; adopt: true reimages them)" % compress(unknown))
    return ", ".join(parts)
