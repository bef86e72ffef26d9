"""The ray accelerator top level (``RayAccel``): one intersect instruction per cycle.

``IMAGE_BVH8_INTERSECT_RAY`` and ``IMAGE_BVH_DUAL_INTERSECT_RAY`` of the AMD "RDNA4 Instruction
Set Architecture" guide ("Ray Tracing"), as GPUOpen gpurt
``src/shaders/rtip3_opcode_emulation.hlsl``
emulates them. Golden model: :class:`gpurtl.golden.ray_accel.scalar.intersect.IntersectModel`,
restricted to the node kinds this build has (:attr:`RayAccel.paths`; other kinds give status 1
on both sides).

Transaction: ``i`` carries one ``INSTR_LAYOUT`` instruction, ``o`` one ``OUT_LAYOUT`` result
(10 dwords, the returned ray, a status; :mod:`gpurtl.facts.ray_accel`). One global enable
``en = ~o.valid | o.ready``; every register advances only with ``en``. Every path has the same
latency, so results leave in order.

Components (each a ``wiring.Component`` with a ``latency`` and its own golden reference)
------------------------------------------------------------------------------------------
========================== ============================================================
``NodeDecode``             the node bytes decoded once into the entry register ``s1``
                           (:func:`~.node_decode.decoded_layout`: plane offsets, slot
                           pointers with valid/cull folded in, the ray without its
                           instance mask, the instance matrix and result fields, the
                           controls)
``RaySetupUnit``           OBB / instance ray transform (one shared core), ``rcp(dir)``
``BoxEngine`` x E          the slab tests, ``boxes_per_engine`` per engine per cycle
``DedupUnit``              hit select and child-reuse de-duplication
``SortUnit``               the 19-comparator network
``TrianglePairCore``       compressed triangle pairs, from the instruction (own decode)
``LegacyTriangleCore``     the dual form's legacy triangle nodes, from the instruction
``ResultFormat``           the 10 dwords, the returned ray, the status (output register)
========================== ============================================================

Between the components only side-band fields wait (the slot pointers for the de-duplication,
the controls, the returned ray); lines of :data:`~gpurtl.hdl.pipe.SIDEBAND_MIN_CYCLES` or more cycles are
memory rings (:func:`~gpurtl.hdl.pipe.sideband`), not flip-flops. :attr:`RayAccel.register_bits` (shown
by ``gpurtl list ray_accel``) gives the payload bits of each stage's registers outside the FP32
cores: at the ``fpga`` preset the entry register ``s1`` holds 2133 bits (box paths only; 2678
with the transform and triangle fields) instead of the 2373-bit instruction, the planes wait in a
memory ring, the de-duplication register holds 512 bits, the sort network 3228, the output
register 514.

Timing (enabled cycles after the instruction is taken): ``s1`` at 1, held for the ``G`` slot
groups; the ray setup reads ``s1``; slot group ``g`` enters the engines at ``1 + g + P`` with
``P = max(transform, transform + rcp - inv_offset)`` (the engines read the origin with the
planes and the reciprocal ``inv_offset`` cycles later); de-duplication, sort and result format
follow. The triangle cores take the instruction at the cycle it is accepted. ``latency`` is the
sum of the component latencies along the longest path.

FP32 presets (``fp``)
---------------------
``"fpga"`` (default) or ``"shallow"``; the depths of each component per preset are defined in
:mod:`~gpurtl.hdl.ray_accel.presets` (the sort network's split compare and swap adds 6 cycles
at ``"fpga"``). Latencies
(``gpurtl list ray_accel -p fp=PRESET [-p triangles=0 -p transforms=0]``; "box path" is the
latency the build would have without its triangle paths):

================================================ ======= ========= ===== ====
build                                            preset  box path  full  II
================================================ ======= ========= ===== ====
full (2 x 4, all paths)                          fpga    71        122   1
full (2 x 4, all paths)                          shallow 19        19    1
box paths only (2 x 4)                           fpga    65        65    1
box paths only (2 x 4)                           shallow 16        16    1
smallest (1 x 1, box paths only)                 fpga    72        72    8
smallest (1 x 1, box paths only)                 shallow 23        23    8
================================================ ======= ========= ===== ====

Smaller builds (FPGA experiments): ``engines * boxes_per_engine = T`` box testers with ``T`` in
{1, 2, 4, 8}. With ``T < 8`` the ``s1`` register holds an instruction for ``G = 8 / T`` cycles,
feeding slot group ``phase`` to the engines each cycle; a collector gathers the groups at the
engine output and the last group releases the instruction to the de-duplication stage. ``i.ready``
is low for ``G - 1`` cycles after each accepted instruction (II = G); the latency stays fixed.

Not modelled (status 1): procedural type 7 of the dual form, HPB64 (``box_node_64b``), and
whatever ``triangles=False`` / ``transforms=False`` leave out.
"""

from amaranth.hdl import Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from gpurtl.facts.ray_accel import INSTR_LAYOUT, OUT_LAYOUT, SORT_SLOTS

from ..pipe import SIDEBAND_MIN_CYCLES, delay, reg, sideband
from .box_engine import BOX_IN_LAYOUT, BoxEngine
from .dedup import DEDUP_IN_LAYOUT, DedupUnit
from .legacy_triangle import LegacyTriangleCore
from .node_decode import NodeDecode, decoded_layout
from .presets import (
    FP_PRESETS,
    box_engine_stages,
    check_preset,
    ray_setup_stages,
    sort_stages,
    triangle_stages,
)
from .ray_setup import RaySetupUnit
from .result_format import ResultFormat, format_in_layout
from .sort_unit import SORT_IN_LAYOUT, SortUnit
from .triangle_pair import TrianglePairCore

__all__ = ["RayAccel", "build_paths", "FP_PRESETS"]


def build_paths(triangles=True, transforms=True):
    """The node kinds a build models (the ``paths`` of the golden ``IntersectModel``)."""
    paths = {"box"}
    if triangles:
        paths |= {"triangle", "legacy_triangle"}
    if transforms:
        paths |= {"obb", "instance"}
    return frozenset(paths)


def _check_params(engines, boxes_per_engine, ftz, triangles, transforms, fp):
    if engines not in (1, 2) or isinstance(engines, bool):
        raise ValueError(f"`engines` must be 1 or 2, not {engines!r}")
    if (
        isinstance(boxes_per_engine, bool)
        or not isinstance(boxes_per_engine, int)
        or not 1 <= boxes_per_engine <= 8
    ):
        raise ValueError(
            f"`boxes_per_engine` must be an integer from 1 to 8, not {boxes_per_engine!r}"
        )
    if engines * boxes_per_engine not in (1, 2, 4, 8):
        raise ValueError(
            f"`engines * boxes_per_engine` must be 1, 2, 4 or 8, not {engines * boxes_per_engine}"
        )
    for name, value in (("ftz", ftz), ("triangles", triangles), ("transforms", transforms)):
        if not isinstance(value, bool):
            raise TypeError(f"`{name}` must be a boolean, not {value!r}")
    check_preset(fp)


class RayAccel(wiring.Component):
    """The ray accelerator top level (see the module doc string).

    Parameters
    ----------
    engines : int
        Intersection engines, 1 or 2.
    boxes_per_engine : int
        Box tests per engine per cycle; ``engines * boxes_per_engine`` must be 1, 2, 4 or 8
        (fewer than 8 testers take ``8 / (engines * boxes_per_engine)`` cycles per instruction).
    ftz : bool
        Flush subnormals in the box-path ray arithmetic (reciprocal, slab test, keys, sort).
    triangles : bool
        Include the triangle-pair and legacy-triangle paths.
    transforms : bool
        Include the OBB and instance ray transforms.
    fp : str
        FP32 depth preset, ``"fpga"`` or ``"shallow"`` (:mod:`~gpurtl.hdl.ray_accel.presets`).
    """

    def __init__(
        self,
        *,
        engines=2,
        boxes_per_engine=4,
        ftz=False,
        triangles=True,
        transforms=True,
        fp="fpga",
    ):
        _check_params(engines, boxes_per_engine, ftz, triangles, transforms, fp)
        self._engines, self._boxes, self._ftz, self._fp = engines, boxes_per_engine, ftz, fp
        self._triangles, self._transforms = triangles, transforms
        self._groups = 8 // (engines * boxes_per_engine)
        self._decode = NodeDecode(triangles=triangles, transforms=transforms)
        self._setup = RaySetupUnit(transforms=transforms, ftz=ftz, **ray_setup_stages(fp))
        self._box_engines = [
            BoxEngine(boxes_per_engine, ftz=ftz, **box_engine_stages(fp)) for _ in range(engines)
        ]
        self._dedup = DedupUnit()
        self._sorter = SortUnit(ftz=ftz, **sort_stages(fp))
        self._format = ResultFormat(triangles=triangles, transforms=transforms)
        self._tri = self._leg = None
        if triangles:
            self._tri = TrianglePairCore(stages=triangle_stages(fp))
            self._leg = LegacyTriangleCore(stages=triangle_stages(fp))
        super().__init__(
            {"i": In(stream.Signature(INSTR_LAYOUT)), "o": Out(stream.Signature(OUT_LAYOUT))}
        )

    @property
    def engines(self):
        return self._engines

    @property
    def boxes_per_engine(self):
        return self._boxes

    @property
    def ftz(self):
        return self._ftz

    @property
    def fp(self):
        return self._fp

    @property
    def initiation_interval(self):
        """Cycles between accepted instructions at full rate (1 for the full 8-box build)."""
        return self._groups

    @property
    def paths(self):
        """Node kinds this build models (the golden model is restricted to the same set)."""
        return build_paths(self._triangles, self._transforms)

    @property
    def _plane_delay(self):
        """``P``: enabled cycles the planes wait in front of the engines for the ray."""
        setup = self._setup
        return max(setup.transform_latency, setup.latency - self._box_engines[0].inv_offset)

    @property
    def _dedup_time(self):
        """Enabled cycles from the take to the de-duplication input (last slot group)."""
        return (
            self._decode.latency
            + self._groups
            - 1
            + self._plane_delay
            + self._box_engines[0].latency
        )

    @property
    def path_latencies(self):
        """Cycles of each path from the take to the result format input: ``box`` (decode,
        slot groups, ray setup / engines, de-dup, sort), ``triangle``, ``legacy_triangle``."""
        box = self._dedup_time + self._dedup.latency + self._sorter.latency
        out = {"box": box}
        if self._triangles:
            out.update(triangle=self._tri.latency, legacy_triangle=self._leg.latency)
        return out

    @property
    def latency(self):
        """Cycles from an accepted instruction to its result (the same for every path)."""
        return max(self.path_latencies.values()) + self._format.latency

    @property
    def box_latency(self):
        """Latency of the box path alone (what the build would have without triangle paths)."""
        return self.path_latencies["box"] + self._format.latency

    @property
    def register_bits(self):
        """Payload flip-flops of each stage's registers (memory rings not counted; the FP32
        cores' internal pipeline registers not counted): ``s1`` the entry register, ``planes``
        the slot planes waiting for the ray (``0`` when a memory ring), ``dedup`` and ``sort``
        the slot registers, ``format`` the output register."""
        s1 = decoded_layout(triangles=self._triangles, transforms=self._transforms).size
        p = self._plane_delay
        group = self._engines * self._boxes * BOX_IN_LAYOUT.size
        return {
            "s1": s1,
            "planes": group * p if p < SIDEBAND_MIN_CYCLES else 0,
            "dedup": SORT_IN_LAYOUT["slots"].shape.size,
            "sort": self._sorter.latency * (SORT_SLOTS * (32 + 32 + 3) + 2),
            "format": OUT_LAYOUT.size,
        }

    @property
    def details(self):
        """What ``gpurtl list`` shows besides the latency."""
        bits = self.register_bits
        return {
            "initiation_interval": self.initiation_interval,
            "box_path_latency": self.box_latency,
            "register_bits": ", ".join(f"{k} {v}" for k, v in bits.items())
            + f" (total {sum(bits.values())})",
        }

    def elaborate(self, platform):
        m = Module()
        G = self._groups
        en = Signal(name="en")
        phase = Signal(range(G + 1), name="s1_phase")
        s1_valid = Signal(name="s1_valid")
        last = Signal(name="s1_last")
        take = Signal(name="take")
        m.d.comb += [
            en.eq(~self.o.valid | self.o.ready),
            last.eq(phase == G - 1),
            take.eq(en & (~s1_valid | last)),
            self.i.ready.eq(take),
        ]
        with m.If(take):
            m.d.sync += [s1_valid.eq(self.i.valid), phase.eq(0)]
        with m.Elif(en):
            m.d.sync += phase.eq(phase + 1)
        v1 = Signal(name="s1_done")  # the last slot group of a valid instruction
        m.d.comb += v1.eq(s1_valid & last)

        # ---- s1: the decoded instruction, loaded by `take`, held for the G slot groups --------
        m.submodules.decode = dec = self._decode
        m.d.comb += [dec.en.eq(take), dec.i.eq(self.i.payload)]
        s1 = dec.o

        # ---- ray setup: transform and reciprocal ----------------------------------------------
        m.submodules.setup = setup = self._setup
        m.d.comb += [setup.en.eq(en), setup.i.origin.eq(s1.ray.origin), setup.i.dir.eq(s1.ray.dir)]
        if self._transforms:
            m.d.comb += [setup.i.obb_index.eq(s1.obb_index), setup.i.transform.eq(s1.transform)]

        hits, keys = self._box_tests(m, en, s1, phase, s1_valid)
        sorted_ptrs = self._dedup_and_sort(m, en, s1, hits, keys)
        self._result_format(m, en, s1, sorted_ptrs)

        # ---- output ---------------------------------------------------------------------------
        t_fmt = max(self.path_latencies.values())
        o_valid = delay(m, en, v1, t_fmt + self._format.latency - G, "o_valid")
        m.d.comb += [self.o.payload.eq(self._format.o), self.o.valid.eq(o_valid)]
        return m

    def _box_tests(self, m, en, s1, phase, s1_valid):
        """The box engines on slot group ``phase`` (the planes wait ``P`` cycles for the ray),
        then the collector: groups ``0 .. G-2`` wait in registers for the last group. Returns
        the 8 slots' ``hit`` and ``key`` at the de-duplication input."""
        G, T = self._groups, self._engines * self._boxes
        ctl, setup = s1.control, self._setup
        eng0 = self._box_engines[0]
        P = self._plane_delay
        t_origin = setup.transform_latency  # the engines read the origin with the planes
        t_inv = setup.latency  # ... and the reciprocal inv_offset later
        grp = Signal(data.ArrayLayout(BOX_IN_LAYOUT, T), name="s1_group")
        with m.Switch(phase):
            for g in range(G):
                with m.Case(g):
                    m.d.comb += [grp[j].eq(s1.planes[g * T + j]) for j in range(T)]
        if P >= 1:
            # Registered before the ring: the group select (the phase counter drives a mux of
            # every plane bit) straight into the ring's LUT-RAM write port was the placed 1 x 1
            # build's critical path at 97.7 MHz, almost all routing. Same total delay.
            grp = reg(m, en, grp, "s2_group")
            e_planes = sideband(m, en, grp, P - 1, "e_planes")
        else:
            e_planes = grp
        wait = Signal(
            data.StructLayout(
                {"base": s1.base.shape(), "extent": 32, "box_grow": 8, "heuristic": 2}
            ),
            name="s1_engine_side",
        )
        m.d.comb += [
            wait.base.eq(s1.base),
            wait.extent.eq(s1.ray.extent),
            wait.box_grow.eq(ctl.box_grow),
            wait.heuristic.eq(ctl.heuristic),
        ]
        e_wait = sideband(m, en, wait, P, "e_wait")
        e_origin = sideband(m, en, setup.o.ray.origin, P - t_origin, "e_origin")
        e_inv = sideband(m, en, setup.o.inv_dir, P + eng0.inv_offset - t_inv, "e_inv")
        g_hits, g_keys = [], []
        for e, eng in enumerate(self._box_engines):
            m.submodules[f"engine{e}"] = eng
            m.d.comb += [
                eng.en.eq(en),
                eng.i.base.eq(e_wait.base),
                eng.i.ray.origin.eq(e_origin),
                eng.i.ray.extent.eq(e_wait.extent),
                eng.i.ray.box_grow.eq(e_wait.box_grow),
                eng.i.ray.heuristic.eq(e_wait.heuristic),
                eng.inv_dir.eq(e_inv),
            ]
            for b in range(self._boxes):
                m.d.comb += eng.i.boxes[b].eq(e_planes[e * self._boxes + b])
                g_hits.append(eng.o.boxes[b].hit)
                g_keys.append(eng.o.boxes[b].key)

        t_eng = P + eng0.latency  # from s1 to the engine output
        h_valid = delay(m, en, s1_valid, t_eng, "h_valid")
        h_phase = delay(m, en, phase, t_eng, "h_phase")
        hits, keys = [None] * SORT_SLOTS, [None] * SORT_SLOTS
        for g in range(G):
            for j in range(T):
                k = g * T + j
                if g == G - 1:
                    hits[k], keys[k] = g_hits[j], g_keys[j]
                    continue
                ch = Signal(name=f"h_coll_hit{k}")
                ck = Signal(32, name=f"h_coll_key{k}")
                with m.If(en & h_valid & (h_phase == g)):
                    m.d.sync += [ch.eq(g_hits[j]), ck.eq(g_keys[j])]
                hits[k], keys[k] = ch, ck
        return hits, keys

    def _dedup_and_sort(self, m, en, s1, hits, keys):
        """De-duplication and sort of the collected slots; returns the sorted pointers."""
        ctl = s1.control
        t_dedup = self._dedup_time - self._decode.latency  # from s1 (held) to the de-dup input
        side = Signal(data.StructLayout({"ptrs": s1.ptrs.shape(), "dual": 1}), name="s1_side")
        m.d.comb += [side.ptrs.eq(s1.ptrs), side.dual.eq(ctl.dual)]
        d_side = sideband(m, en, side, t_dedup, "d_side")
        m.submodules.dedup = dedup = self._dedup
        d_in = Signal(DEDUP_IN_LAYOUT, name="d_in")
        for k in range(SORT_SLOTS):
            m.d.comb += [
                d_in.slots[k].ptr.eq(d_side.ptrs[k]),
                d_in.slots[k].hit.eq(hits[k]),
                d_in.slots[k].key.eq(keys[k]),
            ]
        m.d.comb += [d_in.dedup.eq(~d_side.dual), dedup.en.eq(en), dedup.i.eq(d_in)]
        m.submodules.sort = sorter = self._sorter
        t_sort = t_dedup + dedup.latency
        m.d.comb += [
            sorter.en.eq(en),
            sorter.i.slots.eq(dedup.o.slots),
            sorter.i.enable.eq(sideband(m, en, ctl.sort_enable, t_sort, "sort_en")),
            sorter.i.wide.eq(sideband(m, en, ctl.sort_wide, t_sort, "sort_wide")),
            sorter.i.stf.eq(sideband(m, en, ctl.sort_tri_first, t_sort, "sort_stf")),
        ]
        # the box path's latency is the sum of its parts
        assert self.path_latencies["box"] == self._decode.latency + t_sort + sorter.latency
        return sorter.o.ptrs

    def _result_format(self, m, en, s1, sorted_ptrs):
        """The result format's input: every path aligned to ``t_fmt`` after the take."""
        t_fmt = max(self.path_latencies.values())
        lat_box = self.path_latencies["box"]
        t_origin = self._setup.transform_latency
        m.submodules.format = fmt = self._format
        f_in = Signal(
            format_in_layout(triangles=self._triangles, transforms=self._transforms), name="f_in"
        )
        m.d.comb += [
            fmt.en.eq(en),
            fmt.i.eq(f_in),
            f_in.ptrs.eq(sideband(m, en, sorted_ptrs, t_fmt - lat_box, "f_ptrs")),
        ]
        t_s1 = t_fmt - self._decode.latency  # from s1 to the result format input
        late = {"control": s1.control, "ray": s1.ray}
        if self._transforms:
            late["instance"] = s1.instance
        if self._triangles:
            late["geometry_index"] = s1.geometry_index
        late_layout = data.StructLayout({name: value.shape() for name, value in late.items()})
        late_now = Signal(late_layout, name="s1_late")
        m.d.comb += [late_now[name].eq(value) for name, value in late.items()]
        f_late = sideband(m, en, late_now, t_s1, "f_late")
        m.d.comb += [
            f_in.control.eq(f_late.control),
            f_in.ray.origin.eq(f_late.ray.origin),
            f_in.ray.dir.eq(f_late.ray.dir),
        ]
        if self._transforms:
            xray = sideband(m, en, self._setup.o.ray, t_s1 - t_origin, "f_xray")
            m.d.comb += [f_in.instance.eq(f_late.instance), f_in.instance_ray.eq(xray)]
        if self._triangles:
            m.d.comb += f_in.geometry_index.eq(f_late.geometry_index)
            ins = self.i.payload
            tri, leg = self._tri, self._leg
            m.submodules.triangle = tri
            m.submodules.legacy_triangle = leg
            m.d.comb += [
                tri.en.eq(en),
                tri.i.ray.eq(ins.ray),
                tri.i.node.eq(ins.node[0]),
                tri.i.node_ptr.eq(ins.node_ptr[0]),
                tri.i.pointer_flags.eq(ins.pointer_flags),
                tri.i.desc.eq(ins.desc),
                leg.en.eq(en),
                leg.i.ray.eq(ins.ray),
                leg.i.pointer_flags.eq(ins.pointer_flags),
                leg.i.desc.eq(ins.desc),
            ]
            for n in range(2):
                m.d.comb += leg.i.node_ptr[n].eq(ins.node_ptr[n])
                for k in range(16):
                    m.d.comb += leg.i.node[n][k].eq(ins.node[n][k])
            m.d.comb += [
                f_in.triangle.eq(sideband(m, en, tri.o, t_fmt - tri.latency, "f_tri")),
                f_in.legacy.eq(sideband(m, en, leg.o, t_fmt - leg.latency, "f_leg")),
            ]
