"""Ray accelerator top level (block ``ray_accel``): lockstep against the golden intersect model on
real encoded nodes, throughput (one instruction per cycle, N instructions in N + latency cycles),
a smaller build, the sort unit against the golden network, and one Verilator build."""

import numpy as np
import pytest
from amaranth.sim import Simulator

from gpurtl.golden.ray_accel import sort as golden_sort
from gpurtl.golden.ray_accel.ray import INVALID_NODE
from gpurtl.hdl.ray_accel.ray_accel import RayAccel
from gpurtl.hdl.ray_accel.sort_unit import SortUnit
from gpurtl.hdl.shapes import f32_bits
from gpurtl.sim import lockstep, registry
from gpurtl.sim.engine import StallPattern

BLOCK = registry.get("ray_accel")


def test_lockstep_pysim_full_build():
    params = BLOCK.resolve({})
    report = lockstep.check(BLOCK, params, count=120, seed=11, backend="pysim")
    assert report.failed == 0, str(report.first)
    assert report.passed == 120


def test_lockstep_pysim_ftz():
    params = BLOCK.resolve({"ftz": "1"})
    report = lockstep.check(BLOCK, params, count=40, seed=12, backend="pysim")
    assert report.failed == 0, str(report.first)


def test_lockstep_pysim_one_engine_two_boxes():
    """4 box testers in total: two cycles per instruction, same results."""
    params = BLOCK.resolve({"engines": "1", "boxes_per_engine": "2"})
    report = lockstep.check(BLOCK, params, count=30, seed=13, backend="pysim")
    assert report.failed == 0, str(report.first)


def test_throughput_one_instruction_per_cycle():
    """N back-to-back instructions, no stalls: the last result leaves at cycle N - 1 + latency."""
    params = BLOCK.resolve({})
    inputs = BLOCK.stimulus(np.random.default_rng(5), 40, **params)
    expected = lockstep.golden_outputs(BLOCK, params, inputs)
    n = len(inputs)
    report = lockstep.run_block(BLOCK, params, inputs, expected=expected,
                                stalls=StallPattern(free_run=n))
    latency = BLOCK.build(**params).latency
    assert report.failed == 0, str(report.first)
    assert report.cycles == n + latency


def test_sort_unit_matches_golden_network():
    rng = np.random.default_rng(9)
    cases = []
    for _ in range(150):
        ptrs = [INVALID_NODE if rng.random() < 0.3 else
                (int(rng.integers(0, 1 << 20)) << 4) | int(rng.integers(0, 16)) for _ in range(8)]
        pool = [f32_bits(float(v)) for v in rng.integers(-3, 4, size=8) * 0.25] + \
            [0x7FC00000, 0x80000000, 0x7F800000, 0xFF800000]
        keys = [pool[int(rng.integers(0, len(pool)))] for _ in range(8)]
        cases.append((ptrs, keys, int(rng.integers(0, 2)), int(rng.integers(0, 2)),
                      int(rng.random() < 0.85)))
    dut = SortUnit()
    got = []

    async def bench(ctx):
        ctx.set(dut.en, 1)
        for k in range(len(cases) + dut.latency):
            if k < len(cases):
                ptrs, keys, stf, wide, enable = cases[k]
                for s in range(8):
                    ctx.set(dut.i.slots[s].ptr, ptrs[s])
                    ctx.set(dut.i.slots[s].key, keys[s])
                ctx.set(dut.i.stf, stf)
                ctx.set(dut.i.wide, wide)
                ctx.set(dut.i.enable, enable)
            await ctx.tick()
            if k + 1 >= dut.latency:
                got.append([ctx.get(dut.o.ptrs[s]) for s in range(8)])

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    for (ptrs, keys, stf, wide, enable), out in zip(cases, got):
        want = golden_sort.sort_slots(ptrs, keys, stf, wide=bool(wide)) if enable else ptrs
        assert out == want


@pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")
def test_bad_parameters():
    with pytest.raises(ValueError, match="engines"):
        RayAccel(engines=3)
    with pytest.raises(ValueError, match="1, 2, 4 or 8"):
        RayAccel(engines=2, boxes_per_engine=3)


@pytest.mark.verilator
def test_lockstep_verilator_small_build():
    params = BLOCK.resolve({"engines": "1", "boxes_per_engine": "4"})
    report = lockstep.check(BLOCK, params, count=200, seed=21, backend="verilator")
    assert report.failed == 0, str(report.first)
