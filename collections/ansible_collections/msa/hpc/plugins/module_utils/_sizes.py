# SPDX-License-Identifier: GPL-3.0-or-later
"""The one size parser of msa.hpc, with Slurm's meaning: K, M, G, T, P, E are powers of 1024 in every spelling."""
from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

# Slurm reads ``--mem=16G`` and licence sizes with binary multiples; so does msa.hpc everywhere (nam_segment,
# slurm_packjob, the NAM hook, slurm.conf licences): "G", "GB", "GiB" and "gib" all mean 2**30 bytes.
POWERS = {"": 0, "K": 1, "M": 2, "G": 3, "T": 4, "P": 5, "E": 6}
_SIZE = re.compile(r"^\s*(?P<num>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*(?P<unit>[KMGTPE]?)(?P<i>i?)(?P<b>B?)\s*$",
                   re.IGNORECASE)
HINT = "a number of bytes or a number with K, M, G, T, P or E (powers of 1024; B, KB and KiB are the same), e.g. 512M"


class SizeError(ValueError):
    """A size that cannot be read; the message names the field and the value."""


def parse_size(value, field="size", minimum=1):
    """``512M``, ``2GB``, ``1.5TiB``, ``4096``, ``100B`` or an int → a whole number of bytes (powers of 1024).

    ``minimum`` is the smallest value accepted (1: sizes of things that exist; 0 where nothing is allowed)."""
    if isinstance(value, bool):
        raise SizeError("%s: %r is not a size (expected %s)" % (field, value, HINT))
    if isinstance(value, int):
        number = Decimal(value)
    else:
        text = repr(value) if isinstance(value, float) else value
        if not isinstance(text, str):
            raise SizeError("%s: %r is not a size (expected %s)" % (field, value, HINT))
        m = _SIZE.match(text)
        if not m or (m.group("i") and not m.group("unit")):
            raise SizeError("%s: %r is not a size (expected %s)" % (field, value, HINT))
        try:
            number = Decimal(m.group("num")) * (1 << (10 * POWERS[m.group("unit").upper()]))
        except InvalidOperation:
            raise SizeError("%s: %r is not a size (expected %s)" % (field, value, HINT)) from None
    if number != number.to_integral_value():
        raise SizeError("%s: %r is not a whole number of bytes (%s)" % (field, value, number))
    if number < minimum:
        raise SizeError("%s: %r must be positive" % (field, value) if minimum == 1
                        else "%s: %r is below %d bytes" % (field, value, minimum) if minimum > 1
                        else "%s: %r is negative" % (field, value))
    return int(number)


def format_size(nbytes):
    """Bytes → the shortest exact binary form (``1.5GiB``, ``4KiB``, ``100B``); parse_size reads it back."""
    nbytes = int(nbytes)
    for unit in ("E", "P", "T", "G", "M", "K"):
        scale = 1 << (10 * POWERS[unit])
        if nbytes >= scale:
            text = ("%.3f" % (Decimal(nbytes) / scale)).rstrip("0").rstrip(".")
            if Decimal(text) * scale == nbytes:
                return text + unit + "iB"
    return "%dB" % nbytes
