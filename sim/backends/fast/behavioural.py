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
(:func:`cxx_source`) computes what :mod:`gpurtl.golden.fp32` defines, the same way it does:

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

__all__ = ["FP_CORES", "PLATFORM", "CXX_FLAGS", "verilog_library", "cxx_source"]

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


def cxx_source(top):
    """The C++ of the DPI-C functions, for the verilated module ``V<top>``."""
    return f"""// Behavioural FP32 cores: generated by gpurtl.sim.backends.fast.behavioural.
// Each function returns the results of one operation, packed from bit 0 in port order.
#include "V{top}__Dpi.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

namespace {{
const uint32_t SIGN = 0x80000000u, MAG = 0x7FFFFFFFu, INF = 0x7F800000u, QNAN = 0x7FC00000u;

inline float f32(uint32_t x) {{ float f; std::memcpy(&f, &x, 4); return f; }}
inline uint32_t bits(float f) {{ uint32_t x; std::memcpy(&x, &f, 4); return x; }}
inline double f64(uint32_t x) {{ return (double)f32(x); }}
inline bool is_nan(uint32_t x) {{ return (x & MAG) > INF; }}
// A subnormal pattern becomes the zero of its sign.
inline uint32_t flush(uint32_t x) {{ return (x & INF) == 0 ? x & SIGN : x; }}
// The ftz output flush, then the canonical NaN.
inline uint32_t finish(uint32_t z, int ftz) {{
    if (ftz) z = flush(z);
    return is_nan(z) ? QNAN : z;
}}
// Integer key ordering non-NaN patterns numerically, -0 == +0 (compares).
inline int64_t key(uint32_t x) {{
    int64_t mag = x & MAG;
    return (x & SIGN) ? -mag : mag;
}}
// Total-order key with -0 below +0 (min/max).
inline int64_t order(uint32_t x) {{
    int64_t mag = x & MAG;
    return (x & SIGN) ? -mag - 1 : mag;
}}
uint32_t divide(uint32_t a, uint32_t b, int ftz) {{
    if (ftz) {{ a = flush(a); b = flush(b); }}
    return finish(bits((float)(f64(a) / f64(b))), ftz);
}}

inline uint64_t add(uint32_t a, uint32_t b, uint32_t sub, int ftz) {{
    if (sub & 1) b ^= SIGN;
    if (ftz) {{ a = flush(a); b = flush(b); }}
    return finish(bits((float)(f64(a) + f64(b))), ftz);
}}

inline uint64_t mul(uint32_t a, uint32_t b, int ftz) {{
    if (ftz) {{ a = flush(a); b = flush(b); }}
    return finish(bits((float)(f64(a) * f64(b))), ftz);
}}

inline uint64_t fused(uint32_t a, uint32_t b, uint32_t c, int ftz) {{
    if (ftz) {{ a = flush(a); b = flush(b); c = flush(c); }}
    double p = f64(a) * f64(b);  // exact
    double cd = f64(c);
    double s = p + cd;
    double bv = s - p;
    double err = (p - (s - bv)) + (cd - bv);  // TwoSum: p + c == s + err
    uint64_t sbits;
    std::memcpy(&sbits, &s, 8);
    if (err != 0 && (sbits & 1) == 0 && std::isfinite(s))  // round to odd
        s = std::nextafter(s, err > 0 ? INFINITY : -INFINITY);
    return finish(bits((float)s), ftz);
}}

inline uint64_t cmp(uint32_t a, uint32_t b, int ftz) {{
    if (ftz) {{ a = flush(a); b = flush(b); }}
    bool un = is_nan(a) || is_nan(b);
    int64_t ka = key(a), kb = key(b);
    uint64_t lt = !un && ka < kb, le = !un && ka <= kb, eq = !un && ka == kb;
    return (unsigned long long)(lt | (le << 1) | (eq << 2) | ((uint64_t)un << 3));
}}

inline uint64_t minmax(uint32_t a, uint32_t b, int ftz) {{
    if (ftz) {{ a = flush(a); b = flush(b); }}
    uint32_t lo = order(b) < order(a) ? b : a, hi = order(b) > order(a) ? b : a;
    if (is_nan(a) || is_nan(b)) lo = hi = QNAN;
    return (unsigned long long)((uint64_t)lo | ((uint64_t)hi << 32));
}}

inline uint64_t f2i(uint32_t a, uint32_t is_signed, int ftz) {{
    if (ftz) a = flush(a);
    bool sign = a >> 31;
    int64_t field = (a >> 23) & 0xFF;
    uint64_t sig = (a & 0x7FFFFF) | (field ? 0x800000u : 0);
    int64_t exp = (field > 1 ? field : 1) - 150;  // |a| = sig * 2**exp
    int64_t left = exp < 0 ? 0 : exp > 16 ? 16 : exp, right = -exp < 0 ? 0 : -exp > 63 ? 63 : -exp;
    int64_t mag = (int64_t)(exp >= 0 ? sig << left : sig >> right);
    int64_t value = sign ? -mag : mag;
    int64_t lo = (is_signed & 1) ? INT32_MIN : 0, hi = (is_signed & 1) ? INT32_MAX : UINT32_MAX;
    bool nan = is_nan(a), invalid = nan || value < lo || value > hi;
    int64_t z = nan ? 0 : value < lo ? lo : value > hi ? hi : value;
    return (unsigned long long)(((uint64_t)z & 0xFFFFFFFFu) | ((uint64_t)invalid << 32));
}}

inline uint64_t i2f(uint32_t a, uint32_t is_signed, int ftz) {{
    float z = (is_signed & 1) ? (float)(int32_t)a : (float)a;  // one rounding, to nearest even
    return finish(bits(z), ftz);
}}

// The delay lines: line k holds the last `depth` results of one core, oldest at `at`.
struct Line {{
    uint32_t base, depth, at;
}};
std::vector<Line> lines;
std::vector<uint64_t> ring;

// Push `value` into line `k`; returns the value that leaves it (the value itself when the line
// is empty).
inline uint64_t pass(uint32_t k, uint64_t value) {{
    Line& l = lines[k];
    if (l.depth == 0) return value;
    uint64_t& slot = ring[l.base + l.at];
    uint64_t out = slot;
    slot = value;
    if (++l.at == l.depth) l.at = 0;
    return out;
}}

}}  // namespace

unsigned int gpurtl_fp32_line(unsigned int depth) {{
    lines.push_back(Line{{(uint32_t)ring.size(), depth, 0}});
    ring.resize(ring.size() + depth, 0);
    return (unsigned int)(lines.size() - 1);
}}

unsigned long long gpurtl_fp32_add_dpi(unsigned int k, uint32_t a, uint32_t b, uint32_t sub, int ftz) {{
    return pass(k, add(a, b, sub, ftz));
}}
unsigned long long gpurtl_fp32_mul_dpi(unsigned int k, uint32_t a, uint32_t b, int ftz) {{
    return pass(k, mul(a, b, ftz));
}}
unsigned long long gpurtl_fp32_fma_dpi(unsigned int k, uint32_t a, uint32_t b, uint32_t c, int ftz) {{
    return pass(k, fused(a, b, c, ftz));
}}
unsigned long long gpurtl_fp32_div_dpi(unsigned int k, uint32_t a, uint32_t b, int ftz) {{
    return pass(k, divide(a, b, ftz));
}}
unsigned long long gpurtl_fp32_rcp_dpi(unsigned int k, uint32_t a, int ftz) {{
    return pass(k, divide(0x3F800000u, a, ftz));
}}
unsigned long long gpurtl_fp32_cmp_dpi(unsigned int k, uint32_t a, uint32_t b, int ftz) {{
    return pass(k, cmp(a, b, ftz));
}}
unsigned long long gpurtl_fp32_minmax_dpi(unsigned int k, uint32_t a, uint32_t b, int ftz) {{
    return pass(k, minmax(a, b, ftz));
}}
unsigned long long gpurtl_fp32_f2i_dpi(unsigned int k, uint32_t a, uint32_t is_signed, int ftz) {{
    return pass(k, f2i(a, is_signed, ftz));
}}
unsigned long long gpurtl_fp32_i2f_dpi(unsigned int k, uint32_t a, uint32_t is_signed, int ftz) {{
    return pass(k, i2f(a, is_signed, ftz));
}}
"""
