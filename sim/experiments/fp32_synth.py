"""ECP5-85k (speed 8) resources and Fmax of the FP32 units at their default stage counts.

Each registered ``fp32_*`` block is synthesised out of context with :func:`gpurtl.sim.tools.synth.
synthesize` behind one extra input register stage (:class:`InputRegistered`): out of context,
nextpnr does not time paths from input ports, so without it the logic in front of a unit's
first pipeline register would go unmeasured. The FF column subtracts that input register
(payload width + valid), so it counts the unit's own flip-flops.
"""

from amaranth.hdl import Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from gpurtl.sim.core import registry
from gpurtl.sim.core.registry import Block
from gpurtl.sim.tools.tables import Column, document, markdown, write_csv

from . import check_params

#: No random numbers: synthesis of fixed builds.
SEEDS = {}

NAME = "fp32-synth"
DESCRIPTION = "FP32 units on ECP5-85k speed 8: LUT4, FF, DSP, Fmax at default stages"

UNITS = (
    "fp32_add",
    "fp32_mul",
    "fp32_fma",
    "fp32_cmp",
    "fp32_minmax",
    "fp32_rcp",
    "fp32_div",
    "fp32_f2i",
    "fp32_i2f",
)

__all__ = ["NAME", "DESCRIPTION", "InputRegistered", "synth_unit", "measure", "report"]


class InputRegistered(wiring.Component):
    """``unit`` with a plain pipeline register in front of its input stream (timing only)."""

    def __init__(self, unit, in_layout, out_layout):
        self._unit = unit
        super().__init__(
            {"i": In(stream.Signature(in_layout)), "o": Out(stream.Signature(out_layout))}
        )

    def elaborate(self, platform):
        m = Module()
        m.submodules.unit = unit = self._unit
        valid, payload = Signal(), Signal.like(self.i.payload)
        m.d.comb += self.i.ready.eq(~valid | unit.i.ready)
        with m.If(self.i.ready):
            m.d.sync += [valid.eq(self.i.valid), payload.eq(self.i.payload)]
        m.d.comb += [unit.i.valid.eq(valid), unit.i.payload.eq(payload)]
        wiring.connect(m, unit.o, wiring.flipped(self.o))
        return m


def synth_unit(name, overrides=None, freq=150.0):
    """Synthesis result dictionary of one block (``ff_unit``: ``ff`` without the input
    register)."""
    from gpurtl.sim.tools.synth import synthesize

    block = registry.get(name)
    params = block.resolve(overrides or {})
    in_layout, _ = block.layouts(**params)
    wrapped = Block(
        name=name,
        doc=block.doc,
        kind="pipeline",
        build=lambda **kw: InputRegistered(block.build(**kw), *block.layouts(**kw)),
        golden=None,
        layouts=block.layouts,
        stimulus=None,
        params=block.params,
    )
    result = synthesize(wrapped, params, freq=freq)
    result["ff_unit"] = result["ff"] - (data.Layout.cast(in_layout).size + 1)
    result["latency"] = params["stages"]
    return result


#: What the report keeps of a synthesis result (not the machine's cache folder).
FIELDS = ("block", "latency", "lut4", "ff", "ff_unit", "dsp", "bram", "fmax_mhz", "target_mhz")

#: The report's table; ``fp32_synth.csv`` has the columns with a CSV name.
COLUMNS = (
    Column("block", "unit"),
    Column("latency", "stages (latency)"),
    Column("ii", "II", get=lambda r: 1, csv=False),
    Column("lut4", "LUT4"),
    Column("ff_unit", "FF"),
    Column("dsp", "DSP"),
    Column("fmax_mhz", "Fmax", "MHz"),
)


def measure(*, quick=False, progress=None, **params):
    """Every FP32 unit (``quick``: ``fp32_cmp``) placed and routed on ECP5-85k at 150 MHz."""
    check_params(NAME, params)
    names = ("fp32_cmp",) if quick else UNITS
    units = []
    for index, name in enumerate(names):
        if progress:
            progress(index, len(names), name)
        result = synth_unit(name)
        units.append({field: result.get(field) for field in FIELDS})
    if progress:
        progress(len(names), len(names), "done")
    return {"device": "ECP5-85k, speed 8", "units": units}


def report(data, out_dir):
    """``fp32_synth.csv`` and ``summary.md``."""
    units = data["units"]
    rows = [
        (
            r["block"],
            f"latency {r['latency']}, II 1, LUT4 {r['lut4']}, FF {r['ff_unit']}, "
            f"DSP {r['dsp']}, Fmax {r['fmax_mhz']} MHz",
        )
        for r in units
    ]
    files = [
        write_csv(out_dir / "fp32_synth.csv", units, COLUMNS),
        document(
            out_dir / "summary.md",
            "FP32 units on ECP5-85k, speed 8",
            markdown(units, COLUMNS),
        ),
    ]
    return {
        "title": "FP32 units on ECP5-85k (speed 8), default stages",
        "rows": rows,
        "files": files,
    }
