# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

"""Sensor readings on the wire (JSON or DCDB's binary pairs), topic validation and topic patterns.

Payload formats (one MQTT message carries one sensor's readings, oldest first):
- ``json``: ``[[<timestamp ns>, <value>], ...]`` — values may be integers or floats.
- ``binary``: DCDB's native format, a sequence of 16-byte records ``<uint64 timestamp ns><int64 value>``,
  little-endian; values are integers, so a sensor that needs fractions sets a ``factor`` (e.g. 1000 → milli-units).
A receiver tells them apart by the first byte: ``[`` starts JSON; anything else must be whole 16-byte records.
"""

import fnmatch
import json
import math
import re
import struct

PAIR = struct.Struct("<Qq")
MIN_LEVELS = 3              # /<system>/<module>/<node>/... : a node prefix must exist for jobs and analytics
MAX_LEVELS = 16
_LEVEL = re.compile(r"[A-Za-z0-9_.:-]+")
_MAX_TS = 1 << 63


class PayloadError(ValueError):
    """A message that is not a valid reading list; the message says why."""


def encode(readings, fmt="json"):
    """``readings``: iterable of (ts_ns, value) → bytes."""
    if fmt == "binary":
        return b"".join(PAIR.pack(int(ts), int(round(value))) for ts, value in readings)
    return json.dumps([[int(ts), value] for ts, value in readings], separators=(",", ":")).encode()


def _is_json(payload):
    """A JSON reading list is UTF-8 text from '[' to ']'. Testing the first byte alone is not enough: a binary
    payload starts with the low byte of a timestamp, which is '[' (0x5b) once in 256 messages; it ends with the top
    byte of a value, ']' only for values of 6.7e18 and more, and is rarely valid UTF-8."""
    if payload[:1] != b"[" or payload.rstrip()[-1:] != b"]":
        return False
    try:
        payload.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def decode(payload):
    """bytes → list of (ts_ns int, value number); raise PayloadError for anything malformed."""
    if not payload:
        raise PayloadError("empty payload")
    if _is_json(payload):
        try:
            data = json.loads(payload)
        except ValueError as exc:
            raise PayloadError("invalid JSON: %s" % exc)
        if not isinstance(data, list) or not data:
            raise PayloadError("JSON payload is not a non-empty list of [ts, value] pairs")
        out = []
        for item in data:
            if (not isinstance(item, list) or len(item) != 2 or isinstance(item[0], bool) or not isinstance(item[0], int)
                    or isinstance(item[1], bool) or not isinstance(item[1], (int, float))):
                raise PayloadError("JSON reading %r is not [<int ns>, <number>]" % (item,))
            ts, value = item
            if not 0 < ts < _MAX_TS:
                raise PayloadError("timestamp %r out of range" % (ts,))
            if isinstance(value, float) and not math.isfinite(value):
                raise PayloadError("value %r is not finite" % (value,))
            out.append((ts, value))
        return out
    if len(payload) % PAIR.size:
        raise PayloadError("binary payload of %d bytes is not a whole number of 16-byte readings" % len(payload))
    out = list(PAIR.iter_unpack(payload))
    for ts, _ in out:
        if ts == 0 or ts >= _MAX_TS:
            raise PayloadError("timestamp %r out of range" % ts)
    return out


def check_topic(topic):
    """Return the topic's levels; raise PayloadError if it is not /l1/l2/.../ln with safe level names."""
    if not topic.startswith("/"):
        raise PayloadError("topic %r does not start with '/'" % topic)
    levels = topic[1:].split("/")
    if not MIN_LEVELS <= len(levels) <= MAX_LEVELS:
        raise PayloadError("topic %r has %d levels, expected %d..%d" % (topic, len(levels), MIN_LEVELS, MAX_LEVELS))
    for level in levels:
        if not _LEVEL.fullmatch(level):
            raise PayloadError("topic %r has an invalid level %r" % (topic, level))
    return levels


def node_prefix(topic):
    """/<system>/<module>/<node>/<group>/<sensor> → /<system>/<module>/<node> (all but the last two levels)."""
    levels = topic[1:].split("/")
    keep = max(1, len(levels) - 2)
    return "/" + "/".join(levels[:keep])


def _expand_braces(segment):
    m = re.search(r"\{([^{}]*)\}", segment)
    if not m:
        return [segment]
    out = []
    for alt in m.group(1).split(","):
        out.extend(_expand_braces(segment[:m.start()] + alt + segment[m.end():]))
    return out


def is_pattern(text):
    return any(c in text for c in "*+#?[{")


class TopicPattern:
    """A sensor pattern: '/' levels where '+' or '*' match one level, '#' the rest, {a,b} alternatives and
    shell globs inside a level (``/msa/cm/cm0?/procfs/{load1,load5}``)."""

    def __init__(self, pattern):
        self.pattern = pattern
        self.levels = [lvl for lvl in pattern.strip("/").split("/")] if pattern.strip("/") else []
        self._alts = [None if lvl in ("+", "*", "#") else _expand_braces(lvl) for lvl in self.levels]

    def match(self, topic):
        levels = topic.strip("/").split("/")
        for i, lvl in enumerate(self.levels):
            if lvl == "#":
                return True
            if i >= len(levels):
                return False
            if lvl in ("+", "*"):
                continue
            if not any(fnmatch.fnmatchcase(levels[i], alt) for alt in self._alts[i]):
                return False
        return len(levels) == len(self.levels)
