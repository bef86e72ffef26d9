"""The binary32 shape and bit-pattern helpers shared by the RTL, the golden models and the testbenches."""

import struct

from amaranth.hdl import Const, ShapeCastable, unsigned

__all__ = ["Float32", "f32_bits", "bits_f32"]


def f32_bits(value):
    """IEEE-754 binary32 bit pattern of a Python number (round to nearest even)."""
    return struct.unpack("<I", struct.pack("<f", value))[0]


def bits_f32(bits):
    """Python float of a binary32 bit pattern."""
    return struct.unpack("<f", struct.pack("<I", bits & 0xFFFFFFFF))[0]


class Float32(ShapeCastable):
    """A 32-bit field that holds an IEEE-754 binary32 bit pattern.

    In the RTL it is a plain ``unsigned(32)`` value; the marker lets the JSON reader accept numbers
    as well as bit patterns, and makes the JSON writer print exact bit patterns.
    """

    def as_shape(self):
        return unsigned(32)

    def __call__(self, target):
        return target

    def const(self, init):
        if init is None:
            init = 0
        if isinstance(init, float):
            init = f32_bits(init)
        return Const(init, 32)

    def from_bits(self, raw):
        return raw

    def __eq__(self, other):
        return isinstance(other, Float32)

    def __hash__(self):
        return hash(Float32)

    def __repr__(self):
        return "Float32()"
