"""The ``cdna3`` preset against MMA-Sim's CDNA 3 MFMA models (the ``mmasim`` package), bit for bit.

MMA-Sim (arXiv 2511.10909) models each CDNA 3 matrix instruction as an arithmetic algorithm; the
``cdna3`` preset of :mod:`gpurtl.golden.matrix.presets` restates those algorithms in integer
arithmetic. Each case is one output element: ``C + A . B`` over the instruction's K (16 for
FP16/BF16, 32 for FP8/BF8, i.e. one and two steps of the preset). The default run checks a few
thousand random elements per format plus the targeted set; ``-m slow`` checks 10**5 per format.
"""

import numpy as np
import pytest

from gpurtl.golden.matrix.arith import dot
from gpurtl.golden.matrix.presets import PRESETS
from gpurtl.golden.matrix.samples import random_elements, targeted

_WHY = "the reference `mmasim` (with PyTorch) is an extra: `make mmasim` installs it"
torch = pytest.importorskip("torch", reason=_WHY)  # mmasim's own dependency
mmasim_amd = pytest.importorskip("mmasim.amd", reason=_WHY)

#: format pair -> (mmasim suffix, K, torch dtypes of A and B, our element names)
FORMATS = {
    "f16": ("f32_16x16x16_f16", 16, ("float16", "float16"), ("f16", "f16")),
    "bf16": ("f32_16x16x16_bf16", 16, ("bfloat16", "bfloat16"), ("bf16", "bf16")),
    "fp8_fp8": ("f32_16x16x32_fp8_fp8", 32, ("float8_e4m3fnuz",) * 2, ("fp8", "fp8")),
    "fp8_bf8": ("f32_16x16x32_fp8_bf8", 32, ("float8_e4m3fnuz", "float8_e5m2fnuz"), ("fp8", "bf8")),
    "bf8_fp8": ("f32_16x16x32_bf8_fp8", 32, ("float8_e5m2fnuz", "float8_e4m3fnuz"), ("bf8", "fp8")),
    "bf8_bf8": ("f32_16x16x32_bf8_bf8", 32, ("float8_e5m2fnuz",) * 2, ("bf8", "bf8")),
}


def _tensor(bits, dtype):
    dtype = getattr(torch, dtype)
    width = torch.tensor([], dtype=dtype).element_size() * 8
    raw = {8: (np.uint8, torch.uint8), 16: (np.int16, torch.int16), 32: (np.int32, torch.int32)}
    np_t, _ = raw[width]
    arr = np.asarray(bits, np.int64).astype({8: np.uint8, 16: np.uint16, 32: np.uint32}[width])
    return torch.from_numpy(arr.view(np_t)).view(dtype)


def mmasim_dot(key, a, b, c):
    suffix, _, (ta, tb), _ = FORMATS[key]
    op = mmasim_amd.MFMA("CDNA3", suffix)
    out = op.dpa(_tensor(a, ta), _tensor(b, tb), _tensor(c, "float32"))
    return out.view(torch.int32).numpy().view(np.uint32).astype(np.int64)


def ours(key, a, b, c):
    _, _, _, (fa, fb) = FORMATS[key]
    alg = PRESETS["cdna3"].algorithm(fa)
    return dot(alg, a, b, c, fa, fb, "f32")


def random_cases(key, rng, n):
    """Random elements in five mixes: uniform patterns; normal numbers over the whole range;
    a narrow exponent window (long alignments, cancellation); products that cancel; tiny values
    (subnormal products and results). C follows each mix in FP32."""
    _, k, _, (fa, fb) = FORMATS[key]
    fa_, fb_ = (x + "_fnuz" if x in ("fp8", "bf8") else x for x in (fa, fb))
    mix = rng.integers(0, 5, n)
    out = []
    for m in range(5):
        cnt = int((mix == m).sum())
        if m == 0:
            a = random_elements(rng, fa_, (cnt, k), "bits")
            b = random_elements(rng, fb_, (cnt, k), "bits")
            c = random_elements(rng, "f32", cnt, "bits")
        elif m in (1, 3):
            a = random_elements(rng, fa_, (cnt, k), special=0.002)
            b = random_elements(rng, fb_, (cnt, k), special=0.002)
            c = random_elements(rng, "f32", cnt, span=(60, 190), special=0.002)
            if m == 3:  # b[k+1] = -b[k] * a[k] / a[k+1] is not representable; flip signs instead
                a[:, 1::2] = a[:, 0::2]
                b[:, 1::2] = b[:, 0::2] ^ (1 << (7 if "8" in fb else 15))
        elif m == 2:
            span_a = (5, 9) if "8" in fa else ((13, 17) if fa == "f16" else (124, 130))
            span_b = (5, 9) if "8" in fb else ((13, 17) if fb == "f16" else (124, 130))
            a = random_elements(rng, fa_, (cnt, k), span=span_a, special=0.0)
            b = random_elements(rng, fb_, (cnt, k), span=span_b, special=0.0)
            c = random_elements(rng, "f32", cnt, span=(110, 150), special=0.0)
        else:
            a = random_elements(rng, fa_, (cnt, k), span=(1, 3), special=0.0)
            b = random_elements(rng, fb_, (cnt, k), span=(1, 3), special=0.0)
            c = random_elements(rng, "f32", cnt, span=(0, 40), special=0.0)
        out.append((a, b, c))
    return tuple(np.concatenate(parts) for parts in zip(*out))


def check_random(key, n, seed):
    rng = np.random.default_rng(seed)
    a, b, c = random_cases(key, rng, n)
    ref, got = mmasim_dot(key, a, b, c), ours(key, a, b, c)
    bad = np.nonzero(ref != got)[0]
    assert bad.size == 0, (
        f"{key}: {bad.size} of {n} differ; first a={a[bad[0]].tolist()} b={b[bad[0]].tolist()} "
        f"c={c[bad[0]]:#x}: mmasim {ref[bad[0]]:#x}, ours {got[bad[0]]:#x}"
    )
    return n


@pytest.mark.parametrize("key", FORMATS)
def test_cdna3_equals_mmasim_random(key):
    check_random(key, 3000, seed=1)


@pytest.mark.slow
@pytest.mark.parametrize("key", FORMATS)
def test_cdna3_equals_mmasim_1e5(key):
    assert check_random(key, 100_000, seed=2) == 100_000


@pytest.mark.parametrize("key", FORMATS)
def test_cdna3_equals_mmasim_targeted(key):
    _, k, _, (fa, fb) = FORMATS[key]
    names, a, b, c = targeted(fa, fb, "f32", k, fp8="fnuz")
    ref, got = mmasim_dot(key, a, b, c), ours(key, a, b, c)
    diff = [n for n, r, g in zip(names, ref, got) if r != g]
    assert not diff, diff
    assert len(names) >= 10


def test_a_wrong_preset_is_caught():
    """The comparison can fail: the rdna4 preset (one 16-product step, another NaN) differs."""
    rng = np.random.default_rng(3)
    a, b, c = random_cases("f16", rng, 2000)
    alg = PRESETS["rdna4"].algorithm("f16")
    assert (dot(alg, a, b, c, "f16", "f16", "f32") != mmasim_dot("f16", a, b, c)).any()
