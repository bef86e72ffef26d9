# amaranth: UnusedElaboratable=no
"""RDNA 4 dynamic-VGPR allocator: lockstep against the golden model, directed s_alloc_vgpr
semantics, deadlock reserve, non-contiguous translation and fault injection into the invariant
assertions (RTL and golden)."""

import pytest

from gpurtl.golden.vgpr_alloc.common import ERR, OP
from gpurtl.golden.vgpr_alloc.dynamic import DynVgprModel
from gpurtl.hdl.vgpr_alloc.dynamic import DynVgprAllocator, dyn_layouts
from gpurtl.sim.backends import BACKENDS
from gpurtl.sim.core import registry

from .helpers import idle, run_rtl

BLOCK = registry.get("vgpr_dyn")


def check(count, seed=0, **overrides):
    params = BLOCK.check_params(overrides)
    report = BACKENDS["pysim"].check(BLOCK, params, count=count, seed=seed)
    assert report.failed == 0, str(report.first)
    assert report.passed == count


def test_lockstep_default():
    check(3000, seed=11)


@pytest.mark.parametrize(
    "overrides",
    [
        {"block_size": 32},
        {"rf_vgprs": 1024, "wave_limit": 12},
        {"rf_vgprs": 1024, "block_size": 32, "wave_limit": 10, "max_blocks": 5, "reserve": 4},
        {"fwd_progress": False},
        {"reserve": 3},  # smaller than max_blocks - 1: allowed, no guarantee asserted
    ],
)
def test_lockstep_configs(overrides):
    check(1000, seed=5, **overrides)


def both(steps, **params):
    """Run ``steps`` on the RTL and the golden model; they must agree; return the outputs."""
    in_l, out_l = dyn_layouts(**params)
    rtl = run_rtl(DynVgprAllocator(**params), in_l, out_l, steps)
    model = DynVgprModel(**params)
    gold = [model.step(tx) for tx in steps]
    for cycle, (r, g) in enumerate(zip(rtl, gold)):
        assert r == g, f"cycle {cycle}: RTL {r} golden {g}"
    return rtl


def test_alloc_semantics():
    """Rounding to blocks, request 0 keeps one block, shrink and no-change succeed, a request
    above the maximum is an error that changes nothing, misuse codes."""
    o = both(
        [
            idle(op=OP.LAUNCH, wave=3),  # 0
            idle(op=OP.ALLOC, wave=3, count=17),  # 1: 17 VGPRs -> 2 blocks of 16
            idle(op=OP.ALLOC, wave=3, count=32),  # 2: still 2 blocks: no change
            idle(op=OP.ALLOC, wave=3, count=129),  # 3: 9 blocks > 8: OVER_MAX
            idle(op=OP.ALLOC, wave=3, count=0),  # 4: shrink to 1 block
            idle(op=OP.LAUNCH, wave=3),  # 5: busy slot
            idle(op=OP.ALLOC, wave=4, count=16),  # 6: slot 4 empty
            idle(op=OP.END, wave=4),  # 7: free of blocks not held
            idle(op=OP.END, wave=3),  # 8
            idle(),  # 9
        ],
        block_size=16,
    )
    assert [x["ack"] for x in o[:9]] == [1, 1, 1, 0, 1, 0, 0, 0, 1]
    assert [x["err"] for x in o[:9]] == [
        0,
        0,
        0,
        ERR.OVER_MAX,
        0,
        ERR.SLOT_BUSY,
        ERR.NOT_RESIDENT,
        ERR.NOT_RESIDENT,
        0,
    ]
    assert [x["units"][3] for x in o] == [0, 1, 2, 2, 2, 1, 1, 1, 1, 0]
    assert o[1]["free"] - o[2]["free"] == 1 and o[3]["free"] == o[4]["free"]
    assert o[9]["free"] == 1536 // 16 - 16


def test_bad_slot_when_wave_limit_is_lower():
    o = both(
        [
            idle(op=OP.LAUNCH, wave=12),
            idle(op=OP.ALLOC, wave=13, count=5),
            idle(op=OP.END, wave=15),
            idle(),
        ],
        wave_limit=12,
    )
    assert [x["err"] for x in o[:3]] == [ERR.BAD_SLOT] * 3
    assert o[3]["units"] == [0] * 16


def test_all_or_nothing_and_reserve():
    """Fill the pool until only the reserve is left; a growth request that needs the reserve is
    granted to one wave only (the holder); a request larger than what is free fails whole."""
    B, R = 16, 7
    steps = [idle(op=OP.LAUNCH, wave=w) for w in range(16)]
    # waves 0..9 take 8 blocks each (70 of the 80 pool blocks): 10 general blocks are left
    steps += [idle(op=OP.ALLOC, wave=w, count=8 * B) for w in range(10)]
    steps += [
        idle(op=OP.ALLOC, wave=10, count=4 * B),  # +3: free 10 -> 7 (general, leaves R)
        idle(op=OP.ALLOC, wave=11, count=3 * B),  # +2: needs the reserve: holder = 11
        idle(op=OP.ALLOC, wave=12, count=2 * B),  # +1: reserve held by 11: denied
        idle(op=OP.ALLOC, wave=11, count=8 * B),  # +5 for the holder: granted, free 0
        idle(op=OP.ALLOC, wave=11, count=8 * B),  # no change
        idle(op=OP.END, wave=0),  # frees 7: free 7 >= R: holder released
        idle(op=OP.ALLOC, wave=12, count=9 * B),  # OVER_MAX
        idle(op=OP.ALLOC, wave=12, count=8 * B),  # +7 with 7 free: via the reserve
        idle(),
    ]
    o = both(steps, block_size=B, reserve=R)
    base = 26
    assert o[base]["free"] == 10 and o[base]["ack"] == 1
    assert o[base + 1]["free"] == 7 and o[base + 1]["ack"] == 1
    assert o[base + 2]["holder_valid"] == 1 and o[base + 2]["holder"] == 11
    assert o[base + 2]["ack"] == 0 and o[base + 2]["err"] == ERR.NONE
    assert o[base + 3]["ack"] == 1 and o[base + 4]["free"] == 0
    assert o[base + 6]["holder_valid"] == 0 and o[base + 6]["free"] == 7
    assert o[base + 6]["err"] == ERR.OVER_MAX
    assert o[base + 7]["ack"] == 1
    assert o[base + 8]["free"] == 0 and o[base + 8]["holder"] == 12


def test_without_reserve_every_wave_can_stall():
    """With deadlock avoidance off, 16 waves at 6 blocks exhaust the 80-block pool and no
    request for a 7th block can succeed."""
    steps = [idle(op=OP.LAUNCH, wave=w) for w in range(16)]
    steps += [idle(op=OP.ALLOC, wave=w, count=96) for w in range(16)]
    steps += [idle(op=OP.ALLOC, wave=w, count=112) for w in range(16)]
    o = both(steps + [idle()], fwd_progress=False)
    assert all(x["ack"] for x in o[16:32])
    assert not any(x["ack"] for x in o[32:48])
    assert o[-1]["free"] == 0


def test_translation_is_non_contiguous():
    """After churn the blocks of a wave are scattered; the translation follows the block table
    (compared with the golden model) and never leaves the wave's blocks."""
    steps = [idle(op=OP.LAUNCH, wave=w) for w in range(4)]
    steps += [idle(op=OP.ALLOC, wave=w, count=48) for w in range(4)]
    steps += [idle(op=OP.ALLOC, wave=1, count=16), idle(op=OP.END, wave=2)]
    steps += [idle(op=OP.ALLOC, wave=0, count=128)]
    steps += [idle(lk_wave=0, lk_reg=r) for r in range(0, 140, 5)]
    o = both(steps)
    rows = [x["lk_row"] for x in o[-28:] if x["lk_valid"]]
    blocks = sorted({r // 16 for r in rows})
    assert len(blocks) == 8 and blocks[0] == 0
    assert blocks != list(range(blocks[0], blocks[0] + 8))  # not one contiguous run
    assert sum(x["lk_valid"] for x in o[-28:]) == len(range(0, 128, 5))


@pytest.mark.parametrize("fault", ["top", "blocks", "tbl"])
def test_assertions_catch_corruption(fault):
    """Corrupting a state register makes an invariant Assert fire in the simulator."""
    params = {}
    in_l, out_l = dyn_layouts(**params)
    steps = [idle(op=OP.LAUNCH, wave=w) for w in range(3)]
    steps += [idle(op=OP.ALLOC, wave=w, count=64) for w in range(3)]
    steps += [idle(op=OP.ALLOC, wave=0, count=16, lk_wave=0, lk_reg=20), idle(), idle()]

    def inject(ctx, cycle, dut):
        if cycle != 6:
            return
        state = dut.state
        if fault == "top":
            ctx.set(state["top"], ctx.get(state["top"]) + 1)
        elif fault == "blocks":
            ctx.set(state["blocks"], ctx.get(state["blocks"]) | 9)  # wave 0: 9 blocks
        else:  # wave 0, entry 1 -> a block of wave 1
            tbl, bb = state["tbl"], 7
            value = ctx.get(tbl)
            other = (value >> (bb * 9)) & 0x7F
            value &= ~(0x7F << (bb * 1))
            ctx.set(tbl, value | other << (bb * 1))

    with pytest.raises(AssertionError):
        run_rtl(DynVgprAllocator(**params), in_l, out_l, steps, inject=inject)
    # the same run without the fault is clean
    run_rtl(DynVgprAllocator(**params), in_l, out_l, steps)


def test_golden_invariants_catch_corruption():
    model = DynVgprModel()
    model.step(idle(op=OP.LAUNCH, wave=0))
    model.step(idle(op=OP.ALLOC, wave=0, count=64))
    model.stack.append(model.table[0][1])  # a block both owned and free
    with pytest.raises(AssertionError):
        model.step(idle())


def test_parameter_validation():
    with pytest.raises(ValueError, match="block_size"):
        DynVgprAllocator(block_size=8)
    with pytest.raises(ValueError, match="reserve"):
        DynVgprAllocator(rf_vgprs=1024, block_size=32, reserve=20)
    with pytest.raises(registry.RegistryError, match="reserve"):
        BLOCK.resolve({"rf_vgprs": "1024", "block_size": "32", "reserve": "20"})
    with pytest.raises(registry.RegistryError):
        BLOCK.resolve({"wave_limit": "17"})
