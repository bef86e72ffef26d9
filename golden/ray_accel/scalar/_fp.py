"""FP32 access point of the OBB and instance transform models.

All arithmetic goes through :mod:`gpurtl.golden.fp32` (bit-exact IEEE binary32, round to nearest
even, subnormals kept, canonical NaN ``0x7FC00000``). The functions
here return numpy uint32 arrays (at least 1-D) whatever the input shape.
"""

import numpy as np

from gpurtl.golden import fp32 as _lib

__all__ = ["fma", "mul", "add", "rcp", "CANONICAL_NAN"]

CANONICAL_NAN = _lib.CANONICAL_NAN


def _arr(value):
    return np.atleast_1d(np.asarray(value, dtype=np.uint32))


def fma(a, b, c):
    return _arr(_lib.fma(_arr(a), _arr(b), _arr(c)))


def mul(a, b):
    return _arr(_lib.mul(_arr(a), _arr(b)))


def add(a, b):
    return _arr(_lib.add(_arr(a), _arr(b)))


def rcp(a):
    return _arr(_lib.rcp(_arr(a)))
