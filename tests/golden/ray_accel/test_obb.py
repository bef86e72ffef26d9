"""Independent checks of the OBB tables (facts/obb.py) and the OBB/instance ray transform
(golden/ray_accel/scalar/obb.py).

References used here are independent of the code under test: the axis/angle structure of the
tables (13 axes in the order of gpurt ``ObbAxesLut``, 4 angles of 22.5 degrees, 2 signs; Rodrigues
in float64, rounded to float32), the published listing of the 104 decoded matrices kept in
``data/obb_matrices.txt``, and an exact rational (fractions.Fraction) evaluation of the same FMA
order with our own RNE rounding.
"""

import math
import pathlib
from fractions import Fraction

import numpy as np
import pytest

from gpurtl.facts.fp32 import bits_f32, f32_bits
from gpurtl.golden.ray_accel.scalar import obb

LISTING = pathlib.Path(__file__).parent / "data" / "obb_matrices.txt"

# 13 axes in gpurt ObbAxesLut order; index = axis*8 + angleIdx*2 + signIdx.
_S2, _S3 = 1 / math.sqrt(2), 1 / math.sqrt(3)
AXES = [
    (1, 0, 0),
    (0, 1, 0),
    (0, 0, 1),
    (0, _S2, _S2),
    (0, -_S2, _S2),
    (_S2, 0, _S2),
    (_S2, 0, -_S2),
    (_S2, _S2, 0),
    (-_S2, _S2, 0),
    (_S3, _S3, _S3),
    (-_S3, _S3, _S3),
    (_S3, -_S3, _S3),
    (-_S3, -_S3, _S3),
]


def rodrigues(axis, angle):
    x, y, z = axis
    c, s = math.cos(angle), math.sin(angle)
    t = 1 - c
    return np.array(
        [
            [c + x * x * t, x * y * t - z * s, x * z * t + y * s],
            [y * x * t + z * s, c + y * y * t, y * z * t - x * s],
            [z * x * t - y * s, z * y * t + x * s, c + z * z * t],
        ]
    )


def test_stage_tables_shape():
    assert len(obb.STAGE1) == 104
    for entry in obb.STAGE1:
        assert entry >> 54 == 0
    for i in range(104):
        for row in obb.stage1_codes(i):
            for code in row:
                assert (code & 0x1F) < 26  # only 26 stage-2 values are used
    # float bit 30 is always 0: every magnitude <= 1.0
    assert all(v & (1 << 30) == 0 for v in obb.STAGE2)
    assert obb.STAGE2[26:] == (0,) * 6


@pytest.mark.parametrize("index", range(104))
def test_matrix_matches_axis_angle(index):
    axis, angle_idx, sign = index // 8, (index // 2) % 4, index % 2
    angle = math.radians(22.5 * (angle_idx + 1)) * (-1 if sign else 1)
    exact = rodrigues(AXES[axis], angle)
    exact[np.abs(exact) < 1e-12] = 0.0  # exact zeros (float64 noise of cos 90 deg)
    expected = exact.astype(np.float32)  # float32(RNE(exact Rodrigues entry))
    got = obb.obb_matrix(index)
    assert np.array_equal(got.view(np.uint32) & 0x7FFFFFFF, expected.view(np.uint32) & 0x7FFFFFFF)
    assert np.array_equal(np.sign(got), np.sign(expected))


@pytest.mark.parametrize("index", range(104))
def test_proper_rotation(index):
    m = obb.obb_matrix(index).astype(np.float64)
    err = np.abs(m @ m.T - np.eye(3)).max()
    assert err < 2**-22  # orthonormal within float32 rounding
    assert abs(np.linalg.det(m) - 1) < 2**-21
    assert not np.array_equal(m, np.eye(3))  # no table entry is the identity


def read_listing(path=LISTING):
    """``{index: (stage-1 entry, 3x3 matrix)}`` from the published listing."""
    rows = {}
    for line in path.read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        index, entry, *values = line.split()
        rows[int(index)] = (int(entry, 16), np.array([float(v) for v in values]).reshape(3, 3))
    return rows


def listing_mismatches(stage1, matrix_of, rows):
    """Indices whose stage-1 entry or decoded matrix differ from the listing."""
    return [
        index
        for index, (entry, listed) in rows.items()
        if stage1[index] != entry or not np.allclose(matrix_of(index), listed, atol=1e-6)
    ]


def test_matches_appendix_b():
    rows = read_listing()
    assert sorted(rows) == list(range(104))
    assert listing_mismatches(obb.STAGE1, obb.obb_matrix, rows) == []


def test_listing_check_catches_a_wrong_entry():
    rows = read_listing()
    broken = list(obb.STAGE1)
    broken[37] ^= 1 << 23  # flip the sign bit of element (1, 0)
    assert listing_mismatches(broken, obb.obb_matrix, rows) == [37]

    # A matrix decoded with its columns in the wrong order is caught too.
    def swapped(index):
        return obb.obb_matrix(index)[:, ::-1] if index == 5 else obb.obb_matrix(index)

    assert listing_mismatches(obb.STAGE1, swapped, rows) == [5]


# --- exact rational reference of the transform --------------------------------------------------


def frac_of(bits):
    return Fraction(bits_f32(bits))


def round_f32(value):
    """float32 RNE of an exact rational (subnormals, overflow to inf); -0 kept via `neg_zero`."""
    if value == 0:
        return 0
    sign = 0x80000000 if value < 0 else 0
    mag = abs(value)
    e = mag.numerator.bit_length() - mag.denominator.bit_length()
    if Fraction(2) ** e > mag:
        e -= 1
    e = max(e, -126)
    scale = Fraction(2) ** (23 - e)
    q = mag * scale
    n = q.numerator // q.denominator
    rem = q - n
    if rem > Fraction(1, 2) or (rem == Fraction(1, 2) and n & 1):
        n += 1
    result = Fraction(n) / scale
    if result >= Fraction(2) ** 128:
        return sign | 0x7F800000
    return sign | f32_bits(float(result))


def exact_fma(a, b, c):
    """fma of finite a, b by exact arithmetic, with IEEE zero-sign rules (c may be inf/NaN
    after an overflow earlier in the chain)."""
    if (c & 0x7F800000) == 0x7F800000:
        return 0x7FC00000 if c & 0x7FFFFF else c
    fa, fb, fc = frac_of(a), frac_of(b), frac_of(c)
    exact = fa * fb + fc
    if exact == 0:
        prod_neg = ((a ^ b) >> 31) & 1 if fa * fb == 0 else None
        if fa * fb == 0 and fc == 0:
            c_neg = c >> 31
            return 0x80000000 if (prod_neg and c_neg) else 0
        return 0
    return round_f32(exact)


def exact_mul(a, b):
    exact = frac_of(a) * frac_of(b)
    if exact == 0:
        return (a ^ b) & 0x80000000
    return round_f32(exact)


def exact_transform(m, o, d):
    out_o, out_d = [], []
    for r in range(3):
        t = m[r][3] if len(m[r]) == 4 else 0
        acc = exact_fma(o[2], m[r][2], t)
        acc = exact_fma(o[1], m[r][1], acc)
        out_o.append(exact_fma(o[0], m[r][0], acc))
        acc = exact_mul(d[2], m[r][2])
        acc = exact_fma(d[1], m[r][1], acc)
        out_d.append(exact_fma(d[0], m[r][0], acc))
    return out_o, out_d


def random_finite(rng, n):
    """Finite float32 patterns: mixed magnitudes, zeros of both signs, a few subnormals."""
    kind = rng.integers(0, 10, n)
    mant = rng.integers(0, 1 << 23, n, dtype=np.int64)
    sign = rng.integers(0, 2, n, dtype=np.int64) << 31
    exp = rng.integers(100, 155, n, dtype=np.int64)
    exp = np.where(kind == 0, rng.integers(1, 254, n), exp)
    bits = sign | (exp << 23) | mant
    bits = np.where(kind == 1, sign, bits)  # signed zero
    bits = np.where(kind == 2, sign | (mant & 0x7FFF), bits)  # subnormal
    return bits.astype(np.uint32)


def test_obb_transform_matches_exact_rationals():
    rng = np.random.default_rng(1)
    n = 300
    idx = rng.integers(0, 104, n)
    o = random_finite(rng, 3 * n).reshape(n, 3)
    d = random_finite(rng, 3 * n).reshape(n, 3)
    go, gd, bad = obb.obb_transform_ray(idx, o, d)
    assert not bad.any()
    for k in range(n):
        eo, ed = exact_transform(
            obb.obb_matrix_bits(int(idx[k])), [int(v) for v in o[k]], [int(v) for v in d[k]]
        )
        assert [int(v) for v in go[k]] == eo, (k, idx[k])
        assert [int(v) for v in gd[k]] == ed, (k, idx[k])


def test_instance_transform_matches_exact_rationals():
    rng = np.random.default_rng(2)
    n = 150
    m = random_finite(rng, 12 * n).reshape(n, 3, 4)
    o = random_finite(rng, 3 * n).reshape(n, 3)
    d = random_finite(rng, 3 * n).reshape(n, 3)
    go, gd = obb.transform_rows(m, o, d)
    for k in range(n):
        mk = [[int(v) for v in row] for row in m[k]]
        eo, ed = exact_transform(mk, [int(v) for v in o[k]], [int(v) for v in d[k]])
        assert [int(v) for v in go[k]] == eo
        assert [int(v) for v in gd[k]] == ed


def test_passthrough_and_bad_index():
    o = np.array([[0x7FC00001, 0x80000000, 0xFF800000]], np.uint32)  # NaN payload, -0, -inf
    d = np.array([[0x00000001, 0x3F800000, 0x7F800000]], np.uint32)
    go, gd, bad = obb.obb_transform_ray(0x7F, o, d)
    assert np.array_equal(go, o) and np.array_equal(gd, d) and not bad.any()
    go, gd, bad = obb.obb_transform_ray(104, o, d)
    assert np.array_equal(go, o) and bad.all()
    with pytest.raises(ValueError, match="7-bit"):
        obb.obb_transform_ray(128, o, d)


def test_special_values_follow_ieee():
    # inf * 0 inside the chain gives NaN -> canonical NaN; zero-sign of the innermost origin term
    m = obb.obb_matrix_bits(6)  # rows (1,0,0), (0,0,-1), (0,1,0)
    o = [0x80000000, 0x7F800000, 0x3F800000]  # -0, +inf, 1
    d = [0x80000000, 0x80000000, 0x80000000]
    go, gd = obb.transform_rows(m, o, d)
    # row 0: 1*(-0) + 0*inf -> NaN
    assert int(go[0]) == 0x7FC00000
    # direction row 0: -0*1 + (-0*0 + -0*0) = -0 ; origin-like chain would give +0
    assert int(gd[0]) == 0x80000000
    _, oz, _ = obb.obb_transform_ray(2, [0x80000000] * 3, [0] * 3)
    assert int(obb.obb_transform_ray(6, [0x80000000] * 3, [0x80000000] * 3)[0][0]) == 0


def test_vectorized_equals_scalar():
    rng = np.random.default_rng(3)
    idx = rng.integers(0, 128, 50)
    o = random_finite(rng, 150).reshape(50, 3)
    d = random_finite(rng, 150).reshape(50, 3)
    vo, vd, vb = obb.obb_transform_ray(idx, o, d)
    for k in range(50):
        so, sd, sb = obb.obb_transform_ray(int(idx[k]), o[k], d[k])
        assert np.array_equal(so, vo[k]) and np.array_equal(sd, vd[k]) and sb == vb[k]
