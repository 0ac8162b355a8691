# SPDX-License-Identifier: GPL-3.0-or-later
"""The job-options codec: both forms of the comment, typed values, refusals naming the key and the value."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ansible_collections.msa.hpc.plugins.module_utils import _jobopts as J


def test_the_packjob_form_and_the_handwritten_form_decode_alike():
    packjob = "msa:gw_num=2;gw_file=/home/u/route;gw_plugin=booster;gw_cleanup=1;nam_bytes=1073741824;gce=1"
    by_hand = "my run: gw_num=2,gw_file=/home/u/route,gw_plugin=booster,gw_cleanup nam=1G gce=yes"
    expected = {"gw_num": 2, "gw_file": "/home/u/route", "gw_plugin": "booster", "gw_cleanup": True,
                "nam": 1 << 30, "gce": True}
    assert J.decode(packjob) == J.decode(by_hand) == expected


def test_other_words_of_a_handwritten_comment_are_ignored():
    assert J.decode("gw_nam=5,mynam=3 agce=1 nam_ gce the gce word") == {}
    assert J.decode(None) == J.decode("(null)") == J.decode("") == {}
    assert J.decode("nam=512M,nam_nonvolatile,nam_name=x") == {"nam": 512 << 20, "nam_nonvolatile": True,
                                                               "nam_name": "x"}


def test_keys_of_other_tools_pass_through_the_msa_form():
    assert J.decode("msa:alt=job;set=abc;alternative=2") == {"alt": "job", "set": "abc", "alternative": "2"}


@settings(max_examples=80)
@given(st.fixed_dictionaries({}, optional={
    "gw_num": st.integers(0, 4096), "gw_file": st.from_regex(r"\A(/[a-z0-9_.-]{1,8}){1,4}\Z").filter(
        lambda p: ".." not in p.split("/") and p.split("/")[-1] != "."),
    "gw_plugin": st.from_regex(r"\A[A-Za-z0-9_-]{1,64}\Z"), "gw_cleanup": st.booleans(),
    "nam": st.integers(1, 1 << 50), "nam_nonvolatile": st.booleans(), "gce": st.booleans()}))
def test_encode_then_decode_gives_the_options_back(options):
    decoded = J.decode(J.encode(options))
    assert decoded == {k: v for k, v in options.items() if v is not False}


@pytest.mark.parametrize("comment, message", [
    ("gw_plugin=/home/u/x.py", "gw_plugin: '/home/u/x.py' is not a bare name"),
    ("msa:gw_plugin=os:system", "gw_plugin: 'os:system' is not a bare name"),
    ("gw_plugin=../../tmp/evil", "gw_plugin: '../../tmp/evil' is not a bare name"),
    ("gw_plugin=x.py", "gw_plugin: 'x.py' is not a bare name"),
    ("gw_file=../../etc/cron.d/x", "gw_file: '../../etc/cron.d/x' climbs out of its directory"),
    ("msa:gw_file=/home/u/a/../../v/x", "gw_file: '/home/u/a/../../v/x' climbs out"),
    ("gw_file=~bob/x", "gw_file: '~bob/x' does not name a file"),
    ("gw_file=/home/u/", "gw_file: '/home/u/' does not name a file"),
    ("gw_num=two", "gw_num: 'two' is not a whole number"),
    ("gw_num=-1", "gw_num: '-1' is not a whole number"),
    ("gw_num=99999", "gw_num: '99999' is not a whole number from 0 to 4096"),
    ("gw_cleanup=maybe", "gw_cleanup: 'maybe' is not a boolean"),
    ("nam=lots", "nam: 'lots' is not a size"),
    ("msa:nam_bytes=1.5", "nam_bytes: '1.5' is not a whole number of bytes"),
    ("nam=0", "nam: '0' must be positive"),
    ("nam_name=../x", "nam_name: '../x' is not a bare name"),
    ("gw_num=1 gw_num=2", "gw_num is given twice"),
    ("msa:nam=1G;nam_bytes=5", "nam='1G' and nam_bytes='5' both given"),
    ("msa:gw_num", "'gw_num' is not key=value"),
    ("gw_file=", "gw_file: '' is empty"),
])
def test_bad_values_are_refused_naming_the_key_and_the_value(comment, message):
    with pytest.raises(J.JobOptionError) as exc:
        J.decode(comment)
    assert message in str(exc.value)


@pytest.mark.parametrize("fields, message", [
    ([("gw_file", "a;b")], "gw_file='a;b' holds white space"),
    ([("gw file", "x")], "key 'gw file' is not"),
    ([("nam_bytes", "1 2")], "nam_bytes='1 2' holds"),
])
def test_the_msa_form_refuses_what_it_cannot_carry(fields, message):
    with pytest.raises(J.JobOptionError, match=message):
        J.format_options(fields)


def test_encode_refuses_what_the_hooks_would_refuse():
    with pytest.raises(J.JobOptionError, match="gw_plugin: 'a:b'"):
        J.encode({"gw_plugin": "a:b"})


def test_each_hook_judges_only_its_own_options():
    comment = "gw_plugin=/x.py nam=1G"
    assert J.decode(comment, J.NAM_KEYS) == {"nam": 1 << 30}
    with pytest.raises(J.JobOptionError, match="gw_plugin: '/x.py'"):
        J.decode(comment, J.GATEWAY_KEYS)
