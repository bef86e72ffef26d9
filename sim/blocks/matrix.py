"""Registry entry of the RDNA 4 matrix core: ``matrix_core``.

One build runs every WMMA / SWMMAC instruction of a ``family`` (the ``op`` field picks one, in
the order of :data:`gpurtl.facts.matrix.FAMILIES`) under an arithmetic ``preset``, with
``dots`` dot-product units (``0``: as many as ``rate`` asks for: ``rdna4``, ``rdna3`` or ``fpga``
= one unit) of ``stages`` pipeline registers. The golden model is
:class:`gpurtl.golden.matrix.model.MatrixModel`.

Stimulus: every transaction draws an ``op`` and builds its tiles from element values, not raw
words (raw FP16 words would make most results NaN): A, B and C mostly normal numbers over a
random exponent window, with zeros, subnormals and a few NaN / infinity patterns; sparse ops get
random 2-bit indices (repeated indices included); integer ops random signedness, ``clamp`` and C
values near the int32 limits now and then; float ops random ``neg_lo`` / ``neg_hi`` modifiers in
a third of the transactions (all bits, those an op does not take included). VGPRs an op does not
read carry random words.
"""

import numpy as np

from gpurtl.facts.matrix import (
    FAMILIES,
    FORMATS,
    PRESETS,
    TILE,
    family_shape,
    family_variants,
    operand_chunk,
)
from gpurtl.golden.matrix import layouts
from gpurtl.golden.matrix.model import MatrixModel
from gpurtl.golden.matrix.samples import random_elements
from gpurtl.hdl.matrix.core import MatrixCore, core_layouts, dots_for

from ..core.registry import Block, Param, component_facts, register

__all__ = ["stimulus", "build_params", "notes"]


def build_params(family, preset, rate, dots, stages):
    """``MatrixCore`` keyword arguments of registry parameters (``dots = 0``: from ``rate``)."""
    return {
        "family": family,
        "preset": preset,
        "dots": dots or dots_for(family, rate, preset),
        "stages": stages,
    }


def _elements(rng, name, shape, preset):
    f = FORMATS[name]
    if not f.is_float:
        return rng.integers(0, 1 << f.bits, shape)
    if name in ("fp8", "bf8"):
        alg = PRESETS[preset].algorithm(name)
        f = alg.element_format(name)
    lo = int(rng.integers(1, (1 << f.exp_bits) - 2))
    hi = min(lo + int(rng.integers(1, 6)), (1 << f.exp_bits) - 2)
    return random_elements(rng, f, shape, span=(lo, hi), special=0.003)


def stimulus(rng, count, family, preset, **_):
    """``count`` random transactions of ``family`` (see the module doc string)."""
    variants = family_variants(family)
    shape = family_shape(family)
    txs = []
    for _ in range(count):
        op = int(rng.integers(0, len(variants)))
        v = variants[op]
        wc = FORMATS[v.cd].bits
        a = _elements(rng, v.a, (TILE, v.k_stored), preset)
        b = _elements(rng, v.b, (v.k, TILE), preset)
        if v.is_int:
            c = rng.integers(0, 1 << 32, (TILE, TILE))
            if rng.random() < 0.3:  # near the int32 limits: saturation and wrap-around
                c = (np.int64(0x7FFFFF00) + rng.integers(0, 512, (TILE, TILE))) & 0xFFFFFFFF
                if rng.random() < 0.5:
                    c = (-c) & 0xFFFFFFFF
        else:
            c = _elements(rng, v.cd, (TILE, TILE), preset)

        def words(packed, total):
            extra = rng.integers(0, 1 << 32, (total - packed.shape[0], 32))
            return np.concatenate([packed, extra]).tolist()

        key = int(rng.integers(0, 2))
        idx_word = rng.integers(0, 1 << 32, 32)
        if v.sparse:
            idx = rng.integers(0, 4, (TILE, v.k_stored))
            idx_word = layouts.pack_index(
                idx, key if v.index_keys > 1 else 0, into=idx_word, chunk=operand_chunk(v, "a")
            )
        tx = {
            "op": op,
            "index_key": key,
            "a": words(layouts.pack_a(v, a), shape["a"]),
            "b": words(layouts.pack_b(v, b), shape["b"]),
            "c": words(layouts.pack_cd(c, wc), shape["c"]),
            "idx": np.asarray(idx_word).tolist(),
        }
        if shape["is_int"]:
            tx.update(
                a_signed=int(rng.integers(0, 2)),
                b_signed=int(rng.integers(0, 2)),
                clamp=int(rng.integers(0, 2)),
            )
        else:
            mods = rng.random() < 1 / 3
            tx.update(
                neg_lo=int(rng.integers(0, 8)) if mods else 0,
                neg_hi=int(rng.integers(0, 8)) if mods else 0,
            )
        txs.append(tx)
    return txs


def _validate(family, preset, rate, dots, stages):
    # built only to see the parameters refused, and dropped without being elaborated
    kwargs = build_params(family, preset, rate, dots, stages)
    try:
        component_facts(lambda: MatrixCore(**kwargs), lambda core: None)
    except ValueError as error:
        raise ValueError(str(error)) from None


def _defaults(family, preset, rate, dots, stages):
    shape = family_shape(family)
    out = {"index_key": 0, "idx": [0] * 32}
    if shape["is_int"]:
        out.update(a_signed=1, b_signed=1, clamp=0)
    else:
        out.update(neg_lo=0, neg_hi=0)
    return out


def _ops_text(indices):
    return "op " + ", ".join(str(i) for i in indices) if indices else "no op"


def _span(name, first, last):
    return f"{name}[{first}]" if first == last else f"{name}[{first}..{last}]"


def _vgpr_note(name, total, counts, what, verb="reads"):
    """Which of ``total`` VGPRs ``name[0..]`` each op uses (``counts`` per op)."""
    if all(n == total for n in counts):
        done = {"reads": "read", "writes": "written"}[verb]
        return f"{what}: {total} VGPRs x 32 lanes, all of them {done} by every op"
    uses = "; ".join(
        f"op {i} {verb} {_span(name, 0, n - 1)}"
        + (f", leaves {_span(name, n, total - 1)} unused" if n < total else "")
        for i, n in enumerate(counts)
    )
    return f"{what}: {total} VGPRs x 32 lanes; {uses} (an unused VGPR may hold anything)"


def notes(family, **_):
    """``op`` names its instructions; ``a``, ``b``, ``c``, ``d``, ``idx`` and ``index_key`` say
    which ops read them (see :attr:`gpurtl.sim.core.registry.Block.notes`)."""
    variants = family_variants(family)
    shape = family_shape(family)
    sparse = [i for i, v in enumerate(variants) if v.sparse]
    keyed = [i for i, v in enumerate(variants) if v.index_keys > 1]
    dense = [i for i, v in enumerate(variants) if not v.sparse]
    single = [i for i in sparse if i not in keyed]
    notes_in = {
        "op": ", ".join(f"{i} {v.name}" for i, v in enumerate(variants)),
        "a": _vgpr_note("a", shape["a"], [v.a_vgprs for v in variants], "A tile"),
        "b": _vgpr_note("b", shape["b"], [v.b_vgprs for v in variants], "B tile"),
        "c": _vgpr_note("c", shape["c"], [v.cd_vgprs for v in variants], "C tile"),
        "idx": f"2:4 sparsity index of A (2 bits per stored element), read by {_ops_text(sparse)}"
        + (f"; unused by {_ops_text(dense)}" if dense else ""),
        "index_key": f"which of the two index sets in idx {_ops_text(keyed)} reads (0 or 1)"
        + (f"; unused by {_ops_text(dense + single)}" if dense + single else ""),
    }
    if shape["is_int"]:
        notes_in |= {
            "a_signed": "1: A elements are signed",
            "b_signed": "1: B elements are signed",
            "clamp": "1: saturate D to the int32 range",
        }
    else:
        what = {
            "neg_lo": "negate the elements in bits 0-15 of A/B; negate C",
            "neg_hi": "negate the elements in bits 16-31 of A/B; abs(C), applied before neg_lo",
        }
        notes_in |= {
            name: f"bit 0 A, bit 1 B, bit 2 C: {text} (A/B: 16-bit formats; C: WMMA only)"
            for name, text in what.items()
        }
    notes_out = {
        "d": _vgpr_note("d", shape["c"], [v.cd_vgprs for v in variants], "D tile", "writes")
    }
    return {"in": notes_in, "out": notes_out}


def _build(**params):
    core = MatrixCore(**build_params(**params))
    # the cycles between instructions depend on each instruction's op (its K), so the harness
    # checks no fixed initiation interval
    core.initiation_interval = None
    return core


register(
    Block(
        name="matrix_core",
        doc="RDNA 4 WMMA / 2:4-sparse SWMMAC matrix core of one SIMD (register tiles in and out)",
        kind="pipeline",
        build=_build,
        golden=lambda family, preset, **_: MatrixModel(family, preset),
        layouts=lambda family, **_: core_layouts(family),
        stimulus=lambda rng, count, **p: stimulus(rng, count, **p),
        params=(
            Param(
                "family",
                "f16_f32",
                "instruction family (input and accumulator formats)",
                choices=tuple(FAMILIES),
            ),
            Param("preset", "rdna4", "arithmetic preset", choices=tuple(PRESETS)),
            Param(
                "rate",
                "rdna4",
                "products per cycle: rdna4, rdna3 or fpga (one dot unit)",
                choices=("rdna4", "rdna3", "fpga"),
            ),
            Param("dots", 0, "dot-product units (0: from rate)", range=(0, 256)),
            Param("stages", 2, "pipeline registers inside a dot unit", range=(0, 5)),
        ),
        defaults=_defaults,
        validate=_validate,
        notes=notes,
        check_count=24,
        small={"family": "iu8_i32", "dots": 16},
    )
)
