"""Shared pieces of the FP32 cores: stage placement, operand unpacking, leading-zero count,
shifters, and the normalise-round-pack back end.

Each core is written as a chain of combinational *segments* with an estimated delay weight.
:class:`Stager` puts the core's ``stages`` pipeline registers on the segment boundaries that
balance the weights (the last register always sits on the output), so one ``stages`` parameter
trades latency against clock rate. Every register advances only while ``en`` is high.

The number format (IEEE 754-2019 binary32, round to nearest even) and the special-value rules are
those of :mod:`gpurtl.golden.fp32`; the decomposition (special cases / align / add / normalise,
round and pack) follows the usual textbook split also used by Libre-SOC's ieee754fpu.
"""

from amaranth.hdl import Cat, Const, Mux, Signal, Value
from amaranth.lib import wiring
from amaranth.lib.wiring import In

from gpurtl.facts.fp32 import CANONICAL_NAN, EXPONENT_MAX, MIN_NORMAL, POS_INF, Float32

__all__ = [
    "Stager",
    "place_registers",
    "FPCore",
    "Operand",
    "unpack",
    "leading_zeros",
    "trailing_zeros",
    "lz_groups",
    "lz_finish",
    "shift_right_sticky",
    "ROUND_WEIGHTS",
    "round_pack",
    "SPEC_NONE",
    "SPEC_ZERO",
    "SPEC_INF",
    "SPEC_NAN",
    "CANONICAL_NAN",
]

# special-result kinds carried down a pipeline instead of a 32-bit value
SPEC_NONE, SPEC_ZERO, SPEC_INF, SPEC_NAN = range(4)


def place_registers(weights, stages):
    """Segment indices after which a register goes: ``stages`` of them, the last one at the end,
    chosen to minimise the largest summed weight between registers (dynamic programming)."""
    count = len(weights)
    if stages == 0:
        return set()
    if not 1 <= stages <= count:
        raise ValueError(f"`stages` must be from 0 to {count}, not {stages}")
    prefix = [0.0]
    for w in weights:
        prefix.append(prefix[-1] + w)
    inf = float("inf")
    # best[s][j]: minimal max weight splitting the first j segments into s groups
    best = [[inf] * (count + 1) for _ in range(stages + 1)]
    choice = [[0] * (count + 1) for _ in range(stages + 1)]
    best[0][0] = 0.0
    for s in range(1, stages + 1):
        for j in range(s, count + 1):
            for i in range(s - 1, j):
                cost = max(best[s - 1][i], prefix[j] - prefix[i])
                if cost < best[s][j] - 1e-9:
                    best[s][j], choice[s][j] = cost, i
    cuts, j = set(), count
    for s in range(stages, 0, -1):
        cuts.add(j - 1)
        j = choice[s][j]
    return cuts


class Stager:
    """Inserts the pipeline registers of one core.

    Call :meth:`cut` once at the end of every segment, in order, with the values the rest of the
    pipeline needs; it returns them registered (when a register goes there) or unchanged.
    """

    def __init__(self, m, en, weights, stages):
        self._m, self._en = m, en
        self._weights = tuple(weights)
        self._cuts = place_registers(self._weights, stages)
        self._index = 0
        self._stage = 0

    @property
    def done(self):
        return self._index == len(self._weights)

    def cut(self, **values):
        index = self._index
        if index >= len(self._weights):
            raise RuntimeError("more segments than weights")
        self._index += 1
        if index not in self._cuts:
            # a named wire per boundary keeps expression trees small (the Python simulator
            # inlines expressions, so shared sub-expressions would otherwise be duplicated)
            out = {}
            for name, value in values.items():
                value = Value.cast(value)
                wire = Signal(value.shape(), name=f"c{index}_{name}")
                self._m.d.comb += wire.eq(value)
                out[name] = wire
            return _Bag(out)
        stage = self._stage
        self._stage += 1
        out = {}
        for name, value in values.items():
            value = Value.cast(value)
            reg = Signal(value.shape(), name=f"s{stage}_{name}")
            with self._m.If(self._en):
                self._m.d.sync += reg.eq(value)
            out[name] = reg
        return _Bag(out)


class _Bag(dict):
    __getattr__ = dict.__getitem__


class FPCore(wiring.Component):
    """Base of the FP32 cores: validated ``stages`` and ``ftz``, ``latency`` property.

    Subclasses set ``WEIGHTS`` (delay weight of each segment; ``len(WEIGHTS)`` is the largest
    ``stages``) and ``DEFAULT_STAGES``, give their operand and result ports as ``ports``
    (``{name: In(32) or Out(32)}``) and their datapath as ``elaborate_rtl``; the clock enable
    ``en`` (:mod:`gpurtl.hdl.pipe`) is added here.

    A platform may stand in for the datapath: when the platform that elaborates a core has a
    callable ``fp32_core(core)`` that returns an elaboratable (not ``None``), that is the core's
    implementation. Simulators use it to put a behavioural model of
    the same latency, enable and results in its place (``gpurtl.sim.backends.fast.behavioural``),
    and the Verilog export to instance one module per distinct core by name
    (``gpurtl.sim.core.export.SharedCores``); the RTL is the default.
    """

    WEIGHTS = ()
    DEFAULT_STAGES = 1

    def __init__(self, ports, stages=None, ftz=False):
        if stages is None:
            stages = self.DEFAULT_STAGES
        if isinstance(stages, bool) or not isinstance(stages, int) or stages < 0:
            raise TypeError(f"`stages` must be a non-negative integer, not {stages!r}")
        if stages > self.max_stages():
            raise ValueError(
                f"`stages` must be at most {self.max_stages()} for "
                f"{type(self).__name__}, not {stages}"
            )
        if not isinstance(ftz, bool):
            raise TypeError(f"`ftz` must be a boolean, not {ftz!r}")
        self._stages, self._ftz = stages, ftz
        super().__init__({"en": In(1), **ports})

    @classmethod
    def max_stages(cls):
        return len(cls.WEIGHTS)

    @property
    def stages(self):
        return self._stages

    @property
    def latency(self):
        """Cycles (with ``en`` high) from an operand to its result: the number of stages."""
        return self._stages

    @property
    def ftz(self):
        return self._ftz

    def _stager(self, m):
        return Stager(m, self.en, self.WEIGHTS, self._stages)

    def elaborate(self, platform):
        stand_in = getattr(platform, "fp32_core", None)
        if stand_in is not None:
            implementation = stand_in(self)
            if implementation is not None:
                return implementation
        return self.elaborate_rtl(platform)

    def elaborate_rtl(self, platform):
        raise NotImplementedError(f"{type(self).__name__} must define `elaborate_rtl`")


class Operand:
    """Fields of one unpacked binary32 operand (combinational)."""

    def __init__(self, bits, ftz):
        f = Float32(bits)
        self.sign = f.sign
        self.field = f.exponent
        frac = f.fraction
        self.field_zero = self.field == 0
        self.field_ones = self.field == EXPONENT_MAX
        self.is_nan = self.field_ones & (frac != 0)
        self.is_inf = self.field_ones & (frac == 0)
        if ftz:
            self.is_zero = self.field_zero
            self.sig = Mux(self.field_zero, 0, Cat(frac, Const(1, 1)))
        else:
            self.is_zero = self.field_zero & (frac == 0)
            self.sig = Cat(frac, ~self.field_zero)  # 24 bits, implicit bit
        self.exp = Mux(self.field_zero, 1, self.field)  # effective biased exponent, 8 bits
        # magnitude for ordering (flushed subnormals order as zero)
        self.mag = Mux(self.field_zero, 0, f.magnitude()) if ftz else f.magnitude()
        self.bits = f.as_value()


def unpack(bits, ftz):
    return Operand(bits, ftz)


def _pad_pow2(value, fill):
    value = Value.cast(value)
    width = len(value)
    size = 2
    while size < width:
        size *= 2
    if size == width:
        return value
    pad = Const((1 << (size - width)) - 1 if fill else 0, size - width)
    return Cat(pad, value)


def _combine(parts):
    """Merge (zeros, any) pairs of equal-sized power-of-two blocks, listed low block first."""
    while len(parts) > 1:
        merged = []
        for (zl, al), (zh, ah) in zip(parts[0::2], parts[1::2]):
            merged.append((Mux(ah, Cat(zh, Const(0, 1)), Cat(zl, Const(1, 1))), ah | al))
        parts = merged
    return parts[0]


def lz_groups(value, group=8):
    """First half of a leading-zero count: ``(zeros, any)`` of each ``group``-bit block of
    ``value`` (padded at the bottom with ones to a power of two), low block first."""
    padded = _pad_pow2(value, 1)
    group = min(group, len(padded))
    parts = []
    for lo in range(0, len(padded), group):
        pairs = [(~padded[i + 1], padded[i] | padded[i + 1]) for i in range(lo, lo + group, 2)]
        parts.append(_combine(pairs) if group > 2 else pairs[0])
    return parts


def lz_finish(parts, width):
    """Second half: the leading-zero count (``width`` when all zero) from :func:`lz_groups`."""
    zeros, found = _combine(list(parts))
    return Mux(found, zeros, width)


def leading_zeros(value):
    """Number of leading zeros of ``value`` (its full width when it is zero), as a Value."""
    value = Value.cast(value)
    return lz_finish(lz_groups(value), len(value))


def trailing_zeros(value):
    """Number of trailing zeros of ``value`` (its full width when it is zero)."""
    value = Value.cast(value)
    width = len(value)
    size = 2
    while size < width:
        size *= 2
    padded = Cat(value, Const((1 << (size - width)) - 1, size - width)) if size > width else value
    parts = [(~padded[i], padded[i] | padded[i + 1]) for i in range(0, size, 2)]
    while len(parts) > 1:
        merged = []
        for (zl, al), (zh, ah) in zip(parts[0::2], parts[1::2]):
            merged.append((Mux(al, Cat(zl, Const(0, 1)), Cat(zh, Const(1, 1))), ah | al))
        parts = merged
    zeros, found = parts[0]
    return Mux(found, zeros, width)


def shift_right_sticky(value, amount, width):
    """``(value >> amount)[:width]`` and whether any 1 bit was shifted out. ``amount`` unsigned."""
    value = Value.cast(value)
    amount = Value.cast(amount)
    limit = width + 1
    big = amount >= limit
    amt = Mux(big, limit, amount)[: max(1, limit.bit_length())]
    shifted = (value >> amt)[:width]
    # bits are lost exactly when the shift exceeds the trailing zero count
    lost = value.any() & (amt > trailing_zeros(value))
    return shifted, lost


def round_pack(
    st, *, sign, exp, sig, sticky, width, ftz, spec, spec_sign, zero_sign, min_exp=None, names=()
):
    """Normalise, round to nearest even and pack; seven segments (``st.cut`` seven times).

    The value is ``(-1)**sign * (sig + eps) / 2**(width-1) * 2**(exp - 127)``: ``exp`` is the biased
    exponent of ``sig``'s top bit (a signed Value), ``sticky`` says ``eps`` is non-zero (below
    ``sig``'s last bit, with at least two bits of ``sig`` below the rounding position whenever it
    matters). A zero ``sig`` without sticky packs as ``zero_sign``. ``spec`` (SPEC_*) and
    ``spec_sign`` override the result. ``min_exp``, when known, is the smallest ``exp`` can be
    (``>= 1``: no denormalising right shift is ever needed). ``names`` maps extra values to carry.

    The net left shift is ``s = min(lz, exp - 1)`` (negative: a right shift that denormalises);
    it is done as one right shift of ``sig << W`` by ``t = W - s`` (``W`` the padded width), split
    into a coarse (multiples of 8) and a fine step. Bits shifted out are known from the trailing
    zero count of ``sig``: some are lost exactly when ``t - W > tz(sig)``.

    Returns the final bag with ``z`` (32 bits).
    """
    carry = dict(names) if names else {}
    sig = Value.cast(sig)
    if len(sig) != width:
        raise ValueError(f"`sig` must be {width} bits wide, not {len(sig)}")
    wp = (width + 7) // 8 * 8  # padded width
    sig_p = Cat(Const(0, wp - width), sig) if wp > width else sig
    denorm = not (min_exp is not None and min_exp >= 1)

    def keep(bag):
        return {k: bag[k] for k in carry}

    # segment 1: leading and trailing zeros (parallel trees), e - 1 clamped at -W
    flat = {"lz": leading_zeros(sig)}
    sh = (exp - 1).as_signed()
    e = exp
    extra = {}
    if denorm:
        clamp = sh < -wp
        sh, e = Mux(clamp, -wp, sh), Mux(clamp, 1 - wp, exp)
        extra = {"tz": trailing_zeros(sig_p)}
    b = st.cut(
        sign=sign,
        e=e,
        sh=sh,
        sig=sig_p,
        sticky=sticky,
        spec=spec,
        spec_sign=spec_sign,
        zero_sign=zero_sign,
        nonzero=sig.any() | sticky,
        **flat,
        **extra,
        **carry,
    )
    # segment 2: s = min(lz, e - 1); lost bits when s < -tz
    lzs = Cat(b.lz, Const(0, 1)).as_signed()
    net = Mux(lzs <= b.sh, lzs, b.sh)  # signed net left shift
    lost = ((b.sh < 0) & ((-b.sh) > b.tz)) if denorm else Const(0, 1)
    b = st.cut(
        sign=b.sign,
        e=b.e,
        net=net,
        sig=b.sig,
        sticky=b.sticky | lost,
        spec=b.spec,
        spec_sign=b.spec_sign,
        zero_sign=b.zero_sign,
        nonzero=b.nonzero,
        **keep(b),
    )
    # segment 3: right-shift amount t = W - s (at most 2 W), exponent field e - s
    tw = (2 * wp + 1).bit_length()
    field = (b.e - b.net).as_signed()
    t = (wp - b.net)[:tw]
    b = st.cut(
        sign=b.sign,
        field=field,
        t=t,
        sig=b.sig,
        sticky=b.sticky,
        spec=b.spec,
        spec_sign=b.spec_sign,
        zero_sign=b.zero_sign,
        nonzero=b.nonzero,
        **keep(b),
    )
    # segment 4: coarse shift of (sig << W) right by 8 * (t >> 3); keep W + 7 bits
    wide = Cat(Const(0, wp), b.sig)
    coarse = (wide >> Cat(Const(0, 3), b.t[3:]))[: wp + 7]
    b = st.cut(
        sign=b.sign,
        field=b.field,
        fine=b.t[:3],
        sig=coarse,
        sticky=b.sticky,
        spec=b.spec,
        spec_sign=b.spec_sign,
        zero_sign=b.zero_sign,
        nonzero=b.nonzero,
        **keep(b),
    )
    # segment 5: fine shift by t mod 8
    shifted = (b.sig >> b.fine)[:wp]
    b = st.cut(
        sign=b.sign,
        field=b.field,
        sig=shifted,
        sticky=b.sticky,
        spec=b.spec,
        spec_sign=b.spec_sign,
        zero_sign=b.zero_sign,
        nonzero=b.nonzero,
        **keep(b),
    )
    # segment 6: round to nearest even; the carry out of the significand bumps the exponent
    kept = b.sig[wp - 24 : wp]
    guard = b.sig[wp - 25]
    rest = b.sig[0 : wp - 25].any() | b.sticky
    up = guard & (rest | kept[0])
    # ((field - 1) << 23) + kept encodes normal and subnormal results alike
    fw = len(b.field) + 24
    packed = (Cat(Const(0, 23), (b.field - 1)[: len(b.field)]).as_signed() + kept + up)[:fw]
    b = st.cut(
        sign=b.sign,
        packed=packed.as_signed(),
        spec=b.spec,
        spec_sign=b.spec_sign,
        zero_sign=b.zero_sign,
        nonzero=b.nonzero,
        **keep(b),
    )
    # segment 7: overflow, flush, specials, sign
    ovf = b.packed >= POS_INF
    mag = Mux(ovf, POS_INF, b.packed[0:31])
    if ftz:
        mag = Mux(mag < MIN_NORMAL, 0, mag)
    z_value = Mux(
        b.spec == SPEC_NAN,
        CANONICAL_NAN,
        Mux(
            b.spec == SPEC_INF,
            Cat(Const(POS_INF, 31), b.spec_sign),
            Mux(
                b.spec == SPEC_ZERO,
                Cat(Const(0, 31), b.spec_sign),
                Mux(b.nonzero, Cat(mag, b.sign), Cat(Const(0, 31), b.zero_sign)),
            ),
        ),
    )
    return st.cut(z=z_value, **keep(b))


ROUND_WEIGHTS = (1.5, 1.5, 1.5, 1.5, 1.0, 2.0, 1.5)
"""Delay weights of the seven :func:`round_pack` segments."""
