"""The binary32 facts: :class:`Float32` as a struct (fields where the format puts them, the
predicates on the IEEE special values, computed in simulation), the named bit patterns against
Python's own binary32 conversion, and Float32 fields staying one number for the simulation
layer."""

import math
import struct

from amaranth.hdl import Module, Signal
from amaranth.lib import data
from amaranth.sim import Simulator

from gpurtl.facts import fp32
from gpurtl.facts.fp32 import Float32, f32_bits
from gpurtl.sim.core import layouts


def test_fields_are_where_the_format_puts_them():
    layout = data.Layout.cast(Float32)
    assert layout.size == 32
    assert (layout["fraction"].offset, layout["fraction"].width) == (0, 23)
    assert (layout["exponent"].offset, layout["exponent"].width) == (23, 8)
    assert (layout["sign"].offset, layout["sign"].width) == (31, 1)
    const = Float32.const({"sign": 1, "exponent": 128, "fraction": 1 << 22})
    assert const.as_value().value == f32_bits(-3.0)
    # constants also from a bit pattern or a Python float
    assert Float32.const(fp32.POS_INF).as_value().value == f32_bits(math.inf)
    assert Float32.const(-3.0).as_value().value == f32_bits(-3.0)


def test_named_patterns_are_the_python_values():
    assert fp32.POS_INF == f32_bits(math.inf)
    assert fp32.NEG_INF == f32_bits(-math.inf)
    assert fp32.ONE == f32_bits(1.0)
    assert fp32.NEG_ZERO == f32_bits(-0.0) == fp32.SIGN_BIT
    assert fp32.POS_ZERO == f32_bits(0.0)
    assert fp32.MIN_NORMAL == f32_bits(2.0**-126)
    assert fp32.MAGNITUDE_MASK == 0xFFFFFFFF ^ fp32.SIGN_BIT
    assert fp32.EXPONENT_BIAS == (f32_bits(1.0) >> fp32.FRACTION_BITS)
    nan = fp32.CANONICAL_NAN
    assert math.isnan(struct.unpack("<f", struct.pack("<I", nan))[0])
    assert nan >> (fp32.FRACTION_BITS - 1) & 1  # quiet
    assert nan >> fp32.FRACTION_BITS & 0xFF == fp32.EXPONENT_MAX


def test_predicates_in_simulation():
    cases = [
        (0.0, (0, 0, 1)),
        (-0.0, (0, 0, 1)),
        (1.5, (0, 0, 0)),
        (-(2.0**-140), (0, 0, 0)),  # subnormal
        (math.inf, (0, 1, 0)),
        (-math.inf, (0, 1, 0)),
    ]
    patterns = {f32_bits(v): want for v, want in cases}
    patterns[fp32.CANONICAL_NAN] = (1, 0, 0)
    patterns[0xFF800001] = (1, 0, 0)  # signalling, negative
    m = Module()
    x = Signal(Float32)
    nan, inf, zero, mag = Signal(), Signal(), Signal(), Signal(31)
    m.d.comb += [nan.eq(x.is_nan()), inf.eq(x.is_inf()), zero.eq(x.is_zero())]
    m.d.comb += mag.eq(x.magnitude())
    sim = Simulator(m)
    seen = {}

    async def bench(ctx):
        for bits in patterns:
            ctx.set(x.as_value(), bits)
            seen[bits] = (ctx.get(nan), ctx.get(inf), ctx.get(zero), ctx.get(mag), ctx.get(x.sign))

    sim.add_testbench(bench)
    sim.run()
    for bits, want in patterns.items():
        assert seen[bits][:3] == want, hex(bits)
        assert seen[bits][3] == bits & fp32.MAGNITUDE_MASK
        assert seen[bits][4] == bits >> 31


def test_a_float32_field_is_one_number_to_the_simulation_layer():
    layout = data.StructLayout({"t": Float32, "v": data.ArrayLayout(Float32, 2), "n": 3})
    assert [(leaf.path, leaf.kind) for leaf in layouts.leaves(layout)] == [
        ("t", "f32"),
        ("v[0]", "f32"),
        ("v[1]", "f32"),
        ("n", "unsigned"),
    ]
    assert layouts.describe(layout) == "{t:f32 v:f32[2] n:u3}"
    bits = layouts.pack(layout, {"t": 1.0, "v": [-0.0, 0x7F800000], "n": 5})
    assert layouts.unpack(layout, bits) == {
        "t": fp32.ONE,
        "v": [fp32.NEG_ZERO, fp32.POS_INF],
        "n": 5,
    }
