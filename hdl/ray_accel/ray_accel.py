"""The ray accelerator top level (``RayAccel``): one intersect instruction per cycle.

Facts: /work/shared/spec/rdna4_ray_accelerator.md sections 1 (BVH8 node), 4 (legacy box nodes),
6 (instructions, box test, sort, results). Golden model:
:class:`gpurtl.golden.ray_accel.intersect.IntersectModel` (restricted to the node kinds this RTL
build has, :attr:`RayAccel.paths`).

Transaction: ``i`` carries one ``INSTR_LAYOUT`` instruction (``golden/ray_accel/ray.py``), ``o``
one ``OUT_LAYOUT`` result (10 dwords, the returned ray, a status). Stream pipeline with the
project's stall style: one global enable ``en = ~o.valid | o.ready``; ``i.ready = en``; II = 1.

Pipeline
--------
``s0`` (combinational, from the input payload): node decode for all 8 slots -- BVH8 header,
ChildInfo fields, ``Dq(q)`` bit patterns (spec 1.5, a priority encoder and a shift), child
pointers (spec 1.4: two running offsets, prefix sums of ``range << 4``), valid (``i < count``),
early cull (box flags vs pointer flags, child mask vs instance mask); or, for the dual form,
two legacy BVH4 nodes (FP32 planes as they are, FP16 planes widened exactly) in slots 0-3 and
4-7; the status. Registered into ``s1``.

``s1``: three ``FPRcpCore`` compute ``rcp(dir)`` while the box engines dequantize; ``engines``
``BoxEngine`` cores of ``boxes_per_engine`` tests each take the slots (delayed when the
reciprocal is slower than the engines' first two adds).

``sh`` (engine output): slot = valid & !culled & hit ? ptr : INVALID; BVH8 child-reuse
de-duplication against the previous slot; register. ``SortUnit``: 6 stages. Output: DW0..7 from
the sort unit, DW8/9 = 0; a non-zero status turns every dword into 0xFFFFFFFF.

Node kinds not in :attr:`paths` (triangle pairs, instances, OBB-rotated box nodes, legacy
triangle and procedural nodes, HPB64) give status 1 ("not modelled by this build"), exactly as
the golden model restricted to the same paths.

Smaller builds: ``engines * boxes_per_engine`` must be 8 (one BVH8 node per cycle); a narrower
build that iterates over the children is not implemented.
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from gpurtl.golden.ray_accel.ray import (INSTR_LAYOUT, OUT_LAYOUT, PF_FORCE_NON_OPAQUE,
                                         PF_FORCE_OPAQUE, STATUS_BAD_NODE, STATUS_NOT_MODELLED,
                                         STATUS_OK)
from gpurtl.hdl.shapes import Float32

from ._fpcores import fp_core
from ._pipe import delay, reg
from .box_engine import BOX_IN_LAYOUT, BoxEngine
from .sort_unit import SortUnit

__all__ = ["RayAccel", "dequant_offset"]

_INVALID = 0xFFFFFFFF
_NAN = 0x7FC00000
_F3 = data.ArrayLayout(Float32(), 3)

SLOT_INFO = data.StructLayout({"ptr": unsigned(32), "valid": unsigned(1), "culled": unsigned(1)})


def dequant_offset(m, exp, q, name):
    """``Dq(q)`` FP32 bits (spec 1.5) of an 8-bit exponent and a 13-bit plane value."""
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
        Box tests per engine per cycle; ``engines * boxes_per_engine`` must be 8.
    ftz : bool
        Flush subnormals in the ray arithmetic (reciprocal, slab test, keys, sort compares).
    add_stages, mul_stages, fma_stages, rcp_stages : int or None
        FP32 core pipeline depths (``None``: the cores' defaults).
    """

    def __init__(self, *, engines=2, boxes_per_engine=4, ftz=False, add_stages=None,
                 mul_stages=None, fma_stages=None, rcp_stages=None):
        if engines not in (1, 2) or isinstance(engines, bool):
            raise ValueError(f"`engines` must be 1 or 2, not {engines!r}")
        if isinstance(boxes_per_engine, bool) or not isinstance(boxes_per_engine, int) \
                or not 1 <= boxes_per_engine <= 8:
            raise ValueError(f"`boxes_per_engine` must be an integer from 1 to 8, "
                             f"not {boxes_per_engine!r}")
        if engines * boxes_per_engine != 8:
            raise ValueError(f"`engines * boxes_per_engine` must be 8 (one BVH8 node per cycle), "
                             f"not {engines * boxes_per_engine}")
        if not isinstance(ftz, bool):
            raise TypeError(f"`ftz` must be a boolean, not {ftz!r}")
        self._engines, self._boxes, self._ftz = engines, boxes_per_engine, ftz
        self._stages = dict(add_stages=add_stages, mul_stages=mul_stages, fma_stages=fma_stages)
        self._rcp_stages = rcp_stages
        probe = BoxEngine(boxes_per_engine, ftz=ftz, **self._stages)
        self._engine_latency, self._inv_offset = probe.latency, probe.inv_offset
        self._lr = fp_core("FPRcpCore")(rcp_stages, ftz).latency
        self._engine_delay = max(0, self._lr - self._inv_offset)
        self._inv_delay = max(0, self._inv_offset - self._lr)
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
    def paths(self):
        """Node kinds this build models (the golden model is restricted to the same set)."""
        return frozenset({"box"})

    @property
    def box_latency(self):
        """Cycles from an accepted instruction to its result (every path has this latency)."""
        return 1 + self._engine_delay + self._engine_latency + 1 + SortUnit().latency

    @property
    def latency(self):
        return self.box_latency

    def elaborate(self, platform):
        m = Module()
        en = Signal(name="en")
        m.d.comb += [en.eq(~self.o.valid | self.o.ready), self.i.ready.eq(en)]
        ins = self.i.payload
        ray, desc = ins.ray, ins.desc
        pf = Signal(10, name="s0_pf")
        m.d.comb += pf.eq(Mux(desc.pointer_flags_en, ins.pointer_flags, 0))

        # ---- s0: decode ------------------------------------------------------------------------
        n0 = ins.node[0]
        exps = [n0[6][0:8], n0[6][8:16], n0[6][16:24]]
        count = n0[6][28:31] + 1
        obb = n0[7][0:7]
        internal = Signal(32, name="s0_internal0")
        m.d.comb += internal.eq(n0[0] | 5)
        prim = n0[1]
        slots = [Signal(BOX_IN_LAYOUT, name=f"s0_box{k}") for k in range(8)]
        info = [Signal(SLOT_INFO, name=f"s0_info{k}") for k in range(8)]
        # box-flag cull helper (see golden box_path.box_culled)
        def culled_by_flags(flags):
            f_lo = Mux(pf & PF_FORCE_OPAQUE, 1, Mux(pf & PF_FORCE_NON_OPAQUE, 2, flags[0:2]))
            return (Cat(f_lo, flags[2:4]) & pf[6:10]) != 0

        for k in range(8):
            # BVH8 child k
            w0, w1, w2 = n0[8 + 3 * k], n0[9 + 3 * k], n0[10 + 3 * k]
            qmin = [w0[0:12], w0[12:24], w1[0:12]]
            qmax = [w1[12:24], w2[0:12], w2[12:24]]
            ctype, crange = w2[24:28], w2[28:32]
            b8_valid = k < count
            b8_ptr = Signal(32, name=f"s0_b8ptr{k}")
            m.d.comb += b8_ptr.eq(Mux(ctype == 5, internal, prim | ctype))
            nxt_int = Signal(32, name=f"s0_internal{k + 1}")
            nxt_prim = Signal(32, name=f"s0_prim{k + 1}")
            m.d.comb += [nxt_int.eq(internal + Mux(ctype == 5, crange << 4, 0)),
                         nxt_prim.eq(prim + Mux(ctype == 5, 0, crange << 4))]
            internal, prim = nxt_int, nxt_prim
            b8_culled = culled_by_flags(w0[24:28]) | ((w1[24:32] & ray.instance_mask) == 0)
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
                m.d.comb += [slots[k].base[a].eq(n0[3 + a]),
                             slots[k].off_min[a].eq(Mux(dual, lg_min[a], b8_min[a])),
                             slots[k].off_max[a].eq(Mux(dual, lg_max[a], b8_max[a]))]
        # status (same precedence as golden intersect with paths = {"box"})
        status = Signal(2, name="s0_status")
        t8 = ins.node_ptr[0][0:4]
        with m.If(ins.dual):
            tl = [ins.node_ptr[0][0:3], ins.node_ptr[1][0:3]]
            any6 = (tl[0] == 6) | (tl[1] == 6)
            bad = Cat(*[(t == 2) | (t == 3) for t in tl]).any()
            nm = Cat(*[(t == 7) | (t == 0) | (t == 1) | ((t == 4) & desc.box_node_64b)
                       for t in tl]).any()
            m.d.comb += status.eq(Mux(any6, STATUS_OK, Mux(bad, STATUS_BAD_NODE,
                                                             Mux(nm, STATUS_NOT_MODELLED,
                                                                 STATUS_OK))))
        with m.Else():
            box = t8 == 5
            tri = t8[0:3] <= 3
            inst = (t8 == 6) & desc.instance_en
            m.d.comb += status.eq(Mux(box, Mux(obb != 0x7F, STATUS_NOT_MODELLED, STATUS_OK),
                                      Mux(tri | inst, STATUS_NOT_MODELLED, STATUS_BAD_NODE)))
        any6_sig = Signal(name="s0_dual_instance")
        m.d.comb += any6_sig.eq(ins.dual & ((ins.node_ptr[0][0:3] == 6)
                                            | (ins.node_ptr[1][0:3] == 6)))

        # ---- s1 registers ----------------------------------------------------------------------
        s1_valid = reg(m, en, self.i.valid, "s1_valid")
        s1_slots = [reg(m, en, s, f"s1_box{k}") for k, s in enumerate(slots)]
        s1_info = [reg(m, en, s, f"s1_info{k}") for k, s in enumerate(info)]
        s1_ray = reg(m, en, ray, "s1_ray")
        s1_status = reg(m, en, status, "s1_status")
        s1_kill = reg(m, en, any6_sig, "s1_kill")
        s1_dual = reg(m, en, ins.dual, "s1_dual")
        s1_sort = reg(m, en, desc.sort_en & (desc.heuristic != 3), "s1_sort")
        s1_wide = reg(m, en, desc.wide_sort, "s1_wide")
        s1_stf = reg(m, en, desc.sort_tri_first, "s1_stf")
        s1_grow = reg(m, en, desc.box_grow, "s1_grow")
        s1_heur = reg(m, en, desc.heuristic, "s1_heur")

        # ---- reciprocal and box engines -----------------------------------------------------------
        rcp_dir = []
        for a in range(3):
            rcp = fp_core("FPRcpCore")(self._rcp_stages, self._ftz)
            m.submodules[f"rcp{a}"] = rcp
            m.d.comb += [rcp.en.eq(en), rcp.a.eq(s1_ray.dir[a])]
            rcp_dir.append(rcp.z)
        inv = [delay(m, en, rcp_dir[a], self._inv_delay, f"inv{a}", shape=32) for a in range(3)]
        e_delay = self._engine_delay
        e_slots = [delay(m, en, s, e_delay, f"e_box{k}") for k, s in enumerate(s1_slots)]
        e_origin = delay(m, en, s1_ray.origin, e_delay, "e_origin")
        e_extent = delay(m, en, s1_ray.extent, e_delay, "e_extent")
        e_grow = delay(m, en, s1_grow, e_delay, "e_grow")
        e_heur = delay(m, en, s1_heur, e_delay, "e_heur")
        hits, keys = [], []
        for e in range(self._engines):
            eng = BoxEngine(self._boxes, ftz=self._ftz, **self._stages)
            m.submodules[f"engine{e}"] = eng
            m.d.comb += [eng.en.eq(en), eng.i.ray.extent.eq(e_extent),
                         eng.i.ray.box_grow.eq(e_grow), eng.i.ray.heuristic.eq(e_heur)]
            for a in range(3):
                m.d.comb += [eng.i.ray.origin[a].eq(e_origin[a]), eng.inv_dir[a].eq(inv[a])]
            for b in range(self._boxes):
                k = e * self._boxes + b
                m.d.comb += eng.i.boxes[b].eq(e_slots[k])
                hits.append(eng.o.boxes[b].hit)
                keys.append(eng.o.boxes[b].key)
        lat_e = e_delay + self._engine_latency
        h_info = [delay(m, en, s, lat_e, f"h_info{k}") for k, s in enumerate(s1_info)]
        h_dual = delay(m, en, s1_dual, lat_e, "h_dual")

        # ---- sh: slot select, child-reuse de-duplication ----------------------------------------
        tested = []
        for k in range(8):
            t = Signal(32, name=f"h_tested{k}")
            m.d.comb += t.eq(Mux(h_info[k].valid & ~h_info[k].culled & hits[k], h_info[k].ptr,
                                 _INVALID))
            tested.append(t)
        sorter = SortUnit(ftz=self._ftz)
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
        lat_o = lat_d + sorter.latency
        o_status = delay(m, en, s1_status, lat_o, "o_status")
        o_kill = delay(m, en, s1_kill, lat_o, "o_kill")
        o_ray = delay(m, en, s1_ray, lat_o, "o_ray")
        o_valid = delay(m, en, s1_valid, lat_o, "o_valid")
        out = self.o.payload
        blank = (o_status != STATUS_OK) | o_kill
        for k in range(8):
            m.d.comb += out.dw[k].eq(Mux(blank, _INVALID, sorter.o.ptrs[k]))
        for k in (8, 9):
            m.d.comb += out.dw[k].eq(Mux(blank, _INVALID, 0))
        m.d.comb += [out.origin.eq(o_ray.origin), out.dir.eq(o_ray.dir),
                     out.status.eq(o_status), self.o.valid.eq(o_valid)]
        return m
