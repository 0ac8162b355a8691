# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

"""Tests of the gateway routing-file format and the routing strategies."""

import os
import random
import stat
import textwrap

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from ansible_collections.msa.hpc.plugins.module_utils import _gw_routing as R

SEED_EXAMPLE = """\
192.168.12.77:40158 cluster015 booster003
192.168.12.77:40158 cluster016 booster003
192.168.12.78:40889 cluster015 booster010
192.168.12.78:40889 cluster016 booster010
"""

sizes = st.tuples(st.integers(1, 25), st.integers(1, 25), st.integers(1, 9))


def nodes(prefix, n):
    return ["%s%03d" % (prefix, i) for i in range(n)]


def gws(n):
    return ["10.1.0.%d:%d" % (i + 1, 40000 + i) for i in range(n)]


@settings(max_examples=60, deadline=None)
@given(sizes)
def test_balance_spreads_pairs_over_gateways_within_one(size):
    n_c, n_b, n_g = size
    table = R.build_routing(nodes("c", n_c), nodes("b", n_b), gws(n_g), "balance")
    counts = np.bincount(table.g, minlength=n_g)
    assert counts.max() - counts.min() <= 1


@settings(max_examples=60, deadline=None)
@given(sizes)
def test_booster_strategy_keeps_each_booster_on_one_gateway_and_spreads_boosters(size):
    n_c, n_b, n_g = size
    table = R.build_routing(nodes("c", n_c), nodes("b", n_b), gws(n_g), "booster")
    per_booster = table.booster_gateways()
    assert all(len(v) == 1 for v in per_booster.values())
    boosters_per_gw = np.bincount([table.gateways.index(v[0]) for v in per_booster.values()], minlength=n_g)
    assert boosters_per_gw.max() - boosters_per_gw.min() <= 1


@settings(max_examples=40, deadline=None)
@given(sizes, st.sampled_from(["balance", "booster", "cluster"]))
def test_every_node_pair_is_routed_exactly_once(size, strategy):
    n_c, n_b, n_g = size
    table = R.build_routing(nodes("c", n_c), nodes("b", n_b), gws(n_g), strategy)
    pairs = set(zip(table.c.tolist(), table.b.tolist()))
    assert len(table) == n_c * n_b == len(pairs)
    assert (table.matrix() >= 0).all()


@settings(max_examples=30, deadline=None)
@given(sizes, st.sampled_from(["balance", "booster", "cluster"]), st.randoms(use_true_random=False))
def test_strategies_give_the_same_routes_whatever_the_node_order(size, strategy, rnd):
    n_c, n_b, n_g = size
    cl, bo = nodes("cluster", n_c), nodes("booster", n_b)
    first = R.build_routing(cl, bo, gws(n_g), strategy)
    rnd.shuffle(cl)
    rnd.shuffle(bo)
    second = R.build_routing(cl, bo, gws(n_g), strategy)
    assert first.to_bytes() == second.to_bytes()


names = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-._", min_size=1, max_size=12)


@settings(max_examples=50, deadline=None)
@given(st.lists(names, min_size=1, max_size=8, unique=True), st.lists(names, min_size=1, max_size=8, unique=True),
       st.integers(1, 5), st.sampled_from(["balance", "booster", "cluster"]))
def test_routing_file_round_trips_through_text(clusters, boosters, n_g, strategy):
    boosters = [b + "-bst" for b in boosters]  # never the same name on both sides
    clusters = [c + "-cl" for c in clusters]
    table = R.build_routing(clusters, boosters, gws(n_g), strategy)
    again = R.parse_routing(table.to_bytes())
    assert again == table
    assert again.to_bytes() == table.to_bytes()


def test_seed_example_is_what_the_booster_strategy_writes():
    table = R.build_routing(["cluster016", "cluster015"], ["booster010", "booster003"],
                            ["192.168.12.77:40158", "192.168.12.78:40889"], "booster")
    assert table.to_text() == SEED_EXAMPLE
    parsed = R.parse_routing(SEED_EXAMPLE)
    assert parsed.lookup("cluster016", "booster003") == "192.168.12.77:40158"
    assert parsed.lookup("booster010", "cluster015") == "192.168.12.78:40889"


def test_comments_blank_lines_and_extra_spaces_are_accepted():
    text = "# written by the prolog\n\n192.168.12.77:40158   cluster015\tbooster003  \n"
    table = R.parse_routing(text)
    assert table.routes() == {("192.168.12.77:40158", "cluster015", "booster003")}


@pytest.mark.parametrize("text, line, words", [
    ("1.2.3.4:5 a b\n1.2.3.4:5 a\n", 2, "found 2 fields"),
    ("# header\n\n1.2.3.4:5 a b extra\n", 3, "found 4 fields"),
    ("1.2.3.4:5 a b\n1.2.3.4 a c\n", 2, "not <address>:<port>"),
    ("1.2.3.4:70000 a b\n", 1, "outside 1-65535"),
    ("1.2.3.4:5 a b\n1.2.3.4:6 c b\n1.2.3.4:6 a b\n", 3, "already routed on line 1"),
    ("1.2.3.4:5 a b\n1.2.3.4:5 b c\n", 2, "'b' is a cluster node here but a booster node on line 1"),
])
def test_bad_lines_are_reported_with_their_line_number(text, line, words):
    with pytest.raises(R.RoutingFileError) as exc:
        R.parse_routing(text, source="route-file")
    assert exc.value.line == line
    assert words in str(exc.value)
    assert str(exc.value).startswith("route-file: line %d:" % line)


def test_every_malformed_line_is_listed_not_only_the_first():
    with pytest.raises(R.RoutingFileError) as exc:
        R.parse_routing("x\n1.2.3.4:5 a b\ny z\n")
    assert [ln for ln, message in exc.value.errors] == [1, 3]


def test_ipv6_gateway_endpoints_parse_and_format():
    assert R.parse_endpoint("[fd00::7]:40158") == ("fd00::7", 40158)
    assert R.format_endpoint("fd00::7", 40158) == "[fd00::7]:40158"
    table = R.build_routing(["c1"], ["b1"], ["[fd00::7]:40158"])
    assert R.parse_routing(table.to_bytes()).gateways == ["[fd00::7]:40158"]


def test_unknown_strategy_error_lists_the_known_ones():
    with pytest.raises(R.RoutingError, match="unknown routing strategy 'nearest'.*balance.*booster"):
        R.build_routing(["c1"], ["b1"], gws(1), "nearest")


def test_a_node_on_both_sides_is_rejected_before_routing():
    with pytest.raises(R.RoutingError, match="both cluster and booster"):
        R.build_routing(["n1", "n2"], ["n2"], gws(1))


def test_duplicate_gateways_are_rejected():
    with pytest.raises(R.RoutingError, match="not unique"):
        R.build_routing(["c1"], ["b1"], ["10.0.0.1:1", "10.0.0.1:1"])


LAST = textwrap.dedent("""\
    import numpy as np
    def route(clusters, boosters, gateways, **options):
        return np.full((len(clusters), len(boosters)), len(gateways) - 1)
""")


@pytest.fixture
def plugin_dir(tmp_path):
    d = tmp_path / "routing.d"
    d.mkdir(mode=0o755)
    d.chmod(0o755)
    (d / "last.py").write_text(LAST)
    (d / "last.py").chmod(0o644)
    return d


def test_site_strategy_from_plugin_directory(plugin_dir):
    owner = os.getuid()  # root when the suite runs as root; the check is the same for any owner
    assert "last" in R.available_strategies([str(plugin_dir)], owner=owner)
    table = R.build_routing(nodes("c", 2), nodes("b", 2), gws(2), R.resolve_strategy("last", [plugin_dir], owner))
    assert set(table.g.tolist()) == {1}


@pytest.mark.parametrize("spec", [
    "site_routes:first_gateway", "os:system", "/home/u/x.py", "x.py", "../last", "..", "routing.d/last",
    "last/../last", "", " ", "a b", "last;id", "ünïcode", "x" * 65,
])
def test_strategies_come_by_bare_name_only(plugin_dir, spec):
    with pytest.raises(R.RoutingError, match="gw_plugin: .* is not a routing strategy name"):
        R.resolve_strategy(spec, [str(plugin_dir)], os.getuid())


def test_the_environment_adds_no_plugin_directory(plugin_dir, monkeypatch):
    monkeypatch.setenv("MSA_GW_ROUTE_PLUGIN_PATH", str(plugin_dir))
    monkeypatch.setenv("PYTHONPATH", str(plugin_dir))
    with pytest.raises(R.RoutingError, match="unknown routing strategy 'last'"):
        R.resolve_strategy("last", [], os.getuid())


@pytest.mark.parametrize("breach, message", [
    (lambda d: (d / "last.py").chmod(0o666), r"file .*last.py is writable by its group or others \(mode 0666\)"),
    (lambda d: (d / "last.py").chmod(0o664), r"file .*last.py is writable by its group or others \(mode 0664\)"),
    (lambda d: d.chmod(0o777), r"directory .*routing.d is writable by its group or others \(mode 0777\)"),
    (lambda d: d.chmod(0o1777), r"directory .*routing.d is writable by its group or others \(mode 1777\)"),
])
def test_plugin_files_anyone_but_the_owner_could_write_are_refused(plugin_dir, breach, message):
    breach(plugin_dir)
    with pytest.raises(R.RoutingError, match=message + ": refused"):
        R.resolve_strategy("last", [str(plugin_dir)], os.getuid())


def test_plugin_files_not_owned_by_root_are_refused(plugin_dir):
    # with the owner the check expects being someone else, a file of ours is "not root's"
    with pytest.raises(R.RoutingError, match=r"directory .*routing.d is owned by uid %d, not root: refused"
                       % os.getuid()):
        R.resolve_strategy("last", [str(plugin_dir)], owner=os.getuid() + 1)
    if os.getuid() == 0:
        os.chown(plugin_dir / "last.py", 1000, 1000)
        with pytest.raises(R.RoutingError, match=r"file .*last.py is owned by uid 1000, not root: refused"):
            R.resolve_strategy("last", [str(plugin_dir)])


def test_a_plugin_reached_through_a_symbolic_link_is_refused(plugin_dir, tmp_path):
    (plugin_dir / "last.py").rename(tmp_path / "elsewhere.py")
    (plugin_dir / "last.py").symlink_to(tmp_path / "elsewhere.py")
    with pytest.raises(R.RoutingError, match="is not a plain file"):
        R.resolve_strategy("last", [str(plugin_dir)], os.getuid())


def test_parastation_per_pair_plugin_is_accepted(plugin_dir):
    (plugin_dir / "psgw_plugin.py").write_text(textwrap.dedent("""\
        def routeConnectionS(sizeA, sizeB, numGwd, localA, localB):
            return None, (localA + localB) % numGwd
    """))
    (plugin_dir / "psgw_plugin.py").chmod(0o644)
    func = R.resolve_strategy("psgw_plugin", [str(plugin_dir)], os.getuid())
    table = R.build_routing(nodes("c", 3), nodes("b", 3), gws(2), func)
    m = table.matrix()
    assert [[(i + j) % 2 for j in range(3)] for i in range(3)] == m.tolist()


def test_strategy_returning_indices_outside_the_gateways_is_rejected():
    def broken(clusters, boosters, gateways, **options):
        return np.full((len(clusters), len(boosters)), 7)
    with pytest.raises(R.RoutingError, match="gateway index 7 outside 0-1"):
        R.build_routing(["c1"], ["b1"], gws(2), broken)


def test_strategy_returning_the_wrong_shape_is_rejected():
    def broken(clusters, boosters, gateways, **options):
        return np.zeros((1, 1), dtype=int)
    with pytest.raises(R.RoutingError, match="shape"):
        R.build_routing(["c1", "c2"], ["b1"], gws(2), broken)


def test_registered_strategy_is_usable_by_name():
    R.register_strategy("test-everything-on-last", lambda c, b, g, **o: np.full((len(c), len(b)), len(g) - 1))
    try:
        assert set(R.build_routing(["c1"], ["b1", "b2"], gws(3), "test-everything-on-last").g.tolist()) == {2}
    finally:
        R._STRATEGIES.pop("test-everything-on-last")


def test_find_gateway_answers_from_either_side(tmp_path):
    path = tmp_path / "route"
    path.write_text(SEED_EXAMPLE)
    assert R.find_gateway(str(path), "cluster016", "booster010") == ("192.168.12.78:40889", "cluster")
    assert R.find_gateway(str(path), "booster003", "cluster015") == ("192.168.12.77:40158", "booster")
    assert R.find_gateway(str(path), "cluster015", "booster999") is None


def test_routing_file_is_written_with_the_requested_mode_and_no_leftovers(tmp_path):
    path = tmp_path / "psgw-route-42"
    table = R.build_routing(nodes("c", 4), nodes("b", 4), gws(2))
    R.write_routing_file(str(path), table, mode=0o640)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o640
    assert os.listdir(tmp_path) == ["psgw-route-42"]
    assert R.read_routing_file(str(path)) == table


def test_large_file_round_trips_line_for_line():
    cl, bo = nodes("cluster", 120), nodes("booster", 90)
    table = R.build_routing(cl, bo, gws(7), "balance")
    data = table.to_bytes()
    lines = data.decode().splitlines()
    assert len(lines) == 120 * 90
    expected = "%s %s %s" % (gws(7)[(5 * 120 + 3) % 7], cl[3], bo[5])
    assert lines[5 * 120 + 3] == expected
    random.seed(1)
    shuffled = "\n".join(random.sample(lines, len(lines))) + "\n"
    assert R.parse_routing(shuffled) == table
