"""Stage placement, parameter validation and the combinational (stages=0) cores."""

import numpy as np
import pytest
from amaranth.sim import Simulator

from gpurtl.golden import fp32 as golden
from gpurtl.hdl.fp32.add import FPAddCore
from gpurtl.hdl.fp32.cmp import FPCmpCore
from gpurtl.hdl.fp32.common import place_registers
from gpurtl.hdl.fp32.div import FPDivCore, FPRcpCore
from gpurtl.hdl.fp32.fma import FPFMACore
from gpurtl.hdl.fp32.minmax import FPMinMaxCore
from gpurtl.hdl.fp32.mul import FPMulCore
from gpurtl.hdl.fp32.stream import FPStreamUnit

CORES = [FPAddCore, FPMulCore, FPFMACore, FPCmpCore, FPMinMaxCore, FPRcpCore, FPDivCore]


def test_place_registers():
    assert place_registers([1, 1, 1, 1], 4) == {0, 1, 2, 3}
    assert place_registers([1, 1, 1, 1], 2) == {1, 3}
    assert place_registers([3, 1, 1, 1], 2) == {0, 3}
    assert place_registers([1] * 5, 1) == {4}
    assert place_registers([1] * 5, 0) == set()
    with pytest.raises(ValueError, match="`stages` must be from 0 to 5, not 6"):
        place_registers([1] * 5, 6)


@pytest.mark.parametrize("cls", CORES)
def test_latency_and_validation(cls):
    for stages in (0, 1, cls.max_stages()):
        core = cls(stages)
        assert core.latency == stages
    core = cls()
    assert core.latency == cls.DEFAULT_STAGES
    with pytest.raises(ValueError, match="`stages` must be at most"):
        cls(cls.max_stages() + 1)
    with pytest.raises(TypeError, match="`stages` must be a non-negative integer, not -1"):
        cls(-1)
    with pytest.raises(TypeError, match="`ftz` must be a boolean"):
        cls(1, ftz=1)


def test_stream_needs_a_stage():
    with pytest.raises(ValueError, match="`stages` must be a positive integer, not 0"):
        FPStreamUnit("add", 0)
    with pytest.raises(ValueError, match="`unit` must be one of"):
        FPStreamUnit("sqrt")


@pytest.mark.parametrize(
    "cls,fn", [(FPCmpCore, None), (FPMinMaxCore, None), (FPMulCore, golden.mul)]
)
def test_combinational(cls, fn):
    """stages=0: results in the same cycle, no clock."""
    dut = cls(0)
    values = golden.special_values()
    rng = np.random.default_rng(2)
    pairs = [(int(x), int(y)) for x, y in rng.choice(values, (150, 2))]
    got = []

    async def bench(ctx):
        for x, y in pairs:
            ctx.set(dut.a, x)
            ctx.set(dut.b, y)
            if cls is FPCmpCore:
                got.append(
                    (ctx.get(dut.lt), ctx.get(dut.le), ctx.get(dut.eq), ctx.get(dut.unordered))
                )
            elif cls is FPMinMaxCore:
                got.append((ctx.get(dut.min), ctx.get(dut.max)))
            else:
                got.append(ctx.get(dut.z))

    sim = Simulator(dut)
    sim.add_testbench(bench)
    sim.run()
    for (x, y), result in zip(pairs, got):
        if cls is FPCmpCore:
            assert result == tuple(
                int(f(x, y)) for f in (golden.lt, golden.le, golden.eq, golden.unordered)
            )
        elif cls is FPMinMaxCore:
            assert result == (golden.fmin(x, y), golden.fmax(x, y))
        else:
            assert result == fn(x, y)


@pytest.mark.parametrize("name", ["fp32_add", "fp32_fma", "fp32_div", "fp32_cmp", "fp32_minmax"])
def test_verilog_lint(name):
    """The exported Verilog passes `verilator --lint-only -Wall` (documented waivers only)."""
    from gpurtl.sim.core import registry
    from gpurtl.sim.core.export import lint, to_verilog

    block = registry.get(name)
    ok, messages = lint(to_verilog(block, block.resolve({})), name)
    assert ok, messages
