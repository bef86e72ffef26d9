"""The matrix core of one SIMD: WMMA and SWMMAC on whole register tiles.

:class:`MatrixCore` runs every instruction of one family (:data:`gpurtl.facts.matrix.FAMILIES`)
under one arithmetic preset (:data:`gpurtl.facts.matrix.PRESETS`). A transaction on ``i`` carries
the operand tiles as VGPR words (the wave32 layouts of :mod:`gpurtl.golden.matrix.layouts`); the
result tile leaves on ``o`` as VGPR words too.

Datapath: ``dots`` dot-product units, each ``L`` products wide (``L`` = the preset's group for
floats, the widest stored K for integers). Unit ``u`` owns the output elements
``e = u + dots * t`` (``t`` = 0 .. 256/dots - 1, its *slots*); each element needs ``S = K_stored /
L`` steps, so the schedule is ``S`` sweeps over the slots, one element per unit per cycle
(a sweep is stretched with idle cycles to at least the unit's pipeline depth, so a step reads
the accumulator its previous step wrote). Per cycle a unit:

* selects its row of A and column of B from the latched tiles (for SWMMAC, every stored A
  element picks one of the four B rows of its group by its 2-bit index: the index-driven
  selection that lets a sparse instruction do twice the logical work in the same cycles);
* takes C (first step) or its accumulator entry (later steps);
* runs one step of the algorithm (:mod:`.dot`), ``stages`` registers deep, and writes the result
  back to its accumulator entry and, on the last step, to the result tile.

Cycles per instruction ``ii = S * max(256 / dots, stages + 2)``; the next instruction is accepted
in the cycle the previous one issues its last step, so back-to-back instructions run at that
interval. ``latency = ii + stages + 2`` (accept, ``ii`` issue cycles, the unit, the write-back).
One global enable ``en = ~o.valid | o.ready`` holds the whole core while a finished tile waits, so
the output keeps its payload until it is taken.
"""

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
)
from gpurtl.facts.matrix import (
    preset as get_preset,
)

from .dot import FLOAT_CUTS, INT_CUTS, float_step, int_step
from .pipe import Stager

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
    fields.update(
        a=data.ArrayLayout(_WORD, shape["a"]),
        b=data.ArrayLayout(_WORD, shape["b"]),
        c=data.ArrayLayout(_WORD, shape["c"]),
        idx=_WORD,
    )
    return data.StructLayout(fields), data.StructLayout({"d": data.ArrayLayout(_WORD, shape["c"])})


def _lane_k(h, j):
    return 16 * (j // 8) + 8 * h + j % 8


def _rows(words, width, k, rows=TILE):
    """Static rewiring: element ``[r][kk]`` of an A-style operand held in ``words`` (a list of
    VGPR views), as a list of lists of bit slices."""
    out = [[None] * k for _ in range(rows)]
    for lane in range(WAVE):
        r, h = lane % TILE, lane // TILE
        for j in range(k // 2):
            bit = j * width
            word = words[bit // LANE_BITS][lane]
            out[r][_lane_k(h, j)] = word[bit % LANE_BITS : bit % LANE_BITS + width]
    return out


def _first_family_class(variants):
    a = variants[0].a
    return "fp8" if a in ("fp8", "bf8") else a


def dots_for(family, rate="rdna4", preset="rdna4"):
    """Dot units of a ``family`` build at ``rate`` (``"rdna4"``, ``"rdna3"`` or ``"fpga"``)."""
    variants = family_variants(family)
    width = _unit_width(variants, get_preset(preset))
    if rate == "fpga":
        return 1
    try:
        products = RATES[rate][_first_family_class(variants)]
    except KeyError:
        raise ValueError(f"`rate` must be one of rdna4, rdna3, fpga, not {rate!r}") from None
    return max(1, products // width)


def _unit_width(variants, preset):
    if variants[0].is_int:
        return max(v.k_stored for v in variants)
    return preset.algorithm(variants[0].a).group


class MatrixCore(wiring.Component):
    """Matrix core of one SIMD for one instruction family (see the module doc string).

    Parameters
    ----------
    family : str
        A key of :data:`gpurtl.facts.matrix.FAMILIES`.
    preset : str
        A key of :data:`gpurtl.facts.matrix.PRESETS`; its ``"tr"`` algorithms are built (the
        ``"gtr"`` structure of ``cdna3``'s FP8 is a golden model only).
    dots : int
        Dot-product units (a divisor of 256).
    stages : int
        Pipeline registers inside a unit (0 .. 5 for floats, 0 .. 2 for integers).

    Attributes
    ----------
    i : In(stream.Signature(in_layout))
        Instructions with their operand tiles.
    o : Out(stream.Signature(out_layout))
        Result tiles, in order.
    """

    def __init__(self, family, preset="rdna4", dots=16, stages=2):
        self._variants = family_variants(family)
        self._preset = get_preset(preset)
        self._family = family
        self._int = self._variants[0].is_int
        if not self._int:
            alg = self._preset.algorithm(self._variants[0].a)
            if alg.structure != "tr":
                raise ValueError(
                    f"preset `{preset}` uses the {alg.structure!r} structure for {family}, "
                    f"which the RTL does not build (only 'tr')"
                )
            self._alg = alg
        self._width = _unit_width(self._variants, self._preset)
        for v in self._variants:
            if not self._int and v.k_stored % self._width:
                raise ValueError(
                    f"group {self._width} does not divide K = {v.k_stored} of {v.name}"
                )
        if not isinstance(dots, int) or dots < 1 or (TILE * TILE) % dots:
            raise ValueError(f"`dots` must divide 256, not {dots!r}")
        cuts = INT_CUTS if self._int else FLOAT_CUTS
        if not isinstance(stages, int) or not 0 <= stages <= cuts:
            raise ValueError(f"`stages` must be an integer from 0 to {cuts}, not {stages!r}")
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
        variants = self._variants
        shape = family_shape(self._family)
        in_layout, _ = core_layouts(self._family)
        v0 = variants[0]
        wa, wb, wc = FORMATS[v0.a].bits, FORMATS[v0.b].bits, FORMATS[v0.cd].bits
        k_a = max(v.k_stored for v in variants)
        k_b = max(v.k for v in variants)
        L, dots, S = self._width, self._dots, self._steps

        en = Signal()
        m.d.comb += en.eq(~self.o.valid | self.o.ready)

        # the latched instruction
        cur = Signal(in_layout)
        busy = Signal()
        t = Signal(range(self._sweep))
        s = Signal(range(max(S, 2)))
        last_issue = busy & (t == self._sweep - 1) & (s == S - 1)
        m.d.comb += self.i.ready.eq(en & (~busy | last_issue))
        with m.If(en):
            with m.If(busy):
                with m.If(t == self._sweep - 1):
                    m.d.sync += [t.eq(0), s.eq(s + 1)]
                    with m.If(s == S - 1):
                        m.d.sync += [busy.eq(0), s.eq(0)]
                with m.Else():
                    m.d.sync += t.eq(t + 1)
            with m.If(self.i.valid & self.i.ready):
                m.d.sync += [cur.eq(self.i.payload), busy.eq(1), t.eq(0), s.eq(0)]

        op = cur.op
        tables = {
            "sparse": [int(v.sparse) for v in variants],
            "deep": [int(v.k_stored > 16) for v in variants],
            "keyed": [int(v.index_keys > 1) for v in variants],
            "a_alt": [int(v.a == "bf8") for v in variants],
            "b_alt": [int(v.b == "bf8") for v in variants],
        }
        ops = 1 << len(op)
        sel = {}
        for name, values in tables.items():
            values = values + [values[-1]] * (ops - len(values))
            sel[name] = Signal(name=f"op_{name}")
            m.d.comb += sel[name].eq(Array(Const(x, 1) for x in values)[op])

        # matrix views of the latched words (static rewiring)
        a_mat = _rows([cur.a[i] for i in range(shape["a"])], wa, k_a)
        b_mat = _rows([cur.b[i] for i in range(shape["b"])], wb, k_b)
        idx_word = [Signal(32, name=f"idx_lane{lane}") for lane in range(WAVE)]
        for lane in range(WAVE):
            word = cur.idx[lane]
            m.d.comb += idx_word[lane].eq(Mux(sel["keyed"] & cur.index_key, word >> 16, word))
        idx_mat = _rows([idx_word], 2, 32)
        c_mat = [[None] * TILE for _ in range(TILE)]
        for lane in range(WAVE):
            n, h = lane % TILE, lane // TILE
            for j in range(8):
                bit = j * wc
                c_mat[j + 8 * h][n] = cur.c[bit // LANE_BITS][lane][bit % 32 : bit % 32 + wc]

        a_rows = Array(Cat(*row) for row in a_mat)
        b_cols = Array(Cat(*(b_mat[n][k] for k in range(k_b))) for n in range(TILE))
        idx_rows = Array(Cat(*row) for row in idx_mat)
        c_elems = Array(Cat(c_mat[e // TILE][e % TILE]) for e in range(TILE * TILE))

        # result tile and its write-back
        out_mat = [[Signal(wc, name=f"d_{r}_{n}") for n in range(TILE)] for r in range(TILE)]
        out_valid = Signal()
        m.d.comb += self.o.valid.eq(out_valid)
        for lane in range(WAVE):
            n, h = lane % TILE, lane // TILE
            for j in range(8):
                bit = j * wc
                word = self.o.payload.d[bit // LANE_BITS][lane]
                m.d.comb += word[bit % 32 : bit % 32 + wc].eq(out_mat[j + 8 * h][n])
        done_wb = Signal()
        with m.If(self.o.valid & self.o.ready):
            m.d.sync += out_valid.eq(0)
        with m.If(en & done_wb):
            m.d.sync += out_valid.eq(1)

        issuing = busy & (t < self._slots)
        first = s == 0
        last_step = s == S - 1
        done_issue = last_issue
        for u in range(dots):
            e = Signal(8, name=f"u{u}_elem")
            m.d.comb += e.eq(u + dots * t)
            row, col = e[4:8], e[0:4]
            a_row = Signal(k_a * wa, name=f"u{u}_arow")
            b_col = Signal(k_b * wb, name=f"u{u}_bcol")
            i_row = Signal(64, name=f"u{u}_irow")
            m.d.comb += [a_row.eq(a_rows[row]), b_col.eq(b_cols[col]), i_row.eq(idx_rows[row])]
            accs = Array(Signal(wc, name=f"u{u}_acc{x}") for x in range(self._slots))
            a_vals, b_vals = [], []
            for j in range(L):
                a_j = Signal(wa, name=f"u{u}_a{j}")
                b_j = Signal(wb, name=f"u{u}_b{j}")
                ka = s * L + j
                m.d.comb += a_j.eq(a_row.word_select(ka, wa))
                if j >= 16 and k_a > 16:  # integer units wider than a 16-deep op
                    with m.If(~sel["deep"]):
                        m.d.comb += a_j.eq(0)
                idx = i_row.word_select(ka, 2)
                kb_sparse = 4 * (s * (L // 2) + j // 2) + idx
                with m.If(sel["sparse"]):
                    m.d.comb += b_j.eq(b_col.word_select(kb_sparse, wb))
                with m.Else():
                    m.d.comb += b_j.eq(b_col.word_select(ka, wb))
                a_vals.append(a_j)
                b_vals.append(b_j)
            c_in = Signal(wc, name=f"u{u}_c")
            m.d.comb += c_in.eq(Mux(first, c_elems[e], accs[t]))
            # the issue register: operands and what the write-back needs
            meta_layout = data.StructLayout(
                {"valid": 1, "slot": range(self._slots), "elem": 8, "last": 1, "done": 1}
            )
            meta = Signal(meta_layout, name=f"u{u}_meta")
            ra = [Signal(wa, name=f"u{u}_ra{j}") for j in range(L)]
            rb = [Signal(wb, name=f"u{u}_rb{j}") for j in range(L)]
            rc = Signal(wc, name=f"u{u}_rc")
            rsel = Signal(2, name=f"u{u}_rsel")
            rint = Signal(3, name=f"u{u}_rint")
            with m.If(en):
                m.d.sync += [
                    meta.valid.eq(issuing),
                    meta.slot.eq(t),
                    meta.elem.eq(e),
                    meta.last.eq(last_step),
                    meta.done.eq(done_issue),
                    rc.eq(c_in),
                    rsel.eq(Cat(sel["a_alt"], sel["b_alt"])),
                ]
                if self._int:
                    m.d.sync += rint.eq(Cat(cur.a_signed, cur.b_signed, cur.clamp))
                m.d.sync += [x.eq(y) for x, y in zip(ra, a_vals)]
                m.d.sync += [x.eq(y) for x, y in zip(rb, b_vals)]
            st = Stager(m, en, INT_CUTS if self._int else FLOAT_CUTS, self._stages, f"u{u}_s")
            if self._int:
                result = int_step(st, ra, rb, rc, rint[0], rint[1], rint[2])
            else:
                fa = [self._alg.element_format(v0.a)]
                fb = [self._alg.element_format(v0.b)]
                if v0.a in ("fp8", "bf8"):
                    fa = [self._alg.element_format("fp8"), self._alg.element_format("bf8")]
                    fb = list(fa)
                result = float_step(st, self._alg, ra, rb, rc, fa, fb, rsel[0], rsel[1], v0.cd)
            assert st.done
            # metadata delayed as far as the unit's registers
            back = meta
            for x in range(self._stages):
                nxt = Signal(meta_layout, name=f"u{u}_meta{x + 1}")
                with m.If(en):
                    m.d.sync += nxt.eq(back)
                back = nxt
            with m.If(en & back.valid):
                m.d.sync += accs[back.slot].eq(result)
                with m.If(back.last):
                    for r in range(TILE):
                        for n in range(TILE):
                            with m.If(back.elem == r * TILE + n):
                                m.d.sync += out_mat[r][n].eq(result)
            if u == 0:
                m.d.comb += done_wb.eq(back.done)
        return m
