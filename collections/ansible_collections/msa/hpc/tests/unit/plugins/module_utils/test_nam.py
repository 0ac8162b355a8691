# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

"""Human NAM sizes and the GCE Table 1 checks of module_utils (_nam, _gce), without a manager."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ansible_collections.msa.hpc.plugins.module_utils import _gce as G
from ansible_collections.msa.hpc.plugins.module_utils._nam import SizeError, format_size, parse_size


@pytest.mark.parametrize("text, expected", [
    ("4096", 4096), (4096, 4096), ("512M", 512 << 20), ("2G", 2 << 30), ("1.5TiB", 3 << 39), ("100MB", 100 << 20),
    ("1k", 1024), (" 3 GiB ", 3 << 30), ("0.5G", 512 << 20), ("7B", 7), (".25K", 256), ("1E", 1 << 60),
])
def test_sizes_in_binary_units_become_bytes(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize("value, fragment", [
    ("12 parsecs", "is not a size"), ("1.3", "not a whole number of bytes"), ("0", "must be positive"),
    ("-5G", "is not a size"), ("", "is not a size"), (True, "is not a size"), ([1], "is not a size"),
    ("5i", "is not a size"), ("0.0000001K", "not a whole number"), (0, "must be positive"),
])
def test_bad_sizes_name_the_field_and_the_value(value, fragment):
    with pytest.raises(SizeError) as exc:
        parse_size(value, "nam_size")
    assert fragment in str(exc.value) and str(exc.value).startswith("nam_size: %r" % (value,))


@settings(max_examples=80)
@given(st.integers(1, 1 << 62))
def test_format_size_reads_back_to_the_same_bytes(nbytes):
    assert parse_size(format_size(nbytes)) == nbytes


def test_format_size_picks_the_largest_exact_unit():
    assert [format_size(n) for n in (100, 4096, 3 << 29, 1536 * 1024 + 1)] == ["100B", "4KiB", "1.5GiB", "1572865B"]


def test_table_1_limits_are_those_of_the_seed():
    assert G.LIMITS == {"max_operation_size": 8 << 20, "max_communicators": 256, "max_operations_per_communicator": 8,
                        "max_processes_per_communicator": 1024, "address_bits": 64, "operation_encodings": 16,
                        "datatype_encodings": 64}
    assert len(G.OPERATIONS) == 16 and len(G.DATATYPES) == 64
    # the field widths of Table 1 bound the limits: 8-bit Comm ID, 3-bit ICID, 10-bit rank
    assert (G.MAX_COMMUNICATORS, G.MAX_OPERATIONS_PER_COMMUNICATOR, G.MAX_PROCESSES_PER_COMMUNICATOR) == \
        (1 << 8, 1 << 3, 1 << 10)


def test_communicators_over_1024_processes_or_257th_fall_back():
    G.check_communicator_size(1024, 255)
    with pytest.raises(G.Fallback) as exc:
        G.check_communicator_size(1025)
    assert exc.value.as_dict()["fallback"] == "software" and exc.value.limit == "max_processes_per_communicator"
    with pytest.raises(G.Fallback) as exc:
        G.check_communicator_size(2, 256)
    assert exc.value.limit == "max_communicators"


def test_operations_over_8_mib_unknown_or_the_ninth_fall_back():
    assert G.check_operation("sum", "float64", 8 << 20, 7) == 1 << 20
    for args, limit in ((("sum", "float64", (8 << 20) + 8), "max_operation_size"),
                        (("sum", "float64", 8, 8), "max_operations_per_communicator"),
                        (("scan", "float64", 8), "operation_encodings"),
                        (("sum", "float128", 16), "datatype_encodings")):
        with pytest.raises(G.Fallback) as exc:
            G.check_operation(*args)
        assert exc.value.limit == limit
    with pytest.raises(ValueError):
        G.check_operation("sum", "int32", 6)


@pytest.mark.parametrize("value, expected", [
    ({"node": "esb01", "vpid": 3}, ("esb01", 3)), ("esb01:3", ("esb01", 3)), ({"node": 129, "vpid": "0"}, ("129", 0)),
])
def test_processes_are_node_and_vpid(value, expected):
    assert G.normalise_process(value, "root") == expected


@pytest.mark.parametrize("value", ["esb01", {"node": "x"}, {"node": "x", "vpid": -1}, {"node": "", "vpid": 1},
                                   {"node": "x", "vpid": "seven"}, {"node": True, "vpid": 1}])
def test_bad_processes_name_the_field(value):
    with pytest.raises(ValueError) as exc:
        G.normalise_process(value, "members[4]")
    assert str(exc.value).startswith("members[4]")
