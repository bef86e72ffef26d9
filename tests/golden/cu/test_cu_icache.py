"""The CU model's instruction cache option (``CuParams(icache=...)``): off changes nothing, on it
counts each code line's first fetch as a miss when the code fits, misses again every wave when
the shading code outgrows the cache, and the kernel-entry prefetch takes the cold misses."""

import numpy as np
import pytest

from gpurtl.golden.cu import CuParams, WaveTrace, simulate
from gpurtl.golden.memory import Level


def _levels(l0=16 * 1024):
    return [
        Level("L0", l0, 2, 10, 1.0, 32),
        Level("L2", 64 * 1024, 4, 50, 0.5, 16),
        Level("DRAM", 0, 1, 200, 0.25, 0),
    ]


def _waves(n, iters=4, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        its = [
            [
                (lane, int(rng.integers(0, 4000)), 0, 8, 0)
                for lane in range(int(rng.integers(4, 33)))
            ]
            for _ in range(iters)
        ]
        out.append(WaveTrace(its, [int(x) for x in rng.integers(1 << 20, (1 << 20) + 500, 16)]))
    return out


def _params(**kw):
    return CuParams(levels=_levels(), slots_per_simd=4, **kw)


def test_off_is_the_model_without_the_option():
    waves = _waves(8)
    plain = simulate(waves, _params())
    off = simulate(waves, _params(icache=None))
    assert off.instructions == plain.instructions and off.cycles == plain.cycles
    assert off.icache is None and "icache" not in _params().as_dict()


def test_code_that_fits_misses_once_per_line_and_costs_cycles():
    waves = _waves(8)
    plain = simulate(waves, _params())
    on = simulate(waves, _params(icache={"size": 32 * 1024}))
    lines = 4 + 8 + 32  # the default layout
    assert on.icache["misses"] == lines
    assert on.cycles > plain.cycles and on.icache["wait_cycles"] > 0


def test_shading_code_larger_than_the_cache_misses_in_every_wave():
    """24 waves on 8 slots, so that they run at different times (waves in lockstep share each
    line's fill and hide the misses)."""
    waves = _waves(24)
    small = {"size": 1024, "ways": 2, "shade_lines": 32}
    run = simulate(waves, _params(icache=small))
    assert run.icache["misses"] >= 24 * 32  # every wave fetches its 32 shading lines again
    big = simulate(waves, _params(icache={"shade_lines": 32}))
    assert big.icache["misses"] == 4 + 8 + 32
    assert run.icache["wait_cycles"] > 2 * big.icache["wait_cycles"]
    assert run.cycles > big.cycles


def test_entry_prefetch_takes_the_cold_misses():
    waves = _waves(8)
    cold = simulate(waves, _params(icache={"entry_lines": 0}))
    warm = simulate(waves, _params(icache={"entry_lines": 256}))
    assert warm.icache["misses"] < cold.icache["misses"]
    assert warm.icache["prefetches"] == 4 + 8 + 32


def test_bad_icache_fields_are_refused():
    with pytest.raises(TypeError, match="unknown icache field `lines`"):
        simulate(_waves(1), _params(icache={"lines": 3}))
    with pytest.raises(ValueError, match="multiple of 128 x ways"):
        simulate(_waves(1), _params(icache={"size": 1000}))
