# SPDX-License-Identifier: GPL-3.0-or-later
"""The demo's coupled program (playbooks/demo/files/coupled.py) without MPI: its field, histogram and NAM layout,
and the DAM part's checks and the hold against an in-memory NAM allocation."""
import array
import hashlib
import importlib.util
import json
import pathlib
import types

import pytest

PROGRAM = pathlib.Path(__file__).resolve().parents[1] / "playbooks" / "demo" / "files" / "coupled.py"
spec = importlib.util.spec_from_file_location("demo_coupled", PROGRAM)
coupled = importlib.util.module_from_spec(spec)
spec.loader.exec_module(coupled)


class FakeNam:
    """An attached allocation: put/get by offset on a bytearray."""

    def __init__(self, size=1 << 20):
        self.mem = bytearray(size)
        self.id, self.device = 7, "nam01"

    def put(self, offset, data):
        data = bytes(memoryview(data).cast("B"))
        self.mem[offset:offset + len(data)] = data
        return len(data)

    def get(self, offset, length):
        return bytes(self.mem[offset:offset + length])

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _written(nam, blocks=2, cells=1000, corrupt=False):
    """What the coupled step leaves in the NAM for ``blocks`` CM blocks; returns the header."""
    total = blocks * cells
    digests, values = [], []
    for c in range(blocks):
        data = array.array("d", coupled.diffuse(coupled.initial(c * cells, (c + 1) * cells, total), 0.0, 0.0))
        digests.append(hashlib.sha256(data.tobytes()).hexdigest())
        values.extend(data)
        nam.put(coupled.FIELD + c * cells * 8, data)
    header = {"job": "41", "cells_per_block": cells, "blocks": blocks, "offset": coupled.FIELD,
              "block_sha256": digests, "histogram": list(coupled.histogram(values)), "gce_path": "gce"}
    nam.put(0, coupled.encode_header(header))
    if corrupt:
        nam.mem[coupled.FIELD + 8 * cells + 3] ^= 0x40   # one bit of the second block
    return header


@pytest.fixture
def nam(monkeypatch):
    fake = FakeNam()
    monkeypatch.setattr(coupled, "attach", lambda job: fake)
    monkeypatch.setattr(coupled.time, "sleep", lambda s: None)
    return fake


def _result(capsys, prefix="RESULT "):
    line = [x for x in capsys.readouterr().out.splitlines() if x.startswith(prefix)][0]
    return json.loads(line[len(prefix):])


def test_split_covers_every_cell_once_in_near_equal_ranges():
    assert coupled.split(10, 3) == [(0, 4), (4, 7), (7, 10)]
    assert coupled.split(2, 2) == [(0, 1), (1, 2)]


def test_diffusion_on_a_periodic_ring_keeps_the_field_sum():
    cells = coupled.initial(0, 64, 64)
    after = coupled.diffuse(cells, cells[-1], cells[0])
    assert sum(after) == pytest.approx(sum(cells), abs=1e-9)
    assert after != cells


def test_histogram_counts_every_value_and_puts_outliers_in_the_edge_bins():
    counts = coupled.histogram([-5.0, -2.0, 0.0, 1.99, 7.0])
    assert sum(counts) == 5 and counts[0] == 2 and counts[-1] == 2 and counts[coupled.BINS // 2] == 1


def test_header_round_trips_and_refuses_what_does_not_fit():
    raw = coupled.encode_header({"a": [1, 2]})
    assert len(raw) == coupled.HEADER and coupled.decode_header(raw) == {"a": [1, 2]}
    assert coupled.decode_header(b"\0" * 16) is None
    with pytest.raises(ValueError, match="exceeds"):
        coupled.encode_header({"x": "y" * coupled.HEADER})


@pytest.mark.parametrize("bad", ["", "12a", "1;rm", "0123456789012"])
def test_job_ids_other_than_digits_are_refused(bad):
    with pytest.raises(SystemExit, match="not a Slurm job id"):
        coupled.job_id(bad)


def test_module_of_a_node_is_its_name_without_number_and_system_prefix():
    assert coupled.module_of("dev2-esb01.example") == "esb" and coupled.module_of("cm02") == "cm"


def test_dam_part_checks_the_field_and_acknowledges_its_read(nam, capsys):
    _written(nam)
    assert coupled.dam(types.SimpleNamespace(job="41", timeout=5)) == 0
    out = _result(capsys)
    assert out["ok"] and out["checksum_ok"] and out["histogram_ok"] and out["read"] == 2 * 1000 * 8
    assert coupled.read_ack(nam)["ok"] is True


def test_dam_part_finds_a_flipped_bit_and_says_so_in_its_acknowledgement(nam, capsys):
    _written(nam, corrupt=True)
    assert coupled.dam(types.SimpleNamespace(job="41", timeout=5)) == 1
    out = _result(capsys)
    assert out["checksum_ok"] is False and out["ok"] is False
    assert coupled.read_ack(nam)["ok"] is False


def test_dam_part_without_a_header_fails_after_its_timeout(nam, capsys, monkeypatch):
    clock = iter(range(0, 1000, 10))
    monkeypatch.setattr(coupled.time, "monotonic", lambda: next(clock))
    assert coupled.dam(types.SimpleNamespace(job="41", timeout=30)) == 1
    assert "no header" in _result(capsys)["error"]


def test_hold_ends_with_the_acknowledgement_and_fails_without_it(nam, capsys, monkeypatch):
    clock = iter(range(0, 1000, 10))
    monkeypatch.setattr(coupled.time, "monotonic", lambda: next(clock))
    assert coupled.hold(types.SimpleNamespace(job="41", timeout=30)) == 1
    nam.put(coupled.HEADER, coupled.encode_header({"by": "dam01", "ok": True})[:coupled.ACK])
    assert coupled.hold(types.SimpleNamespace(job="41", timeout=30)) == 0
    assert _result(capsys, "HOLD ")["ack"]["by"] == "dam01"
