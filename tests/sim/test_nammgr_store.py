# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

"""NAM allocator and GCE bookkeeping of the manager's SQLite store, without the network (unit + hypothesis)."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from msa_sim.nammgr.store import Store, StoreError

UNIT = 4096


def make_store(devices=None, gce=(("gce01", 130),), path=":memory:"):
    store = Store(path, synchronous="off" if path == ":memory:" else "normal", granularity=UNIT)
    devices = devices or [{"name": "nam01", "node_id": 129, "capacity": 64 * UNIT, "nonvolatile_capacity": 32 * UNIT,
                           "aat_size": 4, "reserve_percent": 25}]
    store.sync_devices(devices, [{"name": n, "node_id": i} for n, i in gce])
    return store


def pieces(store, device="nam01", kind="volatile"):
    free = [("free", s["offset"], s["size"]) for s in store.free_segments(device) if s["kind"] == kind]
    used = [("used", a["offset"], a["size"]) for a in store.allocations(device=device)
            if a["volatile"] == (kind == "volatile")]
    return sorted(free + used, key=lambda p: p[1])


def test_allocation_splits_the_best_fitting_free_segment():
    store = make_store()
    a = store.allocate(4 * UNIT, owner="alice")
    b = store.allocate(2 * UNIT, owner="alice")
    store.allocate(8 * UNIT, owner="alice")
    store.free(a["id"])                      # hole of 4 units at 0, hole of 50 units at the end
    store.free(b["id"])                      # merges into a hole of 6 units at 0
    c = store.allocate(5 * UNIT, owner="bob")
    assert (c["offset"], c["size"]) == (0, 5 * UNIT)
    assert pieces(store)[:3] == [("used", 0, 5 * UNIT), ("free", 5 * UNIT, UNIT), ("used", 6 * UNIT, 8 * UNIT)]
    assert store.check() == []


def test_free_merges_both_neighbours_into_one_segment():
    store = make_store()
    allocs = [store.allocate(UNIT, owner="alice") for _ in range(3)]
    store.free(allocs[0]["id"])
    store.free(allocs[2]["id"])
    assert len([p for p in pieces(store) if p[0] == "free"]) == 2
    store.free(allocs[1]["id"])
    assert pieces(store) == [("free", 0, 64 * UNIT)]


def test_sizes_are_rounded_up_to_the_granularity_and_the_request_is_kept():
    store = make_store()
    a = store.allocate(UNIT + 1, owner="alice")
    assert (a["size"], a["requested"]) == (2 * UNIT, UNIT + 1)


def test_too_large_a_request_names_the_largest_free_segment():
    store = make_store()
    store.allocate(10 * UNIT, owner="alice", reserved=True)
    with pytest.raises(StoreError) as exc:
        store.allocate(60 * UNIT, owner="alice", reserved=True)
    assert exc.value.status == 409 and exc.value.code == "no_space"
    assert exc.value.details["largest_free"] == 54 * UNIT
    assert "largest free segment is 216KiB" in exc.value.message


def test_users_cannot_dip_into_the_administrator_reserve():
    store = make_store()                                  # 64 units, 16 reserved
    store.allocate(48 * UNIT, owner="alice")
    with pytest.raises(StoreError) as exc:
        store.allocate(UNIT, owner="bob")
    assert exc.value.code == "no_space" and "administrator reserve" in exc.value.message
    admin = store.allocate(16 * UNIT, owner="root", reserved=True)
    assert admin["reserved"] and store.check() == []


def test_nonvolatile_memory_comes_from_its_own_pool_above_the_volatile_one():
    store = make_store()
    a = store.allocate(UNIT, owner="alice", volatile=False)
    assert a["volatile"] is False and a["offset"] == 0 and a["address"] == 64 * UNIT


def test_the_aat_is_bounded_and_attach_is_idempotent():
    store = make_store()
    a = store.allocate(UNIT, owner="alice")
    entries = [store.attach(a["id"], "esb01", vpid)[0]["aat_index"] for vpid in range(4)]
    assert entries == [0, 1, 2, 3]
    assert store.attach(a["id"], "esb01", 2)[1] is False
    with pytest.raises(StoreError) as exc:
        store.attach(a["id"], "esb01", 9)
    assert exc.value.code == "aat_full" and "4 of 4" in exc.value.message
    assert store.detach(a["id"], "esb01", 1) is True
    assert store.attach(a["id"], "esb02", 0)[0]["aat_index"] == 1     # the freed entry is reused


def test_freeing_an_allocation_releases_its_aat_entries():
    store = make_store()
    a = store.allocate(UNIT, owner="alice")
    store.attach(a["id"], "esb01", 0)
    freed = store.free(a["id"])
    assert len(freed["attachments"]) == 1
    b = store.allocate(UNIT, owner="alice")
    assert store.attach(b["id"], "esb01", 0)[0]["aat_index"] == 0


def test_only_the_owner_may_free_and_unknown_ids_are_reported():
    store = make_store()
    a = store.allocate(UNIT, owner="alice")
    with pytest.raises(StoreError) as exc:
        store.free(a["id"], user="bob")
    assert exc.value.status == 403
    with pytest.raises(StoreError) as exc:
        store.free(999)
    assert exc.value.status == 404
    assert store.free(a["id"], user="alice")["id"] == a["id"]


def test_orphans_are_the_allocations_of_jobs_no_longer_alive():
    store = make_store()
    keep = store.allocate(UNIT, owner="alice", job="10")
    gone = store.allocate(UNIT, owner="bob", job="11")
    manual = store.allocate(UNIT, owner="root")
    assert [a["id"] for a in store.free_where(live_jobs=["10"], dry_run=True)] == [gone["id"]]
    assert store.get(gone["id"]) is not None
    assert [a["id"] for a in store.free_where(live_jobs=["10"])] == [gone["id"]]
    assert {a["id"] for a in store.allocations()} == {keep["id"], manual["id"]}
    assert store.free_where(job="11") == []


def test_names_are_unique_among_live_allocations():
    store = make_store()
    a = store.allocate(UNIT, owner="alice", name="scratch")
    with pytest.raises(StoreError) as exc:
        store.allocate(UNIT, owner="alice", name="scratch")
    assert exc.value.code == "name_taken" and exc.value.details["id"] == a["id"]
    store.free(a["id"])
    store.allocate(UNIT, owner="alice", name="scratch")


def test_a_pool_grows_with_its_configuration_but_never_shrinks_below_an_allocation():
    store = make_store()
    store.allocate(60 * UNIT, owner="root", reserved=True)
    grown = [{"name": "nam01", "capacity": 128 * UNIT, "aat_size": 4, "reserve_percent": 25}]
    store.sync_devices(grown)
    assert pieces(store)[-1] == ("free", 60 * UNIT, 68 * UNIT) and store.check() == []
    with pytest.raises(StoreError) as exc:
        store.sync_devices([dict(grown[0], capacity=32 * UNIT)])
    assert "cannot shrink" in exc.value.message
    with pytest.raises(StoreError):
        store.sync_devices([])
    assert store.check() == []


def test_communicator_ids_and_operations_respect_table_1():
    store = make_store()
    members = [("esb%02d" % i, 0) for i in range(4)]
    comm, fb = store.create_communicator(members, members[0], "alice", name="world")
    assert fb is None and comm["comm_id"] == 0 and comm["operations_left"] == 8
    icids = [store.start_operation(comm["id"], "sum", "float64", 1024)[0]["icid"] for _ in range(8)]
    assert icids == list(range(8))
    op, fb = store.start_operation(comm["id"], "sum", "float64", 1024)
    assert op is None and fb.limit == "max_operations_per_communicator"
    op, fb = store.start_operation(comm["id"], "sum", "float64", 8 * 2**20 + 8)
    assert fb.limit == "max_operation_size"
    assert store.finish_operation(comm["id"], 3) is True
    assert store.start_operation(comm["id"], "max", "int32", 8 * 2**20)[0]["icid"] == 3


def test_the_257th_communicator_falls_back_to_software():
    store = make_store()
    for i in range(256):
        comm, fb = store.create_communicator([("n", i)], ("n", i), "alice")
        assert fb is None and comm["comm_id"] == i
    comm, fb = store.create_communicator([("n", 999)], ("n", 999), "alice")
    assert comm is None and fb.limit == "max_communicators" and "256" in fb.reason
    store.release_communicator(17)          # database id 17 holds Comm ID 16
    comm, fb = store.create_communicator([("n", 999)], ("n", 999), "alice")
    assert comm["comm_id"] == 16


def test_without_a_gce_every_communicator_falls_back():
    store = make_store(gce=())
    comm, fb = store.create_communicator([("n", 0)], ("n", 0), "alice")
    assert comm is None and fb.as_dict()["fallback"] == "software"


# ---------------------------------------------------------------------- properties

DEVICES = [{"name": "nam01", "capacity": 48 * UNIT, "nonvolatile_capacity": 16 * UNIT, "aat_size": 2,
            "reserve_percent": 25},
           {"name": "nam02", "capacity": 32 * UNIT, "aat_size": 2, "reserve_percent": 10}]

op_strategy = st.one_of(
    st.tuples(st.just("alloc"), st.integers(1, 20 * UNIT), st.booleans(), st.booleans(), st.booleans()),
    st.tuples(st.just("free"), st.integers(0, 1000)),
    st.tuples(st.just("attach"), st.integers(0, 1000), st.integers(0, 3)),
)


def expected_fit(store, need, kind, reserved):
    """Reference best fit: the smallest free segment, then device and offset, whose pool has room."""
    pools = {(d["name"], k): p for d in store.nam_devices() for k, p in d["pools"].items()}
    user_allocated = {}
    for a in store.allocations():
        if not a["reserved"]:
            key = (a["device"], "volatile" if a["volatile"] else "nonvolatile")
            user_allocated[key] = user_allocated.get(key, 0) + a["size"]
    fits = [s for s in store.free_segments() if s["kind"] == kind and s["size"] >= need and
            (reserved or user_allocated.get((s["device"], kind), 0) + need <=
             pools[(s["device"], kind)]["capacity"] - pools[(s["device"], kind)]["admin_reserve"])]
    fits.sort(key=lambda s: (s["size"], s["device"], s["offset"]))
    return (fits[0]["device"], fits[0]["offset"]) if fits else None


def assert_invariants(store):
    assert store.check() == []
    for dev in store.nam_devices():
        for kind, pool in dev["pools"].items():
            parts = pieces(store, dev["name"], kind)
            pos = 0
            for state, off, size in parts:
                assert off == pos, "gap or overlap in %s/%s" % (dev["name"], kind)
                pos = off + size
            assert pos == pool["capacity"]
            assert pool["free"] + pool["allocated"] == pool["capacity"]
            assert all(not (a[0] == b[0] == "free") for a, b in zip(parts, parts[1:]))
            user = sum(a["size"] for a in store.allocations(device=dev["name"])
                       if not a["reserved"] and a["volatile"] == (kind == "volatile"))
            assert user <= pool["capacity"] - pool["admin_reserve"]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(op_strategy, min_size=1, max_size=40))
def test_any_sequence_of_operations_keeps_the_pools_tiled_merged_and_within_the_reserve(ops):
    store = make_store(DEVICES)
    for op in ops:
        live = [a["id"] for a in store.allocations()]
        if op[0] == "alloc":
            _, size, volatile, reserved, _ = op
            kind = "volatile" if volatile else "nonvolatile"
            need = store.round_up(size)
            want = expected_fit(store, need, kind, reserved)
            try:
                a = store.allocate(size, volatile=volatile, owner="u", reserved=reserved)
                assert (a["device"], a["offset"]) == want and a["size"] == need
            except StoreError as exc:
                assert exc.code == "no_space" and want is None
        elif op[0] == "free" and live:
            store.free(live[op[1] % len(live)])
        elif op[0] == "attach" and live:
            try:
                store.attach(live[op[1] % len(live)], "node", op[2])
            except StoreError as exc:
                assert exc.code == "aat_full"
        assert_invariants(store)
    for alloc_id in [a["id"] for a in store.allocations()]:
        store.free(alloc_id)
    assert [(s["device"], s["kind"], s["offset"]) for s in store.free_segments()] == [
        ("nam01", "nonvolatile", 0), ("nam01", "volatile", 0), ("nam02", "volatile", 0)]
