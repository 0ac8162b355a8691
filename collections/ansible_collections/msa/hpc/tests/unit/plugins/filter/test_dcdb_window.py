# SPDX-License-Identifier: GPL-3.0-or-later
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

"""verify_dcdb's per-node check (msa.hpc.dcdb_window_check): sound readings pass, readings under swapped node names,
readings equal on every node and nodes without a fresh reading fail."""

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.msa.hpc.plugins.filter.dcdb_window import dcdb_window_check

T0 = 1_780_000_000_000
# each node's own management-interface counter before (read at ms) and after; the nodes differ by megabytes
OWN = {"cm01": (5_120_300, 5_121_900), "esb01": (9_874_000, 9_876_500), "dam01": (2_330_100, 2_330_900)}


def _topic(node):
    return "/mini/%s/%s/net/eth0/rx_bytes" % (node[:-2], node)


def _before():
    return {node: {"topic": _topic(node), "value": window[0], "ms": T0} for node, window in OWN.items()}


def _after():
    return {node: window[1] for node, window in OWN.items()}


def _series(values, stale=None):
    """The /query answer: one stale reading (taken before the window) and one fresh one per node."""
    return [{"target": _topic(node), "datapoints": [[(stale or {}).get(node, 1), T0 - 1000], [value, T0 + 700]]}
            for node, value in values.items()]


SOUND = {node: (low + high) // 2 for node, (low, high) in OWN.items()}


def test_sound_readings_pass():
    result = _series(SOUND)
    check = dcdb_window_check(result, _before(), _after())
    assert check == {"stored": SOUND, "missing": [], "failures": []}


def test_the_window_bounds_are_inclusive():
    edges = {"cm01": OWN["cm01"][0], "esb01": OWN["esb01"][1], "dam01": OWN["dam01"][0]}
    assert dcdb_window_check(_series(edges), _before(), _after())["failures"] == []


def test_readings_under_swapped_node_names_fail():
    swapped = dict(SOUND, cm01=SOUND["esb01"], esb01=SOUND["cm01"])
    failures = dcdb_window_check(_series(swapped), _before(), _after())["failures"]
    assert len(failures) == 2
    assert failures[0].startswith("cm01: stored %d under %s is outside the node's own window [5120300, 5121900]"
                                  % (SOUND["esb01"], _topic("cm01")))
    assert failures[1].startswith("esb01: stored %d" % SOUND["cm01"])


def test_a_reading_taken_before_the_window_is_not_the_one_compared():
    """A stale value (taken before the node's own first reading) is skipped, not compared: only a fresh one counts."""
    stale_only = [{"target": _topic(node), "datapoints": [[SOUND[node], T0]]} for node in OWN]  # ts == ms: not after
    check = dcdb_window_check(stale_only, _before())
    assert check["missing"] == sorted(OWN) and check["stored"] == {}
    failures = dcdb_window_check(stale_only, _before(), _after())["failures"]
    assert [f.split(":")[0] for f in failures] == sorted(OWN)
    assert "no reading of /mini/cm/cm01/net/eth0/rx_bytes taken after %d ms" % T0 in failures[0]


def test_values_equal_on_every_node_fail():
    """Host-wide figures (the load average every container shares) are equal on every node: the check says so."""
    before = {node: dict(entry, value=0) for node, entry in _before().items()}
    after = {node: 10 ** 12 for node in OWN}
    failures = dcdb_window_check(_series({node: 4 for node in OWN}), before, after)["failures"]
    assert failures == ["the stored values of cm01, dam01, esb01 are all 4: the readings cannot tell the nodes apart"]


def test_waiting_names_the_nodes_without_a_fresh_reading():
    partial = [entry for entry in _series(SOUND) if "esb01" not in entry["target"]]
    check = dcdb_window_check(partial, _before())
    assert check["missing"] == ["esb01"] and check["failures"] == []
    assert "esb01" in dcdb_window_check(partial, _before(), _after())["failures"][0]


def test_a_node_without_its_after_reading_fails():
    after = _after()
    del after["dam01"]
    failures = dcdb_window_check(_series(SOUND), _before(), after)["failures"]
    assert failures == ["dam01: stored %d, but the node's own reading after it is missing" % SOUND["dam01"]]


@pytest.mark.parametrize("before, message", [
    ({}, "before must map each node"),
    ({"cm01": {"topic": _topic("cm01"), "value": 1, "ms": "soon"}}, "before[cm01].ms 'soon' is not a number"),
])
def test_bad_input_is_named(before, message):
    with pytest.raises(AnsibleFilterError, match=message.replace("[", r"\[").replace("]", r"\]")):
        dcdb_window_check(_series(SOUND), before)
