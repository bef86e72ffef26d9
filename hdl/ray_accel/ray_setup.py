"""Ray setup of the box path (``RaySetupUnit``): OBB / instance transform, then ``rcp(dir)``.

The box test needs the ray in the node's frame and the reciprocal of its direction (the
instruction has no inverse-direction operand; AMD "RDNA4 Instruction Set Architecture" guide,
``IMAGE_BVH8_INTERSECT_RAY``). One :class:`~gpurtl.hdl.ray_accel.obb_transform.OBBTransformCore`
with the explicit-matrix input serves both node kinds that move the ray (gpurt
``rtip3_opcode_emulation.hlsl``: ``OBBTransform`` for a BVH8 node with an OBB index other than
0x7F, the world-to-object matrix of ``IntersectHardwareInstanceNode``); every other node passes
through it unchanged with the same latency. Three ``FPRcpCore`` follow.

Golden reference: :func:`gpurtl.golden.ray_accel.scalar.setup.ray_setup`.

Interface (clock-enable core)
-----------------------------
``en``; ``i``: ``origin[3]``, ``dir[3]`` and, with ``transforms``, ``obb_index`` and
``transform`` (``use_matrix``, ``matrix``); ``o.ray`` (``origin[3]``, ``dir[3]``: the
transformed ray) ``transform_latency`` enabled cycles after ``i``; ``o.inv_dir[3]``
``latency`` enabled cycles after ``i`` (the box engine reads the origin before the reciprocal).
"""

from amaranth.hdl import Module
from amaranth.lib import data, wiring

from gpurtl.facts.fp32 import Float32

from ..fp32 import FPRcpCore
from ..pipe import EnableCoreSignature, EnableCoreStream, delay
from .node_decode import MATRIX_LAYOUT
from .obb_transform import OBBTransformCore

__all__ = [
    "setup_in_layout",
    "SETUP_RAY_LAYOUT",
    "SETUP_OUT_LAYOUT",
    "RaySetupUnit",
    "RaySetupPipe",
]

_F3 = data.ArrayLayout(Float32, 3)
SETUP_RAY_LAYOUT = data.StructLayout({"origin": _F3, "dir": _F3})
SETUP_OUT_LAYOUT = data.StructLayout({"ray": SETUP_RAY_LAYOUT, "inv_dir": _F3})


def setup_in_layout(transforms=True):
    """Input layout of :class:`RaySetupUnit`."""
    fields = {"origin": _F3, "dir": _F3}
    if transforms:
        fields.update(obb_index=7, transform=MATRIX_LAYOUT)
    return data.StructLayout(fields)


def _check_params(transforms, ftz, xf_fma_stages, rcp_stages):
    for name, value in (("transforms", transforms), ("ftz", ftz)):
        if not isinstance(value, bool):
            raise TypeError(f"`{name}` must be a boolean, not {value!r}")
    if isinstance(xf_fma_stages, bool) or not isinstance(xf_fma_stages, int) or xf_fma_stages < 0:
        raise ValueError(f"`xf_fma_stages` must be a non-negative integer, not {xf_fma_stages!r}")
    if rcp_stages is not None and (
        isinstance(rcp_stages, bool) or not isinstance(rcp_stages, int) or rcp_stages < 0
    ):
        raise ValueError(f"`rcp_stages` must be a non-negative integer or None, not {rcp_stages!r}")


class RaySetupUnit(wiring.Component):
    """Ray transform and reciprocal (see the module doc string).

    Parameters
    ----------
    transforms : bool
        Include the transform (otherwise only the reciprocal; ``transform_latency = 0``).
    ftz : bool
        Flush subnormals in the reciprocal.
    xf_fma_stages : int
        Register stages of each FMA of the transform (its latency is three times this).
    rcp_stages : int or None
        Register stages of the reciprocal (``None``: the core's default).
    """

    def __init__(self, *, transforms=True, ftz=False, xf_fma_stages=2, rcp_stages=None):
        _check_params(transforms, ftz, xf_fma_stages, rcp_stages)
        self._transforms, self._ftz = transforms, ftz
        self._xf_fma_stages = xf_fma_stages
        self._rcp_stages = FPRcpCore.DEFAULT_STAGES if rcp_stages is None else rcp_stages
        super().__init__(EnableCoreSignature(setup_in_layout(transforms), SETUP_OUT_LAYOUT))

    @property
    def transforms(self):
        return self._transforms

    @property
    def ftz(self):
        return self._ftz

    @property
    def transform_latency(self):
        """Enabled cycles from ``i`` to ``o.ray``."""
        return 3 * self._xf_fma_stages if self._transforms else 0

    @property
    def latency(self):
        """Enabled cycles from ``i`` to ``o.inv_dir``."""
        return self.transform_latency + self._rcp_stages

    def elaborate(self, platform):
        m = Module()
        if self._transforms:
            m.submodules.transform = xf = OBBTransformCore(
                fma_stages=self._xf_fma_stages, with_matrix=True
            )
            m.d.comb += [
                xf.en.eq(self.en),
                xf.i.index.eq(self.i.obb_index),
                xf.i.origin.eq(self.i.origin),
                xf.i.dir.eq(self.i.dir),
                xf.i.use_matrix.eq(self.i.transform.use_matrix),
                xf.i.matrix.eq(self.i.transform.matrix),
                self.o.ray.origin.eq(xf.o.origin),
                self.o.ray.dir.eq(xf.o.dir),
            ]
        else:
            m.d.comb += [self.o.ray.origin.eq(self.i.origin), self.o.ray.dir.eq(self.i.dir)]
        for a in range(3):
            rcp = FPRcpCore(self._rcp_stages, self._ftz)
            m.submodules[f"rcp{a}"] = rcp
            m.d.comb += [
                rcp.en.eq(self.en),
                rcp.a.eq(self.o.ray.dir[a]),
                self.o.inv_dir[a].eq(rcp.z),
            ]
        return m


class _AlignedSetup(wiring.Component):
    """:class:`RaySetupUnit` with ``o.ray`` delayed to ``latency`` (one output time)."""

    def __init__(self, **params):
        self._unit = RaySetupUnit(**params)
        super().__init__(
            EnableCoreSignature(setup_in_layout(self._unit.transforms), SETUP_OUT_LAYOUT)
        )

    @property
    def latency(self):
        return self._unit.latency

    def elaborate(self, platform):
        m = Module()
        m.submodules.unit = unit = self._unit
        late = unit.latency - unit.transform_latency
        m.d.comb += [
            unit.en.eq(self.en),
            unit.i.eq(self.i),
            self.o.ray.eq(delay(m, self.en, unit.o.ray, late, "ray")),
            self.o.inv_dir.eq(unit.o.inv_dir),
        ]
        return m


class RaySetupPipe(EnableCoreStream):
    """``RaySetupUnit`` in a valid/ready stream (block ``ray_setup``), II = 1; the transformed
    ray is delayed to leave with its reciprocal."""

    def __init__(self, **params):
        core = _AlignedSetup(**params)
        super().__init__(core, setup_in_layout(params.get("transforms", True)), SETUP_OUT_LAYOUT)
