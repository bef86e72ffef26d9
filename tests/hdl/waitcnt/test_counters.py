"""Wait counters: lockstep against the golden model, directed semantics, and the encodings.

The encodings are checked against words assembled by hand from the SOPP/SOPK bit positions of LLVM
``llvm/lib/Target/AMDGPU/SOPInstructions.td`` (not with the profile's own encoder).
"""

import numpy as np
import pytest

from gpurtl.facts.waitcnt import InstClass, profile
from gpurtl.golden.waitcnt import WaitCountersModel, decode_wait
from gpurtl.sim.backends import BACKENDS
from gpurtl.sim.blocks.waitcnt import _counter_defaults
from gpurtl.sim.core import registry
from gpurtl.sim.harness import golden_io

BLOCK = registry.get("waitcnt")


def idle(generation="gfx12", waves=4):
    return _counter_defaults(generation, waves, "stall")


def sopp(op, simm16):
    return (0b101111111 << 23) | (op << 16) | simm16


def sopk(op, simm16, sdst=0x7C):
    return (0b1011 << 28) | (op << 23) | (sdst << 16) | simm16


@pytest.mark.parametrize(
    "params",
    [
        {"generation": "gfx12", "waves": 16},
        {"generation": "gfx12", "waves": 3, "full_policy": "saturate"},
        {"generation": "gfx11", "waves": 4},
        {"generation": "gfx10", "waves": 2, "full_policy": "saturate"},
        {"generation": "gfx9", "waves": 2},
    ],
)
def test_lockstep_random(params):
    params = BLOCK.resolve(params)
    count = 600 if params["waves"] == 16 else 2500
    report = BACKENDS["pysim"].check(BLOCK, params, count=count, seed=11)
    assert report.failed == 0, str(report.first)
    assert report.passed == count


@pytest.mark.parametrize("policy", ["stall", "saturate"])
def test_stimulus_reaches_every_corner(policy):
    """The random stimulus really exercises stalls, full counters, underflow and bad waits."""
    params = BLOCK.resolve({"waves": 3, "full_policy": policy})
    inputs = BLOCK.stimulus(np.random.default_rng(11), 2500, **params)
    outputs = golden_io.golden_outputs(BLOCK, params, inputs)
    prof = profile("gfx12")
    seen = {
        "stall": sum(o["stall"] != 0 for o in outputs),
        "refused": sum(
            i["issue"]["valid"] and not o["issue_accepted"] for i, o in zip(inputs, outputs)
        ),
        "overflow": sum(o["err"]["overflow"] for o in outputs),
        "underflow": sum(any(o["err"]["underflow"].values()) for o in outputs),
        "bad_wait": sum(o["err"]["bad_wait"] for o in outputs),
        "full": sum(
            any(c[n] == prof.max(n) for c in o["cnt"] for n in prof.counters) for o in outputs
        ),
    }
    expect_refused = policy == "stall"
    assert seen["stall"] > 50 and seen["underflow"] > 5 and seen["bad_wait"] > 5
    assert seen["full"] > 5
    assert (seen["refused"] > 5) == expect_refused
    assert (seen["overflow"] > 5) == (not expect_refused)


def test_lockstep_detects_a_wrong_model():
    """A golden model that forgets FLAT's second counter is caught, at the `ds` field."""
    params = BLOCK.resolve({"waves": 2})
    model = WaitCountersModel("gfx12", 2)
    real = model.prof

    class Broken:
        counters, waits, max = real.counters, real.waits, real.max
        class_map = {**real.class_map, InstClass.FLAT_LOAD: ("load",)}

    model.prof = Broken()
    inputs = BLOCK.stimulus(np.random.default_rng(3), 400, **params)
    expected = [model.step(i) for i in inputs]
    report = BACKENDS["pysim"].run(BLOCK, params, inputs, expected=expected)
    assert report.failed > 0
    assert report.first.field.endswith(".ds")


def step_all(model, cycles):
    return [model.step(c) for c in cycles]


def cycle(generation="gfx12", waves=4, issue=None, wait=None, ret=None):
    c = idle(generation, waves)
    if issue:
        c["issue"] = {"valid": 1, "wave": issue[0], "cls": int(issue[1].value)}
    if wait:
        c["wait"] = {"valid": 1, "wave": wait[0], "word": wait[1]}
    for name, wave in (ret or {}).items():
        c["ret"][name] = {"valid": 1, "wave": wave}
    return c


def run_rtl(cycles, generation="gfx12", waves=4, policy="stall"):
    params = BLOCK.resolve({"generation": generation, "waves": waves, "full_policy": policy})
    golden = golden_io.golden_outputs(BLOCK, params, cycles)
    report = BACKENDS["pysim"].run(BLOCK, params, cycles, expected=golden, keep_outputs=True)
    assert report.failed == 0, str(report.first)
    return golden


def test_wait_semantics_directed():
    """Three loads, s_wait_loadcnt 1: the wave stalls until two have returned."""
    load = (1, InstClass.VMEM_LOAD)
    wait1 = sopp(0x40, 1)
    cycles = [
        cycle(issue=load),
        cycle(issue=load),
        cycle(issue=load),
        cycle(wait=(1, wait1)),
        cycle(),
        cycle(ret={"load": 1}),
        cycle(),
        cycle(ret={"load": 1}),
        cycle(),
        cycle(),
    ]
    out = run_rtl(cycles)
    stall = [(o["stall"] >> 1) & 1 for o in out]
    assert stall == [0, 0, 0, 0, 1, 1, 1, 1, 0, 0]
    assert [o["cnt"][1]["load"] for o in out] == [0, 1, 2, 3, 3, 3, 2, 2, 1, 1]


def test_flat_bumps_load_and_ds_and_other_waves_are_independent():
    cycles = [
        cycle(issue=(2, InstClass.FLAT_LOAD)),
        cycle(wait=(2, sopp(0x46, 0))),
        cycle(),
        cycle(ret={"ds": 2}),
        cycle(),
    ]
    out = run_rtl(cycles)
    assert out[1]["cnt"][2] == {**{n: 0 for n in profile("gfx12").counters}, "load": 1, "ds": 1}
    assert [(o["stall"] >> 2) & 1 for o in out] == [0, 0, 1, 1, 0]
    assert all(o["stall"] & 0b1011 == 0 for o in out)


def test_combined_and_all_ones_waits():
    prof = profile("gfx12")
    # s_wait_loadcnt_dscnt: load in [13:8], ds in [5:0]; all-ones = no wait (LLVM encodeLoadcntDscnt).
    assert decode_wait(prof, sopp(0x48, (2 << 8) | 0x3F))["load"] == 2
    assert decode_wait(prof, sopp(0x48, (2 << 8) | 0x3F))["ds"] == 63
    assert decode_wait(prof, sopp(0x49, (0x3F << 8) | 5))["store"] == 63
    assert decode_wait(prof, sopp(0x49, (0x3F << 8) | 5))["ds"] == 5
    # A count at or above the maximum never stalls (bvhcnt is 3 bits: 7 and 100 both mean no wait).
    assert decode_wait(prof, sopp(0x43, 100))["bvh"] == 7
    assert decode_wait(prof, sopp(0x45, 0)) is None  # opcode 0x45 is not a wait
    assert decode_wait(prof, 0x12345678) is None
    # The profile encoder agrees with the hand-assembled words.
    assert prof.wait("s_wait_loadcnt_dscnt").encode(load=2) == sopp(0x48, (2 << 8) | 0x3F)
    assert prof.wait("s_wait_kmcnt").encode(km=0) == sopp(0x47, 0)


def test_gfx11_gfx10_gfx9_layouts():
    # gfx11 s_waitcnt: exp [2:0], lgkm [9:4], vm [15:10]; s_waitcnt_vscnt is SOPK 0x18.
    g11 = profile("gfx11")
    word = sopp(0x09, (5 << 10) | (0x3F << 4) | 0x7)
    assert decode_wait(g11, word) == {"vm": 5, "lgkm": 63, "vs": 63, "exp": 7}
    assert decode_wait(g11, sopk(0x18, 3)) == {"vm": 63, "lgkm": 63, "vs": 3, "exp": 7}
    # gfx10: vm = [3:0] + [15:14] << 4, exp [6:4], lgkm [13:8], op 0x0C.
    g10 = profile("gfx10")
    word = sopp(0x0C, (0b10 << 14) | (9 << 8) | (2 << 4) | 0b0101)
    assert decode_wait(g10, word) == {"vm": 0b100101, "lgkm": 9, "vs": 63, "exp": 2}
    # gfx9: lgkm is 4 bits at [11:8]; no store counter.
    g9 = profile("gfx9")
    word = sopp(0x0C, (0b11 << 14) | (0xF << 12) | (3 << 8) | (7 << 4) | 0b1111)
    assert decode_wait(g9, word) == {"vm": 63, "lgkm": 3, "exp": 7}


def test_counter_widths_follow_the_spec():
    # LLVM AMDGPUBaseInfo.cpp get*cntBitWidth.
    g12 = profile("gfx12")
    assert dict(zip(g12.counters, g12.widths)) == {
        "load": 6,
        "store": 6,
        "sample": 6,
        "bvh": 3,
        "exp": 3,
        "ds": 6,
        "km": 5,
    }
    assert dict(zip(profile("gfx9").counters, profile("gfx9").widths)) == {
        "vm": 6,
        "lgkm": 4,
        "exp": 3,
    }


def test_full_counter_stalls_or_saturates_with_error():
    bvh = (0, InstClass.BVH)
    cycles = [cycle(issue=bvh) for _ in range(9)] + [cycle(issue=bvh, ret={"bvh": 0}), cycle()]
    stalled = run_rtl(cycles, policy="stall")
    assert [o["issue_accepted"] for o in stalled] == [1] * 7 + [0, 0, 0, 0]
    assert stalled[-1]["cnt"][0]["bvh"] == 6
    saturated = run_rtl(cycles, policy="saturate")
    assert [o["err"]["overflow"] for o in saturated] == [0] * 7 + [1, 1, 0, 0]
    assert [o["cnt"][0]["bvh"] for o in saturated][-3:] == [7, 7, 7]


def test_underflow_is_an_error_and_changes_nothing():
    cycles = [
        cycle(ret={"km": 3}),
        cycle(issue=(3, InstClass.SMEM)),
        cycle(ret={"km": 3}),
        cycle(ret={"km": 3}),
        cycle(),
    ]
    out = run_rtl(cycles)
    assert [o["err"]["underflow"]["km"] for o in out] == [1, 0, 0, 1, 0]
    assert [o["cnt"][3]["km"] for o in out] == [0, 0, 1, 0, 0]
