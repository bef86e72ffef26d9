"""Legacy 64-byte triangle nodes of the dual instruction, two per cycle (RTL).

``LegacyTriangleCore`` (clock-enable core, no valid/ready) tests one legacy triangle node per
lane, two lanes per cycle (``image_bvh_dual_intersect_ray`` with two triangle pointers), on the
same :class:`~.triangle_engine.TriangleEngine` as the compressed path. Bit-exact with
:func:`gpurtl.golden.ray_accel.scalar.triangle.legacy_triangle_result` (its doc string gives the result
rules; layout of gpurt ``gfx10/TriangleNode1_0.hlsli``).

Ports: ``en: In(1)``; ``i: In(LEGACY_IN_LAYOUT)``: ``ray`` (``RAY_LAYOUT``), ``node[2]`` (16 dwords
each: the 64-byte node; the vertices are dwords 0..11 and ``triangle_id`` is dword 15 in both the
RT IP 2 and 3.0 layouts), ``node_ptr[2]`` (bit 0 picks triangle (v0, v1, v2) or (v1, v3, v2)),
``pointer_flags`` (10 bits), ``desc`` (``pointer_flags_en``, ``return_mode`` are used);
``o: Out(LEGACY_OUT_LAYOUT)``: ``result[2]`` (4 dwords per lane) and ``error[2]`` (the pointer's
low 3 bits are not 0 or 1; the lane is then computed as type ``ptr & 1``).
``latency`` = divider latency (ray setup) + ``TriangleEngine.latency`` + 1.
The geometry indices of DW8/9 are plain loads (dword 14 or 12 of the node) left to the top level.
"""

from amaranth.hdl import Cat, Module, Mux, Signal, Value, unsigned
from amaranth.lib import data, wiring

from gpurtl.facts.fp32 import ONE, POS_INF, SIGN_BIT
from gpurtl.facts.ray_accel import (
    DESC_LAYOUT,
    POINTER_FLAGS_SHAPE,
    RAY_LAYOUT,
    PointerFlags,
)

from ..pipe import EnableCoreSignature, EnableCoreStream
from .triangle_engine import (
    RaySetupCore,
    Sched,
    Timed,
    TriangleEngine,
    check_stages,
    engine_latency,
    unit_latency,
)

__all__ = [
    "LEGACY_IN_LAYOUT",
    "LEGACY_OUT_LAYOUT",
    "LegacyTriangleCore",
    "RayTriangleLegacy",
    "legacy_latency",
]

LEGACY_IN_LAYOUT = data.StructLayout(
    {
        "ray": RAY_LAYOUT,
        "node": data.ArrayLayout(data.ArrayLayout(unsigned(32), 16), 2),
        "node_ptr": data.ArrayLayout(unsigned(32), 2),
        "pointer_flags": POINTER_FLAGS_SHAPE,
        "desc": DESC_LAYOUT,
    }
)
LEGACY_OUT_LAYOUT = data.StructLayout(
    {
        "result": data.ArrayLayout(data.ArrayLayout(unsigned(32), 4), 2),
        "error": data.ArrayLayout(unsigned(1), 2),
    }
)


def legacy_latency(stages=None):
    """:attr:`LegacyTriangleCore.latency` for FP32 core depths ``stages`` (without building)."""
    st = check_stages(stages)
    return unit_latency("div", st) + engine_latency(st) + 1


class LegacyTriangleCore(wiring.Component):
    """Two legacy triangle-node tests per cycle; see the module doc string."""

    def __init__(self, *, stages=None):
        self._stages = check_stages(stages)
        self._setup = RaySetupCore(stages=self._stages)
        self._engine = TriangleEngine(stages=self._stages)
        super().__init__(EnableCoreSignature(LEGACY_IN_LAYOUT, LEGACY_OUT_LAYOUT))

    @property
    def latency(self):
        return legacy_latency(self._stages)

    def elaborate(self, platform):
        m = Module()
        en = self.en
        m.submodules.setup = setup = self._setup
        m.submodules.engine = eng = self._engine
        s = Sched(m, en, "leg", self._stages)
        front = setup.latency
        m.d.comb += [
            setup.en.eq(en),
            eng.en.eq(en),
            setup.i.dir.eq(self.i.ray.dir),
            eng.i.setup.eq(setup.o),
            eng.i.origin.eq(s.at(Timed(Value.cast(self.i.ray.origin), 0), front)),
        ]
        for k in range(2):
            node = self.i.node[k]
            odd = self.i.node_ptr[k][0]
            vert = [Cat(node[3 * n], node[3 * n + 1], node[3 * n + 2]) for n in range(4)]
            tri = Cat(Mux(odd, vert[1], vert[0]), Mux(odd, vert[3], vert[1]), vert[2])
            m.d.comb += eng.i.tri[k].eq(s.at(Timed(tri, 0), front))

        t_eng = front + eng.latency
        flags_en = s.at(Timed(Value.cast(self.i.desc.pointer_flags_en), 0), t_eng)
        mode = s.at(Timed(Value.cast(self.i.desc.return_mode), 0), t_eng)
        f = Signal(PointerFlags, name="leg_flags")
        m.d.comb += f.eq(Mux(flags_en, s.at(Timed(Value.cast(self.i.pointer_flags), 0), t_eng), 0))
        for k in range(2):
            lane = eng.o.lane[k]
            ptr = s.at(Timed(Value.cast(self.i.node_ptr[k]), 0), t_eng)
            tri_id = s.at(Timed(Value.cast(self.i.node[k][15]), 0), t_eng)
            tflags = Signal(8, name=f"leg_tflags{k}")
            m.d.comb += tflags.eq(Mux(ptr[0], tri_id[8:16], tri_id[0:8]))
            is_op = f.force_opaque | (~f.force_non_opaque & tflags[7])
            op_culled = Mux(is_op, f.cull_opaque, f.cull_non_opaque)
            front_face = ~lane.backface ^ f.flip_facedness
            face_culled = ~f.disable_tri_cull & Mux(front_face, f.cull_front, f.cull_back)
            ok = Signal(name=f"leg_ok{k}")
            m.d.comb += ok.eq(lane.hit & ~(f.skip_triangles | op_culled | face_culled))
            bary = [lane.u, lane.v, lane.w, 0]

            def pick(sel):
                return Mux(sel[1], Mux(sel[0], 0, bary[2]), Mux(sel[0], bary[1], bary[0]))

            flip_sign = Mux(
                f.flip_facedness, SIGN_BIT, 0
            )  # a flipped facedness negates t_num, t_den
            dw = [
                Mux(ok, lane.t_num.as_value() ^ flip_sign, POS_INF),
                Mux(ok, lane.t_den.as_value() ^ flip_sign, ONE),
                Mux(ok, Mux(mode, pick(tflags[0:2]), tri_id), 0),
                Mux(ok, Mux(mode, pick(tflags[2:4]), 1), 0),
            ]
            with m.If(en):
                m.d.sync += [self.o.result[k][n].eq(dw[n]) for n in range(4)]
                m.d.sync += self.o.error[k].eq(ptr[1:3] != 0)
        return m


class RayTriangleLegacy(EnableCoreStream):
    """Stream wrapper of :class:`LegacyTriangleCore` (registry block ``ray_triangle_legacy``)."""

    def __init__(self, *, stages=None):
        super().__init__(LegacyTriangleCore(stages=stages), LEGACY_IN_LAYOUT, LEGACY_OUT_LAYOUT)
