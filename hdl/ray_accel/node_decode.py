"""The entry stage of the ray accelerator: one instruction decoded once (``NodeDecode``).

Every byte of the fetched nodes is read here, and only here, for the box and transform paths:
the stage turns an ``INSTR_LAYOUT`` instruction into :func:`decoded_layout`, the register the
rest of the pipeline reads. Golden reference: :func:`gpurtl.golden.ray_accel.scalar.decode.decode`.

What the stage computes, per node kind (AMD "RDNA4 Instruction Set Architecture" guide, "Ray
Tracing"; gpurt ``src/shaders/rtip3_opcode_emulation.hlsl`` ``IntersectNodeBvh8``,
``IntersectNodeBvh4`` and ``IntersectHardwareInstanceNode``):

* BVH8 box node (type 5): per child slot the ``Dq(q)`` bit patterns of the six planes (gpurt
  ``Math.hlsl`` ``Dequantize``: a priority encoder and a shift; the add of the node origin is the
  box engine's first operation), the child pointer (``internalNode.hlsli``: two running offsets,
  prefix sums of ``range << 4``), ``INVALID_NODE`` when the slot is not valid (``i >= count``) or
  early-culled (box flags against the pointer flags, child mask against the instance mask).
* Instance node (type 6, ``instance_en``): the embedded 4-child filter box in slots 0-3 (bases 0,
  no cull), the world-to-object matrix for the ray transform, and the instance's own result
  fields (cull, BLAS pointer with merged flags, user data; gpurt ``gpurtAccelStruct.h``
  ``HwInstanceTransformNode``).
* Dual form: two legacy BVH4 box nodes (``BoxNode1_0.hlsli``; FP32 planes as they are, FP16
  planes widened exactly) in slots 0-3 and 4-7, with an origin of ``-0.0`` (``-0 + x = x`` bit
  for bit, so the box engine's add passes them through); the legacy triangle nodes' geometry
  index (dword 14).
* The status, the sort controls and the kind flags that select the result format.

The triangle-pair and legacy-triangle cores decode their own node bytes at their first stages
(they take the instruction at the same cycle as this stage).
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, unsigned
from amaranth.lib import data, wiring

from gpurtl.facts.fp32 import EXPONENT_MAX, NEG_ZERO, Float32
from gpurtl.facts.ray_accel import (
    BOX8_CHILDREN,
    BOX8_NODE_LAYOUT,
    CHILD_RANGE_SHIFT,
    FILTER_CHILDREN,
    HEURISTIC_NONE,
    INSTANCE_AABB_BIT,
    INSTANCE_NODE_LAYOUT,
    INSTR_LAYOUT,
    INVALID_NODE,
    INVALID_OBB,
    LEGACY_BOX16_LAYOUT,
    LEGACY_BOX32_LAYOUT,
    LEGACY_GEOMETRY_INDEX_DW,
    LEGACY_TYPE_BOX16,
    LEGACY_TYPE_INSTANCE,
    LEGACY_TYPE_PROCEDURAL,
    LEGACY_TYPE_TRI1,
    NODE_TYPE_BOX8,
    NODE_TYPE_INSTANCE,
    QUANT_BITS,
    STATUS_BAD_NODE,
    STATUS_NOT_MODELLED,
    STATUS_OK,
    TRIANGLE_TYPE_MAX,
    PointerFlags,
)

from ..pipe import EnableCoreSignature
from .obb_transform import OBB_COUNT

__all__ = [
    "PLANES_LAYOUT",
    "STAGE_RAY_LAYOUT",
    "CONTROL_LAYOUT",
    "INSTANCE_SIDE_LAYOUT",
    "MATRIX_LAYOUT",
    "decoded_layout",
    "NodeDecode",
    "dequant_offset",
    "f16_to_f32",
    "RAW_PLANE_BASE",
    "OBB_INDEX_LIMIT",
]

_F3 = data.ArrayLayout(Float32, 3)
#: The origin given to raw (legacy) planes: ``-0.0 + x == x`` for every non-NaN ``x``.
RAW_PLANE_BASE = NEG_ZERO
#: OBB indices from here to 126 are undefined (the rotation table's size).
OBB_INDEX_LIMIT = OBB_COUNT
_SLOTS = BOX8_CHILDREN

#: One child slot's planes: ``Dq`` offsets (BVH8, filter box) or raw FP32 planes (legacy nodes).
PLANES_LAYOUT = data.StructLayout({"off_min": _F3, "off_max": _F3})
#: The ray as the box and transform paths need it (no instance mask: it is used at decode).
STAGE_RAY_LAYOUT = data.StructLayout({"origin": _F3, "dir": _F3, "extent": Float32})
#: The world-to-object matrix of an instance node and whether to apply it (not culled).
MATRIX_LAYOUT = data.StructLayout(
    {
        "use_matrix": unsigned(1),
        "matrix": data.ArrayLayout(data.ArrayLayout(Float32, 4), 3),
    }
)
#: The instance node's own result fields (DW2, DW3, DW6 and the cull of DW7).
INSTANCE_SIDE_LAYOUT = data.StructLayout(
    {
        "culled": unsigned(1),
        "blas_lo": unsigned(32),
        "blas_hi": unsigned(32),
        "user_data": unsigned(24),
    }
)
#: Status, result-format selection and sort controls.
CONTROL_LAYOUT = data.StructLayout(
    {
        "status": unsigned(2),
        "blank": unsigned(1),  # dual form with an instance node: every dword 0xFFFFFFFF
        "is_instance": unsigned(1),
        "is_triangle": unsigned(1),
        "dual": unsigned(1),
        "dual_triangle": unsigned(2),  # which dual-form node is a legacy triangle node
        "sort_enable": unsigned(1),
        "sort_wide": unsigned(1),
        "sort_tri_first": unsigned(1),
        "box_grow": unsigned(8),
        "heuristic": unsigned(2),
    }
)


def decoded_layout(*, triangles=True, transforms=True):
    """The entry register of a build: the fields the later stages read, nothing else."""
    fields = {
        "base": _F3,
        "planes": data.ArrayLayout(PLANES_LAYOUT, _SLOTS),
        "ptrs": data.ArrayLayout(unsigned(32), _SLOTS),
        "ray": STAGE_RAY_LAYOUT,
        "control": CONTROL_LAYOUT,
    }
    if transforms:
        fields["obb_index"] = unsigned(7)
        fields["transform"] = MATRIX_LAYOUT
        fields["instance"] = INSTANCE_SIDE_LAYOUT
    if triangles:
        fields["geometry_index"] = data.ArrayLayout(unsigned(32), 2)
    return data.StructLayout(fields)


def dequant_offset(m, exp, q, name):
    """``Dq(q)`` FP32 bits of an 8-bit exponent and a 13-bit plane value (gpurt ``Dequantize``):
    ``p = floor(log2 q)``, ``se = p - 12 + exp``; 0 when ``q = 0`` or ``se <= 0``."""
    q13 = Signal(QUANT_BITS + 1, name=f"{name}_q")
    m.d.comb += q13.eq(q)
    q = q13
    p = Signal(4, name=f"{name}_p")
    for k in range(QUANT_BITS + 1):
        with m.If(q[k]):
            m.d.comb += p.eq(k)
    se = Signal(10, name=f"{name}_se")  # only its low 8 bits are used, when not flushed
    m.d.comb += se.eq(p + exp - QUANT_BITS)
    mant = Signal(23, name=f"{name}_mant")
    with m.Switch(p):
        for k in range(QUANT_BITS + 1):
            with m.Case(k):
                m.d.comb += mant.eq((q << (23 - k))[:23])
    flush = (q == 0) | ((p + exp) <= QUANT_BITS)
    out = Signal(Float32, name=f"{name}_dq")
    # fraction, exponent, sign (+0 when flushed), assigned whole: a sign bit driven by a
    # constant alone becomes an `always @*` Verilator's lint reports as never run (ALWNEVER)
    m.d.comb += out.eq(Mux(flush, 0, Cat(mant, se[:8], Const(0, 1))))
    return out


def f16_to_f32(m, h, name):
    """Exact widening of an FP16 pattern (subnormals normalised)."""
    sign, exp, man = h[15], h[10:15], h[:10]
    out = Signal(Float32, name=name)
    m.d.comb += out.sign.eq(sign)
    lead = Signal(4, name=f"{name}_lead")  # index of the leading one of a subnormal
    for k in range(10):
        with m.If(man[k]):
            m.d.comb += lead.eq(k)
    sub_man = Signal(10, name=f"{name}_subman")
    with m.Switch(lead):
        for k in range(10):
            with m.Case(k):
                m.d.comb += sub_man.eq((man << (10 - k))[:10])
    with m.If(exp == 0x1F):
        m.d.comb += [out.exponent.eq(EXPONENT_MAX), out.fraction.eq(man << 13)]
    with m.Elif(exp == 0):
        with m.If(man != 0):
            # value = 1.x * 2**(lead - 24)  ->  biased exponent lead + 103
            m.d.comb += [out.exponent.eq(lead + 103), out.fraction.eq(sub_man << 13)]
    with m.Else():
        m.d.comb += [out.exponent.eq(exp + 112), out.fraction.eq(man << 13)]
    return out


def _box_culled(pf, flags):
    """Early cull of one child (golden ``box_path.box_culled``): force flags first, then the 4
    box flags against the 4 pointer flags they line up with (``flags & (pf >> 6)``)."""
    f_lo = Mux(pf.force_opaque, 1, Mux(pf.force_non_opaque, 2, flags[0:2]))
    culls = Cat(pf.cull_opaque, pf.cull_non_opaque, pf.skip_triangles, pf.skip_procedural)
    return (Cat(f_lo, flags[2:4]) & culls) != 0


class NodeDecode(wiring.Component):
    """Decode of one instruction into :func:`decoded_layout`, registered once (``latency = 1``).

    Parameters
    ----------
    triangles : bool
        The build has the triangle paths (otherwise triangle nodes give status 1).
    transforms : bool
        The build has the OBB and instance transforms (otherwise those nodes give status 1).

    Interface (clock-enable core): ``en``; ``i``: ``INSTR_LAYOUT``; ``o``: the decoded
    instruction, one enabled cycle later.
    """

    def __init__(self, *, triangles=True, transforms=True):
        for name, value in (("triangles", triangles), ("transforms", transforms)):
            if not isinstance(value, bool):
                raise TypeError(f"`{name}` must be a boolean, not {value!r}")
        self._triangles, self._transforms = triangles, transforms
        super().__init__(
            EnableCoreSignature(
                INSTR_LAYOUT, decoded_layout(triangles=triangles, transforms=transforms)
            )
        )

    @property
    def triangles(self):
        return self._triangles

    @property
    def transforms(self):
        return self._transforms

    @property
    def latency(self):
        return 1

    def elaborate(self, platform):
        m = Module()
        ins = self.i
        out = Signal(self.o.shape(), name="s0_decoded")
        with m.If(self.en):
            m.d.sync += self.o.eq(out)
        pf = Signal(PointerFlags, name="s0_pf")
        m.d.comb += pf.eq(Mux(ins.desc.pointer_flags_en, ins.pointer_flags, 0))
        box8 = BOX8_NODE_LAYOUT(ins.node[0].as_value())
        inst = INSTANCE_NODE_LAYOUT(ins.node[0].as_value())
        t8 = ins.node_ptr[0][0:4]
        kind = Signal(data.StructLayout({"box8": 1, "inst": 1, "tri": 1}), name="s0_kind")
        m.d.comb += [
            kind.box8.eq(~ins.dual & (t8 == NODE_TYPE_BOX8)),
            kind.inst.eq(~ins.dual & (t8 == NODE_TYPE_INSTANCE) & ins.desc.instance_en),
            kind.tri.eq(~ins.dual & (t8[0:3] <= TRIANGLE_TYPE_MAX)),
        ]
        self._slots(m, out, pf, box8, inst, kind.inst)
        m.d.comb += [
            out.ray.origin.eq(ins.ray.origin),
            out.ray.dir.eq(ins.ray.dir),
            out.ray.extent.eq(ins.ray.extent),
        ]
        self._control(m, out.control, box8, kind)
        if self._transforms:
            m.d.comb += out.obb_index.eq(Mux(kind.box8, box8.header.obb_index, INVALID_OBB))
            self._instance(m, out, pf, inst, kind.inst)
        if self._triangles:
            for n in range(2):
                m.d.comb += out.geometry_index[n].eq(ins.node[n][LEGACY_GEOMETRY_INDEX_DW])
        return m

    def _slots(self, m, out, pf, box8, inst, is_inst):
        """The 8 slots' planes and pointers (``INVALID_NODE`` when not valid or early-culled),
        and the base they are relative to: a BVH8 node's children, an instance's filter box, or
        the dual form's legacy nodes (node ``k // 4``, child ``k % 4``)."""
        ins = self.i
        exps = [Mux(is_inst, inst.filter_exp[a], box8.header.exp[a]) for a in range(3)]
        count = Signal(4, name="s0_count")
        m.d.comb += count.eq(Mux(is_inst, inst.filter_count_minus_1, box8.header.count_minus_1) + 1)
        internal = Signal(32, name="s0_internal0")
        m.d.comb += internal.eq(Mux(is_inst, 0, box8.header.internal_base) | NODE_TYPE_BOX8)
        prim = Signal(32, name="s0_prim0")
        m.d.comb += prim.eq(Mux(is_inst, 0, box8.header.leaf_base))
        legacy = [LEGACY_BOX32_LAYOUT(ins.node[n].as_value()) for n in range(2)]
        legacy16 = [LEGACY_BOX16_LAYOUT(ins.node[n].as_value()) for n in range(2)]
        for k in range(_SLOTS):
            child = box8.children[k]
            if k < FILTER_CHILDREN:
                child = Mux(is_inst, inst.filter_children[k].as_value(), child.as_value())
                child = box8.children[k].shape()(child)
            qmin = [child.qmin_x, child.qmin_y, child.qmin_z]
            qmax = [child.qmax_x, child.qmax_y, child.qmax_z]
            b8_valid = (k < count) & (~is_inst | (k < FILTER_CHILDREN))
            b8_ptr = Signal(32, name=f"s0_b8ptr{k}")
            is_box_child = child.type == NODE_TYPE_BOX8
            m.d.comb += b8_ptr.eq(Mux(is_box_child, internal, prim | child.type))
            step = child.range << CHILD_RANGE_SHIFT
            nxt_int = Signal(32, name=f"s0_internal{k + 1}")
            nxt_prim = Signal(32, name=f"s0_prim{k + 1}")
            m.d.comb += [
                nxt_int.eq(internal + Mux(is_box_child, step, 0)),
                nxt_prim.eq(prim + Mux(is_box_child, 0, step)),
            ]
            internal, prim = nxt_int, nxt_prim
            b8_culled = ~is_inst & (
                _box_culled(pf, child.cull_flags) | ((child.mask & ins.ray.instance_mask) == 0)
            )
            b8_min = [dequant_offset(m, exps[a], qmin[a], f"s0_c{k}_min{a}") for a in range(3)]
            b8_max = [dequant_offset(m, exps[a], qmax[a] + 1, f"s0_c{k}_max{a}") for a in range(3)]
            n, j = k // 4, k % 4
            lg, lg16 = legacy[n], legacy16[n]
            is16 = ins.node_ptr[n][0:3] == LEGACY_TYPE_BOX16
            lg_ptr = lg.ptr[j]
            f16_min = [
                f16_to_f32(m, lg16.bounds[j].min[a], f"s0_n{n}c{j}_hmin{a}") for a in range(3)
            ]
            f16_max = [
                f16_to_f32(m, lg16.bounds[j].max[a], f"s0_n{n}c{j}_hmax{a}") for a in range(3)
            ]
            lg_min = [Mux(is16, f16_min[a], lg.bounds[j].min[a]) for a in range(3)]
            lg_max = [Mux(is16, f16_max[a], lg.bounds[j].max[a]) for a in range(3)]
            lg_flags = Mux(is16, 0, lg.flags[j][0:4])
            lg_live = (lg_ptr != INVALID_NODE) & ~_box_culled(pf, lg_flags)
            b8_live = b8_valid & ~b8_culled
            with m.If(ins.dual):
                m.d.comb += out.ptrs[k].eq(Mux(lg_live, lg_ptr, INVALID_NODE))
                m.d.comb += [out.planes[k].off_min[a].eq(lg_min[a]) for a in range(3)]
                m.d.comb += [out.planes[k].off_max[a].eq(lg_max[a]) for a in range(3)]
            with m.Else():
                m.d.comb += out.ptrs[k].eq(Mux(b8_live, b8_ptr, INVALID_NODE))
                m.d.comb += [out.planes[k].off_min[a].eq(b8_min[a]) for a in range(3)]
                m.d.comb += [out.planes[k].off_max[a].eq(b8_max[a]) for a in range(3)]
        for a in range(3):
            m.d.comb += out.base[a].eq(
                Mux(
                    ins.dual,
                    RAW_PLANE_BASE,
                    Mux(is_inst, inst.filter_origin[a], box8.header.origin[a]),
                )
            )

    def _control(self, m, ctl, box8, kind):
        """The status (the precedence of the golden intersect, restricted to the build), the
        result-format selection and the sort controls."""
        ins, desc = self.i, self.i.desc
        ok, nm, bad = STATUS_OK, STATUS_NOT_MODELLED, STATUS_BAD_NODE
        status = ctl.status
        obb = box8.header.obb_index
        tl = [ins.node_ptr[0][0:3], ins.node_ptr[1][0:3]]
        any_instance = (tl[0] == LEGACY_TYPE_INSTANCE) | (tl[1] == LEGACY_TYPE_INSTANCE)
        with m.If(ins.dual):
            bad_t = Cat(*[(t > LEGACY_TYPE_TRI1) & (t < LEGACY_TYPE_BOX16) for t in tl]).any()
            nm_t = Cat(
                *[
                    (t == LEGACY_TYPE_PROCEDURAL)
                    | ((t == LEGACY_TYPE_BOX16) & desc.box_node_64b)
                    | ((t <= LEGACY_TYPE_TRI1) if not self._triangles else Const(0, 1))
                    for t in tl
                ]
            ).any()
            m.d.comb += status.eq(Mux(any_instance, ok, Mux(bad_t, bad, Mux(nm_t, nm, ok))))
        with m.Elif(kind.box8):
            if self._transforms:
                m.d.comb += status.eq(Mux((obb != INVALID_OBB) & (obb >= OBB_INDEX_LIMIT), bad, ok))
            else:
                m.d.comb += status.eq(Mux(obb != INVALID_OBB, nm, ok))
        with m.Elif(kind.tri):
            m.d.comb += status.eq(ok if self._triangles else nm)
        with m.Elif(kind.inst):
            m.d.comb += status.eq(ok if self._transforms else nm)
        with m.Else():
            m.d.comb += status.eq(bad)
        dual_tri = [ins.dual & (tl[n] <= LEGACY_TYPE_TRI1) for n in range(2)]
        m.d.comb += [
            ctl.blank.eq(ins.dual & any_instance),
            ctl.is_instance.eq(kind.inst),
            ctl.is_triangle.eq(kind.tri),
            ctl.dual.eq(ins.dual),
            ctl.dual_triangle.eq(Cat(*dual_tri)),
            ctl.sort_enable.eq(desc.sort_en & (desc.heuristic != HEURISTIC_NONE)),
            ctl.sort_wide.eq(desc.wide_sort & ~kind.inst & ~dual_tri[0] & ~dual_tri[1]),
            ctl.sort_tri_first.eq(desc.sort_tri_first),
            ctl.box_grow.eq(desc.box_grow),
            ctl.heuristic.eq(desc.heuristic),
        ]

    def _instance(self, m, out, pf, inst, is_inst):
        """An instance node's transform matrix and its own result fields."""
        child_base = inst.child_base
        inst_flags = child_base[54:64]
        aabb = child_base[INSTANCE_AABB_BIT]
        culled = Signal(name="s0_inst_culled")
        m.d.comb += culled.eq(
            ((inst.mask & self.i.ray.instance_mask) == 0)
            | (~aabb & pf.skip_triangles)
            | (aabb & pf.skip_procedural)
        )
        # (instance flags & (override ? 0x3FC : 0x3FF)) | ray flags over address bits [53:3]
        override = pf.force_opaque | pf.force_non_opaque
        merged = Signal(10, name="s0_blas_flags")
        m.d.comb += merged.eq(
            (inst_flags & Cat(~override, ~override, Const(0xFF, 8))) | pf.as_value()
        )
        blas = Signal(64, name="s0_blas")
        m.d.comb += blas.eq(Cat(Const(0, 3), child_base[3:54], merged))
        m.d.comb += [
            out.instance.culled.eq(culled),
            out.instance.blas_lo.eq(blas[:32]),
            out.instance.blas_hi.eq(blas[32:]),
            out.instance.user_data.eq(inst.user_data),
            out.transform.use_matrix.eq(is_inst & ~culled),
            out.transform.matrix.eq(inst.world_to_object),
        ]
