"""The accumulation algorithms against exact rationals, sparse against dense, integers against
Python integers, and the instruction model end to end."""

import numpy as np
import pytest

from gpurtl.facts.matrix import FAMILIES, FORMATS, VARIANT_BY_NAME, operand_chunk
from gpurtl.golden.matrix import layouts
from gpurtl.golden.matrix.arith import Algorithm, dot, int_dot
from gpurtl.golden.matrix.exact import exact_dot, round_exact, ulp_error, value
from gpurtl.golden.matrix.formats import to_float
from gpurtl.golden.matrix.model import MatrixModel, execute, family_shape
from gpurtl.golden.matrix.presets import PRESETS
from gpurtl.golden.matrix.samples import encode, random_elements, targeted


@pytest.mark.parametrize("preset", PRESETS)
@pytest.mark.parametrize("fa", ["f16", "bf16", "fp8"])
def test_exact_small_integers(preset, fa):
    """Small integer inputs: every partial sum is exact in FP32, so every preset is exact."""
    rng = np.random.default_rng(0)
    alg = PRESETS[preset].algorithm(fa)
    a_val = rng.integers(-4, 5, (200, 16)).astype(float)
    b_val = rng.integers(-4, 5, (200, 16)).astype(float)
    c_val = rng.integers(-1000, 1000, 200).astype(float)
    a, b = encode(a_val, alg.element_format(fa)), encode(b_val, alg.element_format(fa))
    got = dot(alg, a, b, encode(c_val, "f32"), fa, fa, "f32")
    want = encode((a_val * b_val).sum(axis=1) + c_val, "f32")
    assert (got == want).all()


@pytest.mark.parametrize("fa", ["f16", "bf16"])
def test_rdna4_error_against_exact_rationals(fa):
    """Same-sign inputs (no cancellation): each of the 16 products loses less than 2**-24 of the
    largest product's exponent to truncation, so the rdna4 result lies below the exact value by
    at most 16 * 2**-24 relative (8 ulps of FP32) plus half an ulp of rounding, never above it by
    more than half an ulp; the exact reference measures it."""
    rng = np.random.default_rng(1)
    alg = PRESETS["rdna4"].algorithm(fa)
    a = random_elements(rng, fa, (300, 16), span=(10, 20) if fa == "f16" else (120, 130), special=0)
    b = random_elements(rng, fa, (300, 16), span=(10, 20) if fa == "f16" else (120, 130), special=0)
    sign = 1 << 15
    a, b = a & ~sign, b & ~sign
    c = random_elements(rng, "f32", 300, span=(120, 135), special=0) & 0x7FFFFFFF
    got = dot(alg, a, b, c, fa, fa, "f32")
    errs, above = [], 0
    for i in range(300):
        exact = exact_dot(a[i], b[i], c[i], fa, fa, "f32")
        errs.append(ulp_error(got[i], exact, "f32"))
        above += int(value(got[i], "f32") > exact and errs[-1] > 0.5)
    assert max(errs) <= 8.5 and above == 0
    assert np.mean(errs) > 0.1  # truncation is visible: the measure is not blind


def test_error_measure_can_see_a_bad_result():
    exact = exact_dot([0x3C00], [0x3C00], 0x3F800000, "f16", "f16", "f32")  # 1*1 + 1 = 2
    assert ulp_error(0x40000000, exact, "f32") == 0
    assert ulp_error(0x40000001, exact, "f32") == 1.0
    assert round_exact(exact, "f32") == 0x40000000


@pytest.mark.parametrize("name", ["v_swmmac_f32_16x16x32_f16", "v_swmmac_f32_16x16x32_bf8_fp8"])
def test_sparse_equals_dense_with_expanded_a(name):
    """SWMMAC over stored A and its index equals the dense algorithm (twice the group: the zero
    products take no part) on the expanded 16 x 32 A."""
    v = VARIANT_BY_NAME[name]
    rng = np.random.default_rng(2)
    alg = PRESETS["rdna4"].algorithm(v.a)
    stored = random_elements(rng, v.a, (4, 16, 16), special=0)
    keep = np.zeros((4, 16, 8, 4), bool)
    for pos in np.ndindex(4, 16, 8):
        keep[pos][rng.choice(4, 2, replace=False)] = True
    logical = np.zeros((4, 16, 32), np.int64)
    logical[keep.reshape(4, 16, 32)] = stored.reshape(-1)
    stored, idx = layouts.compress(logical, keep.reshape(4, 16, 32))
    b = random_elements(rng, v.b, (4, 32, 16), special=0)
    c = random_elements(rng, "f32", (4, 16, 16), special=0)
    words = execute(
        v,
        "rdna4",
        layouts.pack_a(v, stored),
        layouts.pack_b(v, b),
        layouts.pack_cd(c, 32),
        layouts.pack_index(idx, 1, chunk=operand_chunk(v, "a")),
        index_key=np.ones(4, np.int64),
    )
    d = layouts.unpack_cd(words, 32)
    wide = alg.with_(group=32)
    a_rows = np.broadcast_to(logical[:, :, None, :], (4, 16, 16, 32))
    b_rows = np.broadcast_to(np.swapaxes(b, 1, 2)[:, None, :, :], (4, 16, 16, 32))
    assert (d == dot(wide, a_rows, b_rows, c, v.a, v.b, "f32")).all()


def test_int_dot_wrap_and_clamp():
    rng = np.random.default_rng(3)
    a = rng.integers(0, 256, (500, 16))
    b = rng.integers(0, 256, (500, 16))
    c = rng.integers(0, 1 << 32, 500)
    sa, sb = rng.integers(0, 2, 500), rng.integers(0, 2, 500)
    for clamp in (0, 1):
        got = int_dot(a, b, c, 8, 8, sa, sb, np.full(500, clamp), 16)
        for i in range(0, 500, 7):
            av = [x - 256 if sa[i] and x >= 128 else x for x in a[i]]
            bv = [x - 256 if sb[i] and x >= 128 else x for x in b[i]]
            cv = int(c[i]) - (1 << 32) if c[i] >= 1 << 31 else int(c[i])
            total = cv + sum(int(x) * int(y) for x, y in zip(av, bv))
            want = min(max(total, -(1 << 31)), (1 << 31) - 1) if clamp else total
            assert int(got[i]) == want & 0xFFFFFFFF


@pytest.mark.parametrize("family", FAMILIES)
def test_model_every_op(family):
    """The registry-facing model on random tiles of every op of every family: shapes and a
    recomputation of one element straight from the maths."""
    shape = family_shape(family)
    model = MatrixModel(family)
    rng = np.random.default_rng(4)
    txs = []
    for op in range(shape["ops"]):
        tx = {
            "op": op,
            "index_key": int(rng.integers(0, 2)),
            "a": rng.integers(0, 1 << 32, (shape["a"], 32)).tolist(),
            "b": rng.integers(0, 1 << 32, (shape["b"], 32)).tolist(),
            "c": rng.integers(0, 1 << 32, (shape["c"], 32)).tolist(),
            "idx": rng.integers(0, 1 << 32, 32).tolist(),
        }
        if shape["is_int"]:
            tx.update(a_signed=1, b_signed=0, clamp=1)
        txs.append(tx)
    outs = model.batch(txs)
    assert len(outs) == len(txs)
    for tx, out in zip(txs, outs):
        assert np.array(out["d"]).shape == (shape["c"], 32)
        assert out == model(tx)


def _values_to_words(v, a, b, c):
    return layouts.pack_a(v, a), layouts.pack_b(v, b), layouts.pack_cd(c, FORMATS[v.cd].bits)


def _negate(bits, name, where=True):
    """``bits`` with the value negated (through the value, not the sign bit) where ``where``."""
    return np.where(where, encode(-to_float(bits, name), name), bits)


@pytest.mark.parametrize(
    "name",
    [
        "v_wmma_f32_16x16x16_f16",
        "v_wmma_bf16_16x16x16_bf16",
        "v_swmmac_f16_16x16x32_f16",
        "v_wmma_f32_16x16x16_fp8_bf8",
    ],
)
def test_float_modifiers(name):
    """``neg_lo`` / ``neg_hi`` against the same instruction on operands negated (or made
    absolute) by value: A/B on the 16-bit forms (``neg_lo`` the elements in bits 0-15 of a
    VGPR, ``neg_hi`` those in bits 16-31), C on WMMA (``neg_hi`` = |C|, ``neg_lo`` = -C, both
    = -|C|); bits a form does not take change nothing."""
    v = VARIANT_BY_NAME[name]
    rng = np.random.default_rng(7)
    a = random_elements(rng, v.a, (3, 16, v.k_stored), special=0)
    b = random_elements(rng, v.b, (3, v.k, 16), special=0)
    c = random_elements(rng, v.cd, (3, 16, 16), special=0)
    idx = rng.integers(0, 1 << 32, (3, 32))

    def run(a, b, c, lo=0, hi=0):
        return execute(v, "rdna4", *_values_to_words(v, a, b, c), idx, 0, neg_lo=lo, neg_hi=hi)

    plain = run(a, b, c)
    ab, cm = FORMATS[v.a].bits == 16, not v.sparse
    # which stored A / B elements sit in bits 0-15 of their VGPR
    low_a = layouts.unpack_a(v, np.full((v.a_vgprs, 32), 0xFFFF)) != 0
    low_b = layouts.unpack_b(v, np.full((v.b_vgprs, 32), 0xFFFF)) != 0
    cases = [
        (0b001, 0b001, _negate(a, v.a) if ab else a, b, c),
        (0b001, 0b000, _negate(a, v.a, low_a) if ab else a, b, c),
        (0b000, 0b010, a, _negate(b, v.b, ~low_b) if ab else b, c),
        (0b000, 0b100, a, b, encode(abs(to_float(c, v.cd)), v.cd) if cm else c),
        (0b100, 0b000, a, b, _negate(c, v.cd) if cm else c),
        (0b100, 0b100, a, b, encode(-abs(to_float(c, v.cd)), v.cd) if cm else c),
    ]
    changed = 0
    for lo, hi, a2, b2, c2 in cases:
        want = run(a2, b2, c2)
        assert (run(a, b, c, lo, hi) == want).all(), (lo, hi)
        changed += not (want == plain).all()
    assert changed == 3 * ab + 3 * cm  # each modifier a form takes changes its results


def test_algorithm_parameters_are_checked():
    with pytest.raises(ValueError, match="`group` must be a power of two"):
        Algorithm("x", group=3)
    with pytest.raises(ValueError, match="`rounding` must be"):
        Algorithm("x", rounding="rnd")
    with pytest.raises(ValueError, match="`structure` must be"):
        Algorithm("x", structure="fma")


@pytest.mark.parametrize("preset", ["rdna4", "cdna3"])
def test_targeted_specials(preset):
    """Targeted cases with a known answer under every preset: NaN and infinity rules."""
    alg = PRESETS[preset].algorithm("f16")
    names, a, b, c = targeted("f16", "f16", "f32", 16)
    got = dict(zip(names, dot(alg, a, b, c, "f16", "f16", "f32")))
    nan = alg.nan
    assert got["inf_plus_finite"] == 0x7F800000
    assert got["inf_minus_inf"] == nan and got["zero_times_inf"] == nan
    assert got["nan_in_c"] == nan
    assert got["zero_signs"] == 0  # an exact zero total is +0
    assert got["tie_to_even"] == 0x3F800000  # 1 + 2**-24 ties to 1.0
    assert got["extra_bits_1"] == 0x3F800000
