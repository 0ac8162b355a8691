# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

"""Tests of Slurm hostlist expansion and compression."""

import pytest
from hypothesis import given, settings, strategies as st

from ansible_collections.msa.hpc.plugins.module_utils._hostlist import (
    HostlistError, compress, count, expand, natural_key)


def test_expand_ranges_and_single_names_in_written_order():
    assert expand("cm[01-04,07],esb01") == ["cm01", "cm02", "cm03", "cm04", "cm07", "esb01"]


def test_expand_keeps_the_width_of_the_lower_bound():
    assert expand("cm[08-10]") == ["cm08", "cm09", "cm10"]
    assert expand("cm[8-10]") == ["cm8", "cm9", "cm10"]
    assert expand("n[001-002]") == ["n001", "n002"]


def test_expand_several_bracket_groups_form_their_product():
    assert expand("r[1-2]n[01-02]") == ["r1n01", "r1n02", "r2n01", "r2n02"]


def test_expand_accepts_a_list_and_empty_input():
    assert expand(["cm[1-2]", "esb1"]) == ["cm1", "cm2", "esb1"]
    assert expand("") == [] and expand(None) == []
    assert count("cm[01-04,07]") == 5


@pytest.mark.parametrize("bad, fault", [
    ("cm[01-04", "never closed"),
    ("cm01-04]", "without"),
    ("cm[04-01]", "backwards"),
    ("cm[a-b]", "not a number"),
    ("cm[]", "empty brackets"),
    ("cm01,,cm02", "empty element"),
    ("cm[[1]]", "nested"),
])
def test_expand_rejects_malformed_expressions_naming_them(bad, fault):
    with pytest.raises(HostlistError, match=fault) as info:
        expand(bad)
    assert repr(bad) in str(info.value)


def test_expand_refuses_a_range_larger_than_any_system():
    with pytest.raises(HostlistError, match="larger than"):
        expand("n[0-99999999]")


def test_compress_ranges_consecutive_numbers_and_keeps_padding():
    assert compress(["cm01", "cm02", "cm03", "cm04", "cm07", "esb01"]) == "cm[01-04,07],esb01"
    assert compress(["cm09", "cm10", "cm11"]) == "cm[09-11]"
    assert compress(["cm8", "cm9", "cm10"]) == "cm[8-10]"


def test_compress_keeps_differently_padded_names_apart():
    result = compress(["cm1", "cm01"])
    assert sorted(expand(result)) == ["cm01", "cm1"]
    assert compress(["cm08", "cm9"]) == "cm[08,9]"


def test_compress_sorts_naturally_and_drops_duplicates():
    assert compress(["cm10", "cm2", "cm2", "cm1"]) == "cm[1-2,10]"
    assert compress(["login", "cm1"]) == "cm1,login"


def test_compress_accepts_an_expression_and_an_empty_list():
    assert compress("cm03,cm01,cm02") == "cm[01-03]"
    assert compress([]) == ""


def test_compress_rejects_names_a_hostlist_cannot_carry():
    with pytest.raises(HostlistError, match="cannot carry"):
        compress(["a,b"])


_names = st.builds(
    lambda prefix, number, width: prefix + ("%0*d" % (width, number)) if number is not None else prefix,
    st.sampled_from(["cm", "esb", "dam", "gw", "r1n", "node-", "x"]),
    st.one_of(st.none(), st.integers(min_value=0, max_value=120)),
    st.integers(min_value=1, max_value=3))


@settings(max_examples=150, deadline=None)
@given(st.lists(_names, max_size=40))
def test_compress_then_expand_gives_the_sorted_unique_names(names):
    assert expand(compress(names)) == sorted(set(names), key=natural_key)


@settings(max_examples=100, deadline=None)
@given(st.lists(_names, max_size=40))
def test_compress_is_stable_under_a_second_round_trip(names):
    once = compress(names)
    assert compress(expand(once)) == once
