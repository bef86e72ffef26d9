"""Registry entries of the register allocators (family ``vgpr_alloc``): RDNA 4 dynamic VGPR blocks
(``vgpr_dyn``), RDNA static VGPR allocation (``vgpr_static``) and Intel Xe3 GRF blocks with the
older fixed modes (``xe3_grf``). All three are cycle-stepped blocks sharing one port layout
(:mod:`gpurtl.facts.vgpr_alloc`)."""

from gpurtl.facts.vgpr_alloc import DYN_DEFAULTS as _D
from gpurtl.facts.vgpr_alloc import XE_MODES, dyn_params_ok, rdna_static_config, xe_config
from gpurtl.golden.vgpr_alloc.common import OP
from gpurtl.golden.vgpr_alloc.contiguous import ContigModel
from gpurtl.golden.vgpr_alloc.dynamic import DynVgprModel
from gpurtl.hdl.vgpr_alloc.contiguous import ContigAllocator, contig_layouts
from gpurtl.hdl.vgpr_alloc.dynamic import DynVgprAllocator, dyn_layouts

from ..core.registry import Block, Param, register

__all__ = ["dyn_stimulus", "contig_stimulus"]

ASSERTIONS = Param(
    "assertions",
    False,
    "emit the invariant Assert statements (simulation only; `gpurtl check` turns them on)",
)
#: ``gpurtl check`` and the lockstep tests run with the invariant checks; an export or a synthesis
#: run leaves them out (SystemVerilog immediate `assert`, which plain Yosys `read_verilog` and
#: Verilog-2005 tools reject).
_CHECK = {"assertions": True}


def _input_defaults(**_):
    return {"op": 0, "wave": 0, "count": 0, "lk_wave": 0, "lk_reg": 0}


def _lookup(rng, model_regs, slots):
    """A lookup: usually a register the wave holds (or just past its end), else anything."""
    live = [w for w, n in enumerate(model_regs) if n]
    r = rng.random()
    if live and r < 0.6:
        w = int(rng.choice(live))
        return w, int(min(255, rng.integers(0, model_regs[w])))
    if live and r < 0.7:
        w = int(rng.choice(live))
        return w, int(min(255, model_regs[w] + rng.integers(0, 3)))
    return int(rng.integers(0, 16)), int(rng.integers(0, 256))


# ---------------------------------------------------------------------------------------------
# vgpr_dyn


def dyn_stimulus(rng, count, **params):
    """Random multi-wave command streams, steered by a golden model so that they reach the
    interesting states: phases that fill the file (launch and grow, rarely end) alternate with
    phases that drain it; growth targets are drawn up to the maximum, so requests hit a near-full
    pool and the deadlock reserve; about 5 % of the commands are misuse of every kind."""
    p = {k: v for k, v in params.items() if k != "assertions"}
    model = DynVgprModel(**p, assertions=False)
    B, L, MAXB = model.B, model.wave_limit, model.max_blocks
    out = []
    phase_fill, phase_left = True, 0
    for _ in range(count):
        if phase_left <= 0:
            phase_fill = not phase_fill
            phase_left = int(rng.integers(50, 1500))
        phase_left -= 1
        live = [w for w in range(L) if model.blocks[w]]
        empty = [w for w in range(L) if not model.blocks[w]]
        r = rng.random()
        op, w, n = OP.NONE, int(rng.integers(0, 16)), 0
        if r < 0.05:  # misuse
            kind = int(rng.integers(0, 5))
            if kind == 0 and live:
                op, w = OP.LAUNCH, int(rng.choice(live))
            elif kind == 1 and empty:
                op, w = (OP.ALLOC if rng.random() < 0.5 else OP.END), int(rng.choice(empty))
                n = int(rng.integers(0, 512))
            elif kind == 2 and live:
                op, w = OP.ALLOC, int(rng.choice(live))
                n = int(rng.integers(MAXB * B + 1, 512))
            elif kind == 3:
                op, w = int(rng.integers(1, 4)), int(rng.integers(L, 16)) if L < 16 else 0
                n = int(rng.integers(0, 512))
                if L == 16:
                    op = OP.NONE
            else:
                op = OP.NONE
        elif r < 0.08:
            op = OP.NONE
        else:
            p_launch = 0.25 if phase_fill else 0.05
            p_end = 0.04 if phase_fill else 0.3
            r2 = rng.random()
            if empty and r2 < p_launch:
                op, w = OP.LAUNCH, int(rng.choice(empty))
            elif live and r2 < p_launch + p_end:
                op, w = OP.END, int(rng.choice(live))
            elif live:
                op, w = OP.ALLOC, int(rng.choice(live))
                cur = model.blocks[w]
                if phase_fill and rng.random() < 0.8:
                    tgt = int(rng.integers(cur, MAXB + 1))
                else:
                    tgt = int(rng.integers(1, MAXB + 1))
                # any VGPR count that rounds to tgt blocks; sometimes 0 or exact multiples
                lo = (tgt - 1) * B + 1
                n = int(rng.integers(lo, tgt * B + 1))
                if rng.random() < 0.2:
                    n = tgt * B
                if tgt == 1 and rng.random() < 0.2:
                    n = 0
            elif empty:
                op, w = OP.LAUNCH, int(rng.choice(empty))
        regs = [b * B for b in model.blocks]
        lw, lr = _lookup(rng, regs, 16)
        tx = {"op": op, "wave": w, "count": n, "lk_wave": lw, "lk_reg": lr}
        model.step(tx)
        out.append(tx)
    return out


def _dyn_validate(**params):
    dyn_params_ok(**params)


register(
    Block(
        name="vgpr_dyn",
        doc="RDNA 4 dynamic-VGPR block allocator of one SIMD (s_alloc_vgpr, deadlock avoidance)",
        kind="cycle",
        build=lambda **p: DynVgprAllocator(**p),
        golden=lambda **p: DynVgprModel(**p),
        layouts=lambda **p: dyn_layouts(**p),
        stimulus=dyn_stimulus,
        params=(
            Param(
                "rf_vgprs",
                _D.rf_vgprs,
                "VGPRs per SIMD (1536 on gfx1200/gfx1201, else 1024)",
                choices=(1536, 1024),
            ),
            Param(
                "block_size",
                _D.block_size,
                "SQ_DYN_VGPR.BLOCK_SIZE: VGPRs per block",
                choices=(16, 32),
            ),
            Param(
                "wave_limit",
                _D.wave_limit,
                "SQ_DYN_VGPR.WAVE_LIMIT: enabled wave slots",
                range=(1, 16),
            ),
            Param(
                "max_blocks",
                _D.max_blocks,
                "SQ_DYN_VGPR.MAX_BLOCK_ALLOC + 1: blocks per wave",
                range=(1, 8),
            ),
            Param("fwd_progress", _D.fwd_progress, "SQ_DYN_VGPR.FWD_PROGRESS: deadlock avoidance"),
            Param(
                "reserve",
                _D.reserve,
                "blocks deadlock avoidance keeps back (max_blocks - 1 guarantees "
                "one wave can reach the maximum)",
                range=(0, 80),
            ),
            ASSERTIONS,
        ),
        defaults=_input_defaults,
        validate=_dyn_validate,
        check_count=5000,
        check=_CHECK,
        small={"rf_vgprs": 1024, "block_size": 32, "wave_limit": 4, "max_blocks": 4, "reserve": 3},
    )
)


# ---------------------------------------------------------------------------------------------
# vgpr_static and xe3_grf


def contig_stimulus(config):
    def stimulus(rng, count, **params):
        """Random launch/end streams steered by a golden model: fill phases (mostly launches with
        sizes from one granule to the maximum, so the file fragments and launches fail for lack
        of a hole) alternate with drain phases; about 5 % misuse of every kind."""
        model = ContigModel(config, assertions=False)
        S = config.slots
        out = []
        phase_fill, phase_left = True, 0
        for _ in range(count):
            if phase_left <= 0:
                phase_fill = not phase_fill
                phase_left = int(rng.integers(30, 600))
            phase_left -= 1
            live = [w for w in range(S) if model.units[w]]
            empty = [w for w in range(S) if not model.units[w]]
            op, w, n = OP.NONE, int(rng.integers(0, 16)), 0
            r = rng.random()
            if r < 0.05:
                kind = int(rng.integers(0, 5))
                if kind == 0 and live:
                    op, w, n = OP.LAUNCH, int(rng.choice(live)), int(rng.integers(0, 257))
                elif kind == 1 and empty:
                    op, w = OP.END, int(rng.choice(empty))
                elif kind == 2 and empty:
                    op, w = OP.LAUNCH, int(rng.choice(empty))
                    n = int(rng.integers(config.max_count + 1, 512))
                elif kind == 3:
                    op, w = OP.ALLOC, int(rng.integers(0, 16))
                    n = int(rng.integers(0, 512))
                elif S < 16:
                    op, w = int(rng.integers(1, 4)), int(rng.integers(S, 16))
            elif r < 0.08:
                op = OP.NONE
            else:
                p_launch = 0.6 if phase_fill else 0.1
                if empty and (rng.random() < p_launch or not live):
                    op, w = OP.LAUNCH, int(rng.choice(empty))
                    n = int(rng.integers(0, config.max_count + 1))
                    if rng.random() < 0.3:  # exact thresholds and their neighbours
                        t = int(rng.choice(config.thresholds)) + int(rng.integers(-1, 2))
                        n = min(max(t, 0), config.max_count)
                elif live:
                    op, w = OP.END, int(rng.choice(live))
            regs = [u * config.regs_per_unit for u in model.units]
            lw, lr = _lookup(rng, regs, S)
            tx = {"op": op, "wave": w, "count": n, "lk_wave": lw, "lk_reg": lr}
            model.step(tx)
            out.append(tx)
        return out

    return stimulus


def _static_stimulus(rng, count, rf_vgprs=1536, wave64=False, **_):
    return contig_stimulus(rdna_static_config(rf_vgprs, wave64))(rng, count)


def _xe_stimulus(rng, count, mode="xe3", **_):
    return contig_stimulus(xe_config(mode))(rng, count)


register(
    Block(
        name="vgpr_static",
        doc="RDNA static VGPR allocation at wave launch (granule 24/16 wave32, 12/8 wave64), first fit",
        kind="cycle",
        build=lambda rf_vgprs=1536, wave64=False, assertions=False: ContigAllocator(
            rdna_static_config(rf_vgprs, wave64), assertions=assertions
        ),
        golden=lambda rf_vgprs=1536, wave64=False, assertions=False: ContigModel(
            rdna_static_config(rf_vgprs, wave64), assertions=assertions
        ),
        layouts=lambda rf_vgprs=1536, wave64=False, **_: contig_layouts(
            rdna_static_config(rf_vgprs, wave64)
        ),
        stimulus=_static_stimulus,
        params=(
            Param(
                "rf_vgprs",
                1536,
                "wave32 VGPRs per SIMD (1536 on 1.5x parts, else 1024)",
                choices=(1536, 1024),
            ),
            Param("wave64", False, "wave64 waves (granule halves, each VGPR takes two rows)"),
            ASSERTIONS,
        ),
        defaults=_input_defaults,
        check_count=5000,
        check=_CHECK,
    )
)

register(
    Block(
        name="xe3_grf",
        doc="Intel Xe3 per-thread GRF blocks (32..192, 256) of one vector engine; older fixed modes",
        kind="cycle",
        build=lambda mode="xe3", assertions=False: ContigAllocator(
            xe_config(mode), assertions=assertions
        ),
        golden=lambda mode="xe3", assertions=False: ContigModel(
            xe_config(mode), assertions=assertions
        ),
        layouts=lambda mode="xe3", **_: contig_layouts(xe_config(mode)),
        stimulus=_xe_stimulus,
        params=(
            Param(
                "mode",
                "xe3",
                "xe3 (variable, 10 threads), grf128 (128 x 8 threads) or grf256 (256 x 4 threads)",
                choices=XE_MODES,
            ),
            ASSERTIONS,
        ),
        defaults=_input_defaults,
        check_count=5000,
        check=_CHECK,
    )
)
