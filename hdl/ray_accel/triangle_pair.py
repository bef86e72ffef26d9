"""The triangle-pair path of the ray accelerator: node bytes + ray -> the 10 result dwords (RTL).

``TrianglePairCore`` (clock-enable core, no valid/ready; used by the ``ray_accel`` top level)
    ``en: In(1)``; ``i: In(PAIR_IN_LAYOUT)`` with ``ray`` (``RAY_LAYOUT``: ``origin[3]``,
    ``dir[3]``, ``extent``, ``instance_mask``), ``node`` (32 dwords of the 128-byte primitive
    node), ``node_ptr`` (32 bits; the pair index is bits 0, 1 and 3), ``pointer_flags`` (10 bits =
    BVH base bits 54..63) and ``desc`` (``DESC_LAYOUT``; only ``pointer_flags_en`` matters here);
    ``o: Out(PAIR_OUT_LAYOUT)`` with ``result`` (10 dwords: DW0..7 and DW8/9 of gpurt
    ``rtip3_opcode_emulation.hlsl`` ``IntersectTriangle3_1``) and
    ``error`` (misuse, see :func:`gpurtl.golden.ray_accel.scalar.triangle.triangle_pair_eval`).
    ``latency`` = ``max(2, divider latency)`` (pair decode :class:`PrimitiveDecodeCore` in
    parallel with :class:`RaySetupCore`) + :attr:`TriangleEngine.latency` + 1 (result format
    register). One instruction per cycle (II = 1), two triangle tests per cycle.
``RayTriangle``
    The same behind a valid/ready stream (``i``/``o`` streams of the same layouts, one global
    enable ``en = ~o.valid | o.ready``): the registry block ``ray_triangle``.

Bit-exact with :func:`gpurtl.golden.ray_accel.scalar.triangle.triangle_pair_eval` (its doc string lists
the result rules: culling by pointer flags, opaque / procedural sign bits, invalid triangle 1,
navigation bits).
"""

from amaranth.hdl import Cat, Module, Mux, Signal, Value, unsigned
from amaranth.lib import data, wiring

from gpurtl.facts.fp32 import ONE, POS_INF, Float32
from gpurtl.facts.ray_accel import (
    DESC_LAYOUT,
    NODE_LAYOUT,
    POINTER_FLAGS_SHAPE,
    RAY_LAYOUT,
    RESULT_LAYOUT,
    PointerFlags,
)

from ..pipe import EnableCoreSignature, EnableCoreStream
from .primitive_decode import PrimitiveDecodeCore
from .triangle_engine import (
    RaySetupCore,
    Sched,
    Timed,
    TriangleEngine,
    check_stages,
    engine_latency,
    unit_latency,
)

__all__ = ["PAIR_IN_LAYOUT", "PAIR_OUT_LAYOUT", "TrianglePairCore", "RayTriangle", "pair_latency"]

PAIR_IN_LAYOUT = data.StructLayout(
    {
        "ray": RAY_LAYOUT,
        "node": NODE_LAYOUT,
        "node_ptr": unsigned(32),
        "pointer_flags": POINTER_FLAGS_SHAPE,
        "desc": DESC_LAYOUT,
    }
)
PAIR_OUT_LAYOUT = data.StructLayout({"result": RESULT_LAYOUT, "error": unsigned(1)})

_SIDE_LAYOUT = data.StructLayout(
    {
        "tri": data.ArrayLayout(
            data.StructLayout(
                {
                    "prim_id": unsigned(31),
                    "geo_id": unsigned(30),
                    "opaque": unsigned(1),
                    "procedural": unsigned(1),
                    "valid": unsigned(1),
                }
            ),
            2,
        ),
        "nav": unsigned(2),
        "error": unsigned(1),
    }
)


def pair_latency(stages=None):
    """:attr:`TrianglePairCore.latency` for FP32 core depths ``stages`` (without building)."""
    st = check_stages(stages)
    return max(PrimitiveDecodeCore.LATENCY, unit_latency("div", st)) + engine_latency(st) + 1


class TrianglePairCore(wiring.Component):
    """Clock-enable triangle-pair core; see the module doc string.

    Parameters
    ----------
    stages : dict, optional
        FP32 core register stages ``{"add", "mul", "fma", "div"}`` (``None`` = core default).
    """

    def __init__(self, *, stages=None):
        self._stages = check_stages(stages)
        self._setup = RaySetupCore(stages=self._stages)
        self._engine = TriangleEngine(stages=self._stages, raw_outputs=False)
        self._decode = PrimitiveDecodeCore()
        super().__init__(EnableCoreSignature(PAIR_IN_LAYOUT, PAIR_OUT_LAYOUT))

    @property
    def front_latency(self):
        """Cycles of the decode / ray-setup front end."""
        return max(self._decode.latency, self._setup.latency)

    @property
    def latency(self):
        return pair_latency(self._stages)

    def elaborate(self, platform):
        m = Module()
        en = self.en
        m.submodules.decode = dec = self._decode
        m.submodules.setup = setup = self._setup
        m.submodules.engine = eng = self._engine
        s = Sched(m, en, "pair", self._stages)
        m.d.comb += [
            dec.en.eq(en),
            setup.en.eq(en),
            eng.en.eq(en),
            dec.i.node.eq(self.i.node),
            dec.i.node_ptr.eq(self.i.node_ptr),
            setup.i.dir.eq(self.i.ray.dir),
        ]
        front = self.front_latency
        t_dec = Timed(Value.cast(dec.o), dec.latency)
        t_setup = Timed(Value.cast(setup.o), setup.latency)
        t_origin = Timed(Value.cast(self.i.ray.origin), 0)
        decoded = dec.o.shape()(s.at(t_dec, front))
        m.d.comb += [eng.i.setup.eq(s.at(t_setup, front)), eng.i.origin.eq(s.at(t_origin, front))]
        for k in range(2):
            m.d.comb += eng.i.tri[k].eq(decoded.tri[k].v)

        # ---- result format (at engine output time), then one register ----------------------
        # only the IDs and flags travel along the engine (not the vertices)
        t_eng = front + eng.latency
        side = Signal(_SIDE_LAYOUT, name="pair_side")
        m.d.comb += [side.nav.eq(decoded.nav), side.error.eq(decoded.error)]
        for k in range(2):
            for name in ("prim_id", "geo_id", "opaque", "procedural", "valid"):
                m.d.comb += side.tri[k][name].eq(decoded.tri[k][name])
        pdec = _SIDE_LAYOUT(s.at(Timed(Value.cast(side), front), t_eng))
        flags_en = s.at(Timed(Value.cast(self.i.desc.pointer_flags_en), 0), t_eng)
        flags_raw = s.at(Timed(Value.cast(self.i.pointer_flags), 0), t_eng)
        f = Signal(PointerFlags, name="fmt_flags")
        m.d.comb += f.eq(Mux(flags_en, flags_raw, 0))

        result = Signal(RESULT_LAYOUT, name="fmt_result")
        for k in range(2):
            tri, lane = pdec.tri[k], eng.o.lane[k]
            is_op = Signal(name=f"fmt_opaque{k}")
            m.d.comb += is_op.eq(f.force_opaque | (~f.force_non_opaque & tri.opaque))
            op_culled = Mux(is_op, f.cull_opaque, f.cull_non_opaque)
            front_face = ~lane.backface ^ f.flip_facedness
            face_culled = ~f.disable_tri_cull & Mux(front_face, f.cull_front, f.cull_back)
            tri_ok = Signal(name=f"fmt_tri_ok{k}")
            proc_ok = Signal(name=f"fmt_proc_ok{k}")
            m.d.comb += [
                tri_ok.eq(lane.hit & ~(f.skip_triangles | op_culled | face_culled)),
                proc_ok.eq(~(f.skip_procedural | op_culled)),
            ]
            dw = [Signal(32, name=f"fmt_dw{k}_{n}") for n in range(4)]
            with m.If(tri.procedural):
                m.d.comb += [
                    dw[0].eq(Mux(proc_ok, 0, POS_INF)),
                    dw[1].eq(Mux(proc_ok, ONE, 0)),
                    dw[2].eq(Mux(proc_ok, ONE, 0)),
                    dw[3].eq(0),
                ]
            with m.Elif(tri_ok):
                m.d.comb += [
                    dw[0].eq(lane.t),
                    dw[1].eq(lane.i),
                    dw[2].eq(lane.j),
                    dw[3].eq(~front_face),
                ]
            with m.Else():
                m.d.comb += [dw[0].eq(POS_INF), dw[1].eq(0), dw[2].eq(0), dw[3].eq(0)]
            final = [
                dw[0],
                Cat(Float32(dw[1]).magnitude(), tri.procedural),
                Cat(Float32(dw[2]).magnitude(), ~is_op),
                Cat(dw[3][0], tri.prim_id[:31]),
            ]
            if k == 1:
                invalid = [POS_INF, ONE, ONE, 0]
                final = [Mux(tri.valid, x, c) for x, c in zip(final, invalid)]
            for n in range(4):
                m.d.comb += result[4 * k + n].eq(final[n])
            m.d.comb += result[8 + k].eq(Cat(pdec.nav, tri.geo_id[:30]))
        with m.If(en):
            m.d.sync += [self.o.result.eq(result), self.o.error.eq(pdec.error)]
        return m


class RayTriangle(EnableCoreStream):
    """Stream wrapper of :class:`TrianglePairCore` (registry block ``ray_triangle``)."""

    def __init__(self, *, stages=None):
        super().__init__(TrianglePairCore(stages=stages), PAIR_IN_LAYOUT, PAIR_OUT_LAYOUT)
