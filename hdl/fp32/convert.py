"""Pipelined conversions between binary32 and 32-bit integers: ``FPToIntCore`` (float -> int32 /
uint32, rounding toward zero, saturating) and ``IntToFPCore`` (int32 / uint32 -> float, round to
nearest even), bit-exact with :func:`gpurtl.golden.fp32.f2i` and :func:`~gpurtl.golden.fp32.i2f`.

Float to integer (three segments):

1. unpack; everything but the integer magnitude is decided from the exponent field alone: a
   value below 1 truncates to 0, the field says whether the magnitude reaches the target type's
   limit (saturation), a NaN gives 0;
2. the integer magnitude: the significand (leading bit at bit 31) shifted right by
   ``158 - field``;
3. two's-complement negation for int32 and the saturation multiplexer.

Integer to float (three segments): 1. sign and magnitude, and in parallel the leading-zero
count of the one's complement (no negation in front of the count); 2. normalising left shift
(33 bits: the count is one too large exactly when the magnitude is a power of two); 3. round to
nearest even (23 fraction bits, guard, sticky) and pack, the carry out of the fraction bumping the
exponent field.

Saturation and NaN rule (the documented choice of this library, the AMD GPU behaviour; C leaves
it undefined): out-of-range values and infinities give ``INT32_MIN``/``INT32_MAX`` or
``0``/``UINT32_MAX``, NaN gives 0, and ``invalid`` is high exactly then.
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib.wiring import In, Out

from gpurtl.facts.fp32 import EXPONENT_BIAS, Float32

from .common import FPCore, leading_zeros

__all__ = ["FPToIntCore", "IntToFPCore"]


class FPToIntCore(FPCore):
    """binary32 -> int32/uint32 datapath (round toward zero, saturating) with a clock enable.

    Parameters
    ----------
    stages : int
        Pipeline registers, 0 (combinational) to 3; ``latency == stages``. Default 2.
    ftz : bool
        Flush subnormal inputs (they truncate to 0 anyway: no effect, kept for uniformity).

    Attributes
    ----------
    en : In(1)
        Every pipeline register advances only while ``en`` is high.
    a : In(32)
        Operand (binary32 bit pattern).
    signed : In(1)
        1: convert to int32; 0: to uint32.
    z : Out(32)
        Result (two's complement for int32), ``latency`` enabled cycles later. Out-of-range
        values and infinities saturate to the target type's limit; NaN gives 0.
    invalid : Out(1)
        The result saturated or ``a`` is a NaN. A negative value truncating to 0 (``-0.5`` into
        uint32) is valid.
    """

    WEIGHTS = (1.0, 2.0, 1.5)
    DEFAULT_STAGES = 2

    def __init__(self, stages=None, ftz=False):
        super().__init__(
            {"a": In(32), "signed": In(1), "z": Out(32), "invalid": Out(1)},
            stages,
            ftz,
        )

    def elaborate_rtl(self, platform):
        m = Module()
        st = self._stager(m)
        a = Float32(self.a)
        sign, field, frac = a.sign, a.exponent, a.fraction
        frac_zero = frac == 0
        nan = a.is_nan()
        below_one = field < EXPONENT_BIAS  # subnormals too: ftz changes nothing
        # segment 1: saturation from the field; |a| >= 2**31 from field 158, >= 2**32 from 159
        to_int = self.signed
        over = Mux(
            to_int,
            Mux(sign, (field > 158) | ((field == 158) & ~frac_zero), field >= 158),
            Mux(sign, ~below_one, field >= 159),
        )
        sat = nan | over
        # saturation value: NaN and negative-into-uint32 -> 0, else the limit of the sign
        sat_value = Mux(
            nan | (sign & ~to_int), 0, Mux(to_int, Mux(sign, 0x80000000, 0x7FFFFFFF), 0xFFFFFFFF)
        )
        amount = (158 - field)[:5]  # right shift, 0..31 when not below_one
        s = st.cut(
            sig=Cat(Const(0, 8), frac, Const(1, 1)),
            amount=amount,
            zero=below_one,
            neg=sign & to_int,
            sat=sat,
            sat_value=sat_value,
        )
        # segment 2: integer magnitude (truncation drops the shifted-out bits)
        mag = Mux(s.zero, 0, s.sig >> s.amount)[:32]
        s = st.cut(mag=mag, neg=s.neg, sat=s.sat, sat_value=s.sat_value)
        # segment 3: sign and saturation
        value = Mux(s.neg, -s.mag, s.mag)[:32]
        s = st.cut(z=Mux(s.sat, s.sat_value, value), invalid=s.sat)
        assert st.done
        m.d.comb += [self.z.eq(s.z), self.invalid.eq(s.invalid)]
        return m


class IntToFPCore(FPCore):
    """int32/uint32 -> binary32 datapath (round to nearest even) with a clock enable.

    Parameters
    ----------
    stages : int
        Pipeline registers, 0 (combinational) to 3; ``latency == stages``. Default 3.
    ftz : bool
        Flush subnormal results (there are none: no effect, kept for uniformity).

    Attributes
    ----------
    en : In(1)
        Every pipeline register advances only while ``en`` is high.
    a : In(32)
        Operand: an int32 (two's complement) or uint32 bit pattern.
    signed : In(1)
        1: ``a`` is an int32; 0: a uint32.
    z : Out(32)
        Result (binary32 bit pattern), ``latency`` enabled cycles later. Exact for magnitudes
        below ``2**24``; ``0`` gives ``+0``.
    """

    WEIGHTS = (2.0, 2.0, 2.0)
    DEFAULT_STAGES = 3

    def __init__(self, stages=None, ftz=False):
        super().__init__({"a": In(32), "signed": In(1), "z": Out(32)}, stages, ftz)

    def elaborate_rtl(self, platform):
        m = Module()
        st = self._stager(m)
        # segment 1: sign, magnitude (INT32_MIN's 2**31 fits the 32 bits) and, in parallel
        # with the negation, the leading zeros of the one's complement ~a of a negative a.
        # -a = ~a + 1 has the same leading-one position unless ~a = 2**k - 1 (then -a = 2**k,
        # one position higher; ~a = 0 for a = -1 counts 32 zeros); segment 2 fixes that case.
        # named wires: the count refers to every bit many times (no duplicated expressions)
        neg, ones = Signal(name="neg"), Signal(32, name="ones")
        m.d.comb += [neg.eq(self.signed & self.a[31]), ones.eq(self.a ^ neg.replicate(32))]
        s = st.cut(
            neg=neg, mag=Mux(neg, -self.a, self.a)[:32], lz=leading_zeros(ones), zero=self.a == 0
        )
        # segment 2: normalise the leading one to bit 31, or to bit 32 in the 2**k case above
        # (all bits below it are then zero); the exponent field is 158 - lz (+1 for bit 32)
        s = st.cut(neg=s.neg, norm=(s.mag << s.lz)[:33], field=(158 - s.lz)[:8], zero=s.zero)
        # segment 3: round to nearest even and pack with one 31-bit addition to field:fraction
        # (a carry out of the fraction leaves it zero and bumps the field); the bit-32 case
        # (exact, no rounding) adds 1 to the field instead
        frac, guard, rest = s.norm[8:31], s.norm[7], s.norm[0:7].any()
        up = guard & (rest | frac[0])
        packed = (Cat(frac, s.field) + Cat(up, Const(0, 22), s.norm[32]))[:31]
        s = st.cut(z=Mux(s.zero, 0, Cat(packed, s.neg)))
        assert st.done
        m.d.comb += self.z.eq(s.z)
        return m
