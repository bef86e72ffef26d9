"""The matrix core of one SIMD: WMMA and SWMMAC on whole register tiles.

:class:`MatrixCore` runs every instruction of one family (:data:`gpurtl.facts.matrix.FAMILIES`)
under one arithmetic preset (:data:`gpurtl.facts.matrix.PRESETS`). A transaction on ``i`` carries
the operand tiles as VGPR words (the wave32 layouts of :mod:`gpurtl.golden.matrix.layouts`); the
result tile leaves on ``o`` as VGPR words too.

Stages:

* **accept** (:meth:`MatrixCore._accept`): the instruction is latched with its operand tiles
  rewired from VGPR words into matrix order (rows of A, columns of B, rows of the sparse index,
  elements of C; the layout of each operand follows the op, since a 32-deep operand is not a
  16-deep one extended), the source modifiers applied (float forms: ``neg_lo`` / ``neg_hi``,
  :data:`gpurtl.facts.matrix.FLOAT_MODIFIERS`) and the index half of ``index_key`` chosen;
* **issue** (:meth:`MatrixCore._unit`): ``dots`` dot-product units, each ``L`` products wide
  (``L`` = the preset's group for floats, the widest stored K for integers). Unit ``u`` owns the
  output elements ``e = u + dots * t`` (``t`` = 0 .. 256/dots - 1, its *slots*); each element
  needs ``S = K_stored / L`` steps, so the schedule is ``S`` sweeps over the slots, one element
  per unit per cycle (a sweep is stretched with idle cycles to at least the unit's pipeline
  depth, so a step reads the accumulator its previous step wrote). Per cycle a unit selects its
  row of A and column of B (for SWMMAC, every stored A element picks one of the four B rows of
  its group by its 2-bit index: the index-driven selection that lets a sparse instruction do
  twice the logical work in the same cycles) and C (first step) or its accumulator entry (later
  steps), and registers them as one issue bundle;
* **step** (:class:`.dot.DotStep`): ``stages`` registers deep;
* **write-back**: the accumulator entry and, on the last step, the result tile.

Cycles per instruction ``ii = S * max(256 / dots, stages + 2)``; the next instruction is accepted
in the cycle the previous one issues its last step, so back-to-back instructions run at that
interval. ``latency = ii + stages + 2`` (accept, ``ii`` issue cycles, the unit, the write-back).
One global enable ``en = ~o.valid | o.ready`` holds the whole core while a finished tile waits, so
the output keeps its payload until it is taken.
"""

from types import SimpleNamespace

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import bits_for

from gpurtl.facts.matrix import (
    FORMATS,
    LANE_BITS,
    TILE,
    WAVE,
    family_shape,
    family_variants,
    float_modifiers,
    lane_k,
    operand_chunk,
)
from gpurtl.facts.matrix import (
    preset as get_preset,
)

from ..pipe import delay, reg
from .dot import DotStep, step_params, unit_width

__all__ = ["MatrixCore", "core_layouts", "RATES", "dots_for"]

#: Stored products per cycle of one SIMD's matrix core. RDNA 4 and RDNA 3 FP16 / BF16 / IU8 come
#: from GPUOpen's FLOPS/clock/CU table (2 FLOPs per product, 2 SIMDs per CU): 1024 -> 256,
#: 2048 -> 512, 512 -> 128. FP8 at the IU8 rate, IU4 at twice the IU8 rate on RDNA 4 and, on
#: RDNA 3 (which has no FP8), every family at its FP16 rate are choices: the article does not
#: list them. ``fpga`` is one dot unit.
RATES = {
    "rdna4": {"f16": 256, "bf16": 256, "fp8": 512, "iu8": 512, "iu4": 1024},
    "rdna3": {"f16": 128, "bf16": 128, "fp8": 128, "iu8": 128, "iu4": 256},
}

_WORD = data.ArrayLayout(LANE_BITS, WAVE)


def core_layouts(family):
    """``(in_layout, out_layout)`` of the stream ports of ``family``'s core."""
    shape = family_shape(family)
    fields = {
        "op": max(1, bits_for(shape["ops"] - 1)),
        "index_key": 1,
    }
    if shape["is_int"]:
        fields.update(a_signed=1, b_signed=1, clamp=1)
    else:
        fields.update(neg_lo=3, neg_hi=3)
    fields.update(
        a=data.ArrayLayout(_WORD, shape["a"]),
        b=data.ArrayLayout(_WORD, shape["b"]),
        c=data.ArrayLayout(_WORD, shape["c"]),
        idx=_WORD,
    )
    return data.StructLayout(fields), data.StructLayout({"d": data.ArrayLayout(_WORD, shape["c"])})


def _first_family_class(variants):
    a = variants[0].a
    return "fp8" if a in ("fp8", "bf8") else a


def dots_for(family, rate="rdna4", preset="rdna4"):
    """Dot units of a ``family`` build at ``rate`` (``"rdna4"``, ``"rdna3"`` or ``"fpga"``)."""
    variants = family_variants(family)
    width = unit_width(variants, get_preset(preset))
    if rate == "fpga":
        return 1
    try:
        products = RATES[rate][_first_family_class(variants)]
    except KeyError:
        raise ValueError(f"`rate` must be one of rdna4, rdna3, fpga, not {rate!r}") from None
    return max(1, products // width)


def _gather(words, width, k, chunk):
    """Static rewiring of an A-style operand held in ``words`` (VGPR views): ``[row][k]`` of
    ``(bits, high)``, the element's slice and whether it sits in bits 16-31 of its VGPR."""
    out = [[None] * k for _ in range(TILE)]
    for lane in range(WAVE):
        r, h = lane % TILE, lane // TILE
        for j in range(k // 2):
            bit = j * width
            word = words[bit // LANE_BITS][lane]
            lo = bit % LANE_BITS
            out[r][lane_k(h, j, chunk)] = (word[lo : lo + width], lo >= LANE_BITS // 2)
    return out


def _op_table(m, op, values, name):
    """``values[op]`` (one per op, padded with the last for unused codes) as a named signal."""
    values = list(values) + [values[-1]] * ((1 << len(op)) - len(values))
    width = max(1, bits_for(max(values)))
    sig = Signal(width, name=name)
    m.d.comb += sig.eq(Array(Const(x, width) for x in values)[op])
    return sig


def _negated(bits, flip):
    """``bits`` with its sign bit (the top one) XORed with ``flip``."""
    return Cat(bits[:-1], bits[-1] ^ flip)


class MatrixCore(wiring.Component):
    """Matrix core of one SIMD for one instruction family (see the module doc string).

    Parameters
    ----------
    family : str
        A key of :data:`gpurtl.facts.matrix.FAMILIES`.
    preset : str
        A key of :data:`gpurtl.facts.matrix.PRESETS`; its algorithm for the family's inputs is
        built (``"tr"`` or ``"gtr"``).
    dots : int
        Dot-product units (a divisor of 256).
    stages : int
        Pipeline registers inside a unit (0 .. 5 for floats, 0 .. 2 for integers).

    Attributes
    ----------
    i : In(stream.Signature(in_layout))
        Instructions with their operand tiles (:func:`core_layouts`).
    o : Out(stream.Signature(out_layout))
        Result tiles, in order.
    """

    def __init__(self, family, preset="rdna4", dots=16, stages=2):
        self._variants = family_variants(family)
        self._family, self._preset = family, preset
        self._int = self._variants[0].is_int
        _, _, self._width, _ = step_params(family, preset, stages)
        if isinstance(dots, bool) or not isinstance(dots, int) or dots < 1 or 256 % dots:
            raise ValueError(f"`dots` must divide 256, not {dots!r}")
        self._dots, self._stages = dots, stages
        self._slots = TILE * TILE // dots
        self._sweep = max(self._slots, stages + 2)
        # integer units span the widest stored K (one step); float families share one K
        self._steps = max(v.k_stored for v in self._variants) // self._width
        in_layout, out_layout = core_layouts(family)
        super().__init__(
            {"i": In(stream.Signature(in_layout)), "o": Out(stream.Signature(out_layout))}
        )

    @property
    def ii(self):
        """Cycles between accepted instructions when the output is always taken."""
        return self._steps * self._sweep

    @property
    def latency(self):
        """Cycles from an accepted instruction to its result with ``o.ready`` held high."""
        return self.ii + self._stages + 2

    @property
    def products_per_cycle(self):
        """Stored products the units compute per cycle."""
        return self._dots * self._width

    def elaborate(self, platform):
        m = Module()
        en = Signal()
        m.d.comb += en.eq(~self.o.valid | self.o.ready)
        sched = self._schedule(m, en)
        cur = self._accept(m, sched.load)
        wc = FORMATS[self._variants[0].cd].bits
        out_mat = [[Signal(wc, name=f"d_{r}_{n}") for n in range(TILE)] for r in range(TILE)]
        done = [self._unit(m, en, u, cur, sched, out_mat) for u in range(self._dots)]
        self._output(m, en, out_mat, done[0])
        return m

    def _schedule(self, m, en):
        """The issue counters: sweep position ``t``, step ``s``; accept one instruction in the
        cycle the previous one issues its last step."""
        S, sweep = self._steps, self._sweep
        busy = Signal()
        t = Signal(range(sweep))
        s = Signal(range(max(S, 2)))
        last_issue = busy & (t == sweep - 1) & (s == S - 1)
        load = Signal()
        m.d.comb += [
            self.i.ready.eq(en & (~busy | last_issue)),
            load.eq(self.i.valid & self.i.ready),
        ]
        with m.If(en):
            with m.If(busy):
                with m.If(t == sweep - 1):
                    m.d.sync += [t.eq(0), s.eq(s + 1)]
                    with m.If(s == S - 1):
                        m.d.sync += [busy.eq(0), s.eq(0)]
                with m.Else():
                    m.d.sync += t.eq(t + 1)
            with m.If(load):
                m.d.sync += [busy.eq(1), t.eq(0), s.eq(0)]
        return SimpleNamespace(
            t=t,
            s=s,
            load=load,
            issuing=busy & (t < self._slots),
            first=s == 0,
            last_step=s == S - 1,
            last_issue=last_issue,
        )

    def _operand(self, m, op, name, words, width, depth, key, neg=None):
        """``[row][k]`` of ``words`` in matrix order under the op's layout (``key(v)``: the
        op's ``(depth, chunk)``), zero beyond the op's depth, sign flips ``neg = (lo, hi)``."""
        classes = sorted({key(v) for v in self._variants})
        maps = [_gather(words, width, k, chunk) for k, chunk in classes]
        pick = None
        if len(classes) > 1:
            pick = _op_table(m, op, [classes.index(key(v)) for v in self._variants], name + "_lay")
        out = [[Const(0, width)] * depth for _ in range(TILE)]
        for index, ((k, _), mat) in enumerate(zip(classes, maps)):
            for r in range(TILE):
                for kk in range(k):
                    bits, high = mat[r][kk]
                    if neg is not None:
                        bits = _negated(bits, neg[1] if high else neg[0])
                    out[r][kk] = bits if pick is None else Mux(pick == index, bits, out[r][kk])
        return out

    def _accept(self, m, load):
        """Latch the instruction in matrix order (see the module doc string)."""
        vs, p = self._variants, self.i.payload
        shape = family_shape(self._family)
        v0 = vs[0]
        wa, wb, wc = (FORMATS[x].bits for x in (v0.a, v0.b, v0.cd))
        k_a, k_b = max(v.k_stored for v in vs), max(v.k for v in vs)
        ab_mods, _ = float_modifiers(v0)
        neg_a = (p.neg_lo[0], p.neg_hi[0]) if ab_mods else None
        neg_b = (p.neg_lo[1], p.neg_hi[1]) if ab_mods else None
        a_words = [p.a[i] for i in range(shape["a"])]
        b_words = [p.b[i] for i in range(shape["b"])]
        a = self._operand(m, p.op, "a", a_words, wa, k_a, self._a_key, neg_a)
        b = self._operand(m, p.op, "b", b_words, wb, k_b, self._b_key, neg_b)
        keyed = _op_table(m, p.op, [int(v.index_keys > 1) for v in vs], "op_keyed")
        half = [Signal(32, name=f"idx_lane{lane}") for lane in range(WAVE)]
        for lane, word in enumerate(half):
            m.d.comb += word.eq(Mux(keyed & p.index_key, p.idx[lane] >> 16, p.idx[lane]))
        idx = self._operand(m, p.op, "idx", [half], 2, k_a, self._a_key)
        take_c = (
            None
            if self._int
            else _op_table(m, p.op, [float_modifiers(v)[1] for v in vs], "op_cmod")
        )
        c = []
        for e in range(TILE * TILE):
            r, n = e // TILE, e % TILE
            lane, j = n + TILE * (r // 8), r % 8
            bit = j * wc
            bits = p.c[bit // LANE_BITS][lane][bit % LANE_BITS : bit % LANE_BITS + wc]
            if take_c is not None:  # |C| first (neg_hi), then -C (neg_lo)
                sign = (bits[-1] & ~(take_c & p.neg_hi[2])) ^ (take_c & p.neg_lo[2])
                bits = Cat(bits[:-1], sign)
            c.append(bits)
        ctl = {
            "sparse": _op_table(m, p.op, [int(v.sparse) for v in vs], "op_sparse"),
            "a_alt": _op_table(m, p.op, [int(v.a == "bf8") for v in vs], "op_a_alt"),
            "b_alt": _op_table(m, p.op, [int(v.b == "bf8") for v in vs], "op_b_alt"),
        }
        if self._int:
            ctl.update(a_signed=p.a_signed, b_signed=p.b_signed, clamp=p.clamp)
        fields = {
            "a": (data.ArrayLayout(data.ArrayLayout(wa, k_a), TILE), a),
            "b": (data.ArrayLayout(data.ArrayLayout(wb, k_b), TILE), b),
            "idx": (data.ArrayLayout(data.ArrayLayout(2, k_a), TILE), idx),
            "c": (data.ArrayLayout(wc, TILE * TILE), c),
            "ctl": (data.StructLayout({name: 1 for name in ctl}), ctl),
        }
        cur = {}
        for name, (layout, value) in fields.items():
            wire = Signal(layout, name=f"in_{name}")
            if name == "ctl":
                m.d.comb += [wire[key].eq(x) for key, x in value.items()]
            elif name == "c":
                m.d.comb += [wire[e].eq(x) for e, x in enumerate(value)]
            else:
                m.d.comb += [
                    wire[r][k].eq(x) for r, row in enumerate(value) for k, x in enumerate(row)
                ]
            # one register per field: a single tile-wide one would trip Python's limit on
            # int -> str conversion (4300 digits) when Amaranth's simulator writes its mask
            cur[name] = reg(m, load, wire, f"cur_{name}")
        return SimpleNamespace(**cur)

    @staticmethod
    def _a_key(v):
        return v.k_stored, operand_chunk(v, "a")

    @staticmethod
    def _b_key(v):
        return v.k, operand_chunk(v, "b")

    def _unit(self, m, en, u, cur, sched, out_mat):
        """Dot unit ``u``: operand selection, the issue bundle, the step, the write-back.
        Returns the ``done`` flag of its write-back (the last step of the last slot)."""
        v0 = self._variants[0]
        wa, wb, wc = (FORMATS[x].bits for x in (v0.a, v0.b, v0.cd))
        k_a, k_b = max(v.k_stored for v in self._variants), max(v.k for v in self._variants)
        L, t, s = self._width, sched.t, sched.s
        step = DotStep(self._family, self._preset, self._stages)
        m.submodules[f"u{u}_step"] = step
        e = Signal(8, name=f"u{u}_elem")
        m.d.comb += e.eq(u + self._dots * t)
        row, col = e[4:8], e[0:4]
        a_row = Signal(k_a * wa, name=f"u{u}_arow")
        b_col = Signal(k_b * wb, name=f"u{u}_bcol")
        i_row = Signal(k_a * 2, name=f"u{u}_irow")
        m.d.comb += [
            a_row.eq(cur.a.as_value().word_select(row, k_a * wa)),
            b_col.eq(cur.b.as_value().word_select(col, k_b * wb)),
            i_row.eq(cur.idx.as_value().word_select(row, k_a * 2)),
        ]
        accs = Array(Signal(wc, name=f"u{u}_acc{x}") for x in range(self._slots))
        meta = data.StructLayout({"valid": 1, "slot": range(self._slots), "last": 1, "done": 1})
        issue = Signal(data.StructLayout({"step": step.i.shape(), "meta": meta}), name=f"u{u}_in")
        for j in range(L):
            ka = s * L + j
            kb_sparse = 4 * (s * (L // 2) + j // 2) + i_row.word_select(ka, 2)
            m.d.comb += [
                issue.step.a[j].eq(a_row.word_select(ka, wa)),
                issue.step.b[j].eq(
                    Mux(
                        cur.ctl.sparse,
                        b_col.word_select(kb_sparse, wb),
                        b_col.word_select(ka, wb),
                    )
                ),
            ]
        ctl = cur.ctl
        m.d.comb += [
            issue.step.c.eq(Mux(sched.first, cur.c.as_value().word_select(e, wc), accs[t])),
            issue.step.ctl.eq(
                Cat(ctl.a_signed, ctl.b_signed, ctl.clamp)
                if self._int
                else Cat(ctl.a_alt, ctl.b_alt)
            ),
            issue.meta.valid.eq(sched.issuing),
            issue.meta.slot.eq(t),
            issue.meta.last.eq(sched.last_step),
            issue.meta.done.eq(sched.last_issue),
        ]
        issued = reg(m, en, issue, f"u{u}_issue")
        m.d.comb += [step.en.eq(en), step.i.eq(issued.step)]
        back = delay(m, en, issued.meta, self._stages, f"u{u}_meta")
        with m.If(en & back.valid):
            m.d.sync += accs[back.slot].eq(step.o)
            with m.If(back.last):
                for slot in range(self._slots):
                    elem = u + self._dots * slot
                    with m.If(back.slot == slot):
                        m.d.sync += out_mat[elem // TILE][elem % TILE].eq(step.o)
        return back.done

    def _output(self, m, en, out_mat, done):
        """The result tile on ``o`` (C/D layout), valid from the write-back of the last step
        until it is taken."""
        wc = len(out_mat[0][0])
        for lane in range(WAVE):
            n, h = lane % TILE, lane // TILE
            for j in range(8):
                bit = j * wc
                word = self.o.payload.d[bit // LANE_BITS][lane]
                m.d.comb += word[bit % LANE_BITS : bit % LANE_BITS + wc].eq(out_mat[j + 8 * h][n])
        with m.If(self.o.valid & self.o.ready):
            m.d.sync += self.o.valid.eq(0)
        with m.If(en & done):
            m.d.sync += self.o.valid.eq(1)
