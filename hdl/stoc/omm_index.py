"""Barycentric (u, v) to opacity-micromap micro-triangle index: RTL datapath and block.

The conversion follows the Vulkan reference algorithm (Vulkan-Docs
``appendices/VK_EXT_opacity_micromap.adoc``), re-expressed in integers (see
:mod:`gpurtl.golden.stoc.index` for the golden model and the fixed-point rules). The hardware
computes a single index at the maximum level 12 and shifts it right by ``2 * (12 - level)`` for
coarser levels (the curve is hierarchical; the golden model computes each level directly and the
lockstep check compares the two).
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, wiring

from gpurtl.facts.fp32 import EXPONENT_BIAS, Float32
from gpurtl.facts.stoc import MAX_LEVEL, omm_index_in_layout, omm_index_out_layout

from ..pipe import EnableCoreSignature, EnableCoreStream, reg

__all__ = [
    "MAX_LEVEL",
    "fixed_from_f32",
    "index_at_max_level",
    "shift_to_level",
    "OMMIndexCore",
    "OMMIndex",
]


def _check_frac_bits(frac_bits):
    if (
        not isinstance(frac_bits, int)
        or isinstance(frac_bits, bool)
        or not MAX_LEVEL <= frac_bits <= 24
    ):
        raise TypeError(f"`frac_bits` must be an integer from {MAX_LEVEL} to 24, not {frac_bits!r}")


def fixed_from_f32(bits, frac_bits):
    """Combinational FP32 pattern -> unsigned fixed point with ``frac_bits`` fraction bits
    (``frac_bits + 1`` bits wide): clamp to [0, 1], truncate, NaN and negatives give 0."""
    f = Float32(bits)
    exp = f.exponent
    mantissa = Cat(f.fraction, exp != 0)  # 24 bits
    e = Mux(exp == 0, 1, exp)
    one = Const(1 << frac_bits, frac_bits + 1)
    # value * 2**frac_bits = mantissa >> (150 - frac_bits - e) for e <= 126
    tiny = e <= 126 - frac_bits  # right shift >= 24 -> 0
    amount = (150 - frac_bits - e)[0:5]  # 24 - frac_bits .. 23 when not tiny
    below_one = Mux(tiny, 0, mantissa >> amount)
    return Mux(f.sign | f.is_nan(), 0, Mux(exp >= EXPONENT_BIAS, one, below_one[0 : frac_bits + 1]))


def _suffix_xor(t):
    for step in (1, 2, 4, 8):
        t = t ^ (t >> step)
    return t


def index_at_max_level(m, U, V, frac_bits, prefix="idx"):
    """Combinational level-12 index of fixed-point (U, V); returns a 24-bit Value."""
    n = 1 << MAX_LEVEL
    shift = frac_bits - MAX_LEVEL
    raw_u = Signal(MAX_LEVEL + 1, name=f"{prefix}_raw_u")
    raw_v = Signal(MAX_LEVEL + 1, name=f"{prefix}_raw_v")
    m.d.comb += [raw_u.eq(U[shift:]), raw_v.eq(V[shift:])]
    iu = Signal(MAX_LEVEL, name=f"{prefix}_iu")
    iv = Signal(MAX_LEVEL, name=f"{prefix}_iv")
    m.d.comb += [iu.eq(Mux(raw_u >= n, n - 1, raw_u)), iv.eq(Mux(raw_v >= n, n - 1, raw_v))]
    s = iu + iv  # 13 bits
    if shift:
        inverted = ((U[0:shift] + V[0:shift]) >= (1 << shift)) & (s < n - 1)
    else:
        inverted = Const(0, 1)
    iu2 = Signal(MAX_LEVEL, name=f"{prefix}_iu2")
    m.d.comb += iu2.eq(Mux(s >= n, (n - 1) - iv, iu))
    iw = Signal(MAX_LEVEL, name=f"{prefix}_iw")
    m.d.comb += iw.eq((~(iu2 + iv))[0:MAX_LEVEL] - inverted)
    b0 = Signal(MAX_LEVEL, name=f"{prefix}_b0")
    t = Signal(MAX_LEVEL, name=f"{prefix}_t")
    b1 = Signal(MAX_LEVEL, name=f"{prefix}_b1")
    m.d.comb += [b0.eq(~(iu2 ^ iw)), t.eq((iu2 ^ iv) & b0)]
    m.d.comb += b1.eq(((_suffix_xor(t) ^ iu2) & ~b0) | t)
    return Cat(*(Cat(b0[k], b1[k]) for k in range(MAX_LEVEL)))


def shift_to_level(index12, level):
    """Index at ``level`` (a Value <= 12) from the level-12 index."""
    return (index12 >> ((MAX_LEVEL - level) * 2)[0:5])[0 : 2 * MAX_LEVEL]


class OMMIndexCore(wiring.Component):
    """FP32 barycentrics -> micro-triangle index, a clock-enable core (``latency`` = 3).

    Stage 1 registers the fixed-point barycentrics, stage 2 the level-12 index, stage 3 (the
    output) the index shifted to the requested level. A level above 12 sets ``error`` and gives
    index 0.

    Parameters
    ----------
    frac_bits : int
        Fraction bits of the fixed-point barycentrics (12..24, default 24 like the 24-bit unorm
        u, v of the Xe3 MemHit, IGC ``RTStackFormat.h``).
    """

    def __init__(self, frac_bits=24):
        _check_frac_bits(frac_bits)
        self._frac_bits = frac_bits
        super().__init__(EnableCoreSignature(omm_index_in_layout, omm_index_out_layout))

    @property
    def frac_bits(self):
        return self._frac_bits

    @property
    def latency(self):
        return 3

    def elaborate(self, platform):
        m = Module()
        fb, en = self._frac_bits, self.en
        fixed = data.StructLayout({"u": fb + 1, "v": fb + 1, "level": 4})
        s1 = Signal(fixed, name="s1_next")
        m.d.comb += [
            s1.u.eq(fixed_from_f32(self.i.u, fb)),
            s1.v.eq(fixed_from_f32(self.i.v, fb)),
            s1.level.eq(self.i.level),
        ]
        s1 = reg(m, en, s1, "s1")
        s2 = Signal(data.StructLayout({"index": 2 * MAX_LEVEL, "level": 4}), name="s2_next")
        m.d.comb += [s2.index.eq(index_at_max_level(m, s1.u, s1.v, fb)), s2.level.eq(s1.level)]
        s2 = reg(m, en, s2, "s2")
        bad = s2.level > MAX_LEVEL
        with m.If(en):
            m.d.sync += [
                self.o.index.eq(Mux(bad, 0, shift_to_level(s2.index, s2.level))),
                self.o.error.eq(bad),
            ]
        return m


class OMMIndex(EnableCoreStream):
    """:class:`OMMIndexCore` in a valid/ready stream (block ``omm_index``), II = 1.

    Parameters
    ----------
    frac_bits : int
        As :class:`OMMIndexCore`.
    """

    def __new__(cls, frac_bits=24, *, src_loc_at=0):
        # Refuse a bad parameter before the component exists, so that a refused build leaves no
        # "created but never used" object behind.
        _check_frac_bits(frac_bits)
        return super().__new__(cls, src_loc_at=src_loc_at + 1)

    def __init__(self, frac_bits=24, *, src_loc_at=0):
        super().__init__(OMMIndexCore(frac_bits))

    @property
    def frac_bits(self):
        return self.core.frac_bits
