"""Behavioural FP32 cores for the fast backend: C++ results behind a delay line of the same depth.

With ``fp_cores="behavioural"`` the fast backend exports a design through :data:`PLATFORM`, whose
``fp32_core`` hook (see :class:`gpurtl.hdl.fp32.common.FPCore`) puts an instance of a black box
``gpurtl_fp32_<unit>`` in place of every FP32 core that has at least one stage (the
combinational ones, compares in chains, stay RTL). The black box (:func:`verilog_library`) calls
a DPI-C function once per enabled clock edge; the result goes through a delay line of ``STAGES``
stages that advances with the core's ``en``: the RTL core's latency and stall behaviour. The
first ``STAGES - 1`` stages are a ring in the C++ (the call pushes the new result and returns the
one that leaves; each instance takes its ring from ``gpurtl_fp32_line`` in an ``initial`` block),
the last one is a Verilog register, so the output changes only at a clock edge. Verilator then
copies one word per core and cycle instead of every stage (1.05-1.10x on the full ray
accelerator, 1.09x on its box-only build: see ``docs/simulation.md``). The C++
(``fp32_cores.cpp``, package data beside this module) computes what :mod:`gpurtl.golden.fp32`
defines, the same way it does:

* ``mul``: the float64 product of two binary32 values is exact; one rounding to binary32;
* ``add``/``sub``, ``div``/``rcp``: the float64 result rounded to binary32; the double rounding
  is innocuous because 53 >= 2 * 24 + 2 (Figueroa, "When is double rounding innocuous?",
  SIGNUM 1995);
* ``fma``: the exact float64 product plus ``c`` as Knuth's TwoSum, rounded to odd in float64 and
  then to binary32 (Boldo and Melquiond, "Emulation of FMA and correctly rounded sums: proved
  algorithms using rounding to odd", IEEE TC 2008);
* ``ftz``: subnormal inputs become the zero of their sign, and a result that is subnormal after
  rounding too; every NaN result is ``0x7FC00000``; compares, min/max and the conversions follow
  the golden model's integer rules.

The C++ is compiled with ``-ffp-contract=off`` (no fused multiply-add where the model rounds
twice) and runs with the host's default rounding (to nearest even) and gradual underflow.
Equivalence with the RTL is tested, not assumed (``tests/sim/backends/fast/test_fast_behavioural.py``).
"""

from pathlib import Path

from amaranth.hdl import ClockSignal, Instance, Module

from gpurtl.hdl.fp32 import (
    FPAddCore,
    FPCmpCore,
    FPDivCore,
    FPFMACore,
    FPMinMaxCore,
    FPMulCore,
    FPRcpCore,
    FPToIntCore,
    IntToFPCore,
)

__all__ = [
    "FP_CORES",
    "core_ports",
    "PLATFORM",
    "CXX_FLAGS",
    "verilog_library",
    "cxx_files",
    "cxx_source",
    "ops_header",
    "config_header",
]

_HERE = Path(__file__).parent
_CONFIG_INCLUDE = '#include "fp32_config.h"'
_OPS_INCLUDE = '#include "fp32_ops.h"'

#: How the fast backend builds the FP32 cores: the RTL, or :mod:`this module's <.behavioural>`
#: stand-ins.
FP_CORES = ("rtl", "behavioural")

#: Extra C++ flags of a build with behavioural cores.
CXX_FLAGS = "-ffp-contract=off"

#: core class -> (unit, input ports, output ports with widths); the black box's ports are
#: ``i0, i1, ...`` and ``o0, o1, ...`` in this order (``signed`` is a Verilog keyword).
_UNITS = {
    FPAddCore: ("add", ("a", "b", "sub"), (("z", 32),)),
    FPMulCore: ("mul", ("a", "b"), (("z", 32),)),
    FPFMACore: ("fma", ("a", "b", "c"), (("z", 32),)),
    FPCmpCore: ("cmp", ("a", "b"), (("lt", 1), ("le", 1), ("eq", 1), ("unordered", 1))),
    FPMinMaxCore: ("minmax", ("a", "b"), (("min", 32), ("max", 32))),
    FPRcpCore: ("rcp", ("a",), (("z", 32),)),
    FPDivCore: ("div", ("a", "b"), (("z", 32),)),
    FPToIntCore: ("f2i", ("a", "signed"), (("z", 32), ("invalid", 1))),
    IntToFPCore: ("i2f", ("a", "signed"), (("z", 32),)),
}


class _Platform:
    """The elaboration platform of a behavioural build (only its ``fp32_core`` hook)."""

    def fp32_core(self, core):
        if core.stages == 0:  # combinational (compares in chains): the RTL
            return None
        unit, ins, outs = _UNITS[type(core)]
        ports = {f"i_i{k}": getattr(core, name) for k, name in enumerate(ins)}
        ports.update({f"o_o{k}": getattr(core, name) for k, (name, _) in enumerate(outs)})
        m = Module()
        m.submodules.model = Instance(
            f"gpurtl_fp32_{unit}",
            p_STAGES=core.stages,
            p_FTZ=int(core.ftz),
            i_clk=ClockSignal(),
            i_en=core.en,
            **ports,
        )
        return m


#: Passed to :func:`amaranth.back.verilog.convert` for a behavioural build.
PLATFORM = _Platform()


#: The one-bit operand ports (the others are 32-bit patterns).
_FLAGS = ("sub", "signed")


def core_ports():
    """``(unit, input widths, output widths)`` of each black box, ports ``i0, i1, ...`` and
    ``o0, o1, ...`` in this order (what a netlist of a behavioural build keeps as a cell)."""
    return [
        (unit, [1 if name in _FLAGS else 32 for name in ins], [width for _, width in outs])
        for unit, ins, outs in _UNITS.values()
    ]


def _module(core_class):
    unit, ins, outs = _UNITS[core_class]
    width = sum(w for _, w in outs)
    lines = [
        f"// {core_class.__name__}'s behavioural stand-in (gpurtl.sim.backends.fast.behavioural)",
        f"module gpurtl_fp32_{unit} #(parameter STAGES = 1, parameter FTZ = 0) (",
        "  input clk,",
        "  input en,",
    ]
    for k, name in enumerate(ins):
        w = 1 if name in _FLAGS else 32
        lines.append(f"  input [{w - 1}:0] i{k},")
    lines += [f"  output [{w - 1}:0] o{k}," for k, (_, w) in enumerate(outs)]
    lines[-1] = lines[-1].rstrip(",")
    args = ", ".join(f"input int unsigned x{k}" for k in range(len(ins)))
    call = ", ".join(f"32'(i{k})" for k in range(len(ins)))
    lines += [
        ");",
        f'  import "DPI-C" function longint unsigned gpurtl_fp32_{unit}_dpi('
        f"input int unsigned line, {args}, input int ftz);",
        # The first STAGES - 1 stages of the delay line are a ring in the C++ (one call per
        # enabled edge pushes the new result and returns the one that leaves); the last stage
        # is this register.
        "  int unsigned line;",
        f"  reg [{width - 1}:0] last = 0;",
        "  initial line = gpurtl_fp32_line(STAGES - 1);",
        "  always @(posedge clk) begin",
        "    if (en)",
        f"      last <= {width}'(gpurtl_fp32_{unit}_dpi(line, {call}, FTZ));",
        "  end",
    ]
    at = 0
    for k, (_, w) in enumerate(outs):
        lines.append(f"  assign o{k} = last[{at + w - 1}:{at}];")
        at += w
    lines.append("endmodule")
    return "\n".join(lines) + "\n"


def verilog_library():
    """The Verilog of every black box (appended to a behavioural build's exported text)."""
    head = (
        "// The delay lines of the behavioural FP32 cores (gpurtl.sim.backends.fast.behavioural)\n"
        'import "DPI-C" function int unsigned gpurtl_fp32_line(input int unsigned depth);\n'
    )
    return head + "\n".join(_module(core_class) for core_class in _UNITS)


def ops_header():
    """``fp32_ops.h`` (package data beside this module): the operations one value at a time,
    which the sliced backend's behavioural cores share."""
    return (_HERE / "fp32_ops.h").read_text()


def cxx_files(top):
    """The C++ of the DPI-C functions for the verilated module ``V<top>``, ``{file name:
    text}``: ``fp32_dpi.cpp`` (``fp32_cores.cpp``, package data beside this module), the
    operations it includes (``fp32_ops.h``) and its one generated part, ``fp32_config.h``
    (:func:`config_header`)."""
    return {
        "fp32_dpi.cpp": (_HERE / "fp32_cores.cpp").read_text(),
        "fp32_ops.h": ops_header(),
        "fp32_config.h": config_header(top),
    }


def cxx_source(top):
    """The C++ that :func:`cxx_files` compile to, as one text (the headers in place of their
    includes): what a build's cache key hashes."""
    files = cxx_files(top)
    return (
        files["fp32_dpi.cpp"]
        .replace(_CONFIG_INCLUDE, files["fp32_config.h"])
        .replace(_OPS_INCLUDE, files["fp32_ops.h"])
    )


def config_header(top):
    """``fp32_config.h`` of ``fp32_cores.cpp`` for the verilated module ``V<top>``."""
    return f'#include "V{top}__Dpi.h"'
