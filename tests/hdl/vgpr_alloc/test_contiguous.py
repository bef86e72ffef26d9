"""RDNA static VGPR and Intel Xe3/fixed-mode GRF allocators: lockstep against the golden model,
first fit and fragmentation, misuse, occupancy measured on the RTL against the published formulas, and
fault injection into the invariant assertions."""

import pytest

from gpurtl.facts.vgpr_alloc import rdna_static_config, xe_config
from gpurtl.golden.vgpr_alloc import occupancy
from gpurtl.golden.vgpr_alloc.common import ERR, OP
from gpurtl.golden.vgpr_alloc.contiguous import ContigModel
from gpurtl.hdl.vgpr_alloc.contiguous import ContigAllocator, contig_layouts
from gpurtl.sim.backends import BACKENDS
from gpurtl.sim.core import registry

from .helpers import idle, run_rtl


def check(name, count, seed=0, **overrides):
    block = registry.get(name)
    params = block.check_params(overrides)
    report = BACKENDS["pysim"].check(block, params, count=count, seed=seed)
    assert report.failed == 0, str(report.first)
    assert report.passed == count


def test_static_lockstep_default():
    check("vgpr_static", 2000, seed=2)


@pytest.mark.parametrize(
    "overrides", [{"wave64": True}, {"rf_vgprs": 1024}, {"rf_vgprs": 1024, "wave64": True}]
)
def test_static_lockstep_configs(overrides):
    check("vgpr_static", 700, seed=3, **overrides)


@pytest.mark.parametrize("mode", ["xe3", "grf128", "grf256"])
def test_xe_lockstep(mode):
    check("xe3_grf", 1500 if mode == "xe3" else 600, seed=4, mode=mode)


def both(config, steps):
    in_l, out_l = contig_layouts(config)
    rtl = run_rtl(ContigAllocator(config), in_l, out_l, steps)
    model = ContigModel(config)
    gold = [model.step(tx) for tx in steps]
    for cycle, (r, g) in enumerate(zip(rtl, gold)):
        assert r == g, f"cycle {cycle}: RTL {r} golden {g}"
    return rtl


def test_xe3_first_fit_and_fragmentation():
    """Xe3: 32 blocks of 32 GRFs. Fill with 256-GRF threads, free two that are not adjacent:
    a 512-GRF hole exists in total but a 160-GRF thread fits only in one 256-GRF hole."""
    cfg = xe_config("xe3")
    steps = [idle(op=OP.LAUNCH, wave=w, count=256) for w in range(4)]
    steps += [idle(op=OP.END, wave=1), idle(op=OP.END, wave=3)]
    steps += [
        idle(op=OP.LAUNCH, wave=5, count=160),
        idle(op=OP.LAUNCH, wave=6, count=192),
        idle(op=OP.LAUNCH, wave=7, count=96),
    ]
    steps += [idle(lk_wave=5, lk_reg=0), idle(lk_wave=6, lk_reg=191), idle(lk_wave=6, lk_reg=192)]
    o = both(cfg, steps)
    assert [x["ack"] for x in o[:4]] == [1] * 4 and o[4]["free"] == 0
    assert o[6]["free"] == 16 and o[6]["ack"] == 1  # 160 -> 5 blocks at block 8
    assert o[7]["ack"] == 1  # 192 -> 6 blocks at block 24
    assert o[8]["ack"] == 1 and o[8]["free"] == 5  # 96 -> 3 blocks at block 13
    assert o[9]["lk_row"] == 8 * 32 and o[9]["lk_valid"]
    assert o[10]["lk_row"] == 24 * 32 + 191 and not o[11]["lk_valid"]


def test_xe3_sizes_and_misuse():
    cfg = xe_config("xe3")
    steps = [
        idle(op=OP.LAUNCH, wave=0, count=200),
        idle(op=OP.LAUNCH, wave=1, count=0),
        idle(op=OP.LAUNCH, wave=2, count=257),
        idle(op=OP.LAUNCH, wave=10, count=32),
        idle(op=OP.ALLOC, wave=0, count=32),
        idle(op=OP.END, wave=3),
        idle(op=OP.LAUNCH, wave=0, count=32),
        idle(),
    ]
    o = both(cfg, steps)
    assert o[1]["units"][0] == 8  # 193..256 take 256
    assert o[2]["units"][1] == 1  # 0 takes one block
    assert [x["err"] for x in o[2:7]] == [
        ERR.OVER_MAX,
        ERR.BAD_SLOT,
        ERR.BAD_OP,
        ERR.NOT_RESIDENT,
        ERR.SLOT_BUSY,
    ]
    assert o[7]["free"] == 32 - 9


def test_static_wave64_rows():
    """wave64: 12-VGPR granules, each VGPR takes two wave32 rows."""
    cfg = rdna_static_config(1536, wave64=True)
    o = both(
        cfg,
        [
            idle(op=OP.LAUNCH, wave=0, count=13),
            idle(op=OP.LAUNCH, wave=1, count=1),
            idle(lk_wave=1, lk_reg=11),
            idle(lk_wave=1, lk_reg=12),
            idle(lk_wave=0, lk_reg=23),
        ],
    )
    assert o[1]["units"][0] == 2
    assert o[2]["lk_row"] == 2 * 24 + 22 and not o[3]["lk_valid"]
    assert o[4]["lk_row"] == 46


OCCUPANCY = [
    ("rdna1536w32", rdna_static_config(1536, False), lambda n: occupancy.rdna_static_waves(n)),
    (
        "rdna1024w64",
        rdna_static_config(1024, True),
        lambda n: occupancy.rdna_static_waves(n, 1024, True),
    ),
    ("xe3", xe_config("xe3"), occupancy.xe3_threads),
    ("grf256", xe_config("grf256"), lambda n: occupancy.xe_fixed_threads(n, "grf256")),
]


@pytest.mark.parametrize("name,cfg,expect", OCCUPANCY, ids=[o[0] for o in OCCUPANCY])
def test_rtl_occupancy_matches_spec(name, cfg, expect):
    """Launch identical waves until one does not fit, on the RTL: the count must equal the
    published formula (a sample of register counts here, every count in the slow test)."""
    counts = sorted(
        {0, 1, 255, 256}
        | {t + d for t in cfg.thresholds for d in (0, 1) if 0 <= t + d <= cfg.max_count}
    )
    rtl_occupancy(cfg, counts, expect)


def rtl_occupancy(cfg, counts, expect):
    steps, marks = [], []
    for n in counts:
        marks.append(len(steps))
        steps += [idle(op=OP.LAUNCH, wave=w, count=n) for w in range(cfg.slots)]
        steps += [idle(op=OP.END, wave=w) for w in range(cfg.slots)]
    in_l, out_l = contig_layouts(cfg)
    o = run_rtl(ContigAllocator(cfg), in_l, out_l, steps)
    for n, start in zip(counts, marks):
        fit = sum(x["ack"] for x in o[start : start + cfg.slots])
        assert fit == expect(n), f"{n} registers: RTL fits {fit}, spec {expect(n)}"


@pytest.mark.slow
@pytest.mark.parametrize("name,cfg,expect", OCCUPANCY, ids=[o[0] for o in OCCUPANCY])
def test_rtl_occupancy_every_count(name, cfg, expect):
    rtl_occupancy(cfg, list(range(0, cfg.max_count + 1)), expect)


@pytest.mark.parametrize("fault", ["free", "own", "units"])
def test_assertions_catch_corruption(fault):
    cfg = xe_config("xe3")
    in_l, out_l = contig_layouts(cfg)
    steps = [idle(op=OP.LAUNCH, wave=w, count=64) for w in range(3)] + [idle(), idle()]

    def inject(ctx, cycle, dut):
        if cycle != 3:
            return
        state = dut.state
        if fault == "free":
            ctx.set(state["free"], ctx.get(state["free"]) - 1)
        elif fault == "own":  # slot 1 also claims a unit of slot 0
            ctx.set(state["own"][1], ctx.get(state["own"][1]) | 1)
        else:
            ctx.set(state["units"][2], 9)

    with pytest.raises(AssertionError):
        run_rtl(ContigAllocator(cfg), in_l, out_l, steps, inject=inject)
    run_rtl(ContigAllocator(cfg), in_l, out_l, steps)


def test_golden_invariants_catch_corruption():
    model = ContigModel(xe_config("xe3"))
    model.step(idle(op=OP.LAUNCH, wave=0, count=64))
    model.owner[5] = 0
    with pytest.raises(AssertionError):
        model.step(idle())
