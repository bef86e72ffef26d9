"""FP32 access point of O's golden models (OBB transform, instance transform).

Everything goes through :mod:`gpurtl.golden.fp32` (the FP32 engineer's bit-exact library, see
/work/fp32_contract.md). While that module has not landed yet, a private stand-in with the same
function names and semantics (IEEE binary32, round to nearest even, subnormals kept, every NaN
result is ``0x7FC00000``) is used instead; it is deleted once ``golden/fp32.py`` exists.
"""

import numpy as np

__all__ = ["fma", "mul", "add", "rcp", "CANONICAL_NAN", "USING_SHARED_LIBRARY"]

CANONICAL_NAN = 0x7FC00000

try:  # pragma: no cover - depends on the FP32 engineer's progress
    from gpurtl.golden import fp32 as _lib
    fma, mul, add, rcp = _lib.fma, _lib.mul, _lib.add, _lib.rcp
    USING_SHARED_LIBRARY = True
except ImportError:  # pragma: no cover
    USING_SHARED_LIBRARY = False

    def _f(bits):
        return np.asarray(bits, dtype=np.uint64).astype(np.uint32).view(np.float32)

    def _canon(result):
        bits = result.astype(np.float32).view(np.uint32).copy()
        bits[np.isnan(result)] = CANONICAL_NAN
        return bits

    def mul(a, b):
        with np.errstate(all="ignore"):
            return _canon(np.atleast_1d(_f(a) * _f(b)))

    def add(a, b):
        with np.errstate(all="ignore"):
            return _canon(np.atleast_1d(_f(a) + _f(b)))

    def rcp(a):
        with np.errstate(all="ignore"):
            return _canon(np.atleast_1d(np.float32(1.0) / _f(a)))

    def fma(a, b, c):
        """a*b + c with one rounding: exact binary64 product, binary64 sum rounded to odd
        (TwoSum error fix-up), then one RNE rounding to binary32 (53 >= 24 + 2 bits)."""
        with np.errstate(all="ignore"):
            a64 = np.atleast_1d(_f(a)).astype(np.float64)
            b64 = np.atleast_1d(_f(b)).astype(np.float64)
            c64 = np.atleast_1d(_f(c)).astype(np.float64)
            a64, b64, c64 = np.broadcast_arrays(a64, b64, c64)
            p = a64 * b64                      # exact: 24 + 24 bits
            s = p + c64
            bb = s - p
            err = (p - (s - bb)) + (c64 - bb)  # TwoSum: p + c = s + err exactly
            finite = np.isfinite(s) & np.isfinite(err)
            bits = s.view(np.uint64)
            fix = finite & (err != 0) & ((bits & 1) == 0)
            toward = np.where(err > 0, np.inf, -np.inf)
            s = np.where(fix, np.nextafter(s, toward), s)
            return _canon(s.astype(np.float32))
