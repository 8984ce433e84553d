"""The pieces of `kir.interp.sync` on their own: mbarrier phases (PTX semantics), vector clocks,
and the shadow state of a shared buffer."""

from __future__ import annotations

import numpy as np
import pytest

from kir.dtypes import DTYPES
from kir.interp import sync as S
from kir.interp.errors import InterpError


def vc(*values: int) -> np.ndarray:
    return np.array(values, dtype=np.int64)


def test_a_fresh_barrier_passes_a_wait_for_parity_one_only():
    b = S.MBarriers("full", 1, count=1)
    assert b.ready(0, 1) and not b.ready(0, 0)


def test_phase_completes_when_arrivals_and_bytes_are_both_done():
    b = S.MBarriers("full", 1, count=2)
    b.expect(0, 128, vc(1))  # one arrival, 128 bytes expected
    assert b.pending[0] == 1 and b.tx[0] == 128 and b.phase[0] == 0
    b.complete_tx(0, 128, vc(0, 1))
    assert b.phase[0] == 0  # one arrival still missing
    b.arrive(0, 1, vc(0, 0, 5))
    assert b.phase[0] == 1 and b.pending[0] == 2 and b.tx[0] == 0
    assert b.ready(0, 0) and not b.ready(0, 1)
    assert b.clock[0].tolist() == [1, 1, 5]  # joins every arrival and the copy


def test_bytes_may_land_before_they_are_expected():
    b = S.MBarriers("full", 1, count=1)
    b.complete_tx(0, 64, vc(0, 1))
    assert b.tx[0] == -64 and b.phase[0] == 0
    b.expect(0, 64, vc(2))
    assert b.phase[0] == 1


def test_over_arrival_carries_into_the_next_phase():
    b = S.MBarriers("b", 1, count=2)
    b.arrive(0, 3, vc(1))
    assert b.phase[0] == 1 and b.pending[0] == 1
    b.arrive(0, 1, vc(0, 1))
    assert b.phase[0] == 2


def test_stuck_hints_name_the_cause():
    b = S.MBarriers("empty", 2, count=2)
    b.arrive(1, 1, vc(1))
    assert "1 of 2 arrivals" in b.stuck_hint(1, 0)
    b.expect(0, 10, vc(1))
    b.arrive(0, 1, vc(1))
    assert "10 expected bytes" in b.stuck_hint(0, 0)
    fresh = S.MBarriers("f", 1, count=1)
    assert "parity" in fresh.stuck_hint(0, 0)


def test_vector_clock_join_and_known():
    assert S.join(vc(1, 5), vc(3, 2, 7)).tolist() == [3, 5, 7]
    assert S.known(vc(4, 2), np.array([0, 1, 5])).tolist() == [4, 2, 0]


def _buffer(n: int = 4) -> S.SmemBuffer:
    d = DTYPES["f32"]
    return S.SmemBuffer("t", d, np.full(n, np.nan, dtype=np.float32))


def _ctx():
    return {}


def _no_uninit(diag):
    raise AssertionError(diag.message)


def test_unordered_write_after_a_write_is_a_race_and_an_ordered_one_is_not():
    clocks = S.Clocks()
    a = clocks.new_agent("role", "role `a`")
    b = clocks.new_agent("role", "role `b`")
    buf = _buffer()
    everything = np.arange(4)
    S.write_check(clocks, buf, everything, a, None, _ctx, a.id)
    with pytest.raises(InterpError) as err:
        S.write_check(clocks, buf, everything, b, None, _ctx, b.id)
    assert err.value.diagnostic.rule == "interp.race"
    clocks.acquire(b, a.vc)  # b now happens after a's write
    S.write_check(clocks, buf, everything, b, None, _ctx, b.id)


def test_reads_are_cleared_by_an_ordered_write():
    clocks = S.Clocks()
    a = clocks.new_agent("role", "role `a`")
    r = clocks.new_agent("wgmma", "role `a`", parent=a)
    buf = _buffer()
    S.write_check(clocks, buf, np.arange(4), a, None, _ctx, -1)
    clocks.acquire(r, a.vc)
    S.read_check(clocks, buf, np.arange(2), r, None, _ctx, _no_uninit)
    assert r.id in buf.readers
    clocks.retire(a, [r])
    S.write_check(clocks, buf, np.arange(4), a, None, _ctx, -1)
    assert buf.readers == {}  # the only reader's reads are all superseded


def test_fence_clears_only_the_fencing_agents_writes():
    clocks = S.Clocks()
    a = clocks.new_agent("role", "role `a`")
    buf = _buffer()
    S.write_check(clocks, buf, np.arange(4), a, None, _ctx, a.id)
    S.fence_async([buf], clocks.new_agent("role", "role `other`"))
    assert (buf.fence_owner == a.id).all()
    S.fence_async([buf], a)
    assert (buf.fence_owner == -1).all()
