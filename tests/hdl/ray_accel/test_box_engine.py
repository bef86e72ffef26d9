"""The box engine's clamp at zero (``maxnum(t, +0)`` as a sign test, no compare core) against
the golden ``maxnum`` for the binary32 special values and random patterns, with and without
``ftz``."""

import random

import numpy as np
import pytest
from amaranth.hdl import Module, Signal
from amaranth.sim import Simulator

from gpurtl.facts.fp32 import CANONICAL_NAN, MIN_NORMAL, NEG_INF, NEG_ZERO, POS_INF, f32_bits
from gpurtl.golden.ray_accel.scalar.box_test import maxnum
from gpurtl.hdl.ray_accel.box_engine import _max_with_zero


@pytest.mark.parametrize("ftz", [False, True])
def test_max_with_zero_is_golden_maxnum(ftz):
    rng = random.Random(int(ftz))
    special = [0, NEG_ZERO, POS_INF, NEG_INF, CANONICAL_NAN, 0xFF800001, 1, 0x80000001]
    special += [MIN_NORMAL, MIN_NORMAL | NEG_ZERO, MIN_NORMAL - 1, (MIN_NORMAL - 1) | NEG_ZERO]
    special += [f32_bits(v) for v in (1.0, -1.0, 3e38, -3e38, 1e-40, -1e-40)]
    patterns = special + [rng.randrange(1 << 32) for _ in range(500)]
    m = Module()
    x = Signal(32)
    y = Signal(32)
    m.d.comb += y.eq(_max_with_zero(x, ftz))
    sim = Simulator(m)
    got = []

    async def bench(ctx):
        for bits in patterns:
            ctx.set(x, bits)
            got.append(ctx.get(y))

    sim.add_testbench(bench)
    sim.run()
    want = [int(v) for v in maxnum(np.array(patterns, dtype=np.uint64), 0, ftz=ftz)]
    assert got == want
