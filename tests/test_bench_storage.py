# SPDX-License-Identifier: GPL-3.0-or-later
"""tests/bench/bench_storage.py's parts that need no system: its arguments, the ratios and lines it prints, the
gateways' byte counts; and its probe (tests/bench/_storage_probe.py) measuring two real directories here."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from helpers import BUNDLE

sys.path.insert(0, str(BUNDLE / "tests/bench"))
import bench_storage as B  # noqa: E402


def test_defaults_and_the_module_list():
    args = B.parse_args([], environ={})
    assert (args.system, args.mount, args.local, args.modules, args.size_mib, args.files) == (
        None, "/scratch", "/var/tmp", ["cm", "esb", "dam"], 64, 300)
    args = B.parse_args(["--modules", "cm,dam", "--mount", "/home"], environ={"MSA_BENCH_SYSTEM": "mini"})
    assert (args.system, args.modules, args.mount) == ("mini", ["cm", "dam"], "/home")


@pytest.mark.parametrize("argv", [["--mount", "scratch"], ["--mount", "/scratch/../etc"], ["--local", "/"],
                                  ["--size-mib", "0"], ["--files", "100001"], ["--modules", "cm;reboot"],
                                  ["--modules", ","]])
def test_arguments_that_would_measure_something_else_are_refused(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        B.parse_args(argv, environ={})
    assert exc.value.code == 2 and argv[0] in capsys.readouterr().err


SHARED = {"write_mib_s": 100.0, "read_mib_s": 250.0, "read_direct": True, "create_per_s": 150.0,
          "stat_per_s": 2000.0, "unlink_per_s": 600.0}
LOCAL = {"write_mib_s": 500.0, "read_mib_s": 1000.0, "read_direct": True, "create_per_s": 30000.0,
         "stat_per_s": 0.0, "unlink_per_s": 75000.0}


def test_ratios_are_shared_over_local_and_a_zero_local_figure_gives_none():
    assert B.ratios(SHARED, LOCAL) == {"write": 0.2, "read": 0.25, "create": 0.005, "stat": None, "unlink": 0.008}
    assert B.ratio_line("cm", "cm01", SHARED, LOCAL) == (
        "ratio shared/local cm   cm01    write 0.200  read 0.250  create 0.005  stat n/a  unlink 0.008")


def test_the_figures_say_when_a_read_went_through_the_page_cache():
    assert B.figures_line(SHARED) == ("write 100.0 MiB/s, read 250.0 MiB/s, create 150.0 /s, stat 2000.0 /s, "
                                      "unlink 600.0 /s")
    assert B.figures_line(dict(SHARED, read_direct=False)).endswith("(read through the page cache)")


def test_traffic_and_gateway_bytes_show_the_path():
    net = {"ib0": {"tx": 134217728, "rx": 1048576}, "mgmt0": {"tx": 2097152, "rx": 0}, "storage0": None}
    assert B.traffic_line("cm01", net) == ("  cm01 during the shared run: ib0 tx 128.0 MiB rx 1.0 MiB; "
                                           "mgmt0 tx 2.0 MiB rx 0.0 MiB")
    before = {"ipgw01": {"ib0": 10, "storage0": 1000}, "ipgw02": {"ib0": 5, "storage0": 7}}
    after = {"ipgw01": {"ib0": 20, "storage0": 5000}, "ipgw02": {"ib0": 5, "storage0": 7}}
    assert B.gateway_bytes(before, after) == {"ipgw01": 4010, "ipgw02": 0}


def test_without_a_system_it_measures_nothing_and_says_how_to_skip(monkeypatch, capsys):
    monkeypatch.delenv("MSA_BENCH_SKIP", raising=False)
    monkeypatch.delenv("MSA_BENCH_SYSTEM", raising=False)
    with pytest.raises(SystemExit) as exc:
        B.main([])
    assert exc.value.code == 3 and "bench_storage: CANNOT RUN: no system" in capsys.readouterr().err


def test_the_probe_measures_two_directories_and_leaves_nothing(tmp_path):
    shared, local = tmp_path / "shared", tmp_path / "local"
    shared.mkdir()
    local.mkdir()
    out = subprocess.run([sys.executable, "-I", str(BUNDLE / "tests/bench/_storage_probe.py"),
                          "--dir", "shared=%s" % shared, "--dir", "local=%s" % local, "--size-mib", "2",
                          "--files", "20", "--net", "lo,nonexistent0"], capture_output=True, text=True, check=True)
    results = json.loads(out.stdout.split("RESULT ", 1)[1])
    assert [r["label"] for r in results] == ["shared", "local"]
    for r in results:
        assert all(r[key] > 0 for name, key, unit in B.FIGURES)
        assert r["net"]["nonexistent0"] is None and set(r["net"]["lo"]) == {"tx", "rx"}
    assert list(shared.iterdir()) == [] and list(local.iterdir()) == []


def test_the_probe_refuses_a_directory_that_is_not_one(tmp_path):
    out = subprocess.run([sys.executable, "-I", str(BUNDLE / "tests/bench/_storage_probe.py"),
                          "--dir", "x=%s" % (tmp_path / "absent")], capture_output=True, text=True, check=False)
    assert out.returncode == 2 and "not LABEL=DIRECTORY" in out.stderr
