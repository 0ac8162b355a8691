# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

"""Slurm hostlist expressions (``cm[01-04,07],esb01``): expand and compress, keeping zero padding."""

import itertools
import re

# Refuse expressions that would expand to more names than any real system has.
MAX_EXPANSION = 1000000

_TRAILING_DIGITS = re.compile(r"^(.*?)(\d+)$")
_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")


class HostlistError(ValueError):
    """A hostlist expression that cannot be parsed; the message names the expression and the fault."""


def _split_top_level(expression):
    """Split on commas that are not inside brackets."""
    parts, depth, current = [], 0, []
    for char in expression:
        if char == "[":
            if depth:
                raise HostlistError("hostlist %r: nested '[' is not allowed" % expression)
            depth = 1
        elif char == "]":
            if not depth:
                raise HostlistError("hostlist %r: ']' without '['" % expression)
            depth = 0
        if char == "," and not depth:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    if depth:
        raise HostlistError("hostlist %r: '[' is never closed" % expression)
    parts.append("".join(current))
    return parts


def _expand_ranges(body, expression):
    """``01-03,7`` → ``['01', '02', '03', '7']``; each range keeps the width of its lower bound."""
    values = []
    for item in body.split(","):
        match = _RANGE.match(item.strip())
        if not match:
            raise HostlistError("hostlist %r: %r is not a number or a range lo-hi" % (expression, item))
        lo_text, hi_text = match.group(1), match.group(2)
        lo = int(lo_text)
        hi = int(hi_text) if hi_text is not None else lo
        if hi < lo:
            raise HostlistError("hostlist %r: range %r runs backwards" % (expression, item))
        if hi - lo + 1 > MAX_EXPANSION:
            raise HostlistError("hostlist %r: range %r is larger than %d names" % (expression, item, MAX_EXPANSION))
        width = len(lo_text)
        values.extend("%0*d" % (width, number) for number in range(lo, hi + 1))
    return values


def _expand_one(item, expression):
    """One comma-free element, possibly with several bracket groups (``r[1-2]n[01-02]``)."""
    pieces = re.split(r"(\[[^\]]*\])", item)
    choices = []
    for piece in pieces:
        if piece.startswith("["):
            body = piece[1:-1]
            if not body:
                raise HostlistError("hostlist %r: empty brackets" % expression)
            choices.append(_expand_ranges(body, expression))
        elif piece:
            choices.append([piece])
    total = 1
    for options in choices:
        total *= len(options)
    if total > MAX_EXPANSION:
        raise HostlistError("hostlist %r expands to more than %d names" % (expression, MAX_EXPANSION))
    return ["".join(combo) for combo in itertools.product(*choices)]


def expand(expression):
    """Return the host names of a hostlist expression, in order, duplicates kept as written.

    Accepts a string (``cm[01-04,07],esb01``) or a list of such strings; ``None`` and ``""`` give ``[]``.
    """
    if expression is None:
        return []
    if isinstance(expression, (list, tuple)):
        return [name for part in expression for name in expand(part)]
    if not isinstance(expression, str):
        raise HostlistError("hostlist %r is not a string" % (expression,))
    expression = expression.strip()
    if not expression:
        return []
    names = []
    for item in _split_top_level(expression):
        item = item.strip()
        if not item:
            raise HostlistError("hostlist %r has an empty element" % expression)
        names.extend(_expand_one(item, expression))
        if len(names) > MAX_EXPANSION:
            raise HostlistError("hostlist %r expands to more than %d names" % (expression, MAX_EXPANSION))
    return names


def _split_name(name):
    match = _TRAILING_DIGITS.match(name)
    if not match:
        return name, None
    return match.group(1), match.group(2)


def natural_key(name):
    """Sort key that puts ``cm2`` before ``cm10`` and ``cm01`` next to ``cm1``."""
    prefix, digits = _split_name(name)
    if digits is None:
        return (prefix, -1, 0, "")
    return (prefix, int(digits), len(digits), digits)


def _runs(digit_strings):
    """Group sorted digit strings into runs ``(lo_text, hi_text)`` that re-expand to the same strings."""
    runs = []
    for text in digit_strings:
        if runs:
            lo_text, hi_text = runs[-1]
            width = len(lo_text)
            if "%0*d" % (width, int(hi_text) + 1) == text:
                runs[-1] = (lo_text, text)
                continue
        runs.append((text, text))
    return runs


def compress(names):
    """Return a compact Slurm hostlist for ``names`` (a list or an expression).

    Names are de-duplicated and sorted naturally; the numeric suffix of each name is ranged, keeping its
    zero padding (``cm09, cm10`` → ``cm[09-10]``; ``cm9, cm10`` → ``cm[9-10]``; ``cm1, cm01`` stay distinct).
    """
    if isinstance(names, str):
        names = expand(names)
    unique = sorted(set(n for n in names if n), key=natural_key)
    for name in unique:
        if any(c in name for c in ",[] \t\n"):
            raise HostlistError("host name %r contains a character a hostlist cannot carry" % (name,))
    groups = []  # (prefix, [digit strings]) in order, consecutive names with the same prefix merged
    for name in unique:
        prefix, digits = _split_name(name)
        if digits is None:
            groups.append((name, None))
        elif groups and groups[-1][1] is not None and groups[-1][0] == prefix:
            groups[-1][1].append(digits)
        else:
            groups.append((prefix, [digits]))
    out = []
    for prefix, digit_list in groups:
        if digit_list is None:
            out.append(prefix)
            continue
        runs = _runs(digit_list)
        if len(runs) == 1 and runs[0][0] == runs[0][1]:
            out.append(prefix + runs[0][0])
            continue
        ranges = [lo if lo == hi else "%s-%s" % (lo, hi) for lo, hi in runs]
        out.append("%s[%s]" % (prefix, ",".join(ranges)))
    return ",".join(out)


def count(expression):
    """Number of names in a hostlist expression."""
    return len(expand(expression))
