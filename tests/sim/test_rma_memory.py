# SPDX-License-Identifier: GPL-3.0-or-later
"""The NAM board's memory (msa_sim.rma.memory) without the network: bounds, scrubbing between allocations of a
range, tombstones for freed allocations, persistence of non-volatile memory across a restart of the board."""
from __future__ import annotations

import array

import pytest

from msa_sim.rma.collective import CollectiveError, Engine, reduce_buffers
from msa_sim.rma.memory import EXTENT_STEP, AccessError, Memory

MIB = 1 << 20


def claims(alloc, address, size, volatile=True, created=1.0):
    return {"alloc": alloc, "address": address, "size": size, "volatile": volatile, "created": created}


@pytest.fixture
def memory(tmp_path):
    mem = Memory(str(tmp_path / "state"), str(tmp_path / "run"), 8 * MIB, 8 * MIB)
    yield mem
    if mem.files:
        mem.close()


def test_the_next_allocation_of_a_range_reads_zeros_whatever_the_last_one_wrote(memory):
    memory.put(claims(1, 4096, MIB), 10, b"\xff" * 1000)
    assert memory.get(claims(1, 4096, MIB), 10, 3) == b"\xff" * 3
    # allocation 2 overlaps the tail of allocation 1's range: the first touch scrubs what 1 wrote
    assert memory.get(claims(2, 0, 8192, created=2.0), 4096, 1100) == bytes(1100)
    with pytest.raises(AccessError) as exc:
        memory.get(claims(1, 4096, MIB), 0, 1)
    assert exc.value.status == 410


def test_the_same_allocation_keeps_its_bytes_and_a_retired_one_is_scrubbed_and_refused(memory):
    nv = claims(7, 8 * MIB, MIB, volatile=False)
    memory.put(nv, 0, b"kept")
    assert memory.get(nv, 0, 4) == b"kept"
    assert memory.retire(dict(nv, retire=True)) == min(EXTENT_STEP, MIB)     # the recorded extent, zeroed
    with pytest.raises(AccessError):
        memory.get(nv, 0, 4)
    assert memory.get(claims(8, 8 * MIB, MIB, volatile=False), 0, 4) == bytes(4)


def test_non_volatile_memory_survives_a_restart_of_the_board_and_volatile_memory_is_separate(tmp_path):
    mem = Memory(str(tmp_path / "state"), str(tmp_path / "run"), MIB, MIB)
    mem.put(claims(1, MIB, 4096, volatile=False), 0, b"durable")
    mem.put(claims(2, 0, 4096), 0, b"fleeting")
    mem.close()
    mem = Memory(str(tmp_path / "state"), str(tmp_path / "run2"), MIB, MIB)     # tmpfs gone: a power cycle
    assert mem.get(claims(1, MIB, 4096, volatile=False), 0, 7) == b"durable"
    assert mem.get(claims(2, 0, 4096), 0, 8) == bytes(8)
    mem.close()


@pytest.mark.parametrize("address,size", [(-1, 10), (8 * MIB - 10, 11), (0, 0)])
def test_a_capability_outside_the_boards_pools_is_refused(memory, address, size):
    with pytest.raises(AccessError) as exc:
        memory.get(claims(3, address, size), 0, 0)
    assert exc.value.status == 403


def test_the_reduction_is_element_wise_in_rank_order():
    bufs = [array.array("d", [1.5, -2.0]).tobytes(), array.array("d", [2.0, 4.0]).tobytes()]
    assert array.array("d", reduce_buffers("prod", "float64", bufs)).tolist() == [3.0, -8.0]
    ints = [array.array("q", [6, 1]).tobytes(), array.array("q", [3, 0]).tobytes()]
    assert array.array("q", reduce_buffers("band", "int64", ints)).tolist() == [2, 0]


@pytest.mark.parametrize("op,datatype,nbytes,code", [
    ("allgather", "float64", 8, "unsupported"), ("sum", "complex128", 16, "unsupported"),
    ("bxor", "float64", 8, "unsupported"), ("sum", "float64", (8 << 20) + 8, "max_operation_size")])
def test_the_engine_refuses_what_the_gce_does_not_run(op, datatype, nbytes, code):
    with pytest.raises(CollectiveError) as exc:
        Engine().check(op, datatype, nbytes)
    assert exc.value.code == code
