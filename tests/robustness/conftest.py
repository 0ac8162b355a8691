# SPDX-License-Identifier: GPL-3.0-or-later
"""The robustness test's report: per service, the requests tried, the peak memory and what slow requests met."""
from __future__ import annotations

import pytest

REPORT = {}


@pytest.fixture(scope="session")
def robustness_report():
    return REPORT


def pytest_terminal_summary(terminalreporter):
    if not REPORT:
        return
    terminalreporter.section("HTTP robustness (issue 34): per service")
    for name in sorted(REPORT):
        row = REPORT[name]
        if "requests" in row:
            terminalreporter.write_line(
                "%-12s requests tried %3d (+3 slow), flood taken %s bytes, idle refused %s, VmHWM %d -> %d KiB "
                "(+%d), slowest good answer %.3f s, slow requests %s"
                % (name, row["requests"], row["flood_bytes_taken"], row["idle_refused"], row["base_hwm_kib"],
                   row["peak_hwm_kib"], row["peak_hwm_kib"] - row["base_hwm_kib"], row["latency_s"],
                   row.get("slow", "-")))
        else:
            terminalreporter.write_line("%-12s slow requests %s" % (name, row.get("slow")))
