"""Element decoding against ml_dtypes, and rounding to FP32/F16/BF16 against numpy/ml_dtypes."""

import ml_dtypes
import numpy as np
import pytest

from gpurtl.golden.matrix.formats import decode, round_to, to_float

DTYPES = {
    "f16": np.float16,
    "bf16": ml_dtypes.bfloat16,
    "fp8": ml_dtypes.float8_e4m3fn,
    "bf8": ml_dtypes.float8_e5m2,
    "fp8_fnuz": ml_dtypes.float8_e4m3fnuz,
    "bf8_fnuz": ml_dtypes.float8_e5m2fnuz,
}


@pytest.mark.parametrize("name", DTYPES)
def test_every_pattern_decodes_as_ml_dtypes(name):
    dt = DTYPES[name]
    width = np.dtype(dt).itemsize * 8
    bits = np.arange(1 << width)
    with np.errstate(invalid="ignore"):
        ref = bits.astype(np.uint16 if width == 16 else np.uint8).view(dt).astype(np.float64)
    got = to_float(bits, name)
    nan = np.isnan(ref)
    assert (np.isnan(got) == nan).all()
    assert (got[~nan] == ref[~nan]).all()
    assert (np.signbit(got[~nan]) == np.signbit(ref[~nan])).all()
    d = decode(bits, name)
    assert (d.inf == np.isinf(ref)).all() and (d.zero == (ref == 0)).all()


@pytest.mark.parametrize(
    "name,dt", [("f32", np.float32), ("f16", np.float16), ("bf16", ml_dtypes.bfloat16)]
)
def test_round_to_nearest_even(name, dt):
    rng = np.random.default_rng(1)
    x = rng.standard_normal(50_000) * 2.0 ** rng.integers(-170, 135, 50_000)
    x[:8] = [
        1 + 2.0**-24,
        1 + 3 * 2.0**-24,
        2.0**-149 * 1.5,
        2.0**-150,
        65520.0,
        65519.0,
        0.0,
        -0.0,
    ]
    m, e = np.frexp(np.abs(x))
    mag = (m * 2.0**53).astype(np.int64)
    scale = e.astype(np.int64) - 53
    got = round_to(np.signbit(x).astype(np.int64), mag, scale, name)
    width = np.dtype(dt).itemsize * 8
    with np.errstate(over="ignore"):
        ref = x.astype(dt).view(np.uint32 if width == 32 else np.uint16).astype(np.int64)
    assert (got == ref).all(), np.nonzero(got != ref)[0][:5]


def test_round_toward_zero_and_flush():
    one_plus = np.array([(1 << 30) - 1])  # just below 2 ** 30 at scale -30: below 1.0
    assert round_to(np.array([0]), one_plus, np.array([-30]), "f32", mode="rz")[0] == 0x3F7FFFFF
    assert (
        round_to(np.array([1]), np.array([3]), np.array([200]), "f32", mode="rz")[0] == 0xFF7FFFFF
    )
    assert round_to(np.array([0]), np.array([3]), np.array([200]), "f32")[0] == 0x7F800000
    assert round_to(np.array([1]), np.array([1]), np.array([-140]), "f32", ftz=True)[0] == 1 << 31
