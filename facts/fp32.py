"""The IEEE 754 binary32 format: its fields as an Amaranth :class:`data.Struct`, the bit patterns
the datapaths and the golden models name, and the conversions between Python numbers and bit
patterns.

Source: IEEE 754-2019, section 3.4 (binary interchange format encodings): sign (1 bit), biased
exponent (8 bits, bias 127), trailing significand (23 bits); the canonical quiet NaN is the
pattern the models give every NaN result (as Amaranth's ``IEEE754Single`` example of
:mod:`amaranth.lib.data` lays out the fields).
"""

import struct

from amaranth.hdl import unsigned
from amaranth.lib import data

__all__ = [
    "Float32",
    "f32_bits",
    "bits_f32",
    "FRACTION_BITS",
    "EXPONENT_BIAS",
    "EXPONENT_MAX",
    "SIGN_BIT",
    "MAGNITUDE_MASK",
    "POS_ZERO",
    "NEG_ZERO",
    "ONE",
    "MIN_NORMAL",
    "POS_INF",
    "NEG_INF",
    "CANONICAL_NAN",
]

FRACTION_BITS = 23
EXPONENT_BIAS = 127
#: The exponent field of infinities and NaNs.
EXPONENT_MAX = 0xFF

SIGN_BIT = 0x80000000
#: Exponent and fraction: the magnitude of a pattern (``x & MAGNITUDE_MASK``).
MAGNITUDE_MASK = 0x7FFFFFFF
POS_ZERO = 0x00000000
NEG_ZERO = 0x80000000
ONE = 0x3F800000
#: The smallest positive normal number, ``2**-126``.
MIN_NORMAL = 0x00800000
POS_INF = 0x7F800000
NEG_INF = 0xFF800000
#: The quiet NaN every NaN result of the models is.
CANONICAL_NAN = 0x7FC00000


class Float32(data.Struct):
    """A 32-bit field that holds an IEEE 754 binary32 bit pattern, least significant field
    first.

    As a shape it is 32 bits wide; a signal or field of this shape is a view with the fields
    ``fraction``, ``exponent`` and ``sign`` (``Float32(value)`` views any 32-bit value so). The
    simulation layer reads and writes such fields as numbers or exact bit patterns.
    """

    fraction: unsigned(FRACTION_BITS)
    exponent: unsigned(8)
    sign: unsigned(1)

    @classmethod
    def const(cls, init):
        """A constant of this shape from a mapping of the fields (as for any struct), a bit
        pattern (``int``) or a Python ``float`` (rounded to nearest even)."""
        if isinstance(init, float):
            init = f32_bits(init)
        if isinstance(init, int) and not isinstance(init, bool):
            return cls.from_bits(init)
        return type(cls).const(cls, init)

    def magnitude(self):
        """The pattern without its sign (31 bits; orders like the absolute value)."""
        return self.as_value()[:31]

    def is_nan(self):
        return (self.exponent == EXPONENT_MAX) & (self.fraction != 0)

    def is_inf(self):
        return (self.exponent == EXPONENT_MAX) & (self.fraction == 0)

    def is_zero(self):
        return self.magnitude() == 0


def f32_bits(value):
    """IEEE-754 binary32 bit pattern of a Python number (round to nearest even)."""
    return struct.unpack("<I", struct.pack("<f", value))[0]


def bits_f32(bits):
    """Python float of a binary32 bit pattern."""
    return struct.unpack("<f", struct.pack("<I", bits & 0xFFFFFFFF))[0]
