"""The ray accelerator top level (``RayAccel``): one intersect instruction per cycle.

Facts: /work/shared/spec/rdna4_ray_accelerator.md sections 1 (BVH8 node), 2 (OBB), 4 (legacy
box nodes), 5 (instance node), 6 (instructions, box test, sort, results). Golden model:
:class:`gpurtl.golden.ray_accel.intersect.IntersectModel`, restricted to the node kinds this
build has (:attr:`RayAccel.paths`; other kinds give status 1 on both sides).

Transaction: ``i`` carries one ``INSTR_LAYOUT`` instruction (``golden/ray_accel/ray.py``), ``o``
one ``OUT_LAYOUT`` result (10 dwords, the returned ray, a status). Stream pipeline with the
project's stall style: one global enable ``en = ~o.valid | o.ready``, every register advances
only with ``en``; II = 1 for the full build. Every path has the same latency (delay registers
equalise them), so results leave in order.

Pipeline
--------
``s0`` (combinational, from the input payload): node decode for the 8 box slots -- BVH8 header,
ChildInfo fields, ``Dq(q)`` bit patterns (spec 1.5: a priority encoder and a shift), child
pointers (spec 1.4: two running offsets, prefix sums of ``range << 4``), valid (``i < count``),
early cull (box flags vs pointer flags, child mask vs instance mask); for an instance node the
4 filter-box children (bases 0, no cull) in slots 0-3; for the dual form two legacy BVH4 nodes
(FP32 planes as they are, FP16 planes widened exactly) in slots 0-3 and 4-7; the status.
Registered into ``s1``.

``x`` (``transforms=True``): O's ``OBBTransformCore`` rotates the ray of an OBB box node (index
from node DW7; 0x7F passes through) and O's ``InstanceCore`` transforms the ray of an instance
node (and computes its cull, BLAS pointer, user data); ``3 * fma_stages`` cycles.

``e``: three ``FPRcpCore`` compute ``rcp(dir')``; ``engines`` ``BoxEngine`` cores of
``boxes_per_engine`` tests take the slots (delayed when the reciprocal is slower than the
engines' first two adds).

``h`` (engine output): slot = valid & !culled & hit ? ptr : INVALID; child-reuse
de-duplication against the previous slot (BVH8 and instance filter, not legacy nodes); register.
``SortUnit``: 6 stages (4-wide for the instance filter and for ``wide_sort = 0``).

``t`` (``triangles=True``, in parallel from ``s1``): R2's ``TrianglePairCore`` (pair decode, ray
setup, two watertight triangle tests, result format); its ``error`` gives status 2.

Output: box nodes DW0..7 = sorted pointers, DW8/9 = 0; instance nodes {DEADBEEF x2, BLAS lo/hi,
DEADBEEF x2, user data, packed low bytes of the 4 sorted filter pointers (0xFFFFFFFF if culled),
0xFFFFFFFF x2} and the transformed ray; triangle pairs R2's 10 dwords; a non-zero status (or two
dual nodes of which one is an instance) turns every dword into 0xFFFFFFFF.

``l`` (``triangles=True``, in parallel from ``s1``): R2's ``LegacyTriangleCore`` tests the dual
form's legacy 64 B triangle nodes (two lanes); a triangle node k gives DW4k..4k+3 and DW8+k = its
geometry index (dword 14, RT IP 3.0 layout); a box node next to it is sorted 4-wide.

Not modelled (status 1): procedural type 7 of the dual form, HPB64 (``box_node_64b``), and
whatever ``triangles=False`` / ``transforms=False`` leave out.

Smaller builds (FPGA experiments): ``engines * boxes_per_engine = T`` box testers with ``T`` in
{1, 2, 4, 8}. With ``T < 8`` the ``s1`` register holds an instruction for ``G = 8 / T`` cycles,
feeding slot group ``phase`` (slots ``phase*T .. phase*T+T-1``) to the engines each cycle; a
collector gathers the groups at the engine output and the last group releases the instruction to
the de-duplication stage and the sort unit. ``i.ready`` is low for ``G - 1`` cycles after each
accepted instruction (II = G); the latency stays fixed.
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out
from gpurtl.facts.fp32 import Float32
from gpurtl.facts.ray_accel import (
    INSTR_LAYOUT,
    OUT_LAYOUT,
    PF_FORCE_NON_OPAQUE,
    PF_FORCE_OPAQUE,
    STATUS_BAD_NODE,
    STATUS_NOT_MODELLED,
    STATUS_OK,
)

from ..fp32 import FPRcpCore
from ._pipe import delay, reg
from .box_engine import BOX_IN_LAYOUT, BoxEngine
from .sort_unit import SortUnit

__all__ = ["RayAccel", "dequant_offset", "build_paths"]

_INVALID = 0xFFFFFFFF
_NAN = 0x7FC00000
_F3 = data.ArrayLayout(Float32(), 3)

SLOT_INFO = data.StructLayout({"ptr": unsigned(32), "valid": unsigned(1), "culled": unsigned(1)})


def build_paths(triangles=True, transforms=True):
    """The node kinds a build models (the ``paths`` of the golden ``IntersectModel``)."""
    paths = {"box"}
    if triangles:
        paths |= {"triangle", "legacy_triangle"}
    if transforms:
        paths |= {"obb", "instance"}
    return frozenset(paths)


def dequant_offset(m, exp, q, name):
    """``Dq(q)`` FP32 bits (spec 1.5) of an 8-bit exponent and a 13-bit plane value."""
    q13 = Signal(13, name=f"{name}_q")
    m.d.comb += q13.eq(q)
    q = q13
    p = Signal(4, name=f"{name}_p")
    for k in range(13):
        with m.If(q[k]):
            m.d.comb += p.eq(k)
    se = Signal(10, name=f"{name}_se")   # only its low 8 bits are used, when not flushed
    m.d.comb += se.eq(p + exp - 12)
    mant = Signal(23, name=f"{name}_mant")
    with m.Switch(p):
        for k in range(13):
            with m.Case(k):
                m.d.comb += mant.eq((q << (23 - k))[:23])
    flush = (q == 0) | ((p + exp) <= 12)
    out = Signal(32, name=f"{name}_dq")
    m.d.comb += out.eq(Mux(flush, 0, Cat(mant, se[:8], Const(0, 1))))
    return out


def _f16_to_f32(m, h, name):
    """Exact widening of an FP16 pattern (subnormals normalised)."""
    sign, exp, man = h[15], h[10:15], h[:10]
    out = Signal(32, name=name)
    lead = Signal(4, name=f"{name}_lead")          # index of the leading one of a subnormal
    for k in range(10):
        with m.If(man[k]):
            m.d.comb += lead.eq(k)
    sub_man = Signal(10, name=f"{name}_subman")
    with m.Switch(lead):
        for k in range(10):
            with m.Case(k):
                m.d.comb += sub_man.eq((man << (10 - k))[:10])
    with m.If(exp == 0x1F):
        m.d.comb += out.eq(Cat(Const(0, 13), man, Const(0xFF, 8), sign))
    with m.Elif(exp == 0):
        with m.If(man == 0):
            m.d.comb += out.eq(Cat(Const(0, 31), sign))
        with m.Else():
            # value = 1.x * 2**(lead - 24)  ->  biased exponent lead + 103
            m.d.comb += out.eq(Cat(Const(0, 13), sub_man, (lead + 103)[:8], sign))
    with m.Else():
        m.d.comb += out.eq(Cat(Const(0, 13), man, (exp + 112)[:8], sign))
    return out




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
        Include R2's triangle-pair path (``TrianglePairCore``).
    transforms : bool
        Include O's OBB and instance ray transforms (``OBBTransformCore``, ``InstanceCore``).
    add_stages, mul_stages, fma_stages, rcp_stages : int or None
        FP32 core pipeline depths of the box path (``None``: the cores' defaults).
    xf_fma_stages : int
        FMA stages of the ray transforms (their latency is three times this).
    """

    def __init__(self, *, engines=2, boxes_per_engine=4, ftz=False, triangles=True,
                 transforms=True, add_stages=None, mul_stages=None, fma_stages=None,
                 rcp_stages=None, xf_fma_stages=2):
        self._check(engines, boxes_per_engine, ftz, triangles, transforms)
        self._engines, self._boxes, self._ftz = engines, boxes_per_engine, ftz
        self._init(engines, boxes_per_engine, ftz, triangles, transforms, add_stages, mul_stages,
                   fma_stages, rcp_stages, xf_fma_stages)

    @staticmethod
    def _check(engines, boxes_per_engine, ftz, triangles, transforms):
        if engines not in (1, 2) or isinstance(engines, bool):
            raise ValueError(f"`engines` must be 1 or 2, not {engines!r}")
        if isinstance(boxes_per_engine, bool) or not isinstance(boxes_per_engine, int) \
                or not 1 <= boxes_per_engine <= 8:
            raise ValueError(f"`boxes_per_engine` must be an integer from 1 to 8, "
                             f"not {boxes_per_engine!r}")
        if engines * boxes_per_engine not in (1, 2, 4, 8):
            raise ValueError(f"`engines * boxes_per_engine` must be 1, 2, 4 or 8, "
                             f"not {engines * boxes_per_engine}")
        for name, value in (("ftz", ftz), ("triangles", triangles), ("transforms", transforms)):
            if not isinstance(value, bool):
                raise TypeError(f"`{name}` must be a boolean, not {value!r}")

    def _init(self, engines, boxes_per_engine, ftz, triangles, transforms, add_stages, mul_stages,
              fma_stages, rcp_stages, xf_fma_stages):
        self._groups = 8 // (engines * boxes_per_engine)
        self._triangles, self._transforms = triangles, transforms
        self._stages = dict(add_stages=add_stages, mul_stages=mul_stages, fma_stages=fma_stages)
        self._rcp_stages, self._xf_stages = rcp_stages, xf_fma_stages
        self._box_engines = [BoxEngine(boxes_per_engine, ftz=ftz, **self._stages)
                             for _ in range(engines)]
        self._engine_latency = self._box_engines[0].latency
        self._inv_offset = self._box_engines[0].inv_offset
        self._rcps = [FPRcpCore(rcp_stages, ftz) for _ in range(3)]
        self._lr = self._rcps[0].latency
        self._sorter = SortUnit(ftz=ftz)
        self._engine_delay = max(0, self._lr - self._inv_offset)
        self._inv_delay = max(0, self._inv_offset - self._lr)
        self._lx = 3 * xf_fma_stages if transforms else 0
        self._lt = self._ll = 0
        if triangles:
            from .legacy_triangle import LegacyTriangleCore
            from .triangle_pair import TrianglePairCore
            self._tri, self._leg = TrianglePairCore(), LegacyTriangleCore()
            self._lt, self._ll = self._tri.latency, self._leg.latency
        if transforms:
            from .instance_transform import InstanceCore
            from .obb_transform import OBBTransformCore
            self._obbc = OBBTransformCore(fma_stages=xf_fma_stages)
            self._instc = InstanceCore(fma_stages=xf_fma_stages)
        super().__init__({"i": In(stream.Signature(INSTR_LAYOUT)),
                          "o": Out(stream.Signature(OUT_LAYOUT))})

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
    def initiation_interval(self):
        """Cycles between accepted instructions at full rate (1 for the full 8-box build)."""
        return self._groups

    @property
    def paths(self):
        """Node kinds this build models (the golden model is restricted to the same set)."""
        return build_paths(self._triangles, self._transforms)

    @property
    def path_latencies(self):
        """Cycles of each path before equalisation, from the ``s1`` register (last slot group)
        to its result: ``box`` (transform, reciprocal/engines, de-dup, sort), ``triangle``."""
        box = self._lx + self._engine_delay + self._engine_latency + 1 + self._sorter.latency
        return {"box": box, "triangle": self._lt, "legacy_triangle": self._ll}

    @property
    def latency(self):
        """Cycles from an accepted instruction to its result (the same for every path)."""
        return self._groups + max(self.path_latencies.values())

    def elaborate(self, platform):
        m = Module()
        G, T = self._groups, self._engines * self._boxes
        en = Signal(name="en")
        phase = Signal(range(G + 1), name="s1_phase")
        s1_valid = Signal(name="s1_valid")
        last = Signal(name="s1_last")
        take = Signal(name="take")
        m.d.comb += [en.eq(~self.o.valid | self.o.ready), last.eq(phase == G - 1),
                     take.eq(en & (~s1_valid | last)), self.i.ready.eq(take)]
        with m.If(take):
            m.d.sync += [s1_valid.eq(self.i.valid), phase.eq(0)]
        with m.Elif(en):
            m.d.sync += phase.eq(phase + 1)

        ins = self.i.payload
        ray, desc = ins.ray, ins.desc
        pf = Signal(10, name="s0_pf")
        m.d.comb += pf.eq(Mux(desc.pointer_flags_en, ins.pointer_flags, 0))

        # ---- s0: decode ------------------------------------------------------------------------
        n0 = ins.node[0]
        t8 = ins.node_ptr[0][0:4]
        is_box8 = Signal(name="s0_is_box8")
        is_inst = Signal(name="s0_is_inst")
        is_tri = Signal(name="s0_is_tri")
        m.d.comb += [is_box8.eq(~ins.dual & (t8 == 5)),
                     is_inst.eq(~ins.dual & (t8 == 6) & desc.instance_en),
                     is_tri.eq(~ins.dual & (t8[0:3] <= 3))]
        # BVH8 header, or the instance node's embedded 4-child filter box (bases 0, no cull)
        hdr_exp = Mux(is_inst, n0[19], n0[6])
        exps = [hdr_exp[0:8], hdr_exp[8:16], hdr_exp[16:24]]
        count = Signal(4, name="s0_count")
        m.d.comb += count.eq(Mux(is_inst, n0[19][28:30], n0[6][28:31]) + 1)
        internal = Signal(32, name="s0_internal0")
        m.d.comb += internal.eq(Mux(is_inst, 0, n0[0]) | 5)
        prim = Signal(32, name="s0_prim0")
        m.d.comb += prim.eq(Mux(is_inst, 0, n0[1]))
        slots = [Signal(BOX_IN_LAYOUT, name=f"s0_box{k}") for k in range(8)]
        info = [Signal(SLOT_INFO, name=f"s0_info{k}") for k in range(8)]

        def culled_by_flags(flags):
            # golden box_path.box_culled: force flags first, then flags & (pf >> 6)
            f_lo = Mux(pf & PF_FORCE_OPAQUE, 1, Mux(pf & PF_FORCE_NON_OPAQUE, 2, flags[0:2]))
            return (Cat(f_lo, flags[2:4]) & pf[6:10]) != 0

        for k in range(8):
            words = []
            for w in range(3):
                b8 = n0[8 + 3 * k + w]
                words.append(Mux(is_inst, n0[20 + 3 * k + w], b8) if k < 4 else b8)
            w0, w1, w2 = words
            qmin = [w0[0:12], w0[12:24], w1[0:12]]
            qmax = [w1[12:24], w2[0:12], w2[12:24]]
            ctype, crange = w2[24:28], w2[28:32]
            b8_valid = (k < count) & (~is_inst | (k < 4))
            b8_ptr = Signal(32, name=f"s0_b8ptr{k}")
            m.d.comb += b8_ptr.eq(Mux(ctype == 5, internal, prim | ctype))
            nxt_int = Signal(32, name=f"s0_internal{k + 1}")
            nxt_prim = Signal(32, name=f"s0_prim{k + 1}")
            m.d.comb += [nxt_int.eq(internal + Mux(ctype == 5, crange << 4, 0)),
                         nxt_prim.eq(prim + Mux(ctype == 5, 0, crange << 4))]
            internal, prim = nxt_int, nxt_prim
            b8_culled = ~is_inst & (culled_by_flags(w0[24:28])
                                    | ((w1[24:32] & ray.instance_mask) == 0))
            b8_min = [dequant_offset(m, exps[a], qmin[a], f"s0_c{k}_min{a}") for a in range(3)]
            b8_max = [dequant_offset(m, exps[a], qmax[a] + 1, f"s0_c{k}_max{a}")
                      for a in range(3)]
            # dual form: node k // 4, child k % 4
            node, j = ins.node[k // 4], k % 4
            typ = ins.node_ptr[k // 4][0:3]
            lg_ptr = node[j]
            f32_min = [node[4 + 6 * j + a] for a in range(3)]
            f32_max = [node[7 + 6 * j + a] for a in range(3)]
            halves = []
            for w in range(3):
                word = node[4 + 3 * j + w]
                halves += [word[0:16], word[16:32]]
            f16 = [_f16_to_f32(m, h, f"s0_n{k // 4}c{j}_h{q}") for q, h in enumerate(halves)]
            is16 = typ == 4
            lg_min = [Mux(is16, f16[a], f32_min[a]) for a in range(3)]
            lg_max = [Mux(is16, f16[3 + a], f32_max[a]) for a in range(3)]
            lg_flags = Mux(is16, 0, node[28].word_select(j, 8)[0:4])
            dual = ins.dual
            m.d.comb += [
                info[k].ptr.eq(Mux(dual, lg_ptr, Mux(b8_valid, b8_ptr, _INVALID))),
                info[k].valid.eq(Mux(dual, lg_ptr != _INVALID, b8_valid)),
                info[k].culled.eq(Mux(dual, culled_by_flags(lg_flags), b8_culled)),
                slots[k].raw.eq(dual),
            ]
            for a in range(3):
                m.d.comb += [slots[k].base[a].eq(Mux(is_inst, n0[16 + a], n0[3 + a])),
                             slots[k].off_min[a].eq(Mux(dual, lg_min[a], b8_min[a])),
                             slots[k].off_max[a].eq(Mux(dual, lg_max[a], b8_max[a]))]
        # status (the precedence of golden intersect restricted to self.paths)
        ok, nm, bad = STATUS_OK, STATUS_NOT_MODELLED, STATUS_BAD_NODE
        status = Signal(2, name="s0_status")
        obb = n0[7][0:7]
        with m.If(ins.dual):
            tl = [ins.node_ptr[0][0:3], ins.node_ptr[1][0:3]]
            any6 = (tl[0] == 6) | (tl[1] == 6)
            bad_t = Cat(*[(t == 2) | (t == 3) for t in tl]).any()
            nm_t = Cat(*[(t == 7) | ((t == 4) & desc.box_node_64b)
                         | (((t == 0) | (t == 1)) if not self._triangles else Const(0, 1))
                         for t in tl]).any()
            m.d.comb += status.eq(Mux(any6, ok, Mux(bad_t, bad, Mux(nm_t, nm, ok))))
        with m.Elif(is_box8):
            if self._transforms:
                m.d.comb += status.eq(Mux((obb != 0x7F) & (obb >= 104), bad, ok))
            else:
                m.d.comb += status.eq(Mux(obb != 0x7F, nm, ok))
        with m.Elif(is_tri):
            m.d.comb += status.eq(ok if self._triangles else nm)
        with m.Elif(is_inst):
            m.d.comb += status.eq(ok if self._transforms else nm)
        with m.Else():
            m.d.comb += status.eq(bad)
        kill = Signal(name="s0_dual_instance")
        m.d.comb += kill.eq(ins.dual & ((ins.node_ptr[0][0:3] == 6)
                                        | (ins.node_ptr[1][0:3] == 6)))

        # ---- s1 registers (loaded by `take`, held for the G slot groups) ---------------------
        s1_slots = [reg(m, take, s, f"s1_box{k}") for k, s in enumerate(slots)]
        s1_info = [reg(m, take, s, f"s1_info{k}") for k, s in enumerate(info)]
        s1_ray = reg(m, take, ray, "s1_ray")
        s1_status = reg(m, take, status, "s1_status")
        s1_kill = reg(m, take, kill, "s1_kill")
        s1_dual = reg(m, take, ins.dual, "s1_dual")
        s1_is_box8 = reg(m, take, is_box8, "s1_is_box8")
        s1_is_inst = reg(m, take, is_inst, "s1_is_inst")
        s1_is_tri = reg(m, take, is_tri, "s1_is_tri")
        s1_sort = reg(m, take, desc.sort_en & (desc.heuristic != 3), "s1_sort")
        dual_tri = [ins.dual & (ins.node_ptr[k][0:3] <= 1) for k in range(2)]
        s1_wide = reg(m, take, desc.wide_sort & ~is_inst & ~dual_tri[0] & ~dual_tri[1], "s1_wide")
        s1_dual_tri = [reg(m, take, dual_tri[k], f"s1_dual_tri{k}") for k in range(2)]
        s1_stf = reg(m, take, desc.sort_tri_first, "s1_stf")
        s1_grow = reg(m, take, desc.box_grow, "s1_grow")
        s1_heur = reg(m, take, desc.heuristic, "s1_heur")
        if self._triangles or self._transforms:
            s1_node0 = reg(m, take, n0, "s1_node0")
            s1_ptr0 = reg(m, take, ins.node_ptr[0], "s1_ptr0")
            s1_pf_raw = reg(m, take, ins.pointer_flags, "s1_pf_raw")
            s1_desc = reg(m, take, desc, "s1_desc")
        if self._triangles:
            s1_ptr1 = reg(m, take, ins.node_ptr[1], "s1_ptr1")
            s1_node1 = [reg(m, take, ins.node[1][k], f"s1_node1_{k}", shape=32)
                        for k in range(16)]
        v1 = Signal(name="s1_done")       # the last slot group of a valid instruction
        m.d.comb += v1.eq(s1_valid & last)

        # ---- x: OBB / instance ray transforms -------------------------------------------------
        lx = self._lx
        if self._transforms:
            obbc, instc = self._obbc, self._instc
            m.submodules.obb_transform = obbc
            m.submodules.instance = instc
            m.d.comb += [obbc.en.eq(en), obbc.i.index.eq(Mux(s1_is_box8, s1_node0[7][0:7], 0x7F)),
                         obbc.i.origin.eq(s1_ray.origin), obbc.i.dir.eq(s1_ray.dir),
                         instc.en.eq(en), instc.i.node.eq(s1_node0), instc.i.ray.eq(s1_ray),
                         instc.i.pointer_flags.eq(s1_pf_raw),
                         instc.i.pointer_flags_en.eq(s1_desc.pointer_flags_en)]
            x_inst = delay(m, en, s1_is_inst, lx, "x_is_inst")
            x_origin = [Mux(x_inst, instc.o.origin[a], obbc.o.origin[a]) for a in range(3)]
            x_dir = [Mux(x_inst, instc.o.dir[a], obbc.o.dir[a]) for a in range(3)]
        else:
            x_origin = [s1_ray.origin[a] for a in range(3)]
            x_dir = [s1_ray.dir[a] for a in range(3)]

        # ---- e: reciprocal and box engines -----------------------------------------------------
        rcp_dir = []
        for a in range(3):
            rcp = self._rcps[a]
            m.submodules[f"rcp{a}"] = rcp
            m.d.comb += [rcp.en.eq(en), rcp.a.eq(x_dir[a])]
            rcp_dir.append(rcp.z)
        inv = [delay(m, en, rcp_dir[a], self._inv_delay, f"inv{a}", shape=32) for a in range(3)]
        e_delay = self._engine_delay
        grp = [Signal(BOX_IN_LAYOUT, name=f"s1_grp{j}") for j in range(T)]
        with m.Switch(phase):
            for g in range(G):
                with m.Case(g):
                    m.d.comb += [grp[j].eq(s1_slots[g * T + j]) for j in range(T)]
        e_slots = [delay(m, en, s, lx + e_delay, f"e_box{k}") for k, s in enumerate(grp)]
        e_origin = [delay(m, en, x_origin[a], e_delay, f"e_origin{a}", shape=32)
                    for a in range(3)]
        e_extent = delay(m, en, s1_ray.extent, lx + e_delay, "e_extent")
        e_grow = delay(m, en, s1_grow, lx + e_delay, "e_grow")
        e_heur = delay(m, en, s1_heur, lx + e_delay, "e_heur")
        g_hits, g_keys = [], []
        for e in range(self._engines):
            eng = self._box_engines[e]
            m.submodules[f"engine{e}"] = eng
            m.d.comb += [eng.en.eq(en), eng.i.ray.extent.eq(e_extent),
                         eng.i.ray.box_grow.eq(e_grow), eng.i.ray.heuristic.eq(e_heur)]
            for a in range(3):
                m.d.comb += [eng.i.ray.origin[a].eq(e_origin[a]), eng.inv_dir[a].eq(inv[a])]
            for b in range(self._boxes):
                m.d.comb += eng.i.boxes[b].eq(e_slots[e * self._boxes + b])
                g_hits.append(eng.o.boxes[b].hit)
                g_keys.append(eng.o.boxes[b].key)
        lat_e = lx + e_delay + self._engine_latency
        h_info = [delay(m, en, s, lat_e, f"h_info{k}") for k, s in enumerate(s1_info)]
        h_dual = delay(m, en, s1_dual, lat_e, "h_dual")
        h_valid = delay(m, en, s1_valid, lat_e, "h_valid")
        h_phase = delay(m, en, phase, lat_e, "h_phase")
        # collector: groups 0..G-2 wait in registers for the last group
        hits, keys = [None] * 8, [None] * 8
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

        # ---- h: slot select, child-reuse de-duplication; sort ----------------------------------
        tested = []
        for k in range(8):
            t = Signal(32, name=f"h_tested{k}")
            m.d.comb += t.eq(Mux(h_info[k].valid & ~h_info[k].culled & hits[k], h_info[k].ptr,
                                 _INVALID))
            tested.append(t)
        sorter = self._sorter
        m.submodules.sort = sorter
        m.d.comb += sorter.en.eq(en)
        for k in range(8):
            dup = Const(0, 1) if k == 0 else (~h_dual & (tested[k] == tested[k - 1]))
            m.d.comb += [sorter.i.slots[k].ptr.eq(reg(m, en, Mux(dup, _INVALID, tested[k]),
                                                      f"d_slot{k}", shape=32)),
                         sorter.i.slots[k].key.eq(reg(m, en, keys[k], f"d_key{k}", shape=32))]
        lat_d = lat_e + 1
        m.d.comb += [sorter.i.enable.eq(delay(m, en, s1_sort, lat_d, "d_sort")),
                     sorter.i.wide.eq(delay(m, en, s1_wide, lat_d, "d_wide")),
                     sorter.i.stf.eq(delay(m, en, s1_stf, lat_d, "d_stf"))]
        lat_box = lat_d + sorter.latency
        assert lat_box == self.path_latencies["box"]
        lat = max(self.path_latencies.values())
        sorted_ptrs = [delay(m, en, sorter.o.ptrs[k], lat - lat_box, f"o_sorted{k}", shape=32)
                       for k in range(8)]

        # ---- t: triangle pairs (parallel from s1) ---------------------------------------------
        if self._triangles:
            tri = self._tri
            m.submodules.triangle = tri
            m.d.comb += [tri.en.eq(en), tri.i.ray.eq(s1_ray), tri.i.node.eq(s1_node0),
                         tri.i.node_ptr.eq(s1_ptr0), tri.i.pointer_flags.eq(s1_pf_raw),
                         tri.i.desc.eq(s1_desc)]
            o_tri = delay(m, en, tri.o, lat - self._lt, "o_tri")
            leg = self._leg
            m.submodules.legacy_triangle = leg
            m.d.comb += [leg.en.eq(en), leg.i.ray.eq(s1_ray), leg.i.node_ptr[0].eq(s1_ptr0),
                         leg.i.node_ptr[1].eq(s1_ptr1), leg.i.pointer_flags.eq(s1_pf_raw),
                         leg.i.desc.eq(s1_desc)]
            for k in range(16):
                m.d.comb += [leg.i.node[0][k].eq(s1_node0[k]), leg.i.node[1][k].eq(s1_node1[k])]
            o_leg = delay(m, en, leg.o, lat - self._ll, "o_leg")
            # DW8/9 of legacy triangle nodes: the geometry index (RT IP 3.0 layout, dword 14)
            o_geo = [delay(m, en, node[14], lat, f"o_geo{k}", shape=32)
                     for k, node in enumerate((s1_node0, s1_node1))]
            o_dual_tri = [delay(m, en, s1_dual_tri[k], lat, f"o_dual_tri{k}") for k in range(2)]
        # ---- output -----------------------------------------------------------------------------
        o_status = delay(m, en, s1_status, lat, "o_status")
        o_kill = delay(m, en, s1_kill, lat, "o_kill")
        o_ray = delay(m, en, s1_ray, lat, "o_ray")
        o_is_inst = delay(m, en, s1_is_inst, lat, "o_is_inst")
        o_is_tri = delay(m, en, s1_is_tri, lat, "o_is_tri")
        o_valid = delay(m, en, v1, lat, "o_valid")
        out = self.o.payload
        dw = [Signal(32, name=f"o_dw{k}") for k in range(10)]
        status_out = Signal(2, name="o_status_final")
        m.d.comb += status_out.eq(o_status)
        for k in range(8):
            m.d.comb += dw[k].eq(sorted_ptrs[k])
        m.d.comb += [dw[8].eq(0), dw[9].eq(0)]
        o_origin = [o_ray.origin[a] for a in range(3)]
        o_dir = [o_ray.dir[a] for a in range(3)]
        if self._transforms:
            side = data.StructLayout({"origin": data.ArrayLayout(32, 3),
                                      "dir": data.ArrayLayout(32, 3), "culled": 1,
                                      "blas_lo": 32, "blas_hi": 32, "user": 24})
            x_side = Signal(side, name="x_inst_side")
            m.d.comb += [x_side.origin.eq(instc.o.origin), x_side.dir.eq(instc.o.dir),
                         x_side.culled.eq(instc.o.culled), x_side.blas_lo.eq(instc.o.blas_lo),
                         x_side.blas_hi.eq(instc.o.blas_hi), x_side.user.eq(instc.o.user_data)]
            o_inst = delay(m, en, x_side, lat - lx, "o_inst")
            packed = Cat(*[sorted_ptrs[k][0:8] for k in range(4)])
            undefined = 0xDEADBEEF
            with m.If(o_is_inst):
                m.d.comb += [dw[0].eq(undefined), dw[1].eq(undefined), dw[2].eq(o_inst.blas_lo),
                             dw[3].eq(o_inst.blas_hi), dw[4].eq(undefined),
                             dw[5].eq(undefined), dw[6].eq(o_inst.user),
                             dw[7].eq(Mux(o_inst.culled, _INVALID, packed)),
                             dw[8].eq(_INVALID), dw[9].eq(_INVALID)]
            o_origin = [Mux(o_is_inst, o_inst.origin[a], o_origin[a]) for a in range(3)]
            o_dir = [Mux(o_is_inst, o_inst.dir[a], o_dir[a]) for a in range(3)]
        if self._triangles:
            with m.If(o_is_tri):
                m.d.comb += [dw[k].eq(o_tri.result[k]) for k in range(10)]
                with m.If(o_tri.error & (o_status == STATUS_OK)):
                    m.d.comb += status_out.eq(STATUS_BAD_NODE)
            for k in range(2):
                with m.If(o_dual_tri[k]):
                    m.d.comb += [dw[4 * k + j].eq(o_leg.result[k][j]) for j in range(4)]
                    m.d.comb += dw[8 + k].eq(o_geo[k])
        blank = (status_out != STATUS_OK) | o_kill
        for k in range(10):
            m.d.comb += out.dw[k].eq(Mux(blank, _INVALID, dw[k]))
        for a in range(3):
            m.d.comb += [out.origin[a].eq(o_origin[a]), out.dir[a].eq(o_dir[a])]
        m.d.comb += [out.status.eq(status_out), self.o.valid.eq(o_valid)]
        return m
