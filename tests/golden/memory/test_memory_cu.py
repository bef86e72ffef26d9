"""The memory hierarchy model (golden/memory) and the CU model (golden/cu): caches, pending
fills, MSHR limits, bandwidth; the CU model's use of the golden wait counters, return queues and
dynamic VGPR allocator."""

import numpy as np
import pytest

from gpurtl.golden.cu import CuParams, WaveTrace, simulate
from gpurtl.golden.memory import Hierarchy, Level
from gpurtl.golden.waitcnt import WaitCountersModel


def _levels(l0=1024, mshrs=4, bw=1.0):
    return [
        Level("L0", l0, 2, 10, bw, mshrs),
        Level("L2", 64 * 1024, 4, 50, 0.5, 16),
        Level("DRAM", 0, 1, 200, 0.25, 0),
    ]


def test_hit_miss_pending_and_eviction():
    h = Hierarchy(_levels())
    assert h.access(1, 0) == 0 + 10 + 50 + 200  # cold: through to DRAM
    # a hit on the pending line waits for the fill, not a fresh miss
    assert h.access(1, 5) == 260  # the data of the first request, at the same time
    assert h.access(1, 400) == 410  # present
    s = h.stats()["L0"]
    assert (s["hits"], s["pending_hits"], s["misses"]) == (1, 1, 1)
    # 1 KB, 2-way, 128 B lines: 4 sets; lines 1, 5, 9 share set 1 -> LRU evicts line 1
    h.access(5, 500)
    h.access(9, 600)
    assert h.access(1, 2000) > 2000 + 10  # evicted: misses L0, hits L2
    assert h.access(1, 3000) == 3010


def test_mshr_limit_and_bandwidth():
    few = Hierarchy(_levels(mshrs=2))
    many = Hierarchy(_levels(mshrs=16))
    a = [few.access(k, 0) for k in range(8)]
    b = [many.access(k, 0) for k in range(8)]
    assert max(a) > max(b)  # misses wait for a free MSHR
    assert few.stats()["L0"]["mshr_wait"] > 0
    slow = Hierarchy(_levels(bw=0.25))
    # the port takes one line every 4 cycles: hits queue behind each other
    for k in range(4):
        slow.access(k, 0)
    assert [slow.access(k, 1000) for k in range(4)] == [1010, 1014, 1018, 1022]
    with pytest.raises(ValueError, match="DRAM"):
        Hierarchy(_levels()[:2])


def _waves(n, iters=6, lanes=32, seed=0, mixed=False):
    """Random waves; ``mixed``: even waves touch 8 lines (L0 hits), odd ones 4000 (misses)."""
    rng = np.random.default_rng(seed)
    out = []
    for w in range(n):
        span = 8 if mixed and w % 2 == 0 else 4000
        its = []
        for k in range(iters):
            active = rng.integers(4, lanes + 1)
            its.append(
                [
                    (lane, int(rng.integers(0, span)), int(k == iters - 1), 8, 2 * (k == iters - 1))
                    for lane in range(active)
                ]
            )
        out.append(WaveTrace(its, [int(x) for x in rng.integers(1 << 20, (1 << 20) + 500, 16)]))
    return out


def _params(**kw):
    return CuParams(levels=_levels(l0=16 * 1024, mshrs=32), **kw)


def test_cu_runs_every_wave_and_records_instructions():
    waves = _waves(12)
    run = simulate(waves, _params(slots_per_simd=4))
    assert run.waves_done == 12
    kinds = {k for _, k, _, _ in run.instructions}
    assert kinds == {"bvh", "ds", "load"}
    assert all(done >= issue for _, _, issue, done in run.instructions)
    # the same inputs give the same cycles (deterministic)
    again = simulate(waves, _params(slots_per_simd=4))
    assert again.instructions == run.instructions and again.cycles == run.cycles
    # more resident waves hide more latency
    wide = simulate(waves, _params(slots_per_simd=8))
    assert wide.cycles < run.cycles


class _NeverCounts(WaitCountersModel):
    """A deliberately wrong counter model: it accepts every issue but never counts it (nor the
    returns), so no wait ever stalls."""

    def step(self, inputs, **kw):
        idle = {n: {"valid": 0, "wave": 0} for n in self.prof.counters}
        issue = inputs["issue"]
        out = super().step(dict(inputs, issue=dict(issue, valid=0), ret=idle), **kw)
        return dict(out, issue_accepted=int(bool(issue["valid"])))


def test_timing_depends_on_the_counter_model():
    waves = _waves(8)
    p = _params(slots_per_simd=2)
    right = simulate(waves, p)
    never = simulate(waves, p, counter_model=lambda gen, n: _NeverCounts(gen, waves=n))
    assert never.cycles != right.cycles
    assert never.cycles < right.cycles  # waves no longer wait for their results


def test_in_order_returns_and_static_registers_cost_cycles():
    waves = _waves(16, seed=3, mixed=True)
    ooo = simulate(waves, _params(slots_per_simd=8))
    in_order = simulate(waves, _params(slots_per_simd=8, generation="gfx11"))
    # the waves that hit wait behind the ones that miss: they finish later on the whole
    assert sum(in_order.end_times) > sum(ooo.end_times)
    # shading needs more VGPRs than the pool holds for every wave at once: waves wait for
    # blocks (s_alloc_vgpr retried), which static allocation avoids by holding fewer waves
    tight = simulate(waves, _params(slots_per_simd=16, shade_vgprs=128, rf_vgprs=1024))
    assert tight.alloc_waits > 0
    static = _params(vgpr_mode="static", shade_vgprs=128, rf_vgprs=1024)
    assert static.resident == 8
    assert simulate(waves, static).alloc_waits == 0


class _Counting(WaitCountersModel):
    """The golden counter model, counting the cycles it is stepped."""

    steps = 0

    def step(self, inputs, **kw):
        type(self).steps += 1
        return super().step(inputs, **kw)


@pytest.mark.parametrize(
    "kw",
    [
        {"slots_per_simd": 4},
        {"slots_per_simd": 8, "generation": "gfx11"},  # in-order returns
        {"slots_per_simd": 16, "shade_vgprs": 128, "rf_vgprs": 1024},  # s_alloc_vgpr retries
        {"slots_per_simd": 8, "queue_depth": 2},  # full return queues hold issues back
    ],
)
def test_event_stepping_equals_stepping_every_cycle(kw):
    waves = _waves(10, seed=5, mixed=True)
    p = _params(**kw)
    runs = {}
    for every in (False, True):
        _Counting.steps = 0
        runs[every] = simulate(
            waves, p, every_cycle=every, counter_model=lambda g, n: _Counting(g, waves=n)
        )
        runs[every].steps = _Counting.steps
    fast, ref = runs[False], runs[True]
    # the clocked reference steps the counter model on every cycle, the event-stepped run on a
    # fraction of them; every instruction issues and completes on the same cycle
    assert ref.steps == ref.cycles + 1
    assert fast.steps < ref.steps / 2
    assert len(ref.instructions) == 10 * (2 * 6 + 1)  # bvh and ds per iteration, one load
    assert fast.instructions == ref.instructions
    assert fast.ra == ref.ra
    assert (fast.cycles, fast.end_times, fast.alloc_waits) == (
        ref.cycles,
        ref.end_times,
        ref.alloc_waits,
    )


def test_return_queue_idle_clocks():
    from gpurtl.golden.waitcnt import ReturnQueueModel

    q, r = ReturnQueueModel(8, "ooo"), ReturnQueueModel(8, "ooo")
    for m in (q, r):
        m.step(1, latency=5)
        m.step(2, latency=9)
    assert q.ready_in() == 3  # the first request (age 2 of 5) can leave 3 clocks from now
    q.idle(3)
    for _ in range(3):
        assert r.step() == {"valid": 0, "wave": 0}
    assert q.entries == r.entries
    assert q.step() == r.step() == {"valid": 1, "wave": 1}
    with pytest.raises(ValueError, match="can leave within"):
        q.idle(q.ready_in() + 1)
