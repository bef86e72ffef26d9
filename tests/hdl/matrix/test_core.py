"""The matrix core against the golden model: lockstep with random stalls, the dot-product step
alone, schedule figures, parameter errors and the exported ports.

Default run: the small integer build in lockstep and the floating-point step (the datapath every
float build replicates) against the golden model per format and algorithm. ``-m slow``: whole
float cores of several families and presets in lockstep, and Verilator.
"""

import numpy as np
import pytest
from amaranth.hdl import Const, Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from amaranth.sim import Simulator

from gpurtl.facts.matrix import FAMILIES, FORMATS, PRESETS
from gpurtl.golden.matrix.arith import dot
from gpurtl.golden.matrix.samples import random_elements, targeted
from gpurtl.hdl.matrix.core import MatrixCore, dots_for
from gpurtl.hdl.matrix.dot import FLOAT_WEIGHTS, float_step
from gpurtl.hdl.pipe import Stager, place_registers
from gpurtl.sim.backends import BACKENDS
from gpurtl.sim.core import registry
from gpurtl.sim.harness import golden_io
from gpurtl.sim.harness.engine import StallPattern


def _check(count, seed=1, **params):
    block = registry.get("matrix_core")
    resolved = block.resolve({k: str(v) for k, v in params.items()})
    report = BACKENDS["pysim"].check(block, resolved, count=count, seed=seed)
    assert report.failed == 0, f"{report.line()}; first: {report.first}"
    assert report.passed == count
    return report


class _Step(wiring.Component):
    """The combinational step with all its operands on one port ``x`` (A elements, then B
    elements, then C, from bit 0 up), so that a testbench sets a case in one write."""

    def __init__(self, alg, fa, fb, fc):
        self._alg, self._f = alg, (fa, fb, fc)
        self.width = alg.group * (fa.bits + fb.bits) + fc.bits
        super().__init__({"x": In(self.width), "z": Out(fc.bits)})

    def pack(self, a, b, c):
        """The value of ``x`` of one case (element patterns)."""
        fa, fb, _ = self._f
        value, shift = 0, 0
        for x, bits in [*((x, fa.bits) for x in a), *((x, fb.bits) for x in b), (c, 0)]:
            value |= int(x) << shift
            shift += bits
        return value

    def elaborate(self, platform):
        m = Module()
        st = Stager(m, Const(1), FLOAT_WEIGHTS, 0)
        fa, fb, fc = self._f
        L = self._alg.group
        a = [self.x[j * fa.bits : (j + 1) * fa.bits] for j in range(L)]
        base = L * fa.bits
        b = [self.x[base + j * fb.bits : base + (j + 1) * fb.bits] for j in range(L)]
        c = self.x[base + L * fb.bits :]
        z = float_step(st, self._alg, a, b, c, [fa], [fb], Const(0), Const(0), fc.name)
        m.d.comb += self.z.eq(z)
        return m


# The step's simulation cost grows with its width (about 1.5 s at 4 products, 2.5-4 s at 8, 6-10 s
# at 16), so the default run checks every format, accumulator, preset and structure at 4 products;
# ``-m slow`` runs the presets' own widths.
_SLOW = pytest.mark.slow


@pytest.mark.parametrize(
    "preset,fa,fb,fc,group",
    [
        ("rdna4", "f16", "f16", "f32", 4),
        ("cdna3", "bf16", "bf16", "f32", 4),
        ("rdna4", "bf16", "bf16", "bf16", 4),
        ("rdna4", "f16", "f16", "f16", 4),
        ("rdna4", "bf8", "fp8", "f32", 4),
        ("rz_narrow", "f16", "f16", "f32", 4),
        ("cdna3", "fp8", "bf8", "f32", 4),  # "gtr": even/odd sub-sums, C dropped
        pytest.param("rdna4", "f16", "f16", "f32", 16, marks=_SLOW),
        pytest.param("cdna3", "bf16", "bf16", "f32", 8, marks=_SLOW),
        pytest.param("rdna4", "bf8", "fp8", "f32", 16, marks=_SLOW),
        pytest.param("cdna3", "fp8", "fp8", "f32", 16, marks=_SLOW),
        pytest.param("cdna3", "bf8", "fp8", "f32", 16, marks=_SLOW),
        pytest.param("cdna3", "fp8", "bf8", "f32", 8, marks=_SLOW),
    ],
)
def test_float_step_equals_golden(preset, fa, fb, fc, group):
    """One combinational step against :func:`gpurtl.golden.matrix.arith.dot` on the targeted
    cases and random elements (specials included), both structures (``cdna3``'s FP8 is
    ``"gtr"``, in CDNA 3's FNUZ encodings)."""
    alg = PRESETS[preset].algorithm(fa).with_(group=group)
    FA, FB, FC = alg.element_format(fa), alg.element_format(fb), FORMATS[fc]
    dut = _Step(alg, FA, FB, FC)
    rng = np.random.default_rng(0)
    names, ta, tb, tc = targeted(fa, fb, fc, group, fp8=alg.fp8)
    a = np.concatenate([ta, random_elements(rng, FA, (80, group), special=0.02)])
    b = np.concatenate([tb, random_elements(rng, FB, (80, group), special=0.02)])
    c = np.concatenate([tc, random_elements(rng, FC, 80, special=0.02)])
    want = dot(alg, a, b, c, fa, fb, fc)
    got = []

    async def bench(ctx):
        for i in range(len(c)):
            ctx.set(dut.x, dut.pack(a[i], b[i], c[i]))
            got.append(ctx.get(dut.z))

    sim = Simulator(dut)
    sim.add_testbench(bench)
    sim.run()
    bad = np.nonzero(np.array(got) != want)[0]
    assert bad.size == 0, [
        (names[i] if i < len(names) else i, hex(want[i]), hex(got[i])) for i in bad[:5]
    ]


def test_schedule_figures():
    """Cycles per instruction follow the unit count: RDNA 4 FP16 in 16 cycles (256 products per
    cycle), RDNA 3 in 32, IU8 at RDNA 4 in 8, the FPGA build in 256."""
    assert MatrixCore("f16_f32", dots=dots_for("f16_f32", "rdna4")).ii == 16
    assert MatrixCore("f16_f32", dots=dots_for("f16_f32", "rdna3")).ii == 32
    assert MatrixCore("iu8_i32", dots=dots_for("iu8_i32", "rdna4")).ii == 8
    core = MatrixCore("f16_f32", dots=1)
    assert core.ii == 256 and core.latency == 256 + 2 + 2
    assert MatrixCore("f16_f32", "cdna3", dots=32).ii == 16  # 2 steps of 8, 8 slots each
    assert MatrixCore("f16_f32", dots=128, stages=5).ii == 7  # a sweep no shorter than the unit
    assert place_registers(FLOAT_WEIGHTS, 2) == {4, 2}


@pytest.mark.filterwarnings("ignore:.*created but never used")
def test_every_family_builds_under_every_preset():
    """Parameters only (no elaboration): every family and preset is a valid build; the IU4
    units span the widest stored K (32), so the 16-deep IU4 op runs in the same one step."""
    for family in FAMILIES:
        for name in PRESETS:
            assert MatrixCore(family, name, dots=dots_for(family, "rdna4", name)).ii >= 1
    assert MatrixCore("iu4_i32", dots=dots_for("iu4_i32", "rdna4")).products_per_cycle == 1024


@pytest.mark.filterwarnings("ignore:.*created but never used")
def test_parameters_are_checked():
    with pytest.raises(ValueError, match="`dots` must divide 256"):
        MatrixCore("f16_f32", dots=3)
    with pytest.raises(ValueError, match="`stages` must be"):
        MatrixCore("iu8_i32", stages=4)
    with pytest.raises(ValueError, match="family must be one of"):
        MatrixCore("f64_f64")
    block = registry.get("matrix_core")
    with pytest.raises(registry.RegistryError, match="`dots` must divide 256"):
        block.resolve({"family": "iu8_i32", "dots": "3"})


def test_small_build_lockstep_can_fail():
    """The registry's small build (IU8, 16 dot units; its lockstep with stalls at exact latency
    is the registry smoke test's) under random stalls: one flipped bit in one expected output
    element is the only failure, reported with its field."""
    block = registry.get("matrix_core")
    params = block.small_params()
    rng = np.random.default_rng(2)
    txs = block.stimulus(rng, 6, **params)
    expected = golden_io.golden_outputs(block, params, txs)
    expected[4]["d"][3][5] ^= 1
    stalls = StallPattern(seed=2, p_valid=0.7, p_ready=0.7, free_run=1)
    report = BACKENDS["pysim"].run(block, params, txs, expected=expected, stalls=stalls)
    assert report.passed == 5 and report.failed == 1, report.line()
    assert report.first.where.startswith("transaction 4 ") and "d[3][5]" in report.first.field


@pytest.mark.slow
@pytest.mark.parametrize(
    "params",
    [
        {"family": "f16_f32"},
        {"family": "f16_f32", "preset": "cdna3", "rate": "fpga"},
        {"family": "bf16_bf16", "rate": "fpga"},
        {"family": "f16_f16", "rate": "fpga"},
        {"family": "fp8_f32", "rate": "fpga"},
        {"family": "fp8_f32", "preset": "cdna3", "rate": "fpga"},  # "gtr"
        {"family": "iu4_i32", "rate": "fpga"},
        {"family": "bf16_f32", "preset": "rdna3_dot2", "dots": 16},
    ],
    ids=lambda p: "-".join(f"{v}" for v in p.values()),
)
def test_float_cores_lockstep(params):
    _check(6, **params)


@pytest.mark.slow
@pytest.mark.verilator
def test_small_build_verilator():
    block = registry.get("matrix_core")
    params = block.small_params()
    report = BACKENDS["verilator"].check(block, params, count=20, seed=3)
    assert report.failed == 0, str(report.first)
    assert report.passed == 20


@pytest.mark.slow
def test_export_ports_and_no_assert():
    from gpurtl.sim.core.export import to_verilog

    block = registry.get("matrix_core")
    text = to_verilog(block, block.small_params())
    header = text[text.index("module matrix_core(") : text.index(");")]
    ports = {p.strip().split()[-1] for p in header[len("module matrix_core(") :].split(",")}
    assert all(p in ("clk", "rst") or p.startswith(("i__", "o__")) for p in ports), ports
    assert "assert" not in text
