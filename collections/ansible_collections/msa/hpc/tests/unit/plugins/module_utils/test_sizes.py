# SPDX-License-Identifier: GPL-3.0-or-later
"""The one size parser: Slurm's meaning (powers of 1024 in every spelling) and errors naming field and value."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ansible_collections.msa.hpc.plugins.module_utils import _nam, _slurm_conf
from ansible_collections.msa.hpc.plugins.module_utils.slurm import model as _job
from ansible_collections.msa.hpc.plugins.module_utils._sizes import SizeError, format_size, parse_size


@pytest.mark.parametrize("unit, power", [("K", 1), ("M", 2), ("G", 3), ("T", 4), ("P", 5), ("E", 6)])
def test_every_spelling_of_a_unit_is_the_same_power_of_1024(unit, power):
    spellings = [unit, unit.lower(), unit + "B", unit.lower() + "b", unit + "iB", unit.lower() + "ib", " " + unit]
    assert {parse_size("3" + s) for s in spellings} == {3 * 1024 ** power}


@pytest.mark.parametrize("text, expected", [
    ("100GB", 100 << 30), ("100B", 100), ("100", 100), (100, 100), ("1.5K", 1536), ("0.5KiB", 512),
])
def test_sizes_read_as_slurm_reads_them(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize("value, fragment", [
    ("100XB", "is not a size"), ("GB", "is not a size"), ("1iB", "is not a size"), ("1 0G", "is not a size"),
    ("-1G", "is not a size"), ("1e3", "is not a size"), (None, "is not a size"), (1.25, "not a whole number"),
    ("0.1B", "not a whole number"), ("0", "must be positive"), (-1, "must be positive"),
])
def test_malformed_sizes_name_the_field_and_the_value(value, fragment):
    with pytest.raises(SizeError) as exc:
        parse_size(value, "nam")
    assert str(exc.value).startswith("nam: %r " % (value,)) and fragment in str(exc.value)


def test_zero_is_allowed_where_the_caller_says_so():
    assert parse_size("0G", minimum=0) == 0
    with pytest.raises(SizeError, match="licenses.nam: -1 is negative"):
        parse_size(-1, "licenses.nam", minimum=0)


def test_every_caller_uses_the_same_parser():
    # slurm_packjob (through _slurm_conf), nam_segment (through _nam) and slurm.conf licences agree on 100GB
    assert _nam.parse_size("100GB") == _slurm_conf.parse_size("100GB") == _job.parse_size("100GB") == 100 << 30
    assert _nam.parse_size is parse_size and _nam.SizeError is SizeError


@settings(max_examples=60)
@given(st.integers(1, 1 << 62))
def test_format_size_reads_back(nbytes):
    assert parse_size(format_size(nbytes)) == nbytes
