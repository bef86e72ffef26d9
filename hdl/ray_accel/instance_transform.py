"""Instance-node (type 6) core: cull, BLAS pointer with merged flags, user data, ray transform.

Sources: gpurt (``gpurtAccelStruct.h``
``HwInstanceTransformNode``, ``rtip3_opcode_emulation.hlsl`` ``IntersectHardwareInstanceNode``);
golden model :func:`gpurtl.golden.ray_accel.scalar.instance.instance_transform` (its doc string lists the
choices made where the sources are silent).

What this core does NOT do: the embedded 4-child filter box (DW7 of the result). That box is an
ordinary quantized box test on the *transformed* ray, so the top level (``ray_accel``) feeds
``o.origin``/``o.dir`` and the node's DW16..31 (filter origin, exponents, count, 4 ChildInfos;
child pointers decoded with both running offsets starting at 0, see
:func:`gpurtl.golden.ray_accel.scalar.instance.filter_children`) to its box engine, sorts, and packs the
low bytes of the 4 sorted pointers into DW7 (``0xFFFFFFFF`` when ``o.culled``).

Interface (``InstanceCore``), a clock-enable datapath core without valid/ready
-----------------------------------------------------------------------------
``en: In(1)``
``i: In(INSTANCE_IN_LAYOUT)``
    ``node`` (32 dwords of the 128-byte instance node), ``ray`` (``RAY_LAYOUT``: origin[3], dir[3],
    extent, instance_mask), ``pointer_flags`` (10 bits, BVH base bits 54..63),
    ``pointer_flags_en`` (T# bit 119; 0 = flags treated as 0).
``o: Out(INSTANCE_OUT_LAYOUT)``, valid ``latency`` enabled cycles later
    ``origin[3]``, ``dir[3]``: the returned ray (transformed; the input ray when culled);
    ``culled``; ``blas_lo``, ``blas_hi`` (result DW2, DW3); ``user_data`` (DW6, 24 bits).
``latency``
    ``3 * fma_stages`` (the transform; everything else is combinational at the input and delayed).

The transform is an :class:`~gpurtl.hdl.ray_accel.obb_transform.OBBTransformCore` with
``with_matrix=True``; the top level can instead share one such core between OBB box nodes and
instance nodes (drive ``use_matrix`` from the node type), which is what the ray-transform block
of the hardware does.
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, unsigned
from amaranth.lib import data, wiring

from gpurtl.facts.fp32 import Float32
from gpurtl.facts.ray_accel import NODE_LAYOUT, POINTER_FLAGS_SHAPE, RAY_LAYOUT, PointerFlags

from ..pipe import EnableCoreSignature, EnableCoreStream, delay
from .obb_transform import OBBTransformCore

__all__ = ["INSTANCE_IN_LAYOUT", "INSTANCE_OUT_LAYOUT", "InstanceCore", "InstancePipe"]

_VEC3 = data.ArrayLayout(Float32, 3)

INSTANCE_IN_LAYOUT = data.StructLayout(
    {
        "node": NODE_LAYOUT,
        "ray": RAY_LAYOUT,
        "pointer_flags": POINTER_FLAGS_SHAPE,
        "pointer_flags_en": unsigned(1),
    }
)

INSTANCE_OUT_LAYOUT = data.StructLayout(
    {
        "origin": _VEC3,
        "dir": _VEC3,
        "culled": unsigned(1),
        "blas_lo": unsigned(32),
        "blas_hi": unsigned(32),
        "user_data": unsigned(24),
    }
)


class InstanceCore(wiring.Component):
    """Clock-enable instance-node core (see the module doc string).

    Parameters
    ----------
    fma_stages : int
        Register stages of each FP32 FMA unit of the transform.
    """

    def __init__(self, fma_stages=2):
        if not isinstance(fma_stages, int) or isinstance(fma_stages, bool) or fma_stages < 0:
            raise ValueError(f"`fma_stages` must be a non-negative integer, not {fma_stages!r}")
        self._fma_stages = fma_stages
        super().__init__(EnableCoreSignature(INSTANCE_IN_LAYOUT, INSTANCE_OUT_LAYOUT))

    @property
    def latency(self):
        return 3 * self._fma_stages

    @property
    def fma_units(self):
        return 18

    def elaborate(self, platform):
        m = Module()
        m.submodules.xf = xf = OBBTransformCore(fma_stages=self._fma_stages, with_matrix=True)
        node, ray = self.i.node, self.i.ray
        flags = Signal(PointerFlags)
        m.d.comb += flags.eq(Mux(self.i.pointer_flags_en, self.i.pointer_flags, 0))
        child_base = Cat(node[12], node[13])
        inst_flags = child_base[54:64]
        mask = node[15][24:32]
        aabb = child_base[62]
        culled = Signal()
        m.d.comb += culled.eq(
            ((mask & ray.instance_mask) == 0)
            | (~aabb & flags.skip_triangles)
            | (aabb & flags.skip_procedural)
        )
        # gpurt ``rtip3_opcode_emulation.hlsl`` ``IntersectHardwareInstanceNode``: (inst &
        # (override ? 0x3FC : 0x3FF)) | ray flags, address bits [53:3]
        override = flags.force_opaque | flags.force_non_opaque
        merged = Signal(10)
        m.d.comb += merged.eq(
            (inst_flags & Cat(~override, ~override, Const(0xFF, 8))) | flags.as_value()
        )
        blas = Signal(64)
        m.d.comb += blas.eq(Cat(Const(0, 3), child_base[3:54], merged))
        m.d.comb += [
            xf.en.eq(self.en),
            xf.i.index.eq(0x7F),
            xf.i.use_matrix.eq(~culled),
            xf.i.origin.eq(ray.origin),
            xf.i.dir.eq(ray.dir),
        ]
        for r in range(3):
            for c in range(4):
                m.d.comb += xf.i.matrix[r][c].eq(node[4 * r + c])
        side = Signal(data.StructLayout({"culled": 1, "blas": 64, "user": 24}))
        m.d.comb += [side.culled.eq(culled), side.blas.eq(blas), side.user.eq(node[15][:24])]
        late = delay(m, self.en, side, self.latency, "side")
        m.d.comb += [
            self.o.origin.eq(xf.o.origin),
            self.o.dir.eq(xf.o.dir),
            self.o.culled.eq(late.culled),
            self.o.blas_lo.eq(late.blas[:32]),
            self.o.blas_hi.eq(late.blas[32:]),
            self.o.user_data.eq(late.user),
        ]
        return m


class InstancePipe(EnableCoreStream):
    """``InstanceCore`` in a valid/ready stream (block ``instance_transform``), II = 1."""

    def __init__(self, fma_stages=2):
        super().__init__(InstanceCore(fma_stages=fma_stages))
