"""The ray transform block: OBB rotations from the two-level ROM, or an explicit 3x4 matrix.

RDNA 4 rotates the ray, not the boxes: a type-5 box node names one of 104 rotations by its
7-bit ``obbMatrixIndex`` and the ray accelerator computes ``o' = M o``, ``d' = M d`` before the
reciprocal and the box tests. The same datapath moves a ray from the top level into a BLAS on an
instance node (3x4 world-to-object matrix, translation added to the origin).

Sources: gpurt ``ObbCommon.hlsli`` (``ObbStage1Lut``, ``ObbStage2Lut``),
``rtip3_opcode_emulation.hlsl`` and ``Common.hlsl`` ``OBBTransform``. The golden model is
:mod:`gpurtl.golden.ray_accel.scalar.obb`.

Datapath
--------
Per output component ``r`` (3 rows x {origin, direction} = 6 chains of 3 FMAs = 18
``FPFMACore``), in gpurt's order::

    stage A:  acc_o = fma(o.z, m_r2, t_r)     acc_d = fma(d.z, m_r2, -0.0)   (= d.z * m_r2 exactly)
    stage B:  acc_o = fma(o.y, m_r1, acc_o)   acc_d = fma(d.y, m_r1, acc_d)
    stage C:  o'_r  = fma(o.x, m_r0, acc_o)   d'_r  = fma(d.x, m_r0, acc_d)

``t_r`` is ``+0.0`` for OBB rotations and the matrix's fourth column for explicit matrices. The
direction's innermost product is an FMA with addend ``-0.0``, which equals the rounded product bit
for bit (``x + -0 = x`` for every ``x``, including ``+0``), so all 18 units are the same core.

The ROM is read three times, once per stage, from the 7-bit index that travels down the
pipeline with the ray (a 7-bit delay line instead of nine 32-bit ones): stage A reads column 2,
stage B column 1, stage C column 0. Each read is the hardware's two-level lookup: stage-1 entry
(54 bits) -> 6-bit code -> stage-2 value (31 bits) with the code's sign bit on top.

Index ``0x7F`` ("no rotation") and the undefined indices 104..126 pass the input ray through
unchanged (bit for bit) with the same latency; 104..126 also raise ``bad_index``.

Interface (``OBBTransformCore``), a clock-enable datapath core without valid/ready
--------------------------------------------------------------------------------------
``en: In(1)``
    Every register advances only when ``en`` is high.
``i: In(core_in_layout(lanes, with_matrix))``
    ``index`` (7 bits; with ``lanes=2`` an array of 2), ``origin[3]``, ``dir[3]`` (FP32 bits);
    with ``with_matrix=True`` also ``use_matrix`` (1 bit) and ``matrix`` (3 rows x 4 FP32,
    row-major, column 3 = translation). ``use_matrix=1`` selects the explicit matrix and ignores
    ``index``.
``o: Out(core_out_layout(lanes))``
    ``origin[3]``, ``dir[3]``, ``bad_index`` (lanes=1) or ``lane[2]`` of those (lanes=2). Valid
    ``latency`` enabled cycles after the inputs.
``latency``
    ``3 * fma_stages`` (the FMA cores hold every register of the chain).

Integration in the ray accelerator top level: put one ``OBBTransformCore`` (with
``with_matrix=True`` if the same block also serves instance nodes) in front of the reciprocal for
*every* instruction. Box nodes drive ``index`` from DW7 bits [6:0]; every other node (and box nodes
with 0x7F) drive ``index = 0x7F`` and pass through with the same latency, so all node kinds keep one
fixed pipeline depth and one node enters per cycle. Instance nodes drive ``use_matrix = ~culled``
and ``matrix`` from DW0..11 (see :class:`~gpurtl.hdl.ray_accel.instance_transform.InstanceCore`).
``bad_index`` marks the undefined indices 104..126 (the golden ``intersect`` model reports
status 2 for them).

``lanes=2`` serves the dual (BVH4x2) form, where the two nodes may name different rotations: one
ray, two indices, two transformed rays per cycle (36 FMA units instead of 18). ``with_matrix`` is
available with ``lanes=1`` only. ``OBBTransformPipe`` wraps the core in a valid/ready stream
(the ``obb_transform`` block).
"""

from amaranth.hdl import Cat, Const, Elaboratable, Module, Mux, Signal, unsigned
from amaranth.lib import data, wiring

from gpurtl.facts.fp32 import NEG_ZERO, Float32
from gpurtl.facts.obb import NO_ROTATION, OBB_COUNT, STAGE1, STAGE2

from ..pipe import EnableCoreSignature, EnableCoreStream, delay

__all__ = [
    "core_in_layout",
    "core_out_layout",
    "ObbRom",
    "OBBTransformCore",
    "OBBTransformPipe",
    "fma_core_class",
]

VEC3 = data.ArrayLayout(Float32, 3)
RAY_OUT = data.StructLayout({"origin": VEC3, "dir": VEC3, "bad_index": unsigned(1)})


def fma_core_class():
    """The FP32 FMA core class (:class:`gpurtl.hdl.fp32.FPFMACore`)."""
    from gpurtl.hdl.fp32.fma import FPFMACore

    return FPFMACore


def core_in_layout(lanes=1, with_matrix=False):
    """Input layout of :class:`OBBTransformCore` (also the ``obb_transform`` block's input)."""
    fields = {
        "index": unsigned(7) if lanes == 1 else data.ArrayLayout(unsigned(7), lanes),
        "origin": VEC3,
        "dir": VEC3,
    }
    if with_matrix:
        fields["use_matrix"] = unsigned(1)
        fields["matrix"] = data.ArrayLayout(data.ArrayLayout(Float32, 4), 3)
    return data.StructLayout(fields)


def core_out_layout(lanes=1):
    """Output layout of :class:`OBBTransformCore`."""
    if lanes == 1:
        return RAY_OUT
    return data.StructLayout({"lane": data.ArrayLayout(RAY_OUT, lanes)})


class ObbRom(Elaboratable):
    """Combinational two-level OBB lookup of one matrix column.

    ``index`` (7 bits) -> ``value[3]`` (FP32 bits of rows 0..2 of column ``column``) and
    ``rotate`` (1 when ``index < 104``). Stage 1 gives the 6-bit code, stage 2 the magnitude.
    """

    def __init__(self, column):
        if column not in (0, 1, 2):
            raise ValueError(f"`column` must be 0, 1 or 2, not {column!r}")
        self._column = column
        self.index = Signal(7)
        self.value = Signal(VEC3)
        self.rotate = Signal()

    def elaborate(self, platform):
        m = Module()
        codes = Signal(data.ArrayLayout(unsigned(6), 3))
        with m.Switch(self.index):
            for i, entry in enumerate(STAGE1):
                with m.Case(i):
                    m.d.comb += [
                        codes[r].eq((entry >> (18 * r + 6 * self._column)) & 0x3F) for r in range(3)
                    ]
        m.d.comb += self.rotate.eq(self.index < OBB_COUNT)
        for r in range(3):
            magnitude = Signal(31, name=f"mag{r}")
            with m.Switch(codes[r][:5]):
                for k, bits in enumerate(STAGE2[:26]):
                    with m.Case(k):
                        m.d.comb += magnitude.eq(bits)
            m.d.comb += self.value[r].eq(Cat(magnitude, codes[r][5]))
        return m


class OBBTransformCore(wiring.Component):
    """Clock-enable ray transform core (see the module doc string for ports and timing).

    Parameters
    ----------
    fma_stages : int
        Register stages of each ``FPFMACore`` (0 = combinational).
    lanes : int
        1, or 2 for the dual form (two indices, two rotated rays per cycle).
    with_matrix : bool
        Add the explicit 3x4 matrix input (instance transforms); lanes must be 1.
    """

    @staticmethod
    def _check(fma_stages, lanes, with_matrix):
        if not isinstance(fma_stages, int) or isinstance(fma_stages, bool) or fma_stages < 0:
            raise ValueError(f"`fma_stages` must be a non-negative integer, not {fma_stages!r}")
        if lanes not in (1, 2):
            raise ValueError(f"`lanes` must be 1 or 2, not {lanes!r}")
        if with_matrix and lanes != 1:
            raise ValueError("`with_matrix` requires `lanes` = 1")

    def __init__(self, fma_stages=2, lanes=1, with_matrix=False):
        self._check(fma_stages, lanes, with_matrix)
        self._fma_stages, self._lanes, self._with_matrix = fma_stages, lanes, bool(with_matrix)
        super().__init__(
            EnableCoreSignature(core_in_layout(lanes, with_matrix), core_out_layout(lanes))
        )

    @property
    def fma_stages(self):
        return self._fma_stages

    @property
    def lanes(self):
        return self._lanes

    @property
    def with_matrix(self):
        return self._with_matrix

    @property
    def latency(self):
        """Enabled cycles from ``i`` to ``o``: three chained FMAs."""
        return 3 * self._fma_stages

    @property
    def fma_units(self):
        """Number of FP32 FMA units (18 per lane)."""
        return 18 * self._lanes

    def elaborate(self, platform):
        fma_cls = fma_core_class()
        m = Module()
        L, en = self._fma_stages, self.en
        i = self.i
        # the ray's components, delayed to the stage that consumes them
        o_y, d_y = delay(m, en, i.origin[1], L, "oy"), delay(m, en, i.dir[1], L, "dy")
        o_x, d_x = delay(m, en, i.origin[0], 2 * L, "ox"), delay(m, en, i.dir[0], 2 * L, "dx")
        pass_o = delay(m, en, i.origin.as_value(), 3 * L, "pass_o")
        pass_d = delay(m, en, i.dir.as_value(), 3 * L, "pass_d")
        if self._with_matrix:
            use_m = [
                i.use_matrix,
                delay(m, en, i.use_matrix, L, "usem1"),
                delay(m, en, i.use_matrix, 2 * L, "usem2"),
            ]
            mat_col = [
                [delay(m, en, i.matrix[r][c], (2 - c) * L, f"m{r}{c}") for r in range(3)]
                for c in range(3)
            ]
        indices = [i.index] if self._lanes == 1 else [i.index[k] for k in range(self._lanes)]
        for lane, index in enumerate(indices):
            idx = [
                index,
                delay(m, en, index, L, f"idx{lane}_1"),
                delay(m, en, index, 2 * L, f"idx{lane}_2"),
            ]
            # ROM column read per stage: stage A column 2, stage B column 1, stage C column 0
            col = {}
            for stage, column in enumerate((2, 1, 0)):
                rom = ObbRom(column)
                m.submodules[f"rom{lane}_{stage}"] = rom
                m.d.comb += rom.index.eq(idx[stage])
                values = [rom.value[r] for r in range(3)]
                if self._with_matrix:
                    values = [Mux(use_m[stage], mat_col[column][r], values[r]) for r in range(3)]
                col[column] = values
            translate = [Const(0, 32)] * 3
            if self._with_matrix:
                translate = [Mux(i.use_matrix, i.matrix[r][3], 0) for r in range(3)]
            out = Signal(RAY_OUT, name=f"lane{lane}_out")
            for r in range(3):
                for kind, (vz, vy, vx) in (
                    ("o", (i.origin[2], o_y, o_x)),
                    ("d", (i.dir[2], d_y, d_x)),
                ):
                    units = []
                    for stage, (a, column) in enumerate(((vz, 2), (vy, 1), (vx, 0))):
                        unit = fma_cls(stages=L)
                        m.submodules[f"fma{lane}_{kind}{r}_{stage}"] = unit
                        m.d.comb += [unit.en.eq(en), unit.a.eq(a), unit.b.eq(col[column][r])]
                        units.append(unit)
                    init = translate[r] if kind == "o" else Const(NEG_ZERO, 32)
                    m.d.comb += [
                        units[0].c.eq(init),
                        units[1].c.eq(units[0].z),
                        units[2].c.eq(units[1].z),
                    ]
                    target = out.origin[r] if kind == "o" else out.dir[r]
                    m.d.comb += target.eq(units[2].z)
            rotate = Signal(name=f"lane{lane}_rotate")
            m.d.comb += rotate.eq(idx[2] < OBB_COUNT)
            last_idx = delay(m, en, idx[2], L, f"idx{lane}_3")
            last_rotate = delay(m, en, rotate, L, f"rot{lane}_3")
            if self._with_matrix:
                last_rotate = last_rotate | delay(m, en, use_m[2], L, "usem3")
            bad = (last_idx >= OBB_COUNT) & (last_idx != NO_ROTATION)
            if self._with_matrix:
                bad = bad & ~delay(m, en, use_m[2], L, "usem3b")
            target = self.o if self._lanes == 1 else self.o.lane[lane]
            with m.If(last_rotate):
                m.d.comb += [target.origin.eq(out.origin), target.dir.eq(out.dir)]
            with m.Else():
                m.d.comb += [target.origin.eq(pass_o), target.dir.eq(pass_d)]
            m.d.comb += target.bad_index.eq(bad)
        return m


class OBBTransformPipe(EnableCoreStream):
    """``OBBTransformCore`` in a valid/ready stream (block ``obb_transform``), II = 1."""

    def __init__(self, fma_stages=2, lanes=1):
        OBBTransformCore._check(fma_stages, lanes, False)
        super().__init__(OBBTransformCore(fma_stages=fma_stages, lanes=lanes))
