"""Box intersection engine: dequantization and the slab test (``BoxEngine``).

The box test of ``IMAGE_BVH8_INTERSECT_RAY`` (AMD "RDNA4 Instruction Set Architecture" guide,
"Ray Tracing") as gpurt ``src/shaders/rtip3_opcode_emulation.hlsl`` ``IntersectNodeBvh8`` and
``IntersectCommon.hlsl`` emulate it. Golden reference:
:func:`gpurtl.golden.ray_accel.scalar.box_test.box_engine` (every choice documented in
:mod:`gpurtl.golden.ray_accel.scalar.box_test` is followed here: NaN-ignoring max3/min3, the FMA grow,
``-0 >= 0``).

One engine tests ``boxes`` child boxes per cycle (RDNA 4: 4 per engine, two engines). Per box,
all arithmetic on the FP32 cores of :mod:`gpurtl.hdl.fp32`::

    c0  plane = base + off                      6 FPAddCore (dequant: base = node origin,
                                                 off = Dq(q) bits; legacy nodes give base -0.0
                                                 and their raw planes, which the add passes
                                                 through bit for bit; never flushes: the golden
                                                 decoder's add keeps subnormals, ``ftz``
                                                 applies from c1 on)
    c1  d = plane - ray.origin                  6 FPAddCore (sub)
    c2  tp = d * inv_dir                        6 FPMulCore      (inv_dir enters here)
    c3  lo/hi by sign of inv_dir; max3/min3     4 FPCmpCore (combinational) + register; with
                                                 ``split_compares`` three cycles: lo/hi,
                                                 register, max/min of axes 0 and 1, register,
                                                 then with axis 2
    c4  clamp to [0, extent]; NaN interval      1 FPCmpCore (the clamp at 0 is a sign
                                                 test) + register
    c5  grown = fma(max_t, g*2^-24, max_t)      1 FPFMACore, in parallel with
        key = min_t - max_t | tmin + tmax       1 FPAddCore (largest-first / midpoint keys)
    c6  hit = !nan & min_t <= grown             1 FPCmpCore + register

Interface (clock-enable core, no valid/ready)
---------------------------------------------
``en``; ``i``: ``base[3]`` (shared by the boxes of one node), ``boxes[boxes]`` {``off_min[3]``,
``off_max[3]``} and ``ray`` {``origin[3]``, ``extent``, ``box_grow``, ``heuristic``};
``inv_dir[3]``: the ray's reciprocal, sampled ``inv_offset`` enabled cycles after ``i``;
``o``: ``boxes[boxes]`` {``hit``, ``key``}, ``latency`` cycles after ``i``.
"""

from amaranth.hdl import Module, Mux, Signal, unsigned
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In

from gpurtl.facts.fp32 import NEG_INF, POS_INF, Float32
from gpurtl.facts.ray_accel import box_grow_constant

from ..fp32 import FPAddCore, FPCmpCore, FPFMACore, FPMulCore
from ..pipe import EnableCoreSignature, EnableCoreStream, delay, reg, sideband

__all__ = [
    "BOX_IN_LAYOUT",
    "ENGINE_RAY_LAYOUT",
    "BOX_OUT_LAYOUT",
    "engine_in_layout",
    "engine_out_layout",
    "BoxEngine",
    "BoxEnginePipe",
]

_F3 = data.ArrayLayout(Float32, 3)
BOX_IN_LAYOUT = data.StructLayout({"off_min": _F3, "off_max": _F3})
ENGINE_RAY_LAYOUT = data.StructLayout(
    {"origin": _F3, "extent": Float32, "box_grow": unsigned(8), "heuristic": unsigned(2)}
)
BOX_OUT_LAYOUT = data.StructLayout({"hit": unsigned(1), "key": Float32})


def engine_in_layout(boxes):
    """``i`` of a :class:`BoxEngine` of ``boxes`` tests."""
    return data.StructLayout(
        {"base": _F3, "boxes": data.ArrayLayout(BOX_IN_LAYOUT, boxes), "ray": ENGINE_RAY_LAYOUT}
    )


def engine_out_layout(boxes):
    """``o`` of a :class:`BoxEngine` of ``boxes`` tests."""
    return data.StructLayout({"boxes": data.ArrayLayout(BOX_OUT_LAYOUT, boxes)})


#: What waits beside the grow FMA and the key adder (c5 -> c6).
_C6_WAIT_LAYOUT = data.StructLayout(
    {
        "g_zero": unsigned(1),
        "heuristic": unsigned(2),
        "min_t": unsigned(32),
        "max_t": unsigned(32),
        "nan": unsigned(1),
    }
)


def _is_nan(x):
    return Float32(x).is_nan()


def _max_with_zero(x, ftz):
    """``maxnum(x, +0)`` without a comparator: ``+0`` for a NaN or a value below zero, else
    ``x`` (with ``ftz`` a negative subnormal compares equal to zero and is kept, as the compare
    core flushes it). A compare core with a constant operand reduces to a compare of a
    magnitude with zero, which Verilator's lint reports as constant (``UNSIGNED``)."""
    f = Float32(x)
    below_zero = f.sign & ((f.exponent != 0) if ftz else ~f.is_zero())
    return Mux(f.is_nan() | below_zero, 0, x)


class BoxEngine(wiring.Component):
    """``boxes`` slab tests per cycle.

    Parameters
    ----------
    boxes : int
        Box tests per cycle (1..8).
    ftz : bool
        Flush subnormals in every FP32 operation.
    add_stages, mul_stages, fma_stages : int or None
        Pipeline stages of the FP32 cores (``None``: the cores' defaults).
    split_compares : bool
        Registers between the lo/hi selection and c3's two chained NaN-ignoring max/min (two
        more cycles of latency). On the placed 1 x 1 ray accelerator (ECP5-85k), the chain of
        selection, two FP32 compares and their multiplexers in one cycle limited the clock to
        64 MHz; with one register (after the first max/min) the selection and one compare were
        the critical path at 82 MHz.
    """

    def __init__(
        self,
        boxes=4,
        *,
        ftz=False,
        add_stages=None,
        mul_stages=None,
        fma_stages=None,
        split_compares=False,
    ):
        if isinstance(boxes, bool) or not isinstance(boxes, int) or not 1 <= boxes <= 8:
            raise ValueError(f"`boxes` must be an integer from 1 to 8, not {boxes!r}")
        if not isinstance(ftz, bool):
            raise TypeError(f"`ftz` must be a boolean, not {ftz!r}")
        if not isinstance(split_compares, bool):
            raise TypeError(f"`split_compares` must be a boolean, not {split_compares!r}")
        self._boxes, self._ftz, self._split = boxes, ftz, split_compares
        # FP32 core latency == its stages (fp32 contract); no probe instances (they would be
        # unused elaboratables)
        self._la = FPAddCore.DEFAULT_STAGES if add_stages is None else add_stages
        self._lm = FPMulCore.DEFAULT_STAGES if mul_stages is None else mul_stages
        self._lf = FPFMACore.DEFAULT_STAGES if fma_stages is None else fma_stages
        self._stages = (add_stages, mul_stages, fma_stages)
        super().__init__(
            EnableCoreSignature(engine_in_layout(boxes), engine_out_layout(boxes), inv_dir=In(_F3))
        )

    @property
    def boxes(self):
        return self._boxes

    @property
    def ftz(self):
        return self._ftz

    @property
    def inv_offset(self):
        """Enabled cycles from ``i`` to the cycle ``inv_dir`` is read."""
        return 2 * self._la

    @property
    def split_compares(self):
        return self._split

    @property
    def latency(self):
        return 2 * self._la + self._lm + self._c3 + 1 + max(self._lf, self._la) + 1

    @property
    def _c3(self):
        """Cycles of c3 (the max3/min3)."""
        return 3 if self._split else 1

    def _core(self, m, cls, name, *, ftz=None, **ports):
        stages = {
            FPAddCore: self._stages[0],
            FPMulCore: self._stages[1],
            FPFMACore: self._stages[2],
            FPCmpCore: 0,
        }[cls]
        core = cls(stages, self._ftz if ftz is None else ftz)
        m.submodules[name] = core
        m.d.comb += core.en.eq(self.en)
        for port, value in ports.items():
            m.d.comb += getattr(core, port).eq(value)
        return core

    def _cmp(self, m, name, a, b):
        return self._core(m, FPCmpCore, name, a=a, b=b)

    def _maxnum(self, m, name, a, b):
        c = self._cmp(m, name, a, b)
        return Mux(_is_nan(a) | (~_is_nan(b) & c.lt), b, a)

    def _minnum(self, m, name, a, b):
        c = self._cmp(m, name, b, a)
        return Mux(_is_nan(a) | (~_is_nan(b) & c.lt), b, a)

    def elaborate(self, platform):
        m = Module()
        en = self.en
        la, lm, lf = self._la, self._lm, self._lf
        ray = self.i.ray
        # ray fields travel down with the boxes
        # (long lines are memory rings: they only wait for the arithmetic)
        r_origin = sideband(m, en, ray.origin, la, "c1_origin")
        c4 = 2 * la + lm + self._c3  # cycle the clamp reads
        r_extent = sideband(m, en, ray.extent, c4, "c4_extent")
        r_grow = sideband(m, en, ray.box_grow, c4 + 1, "c5_grow")
        r_heur = sideband(m, en, ray.heuristic, c4 + 1, "c5_heur")
        inv_c3 = sideband(m, en, self.inv_dir, lm, "c3_inv")
        # grow constant g * 2**-24 (a 256-entry table of exact FP32 patterns)
        gconst = Signal(32, name="c5_gconst")
        with m.Switch(r_grow):
            for g in range(256):
                with m.Case(g):
                    m.d.comb += gconst.eq(box_grow_constant(g))
        for b in range(self._boxes):
            box = self.i.boxes[b]
            lo_t, hi_t = [], []
            for a in range(3):
                for side, off in (("min", box.off_min[a]), ("max", box.off_max[a])):
                    tag = f"b{b}_{side}{a}"
                    deq = self._core(
                        m, FPAddCore, f"{tag}_deq", ftz=False, a=self.i.base[a], b=off, sub=0
                    )
                    d = self._core(m, FPAddCore, f"{tag}_sub", a=deq.z, b=r_origin[a], sub=1)
                    tp = self._core(m, FPMulCore, f"{tag}_mul", a=d.z, b=self.inv_dir[a])
                    (lo_t if side == "min" else hi_t).append(tp.z)
            # c3: slab selection and max3/min3 (NaN-ignoring), then a register
            lo, hi = [], []
            for a in range(3):
                positive = Signal(name=f"b{b}_c3_pos{a}")
                inv = inv_c3[a]
                m.d.comb += positive.eq(~inv.is_nan() & (~inv.sign | inv.is_zero()))
                lo.append(Mux(positive, lo_t[a], hi_t[a]))
                hi.append(Mux(positive, hi_t[a], lo_t[a]))
            if self._split:
                lo = [reg(m, en, x, f"b{b}_c3a_lo{a}", shape=32) for a, x in enumerate(lo)]
                hi = [reg(m, en, x, f"b{b}_c3a_hi{a}", shape=32) for a, x in enumerate(hi)]
            tmin = self._maxnum(m, f"b{b}_c3_max01", lo[0], lo[1])
            tmax = self._minnum(m, f"b{b}_c3_min01", hi[0], hi[1])
            lo2, hi2 = lo[2], hi[2]
            if self._split:
                tmin = reg(m, en, tmin, f"b{b}_c3b_max01", shape=32)
                tmax = reg(m, en, tmax, f"b{b}_c3b_min01", shape=32)
                lo2 = reg(m, en, lo2, f"b{b}_c3b_lo2", shape=32)
                hi2 = reg(m, en, hi2, f"b{b}_c3b_hi2", shape=32)
            tmin = self._maxnum(m, f"b{b}_c3_max2", tmin, lo2)
            tmax = self._minnum(m, f"b{b}_c3_min2", tmax, hi2)
            tmin_raw = reg(m, en, tmin, f"b{b}_c4_tmin_raw", shape=32)
            tmax_raw = reg(m, en, tmax, f"b{b}_c4_tmax_raw", shape=32)
            # c4: clamp, NaN interval, then a register
            nan = _is_nan(tmin_raw) | _is_nan(tmax_raw)
            min_t = Mux(nan, POS_INF, _max_with_zero(tmin_raw, self._ftz))
            max_t = Mux(nan, NEG_INF, self._minnum(m, f"b{b}_c4_clampx", tmax_raw, r_extent))
            s5_min_t = reg(m, en, min_t, f"b{b}_c5_min_t", shape=32)
            s5_max_t = reg(m, en, max_t, f"b{b}_c5_max_t", shape=32)
            s5_nan = reg(m, en, nan, f"b{b}_c5_nan", shape=1)
            s5_tmin = reg(m, en, Mux(_is_nan(tmin_raw), 0, tmin_raw), f"b{b}_c5_tmin", shape=32)
            s5_tmax = reg(
                m, en, Mux(_is_nan(tmax_raw), POS_INF, tmax_raw), f"b{b}_c5_tmax", shape=32
            )
            # c5: grow (FMA) and key (add/sub), aligned to the longer of the two
            lc5 = max(lf, la)
            fma = self._core(m, FPFMACore, f"b{b}_c5_grow", a=s5_max_t, b=gconst, c=s5_max_t)
            midpoint = r_heur == 2
            key_add = self._core(
                m,
                FPAddCore,
                f"b{b}_c5_key",
                a=Mux(midpoint, s5_tmin, s5_min_t),
                b=Mux(midpoint, s5_tmax, s5_max_t),
                sub=~midpoint,
            )
            grown = delay(m, en, fma.z, lc5 - lf, f"b{b}_c6_grown_al")
            key_arith = delay(m, en, key_add.z, lc5 - la, f"b{b}_c6_key_al")
            wait = Signal(_C6_WAIT_LAYOUT, name=f"b{b}_c5_wait")
            m.d.comb += [
                wait.g_zero.eq(r_grow == 0),
                wait.heuristic.eq(r_heur),
                wait.min_t.eq(s5_min_t),
                wait.max_t.eq(s5_max_t),
                wait.nan.eq(s5_nan),
            ]
            wait6 = sideband(m, en, wait, lc5, f"b{b}_c6_wait")
            g_zero, heur, nan6 = wait6.g_zero, wait6.heuristic, wait6.nan
            min_t6, max_t6 = wait6.min_t, wait6.max_t
            # c6: the hit decision
            le = self._cmp(m, f"b{b}_c6_le", min_t6, Mux(g_zero, max_t6, grown))
            hit = ~nan6 & le.le
            key = Mux((heur == 1) | (heur == 2), key_arith, min_t6)
            out_hit = reg(m, en, hit, f"b{b}_out_hit", shape=1)
            out_key = reg(m, en, key, f"b{b}_out_key", shape=32)
            m.d.comb += [self.o.boxes[b].hit.eq(out_hit), self.o.boxes[b].key.eq(out_key)]
        return m


class BoxEnginePipe(EnableCoreStream):
    """A :class:`BoxEngine` in a valid/ready stream (block ``ray_box_engine``), II = 1; the
    reciprocal is an input field, delayed inside to the cycle the engine reads it."""

    def __init__(self, boxes=4, **params):
        super().__init__(_AlignedEngine(boxes, **params))


class _AlignedEngine(wiring.Component):
    def __init__(self, boxes, **params):
        self._engine = BoxEngine(boxes, **params)
        super().__init__(
            EnableCoreSignature(
                data.StructLayout({"box": engine_in_layout(boxes), "inv_dir": _F3}),
                engine_out_layout(boxes),
            )
        )

    @property
    def latency(self):
        return self._engine.latency

    def elaborate(self, platform):
        m = Module()
        m.submodules.engine = eng = self._engine
        m.d.comb += [
            eng.en.eq(self.en),
            eng.i.eq(self.i.box),
            eng.inv_dir.eq(delay(m, self.en, self.i.inv_dir, eng.inv_offset, "inv")),
            self.o.eq(eng.o),
        ]
        return m
