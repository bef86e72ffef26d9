"""The last stage of the ray accelerator: the 10 result dwords and the returned ray
(``ResultFormat``).

Result formats (AMD "RDNA4 Instruction Set Architecture" guide, "Ray Tracing", and gpurt
``src/shaders/rtip3_opcode_emulation.hlsl``):

* box nodes: DW0..7 the sorted child pointers, DW8/9 = 0;
* instance nodes (``IntersectHardwareInstanceNode``): DW0, DW1, DW4, DW5 undefined
  (``0xDEADBEEF`` as in the emulation), DW2/3 the BLAS pointer, DW6 the user data, DW7 the low
  bytes of the 4 sorted filter-box pointers (``0xFFFFFFFF`` when the instance is culled), DW8/9
  ``0xFFFFFFFF``; the returned ray is the transformed one;
* triangle pairs: the triangle-pair core's 10 dwords (its ``error`` gives status 2);
* dual form: a legacy triangle node ``k`` gives DW4k..4k+3 (the legacy core's 4 dwords) and
  DW8+k = its geometry index;
* a non-zero status, or a dual form with an instance node, turns every dword into
  ``0xFFFFFFFF``.

Golden reference: :func:`gpurtl.golden.ray_accel.scalar.result.format_result`. One register
(``latency = 1``).
"""

from amaranth.hdl import Cat, Module, Mux, Signal, unsigned
from amaranth.lib import data, wiring

from gpurtl.facts.ray_accel import (
    INSTANCE_UNDEFINED_DW,
    INVALID_NODE,
    OUT_LAYOUT,
    RESULT_DWORDS,
    SORT_SLOTS,
    STATUS_BAD_NODE,
    STATUS_OK,
)

from ..pipe import EnableCoreSignature, EnableCoreStream
from .legacy_triangle import LEGACY_OUT_LAYOUT
from .node_decode import CONTROL_LAYOUT, INSTANCE_SIDE_LAYOUT
from .ray_setup import SETUP_RAY_LAYOUT
from .triangle_pair import PAIR_OUT_LAYOUT

__all__ = ["format_in_layout", "ResultFormat", "ResultFormatPipe"]


def format_in_layout(*, triangles=True, transforms=True):
    """Input layout of :class:`ResultFormat` for a build."""
    fields = {
        "ptrs": data.ArrayLayout(unsigned(32), SORT_SLOTS),
        "control": CONTROL_LAYOUT,
        "ray": SETUP_RAY_LAYOUT,
    }
    if transforms:
        fields.update(instance_ray=SETUP_RAY_LAYOUT, instance=INSTANCE_SIDE_LAYOUT)
    if triangles:
        fields.update(
            triangle=PAIR_OUT_LAYOUT,
            legacy=LEGACY_OUT_LAYOUT,
            geometry_index=data.ArrayLayout(unsigned(32), 2),
        )
    return data.StructLayout(fields)


def _check_params(triangles, transforms):
    for name, value in (("triangles", triangles), ("transforms", transforms)):
        if not isinstance(value, bool):
            raise TypeError(f"`{name}` must be a boolean, not {value!r}")


class ResultFormat(wiring.Component):
    """The result format stage (see the module doc string).

    Parameters
    ----------
    triangles, transforms : bool
        The paths of the build (their inputs exist only then).
    """

    def __init__(self, *, triangles=True, transforms=True):
        _check_params(triangles, transforms)
        self._triangles, self._transforms = triangles, transforms
        super().__init__(
            EnableCoreSignature(
                format_in_layout(triangles=triangles, transforms=transforms), OUT_LAYOUT
            )
        )

    @property
    def latency(self):
        return 1

    def elaborate(self, platform):
        m = Module()
        i, ctl = self.i, self.i.control
        dw = [Signal(32, name=f"f_dw{k}") for k in range(RESULT_DWORDS)]
        status = Signal(2, name="f_status")
        origin = Signal.like(i.ray.origin, name="f_origin")
        direction = Signal.like(i.ray.dir, name="f_dir")
        m.d.comb += [status.eq(ctl.status), origin.eq(i.ray.origin), direction.eq(i.ray.dir)]
        m.d.comb += [dw[k].eq(i.ptrs[k]) for k in range(SORT_SLOTS)]
        m.d.comb += [dw[8].eq(0), dw[9].eq(0)]
        if self._transforms:
            packed = Cat(*[i.ptrs[k][0:8] for k in range(4)])
            undefined = INSTANCE_UNDEFINED_DW
            with m.If(ctl.is_instance):
                m.d.comb += [
                    dw[0].eq(undefined),
                    dw[1].eq(undefined),
                    dw[2].eq(i.instance.blas_lo),
                    dw[3].eq(i.instance.blas_hi),
                    dw[4].eq(undefined),
                    dw[5].eq(undefined),
                    dw[6].eq(i.instance.user_data),
                    dw[7].eq(Mux(i.instance.culled, INVALID_NODE, packed)),
                    dw[8].eq(INVALID_NODE),
                    dw[9].eq(INVALID_NODE),
                    origin.eq(i.instance_ray.origin),
                    direction.eq(i.instance_ray.dir),
                ]
        if self._triangles:
            with m.If(ctl.is_triangle):
                m.d.comb += [dw[k].eq(i.triangle.result[k]) for k in range(RESULT_DWORDS)]
                with m.If(i.triangle.error & (ctl.status == STATUS_OK)):
                    m.d.comb += status.eq(STATUS_BAD_NODE)
            for k in range(2):
                with m.If(ctl.dual_triangle[k]):
                    m.d.comb += [dw[4 * k + j].eq(i.legacy.result[k][j]) for j in range(4)]
                    m.d.comb += dw[8 + k].eq(i.geometry_index[k])
        blank = (status != STATUS_OK) | ctl.blank
        with m.If(self.en):
            m.d.sync += [
                self.o.dw[k].eq(Mux(blank, INVALID_NODE, dw[k])) for k in range(RESULT_DWORDS)
            ]
            m.d.sync += [
                self.o.origin.eq(origin),
                self.o.dir.eq(direction),
                self.o.status.eq(status),
            ]
        return m


class ResultFormatPipe(EnableCoreStream):
    """:class:`ResultFormat` in a valid/ready stream (block ``ray_result``), II = 1."""

    def __init__(self, *, triangles=True, transforms=True):
        _check_params(triangles, transforms)
        super().__init__(
            ResultFormat(triangles=triangles, transforms=transforms),
            format_in_layout(triangles=triangles, transforms=transforms),
            OUT_LAYOUT,
        )
