"""Xe3 STOC / opacity-micromap classification of a candidate triangle hit (pipelined RTL).

One transaction = one candidate hit: its FP32 barycentrics, the opacity data already fetched from
the leaf or the micromap (memory is outside the block), and the ray / instance flags. The block
returns the micro-triangle index used, the 4-state value found, the action (ignore, accept as
opaque, run any-hit), the software-STOC fallback flag and, for the deep levels, the index and the
word address of the full-resolution state. Decoding rules, sources and the choices made where the
sources are silent: :mod:`gpurtl.golden.stoc.classify`.

Pipeline (:class:`STOCCore`, a clock-enable core): stage 1 registers the fixed-point
barycentrics, stage 2 the level-12 micro-triangle index, stage 3 (the output register) the
classification. ``latency`` = 3. :class:`STOCUnit` is the core in a valid/ready stream
(:class:`gpurtl.hdl.pipe.EnableCoreStream`): II = 1, one global enable.
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, wiring

from gpurtl.facts.stoc import Action, Source, stoc_in_layout, stoc_out_layout

from ..pipe import EnableCoreSignature, EnableCoreStream, reg
from .omm_index import (
    MAX_LEVEL,
    _check_frac_bits,
    fixed_from_f32,
    index_at_max_level,
    shift_to_level,
)

__all__ = ["STOCCore", "STOCUnit", "PLANE_ORDERS", "BOTH_PLANES", "check_stoc_params"]

PLANE_ORDERS = ("omm", "corners")
#: 4-state value given to "opaque and transparent bits both set", per ``both_planes``
BOTH_PLANES = {"uo": 3, "ut": 2, "opaque": 1, "transparent": 0}
_CORNER_TABLE = Const(0 | (3 << 2) | (1 << 4) | (2 << 6), 8)  # curve digit -> plane digit


def check_stoc_params(frac_bits=24, plane_order="omm", both_planes="uo"):
    """Raise :exc:`TypeError` or :exc:`ValueError` for parameters :class:`STOCUnit` refuses."""
    _check_frac_bits(frac_bits)
    if plane_order not in PLANE_ORDERS:
        raise ValueError(f"`plane_order` must be one of {PLANE_ORDERS}, not {plane_order!r}")
    if both_planes not in BOTH_PLANES:
        raise ValueError(f"`both_planes` must be one of {tuple(BOTH_PLANES)}, not {both_planes!r}")


class STOCCore(wiring.Component):
    """Sub-triangle opacity classification, a clock-enable core (see the module doc string).

    Parameters
    ----------
    frac_bits : int
        Fraction bits of the fixed-point barycentrics (12..24, default 24).
    plane_order : str
        Bit order of STOC planes: ``"omm"`` (bit i = micro-triangle i, default) or
        ``"corners"`` (each base-4 digit runs near-V0, near-V1, near-V2, middle).
    both_planes : str
        State of opaque and transparent bits both set: ``"uo"`` (default), ``"ut"``,
        ``"opaque"`` or ``"transparent"``.
    """

    def __init__(self, frac_bits=24, plane_order="omm", both_planes="uo"):
        check_stoc_params(frac_bits, plane_order, both_planes)
        self._frac_bits, self._plane_order, self._both_planes = frac_bits, plane_order, both_planes
        super().__init__(EnableCoreSignature(stoc_in_layout, stoc_out_layout))

    @property
    def frac_bits(self):
        return self._frac_bits

    @property
    def plane_order(self):
        return self._plane_order

    @property
    def both_planes(self):
        return self._both_planes

    @property
    def latency(self):
        return 3

    def _position(self, index, digits):
        if self._plane_order == "omm":
            return index
        return Cat(*(_CORNER_TABLE.word_select(index[2 * k : 2 * k + 2], 2) for k in range(digits)))

    def _state(self, o_bit, t_bit):
        both = BOTH_PLANES[self._both_planes]
        return Mux(o_bit & t_bit, both, Mux(o_bit, 1, Mux(t_bit, 0, 2)))

    def elaborate(self, platform):
        m = Module()
        fb, en = self._frac_bits, self.en
        # stage 1: the fixed-point barycentrics; stage 2: the level-12 micro-triangle index
        s1 = Signal(data.StructLayout({"p": stoc_in_layout, "u": fb + 1, "v": fb + 1}))
        m.d.comb += [
            s1.p.eq(self.i),
            s1.u.eq(fixed_from_f32(self.i.u, fb)),
            s1.v.eq(fixed_from_f32(self.i.v, fb)),
        ]
        s1 = reg(m, en, s1, "s1")
        s2 = Signal(data.StructLayout({"p": stoc_in_layout, "index": 2 * MAX_LEVEL}))
        m.d.comb += [
            s2.p.eq(s1.p),
            s2.index.eq(index_at_max_level(m, s1.u, s1.v, fb, prefix="s1")),
        ]
        s2 = reg(m, en, s2, "s2")
        # stage 3 (the output register): the classification
        with m.If(en):
            m.d.sync += self.o.eq(self._classify(m, s2.p, s2.index))
        return m

    def _classify(self, m, p, s2_idx):
        """The ``stoc_out_layout`` value of one candidate ``p`` and its level-12 index."""
        lvl = p.level
        src = p.source.as_value()
        is1, is3, isomm = (
            src == Source.STOC1.value,
            src == Source.STOC3.value,
            src == Source.OMM.value,
        )
        force2 = p.ray_flags[10] | p.instance_flags[4]
        disabled = p.instance_flags[5] | p.internal_flags[3]
        live = ~disabled

        s2_idx1, s2_idx3 = Signal(2), Signal(6)
        s2_idxl = Signal(2 * MAX_LEVEL)
        m.d.comb += [
            s2_idx1.eq(s2_idx[22:24]),
            s2_idx3.eq(s2_idx[18:24]),
            s2_idxl.eq(shift_to_level(s2_idx, lvl[0:4])),
        ]

        # STOC1: quad-leaf DW3 (IGC QuadLeaf<Xe3>)
        dw3 = p.dw3
        o1 = Mux(p.tri, dw3[24:28], dw3[8:12])
        t1 = Mux(p.tri, dw3[28:32], dw3[12:16])
        sw1 = Mux(p.tri, dw3[6], dw3[5])
        pos1 = self._position(s2_idx1, 1)
        st1 = Signal(2)
        m.d.comb += st1.eq(self._state(o1.bit_select(pos1, 1), t1.bit_select(pos1, 1)))
        # STOC3 inline level-3 planes (IGC QuadLeaf_STOC3)
        pos3 = self._position(s2_idx3, 3)
        st3 = Signal(2)
        m.d.comb += st3.eq(self._state(p.opaque.bit_select(pos3, 1), p.transp.bit_select(pos3, 1)))
        fine3_ok = (lvl >= 4) & (lvl <= MAX_LEVEL)
        # OMM (Vulkan "Ray Opacity Micromap" states and special indices)
        oi = p.omm_index
        fmt = p.omm_format
        special = (oi < 0) & (oi >= -4)
        omm_bad = Signal()
        m.d.comb += omm_bad.eq(
            (oi < -5) | ((oi >= 0) & (((fmt != 1) & (fmt != 2)) | (lvl > MAX_LEVEL)))
        )
        lookup = (oi >= 0) & ~omm_bad
        four = fmt == 2
        bitpos = Mux(four, Cat(Const(0, 1), s2_idxl[0:4]), s2_idxl[0:5])
        word = p.omm_word >> bitpos
        st_omm = Signal(2)
        m.d.comb += st_omm.eq(Mux(special, (~oi)[0:2], Mux(four, word[0:2], word[0])))

        used = Signal()
        state = Signal(2)
        m.d.comb += [
            used.eq(live & (is1 | is3 | (isomm & (special | lookup)))),
            state.eq(Mux(used, Mux(is1, st1, Mux(is3, st3, st_omm)), 0)),
        ]
        effective = Mux(force2 & state[1], Cat(state[0], Const(0, 1)), state)
        from_data = Mux(
            effective == 0,
            Action.IGNORE.value,
            Mux(effective == 1, Action.OPAQUE.value, Action.ANYHIT.value),
        )
        from_geometry = Mux(p.geom_opaque, Action.OPAQUE.value, Action.ANYHIT.value)
        action = Signal(2)
        m.d.comb += action.eq(Mux(used, from_data, from_geometry))
        swstoc = Mux(is1, sw1, p.swstoc)

        fine3 = live & is3 & fine3_ok
        fineomm = live & isomm & lookup
        has_fine = fine3 | fineomm
        word_bytes = Mux(fine3 | four, Cat(Const(0, 2), s2_idxl[4:]), Cat(Const(0, 2), s2_idxl[5:]))

        o = Signal(stoc_out_layout, name="s3_next")
        m.d.comb += [
            o.action.as_value().eq(action),
            o.sw_fallback.eq(used & (is1 | is3) & (action == Action.ANYHIT.value) & swstoc),
            o.used.eq(used),
            o.state.eq(state),
            o.level.eq(
                Mux(used & is1, 1, Mux(used & is3, 3, Mux(used & isomm & lookup, lvl[0:4], 0)))
            ),
            o.index.eq(
                Mux(
                    used & is1,
                    s2_idx1,
                    Mux(used & is3, s2_idx3, Mux(used & isomm & lookup, s2_idxl, 0)),
                )
            ),
            o.fine_level.eq(Mux(has_fine, lvl[0:4], 0)),
            o.fine_index.eq(Mux(has_fine, s2_idxl, 0)),
            o.fetch_addr.eq(Mux(has_fine, (p.addr + word_bytes)[0:64], 0)),
            o.error.eq(live & ((isomm & omm_bad) | (is3 & p.swstoc & ~fine3_ok))),
        ]
        return o


class STOCUnit(EnableCoreStream):
    """:class:`STOCCore` in a valid/ready stream (block ``stoc``), II = 1.

    Parameters
    ----------
    frac_bits, plane_order, both_planes
        As :class:`STOCCore`.
    """

    def __new__(cls, frac_bits=24, plane_order="omm", both_planes="uo", *, src_loc_at=0):
        # Refuse bad parameters before the component exists, so that a refused build leaves no
        # "created but never used" object behind.
        check_stoc_params(frac_bits, plane_order, both_planes)
        return super().__new__(cls, src_loc_at=src_loc_at + 1)

    def __init__(self, frac_bits=24, plane_order="omm", both_planes="uo", *, src_loc_at=0):
        super().__init__(STOCCore(frac_bits, plane_order, both_planes))

    @property
    def frac_bits(self):
        return self.core.frac_bits

    @property
    def plane_order(self):
        return self.core.plane_order

    @property
    def both_planes(self):
        return self.core.both_planes
