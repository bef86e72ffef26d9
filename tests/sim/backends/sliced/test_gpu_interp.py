"""The gpu backend's interpreted kernel (``sliced_interp.cu``: the graph as data, behavioural
FP32 cores computed on values): its host build against the golden model under stalls, record
for record equal to the straight-line kernel on the same stalls, a corrupted gate and a wrong
core caught, the cores' operations in their NVRTC form equal to their C++ form, and the backend
around it; on a CUDA device (skipped with the reason elsewhere) ``gpu-behavioural`` itself."""

import subprocess

import numpy as np
import pytest

from gpurtl.sim.backends import BACKENDS
from gpurtl.sim.backends.fast.behavioural import ops_header
from gpurtl.sim.backends.fast.run import write_stimulus
from gpurtl.sim.backends.sliced import build, gpu, netlist
from gpurtl.sim.core import registry
from gpurtl.sim.core.words import words_of

from ...toy import toy_block
from .device import OnHost, compile_host, needs_cuda

compiled = pytest.mark.verilator


def _graph(block, params, fp_cores):
    text, stubs = build.export(block, params, fp_cores)
    graph, _ = netlist.aig(text, block.name, stubs=stubs)
    return graph


def _host(tmp_path, block, params, graph, count, *, seed=3, p=0.7, straight=False):
    """Records of the interpreted kernel's host build (or the straight-line one's) on
    ``count`` transactions of the block's stimulus, and the golden rows."""
    latency, ii, in_width, out_width = build._facts(block, params)
    write_stimulus(block, params, seed, count, tmp_path / "in.bin", tmp_path / "expected.bin")
    lanes = gpu.lanes_for(count)
    stalls = [str(seed), str(gpu.threshold_of(p)), str(gpu.threshold_of(p)), str(count // 10)]
    files = [str(tmp_path / "in.bin"), str(tmp_path / "out.bin")]
    if straight:
        executable = compile_host(
            tmp_path / "straight", gpu.host_source(graph, in_width, out_width)
        )
        command = [str(executable), *files, str(count), str(count), str(lanes), *stalls, "10000"]
    else:
        program = gpu.interp_program(graph, in_width, out_width)
        program.words.tofile(tmp_path / "prog.bin")
        executable = compile_host(tmp_path / "interp", gpu.host_interp_source(in_width, out_width))
        command = [str(executable), str(tmp_path / "prog.bin"), *files, str(count), str(count)]
        command += [str(lanes), *stalls, "10000", str(program.nodes), str(program.line_words)]
        command += [str(program.held)]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    assert '"flags": 0' in done.stdout, done.stdout
    out_words = words_of(out_width)
    records = np.fromfile(tmp_path / "out.bin", dtype="<u4").reshape(count, out_words + 4)
    expected = np.fromfile(tmp_path / "expected.bin", dtype="<u4").reshape(count, out_words)
    return records, expected, lanes, latency, ii


def _mismatches(records, expected):
    return int(np.count_nonzero(np.any(records[:, : expected.shape[1]] != expected, axis=1)))


@compiled
@pytest.mark.parametrize("p", [1.0, 0.3])
def test_the_interpreted_kernel_on_the_host_runs_a_netlist_like_the_straight_line_one(tmp_path, p):
    block = toy_block()
    params = block.resolve({"stages": "3"})
    graph = _graph(block, params, "rtl")
    records, expected, lanes, latency, ii = _host(tmp_path, block, params, graph, 3000, p=p)
    assert _mismatches(records, expected) == 0
    summary = gpu.timing_summary(records, expected.shape[1], lanes, 300, latency, ii)
    assert summary["latency_errors"] == summary["ii_errors"] == 0
    # the same stalls on the straight-line kernel: every record (payload and cycles) equal
    straight, *_ = _host(tmp_path, block, params, graph, 3000, p=p, straight=True)
    assert np.array_equal(records, straight)


@compiled
@pytest.mark.parametrize(
    "unit, params",
    [
        ("fp32_add", {}),
        ("fp32_add", {"ftz": "1"}),
        ("fp32_mul", {}),
        ("fp32_fma", {}),
        ("fp32_fma", {"ftz": "1"}),
        ("fp32_div", {}),
        ("fp32_rcp", {}),
        ("fp32_cmp", {}),
        ("fp32_minmax", {}),
        ("fp32_f2i", {}),
        ("fp32_i2f", {}),
    ],
)
def test_every_behavioural_core_on_the_host_matches_the_golden_model(tmp_path, unit, params):
    block = registry.get(unit)
    params = block.resolve(params)
    graph = _graph(block, params, "behavioural")
    assert len(graph.cores) == 1
    records, expected, lanes, latency, ii = _host(tmp_path, block, params, graph, 4000)
    assert _mismatches(records, expected) == 0
    summary = gpu.timing_summary(records, expected.shape[1], lanes, 400, latency, ii)
    assert summary["latency_errors"] == summary["ii_errors"] == 0


@compiled
def test_a_corrupted_gate_and_a_wrong_core_are_caught(tmp_path):
    block = toy_block()
    params = block.resolve({"stages": "3"})
    graph = _graph(block, params, "rtl")
    ands = list(graph.ands)
    ands[len(ands) // 2] = (ands[len(ands) // 2][0] ^ 1, ands[len(ands) // 2][1])
    records, expected, *_ = _host(tmp_path, block, params, graph.replace(ands=ands), 2000)
    assert _mismatches(records, expected) > 0

    block = registry.get("fp32_add")
    params = block.resolve()
    graph = _graph(block, params, "behavioural")
    core = graph.cores[0]
    # a multiplier reading add's first two operands, and an adder one stage too deep
    mul = netlist.Core(
        "mul", core.stages, core.ftz, core.en, core.operands[:2], core.widths, core.first
    )
    records, expected, *_ = _host(tmp_path, block, params, graph.replace(cores=[mul]), 2000)
    assert _mismatches(records, expected) > 1000
    deep = netlist.Core(
        "add", core.stages + 1, core.ftz, core.en, core.operands, core.widths, core.first
    )
    records, expected, lanes, latency, ii = _host(
        tmp_path, block, params, graph.replace(cores=[deep]), 2000
    )
    summary = gpu.timing_summary(records, expected.shape[1], lanes, 200, latency, ii)
    assert _mismatches(records, expected) > 0 or summary["latency_errors"] == 200


# The NVRTC branch of fp32_ops.h on the host: its CUDA intrinsics by their meaning.
_CUDA_SHIMS = r"""
#include <cstring>
#define __CUDACC_RTC__ 1
#define __device__
static inline float __uint_as_float(unsigned x) { float f; std::memcpy(&f, &x, 4); return f; }
static inline unsigned __float_as_uint(float f) { unsigned x; std::memcpy(&x, &f, 4); return x; }
static inline long long __double_as_longlong(double d) { long long x; std::memcpy(&x, &d, 8); return x; }
static inline double __longlong_as_double(long long x) { double d; std::memcpy(&d, &x, 8); return d; }
"""

_OPS_MAIN = r"""
#include <cstdio>
// OPS: rows of a b c; prints every operation's result words in hex.
int main(int argc, char** argv) {
    FILE* in = fopen(argv[1], "rb");
    unsigned x[3];
    while (fread(x, 4, 3, in) == 3) {
        for (int ftz = 0; ftz < 2; ftz++) {
            unsigned long long r[9] = {
                fp32ops::add(x[0], x[1], x[2], ftz), fp32ops::mul(x[0], x[1], ftz),
                fp32ops::fused(x[0], x[1], x[2], ftz), fp32ops::divide(x[0], x[1], ftz),
                fp32ops::divide(0x3F800000u, x[0], ftz), fp32ops::cmp(x[0], x[1], ftz),
                fp32ops::minmax(x[0], x[1], ftz), fp32ops::f2i(x[0], x[2], ftz),
                fp32ops::i2f(x[0], x[2], ftz)};
            for (int k = 0; k < 9; k++) printf("%llx ", r[k]);
        }
        printf("\n");
    }
    return 0;
}
"""


@compiled
def test_the_nvrtc_form_of_the_operations_equals_the_cpu_form(tmp_path):
    """Special values, subnormals, near-ties and random patterns: every operation of
    ``fp32_ops.h`` gives the same words with its NVRTC definitions as with the C++ library."""
    rng = np.random.default_rng(11)
    special = np.array(
        [
            0,
            0x80000000,
            1,
            0x807FFFFF,
            0x00800000,
            0x7F7FFFFF,
            0x7F800000,
            0xFF800000,
            0x7FC00000,
            0x7F800001,
            0x3F800000,
            0xBF800000,
            0x4B000000,
            0xCF000000,
            0x4F800000,
        ],
        dtype=np.uint32,
    )
    grid = np.stack(np.meshgrid(special, special, special), axis=-1).reshape(-1, 3)
    random = rng.integers(0, 1 << 32, size=(20000, 3), dtype=np.uint64).astype(np.uint32)
    # fused multiply-adds whose product nearly cancels the addend: the rounding-to-odd step
    a = rng.integers(0x3F000000, 0x40000000, size=5000, dtype=np.uint64).astype(np.uint32)
    b = rng.integers(0x3F000000, 0x40000000, size=5000, dtype=np.uint64).astype(np.uint32)
    product = (a.view(np.float32).astype(np.float64) * b.view(np.float32)).astype(np.float32)
    c = (product.view(np.uint32) ^ 0x80000000) + rng.integers(-3, 4, size=5000).astype(np.uint32)
    # a product at a tie of binary32 rounding (an odd significand times 1.5) plus an addend far
    # below it: only the rounding to odd, stepping towards the addend, rounds it the right way
    odd = rng.integers(0x3F800000, 0x40000000, size=5000, dtype=np.uint64).astype(np.uint32) | 1
    tiny = rng.integers(0x00800000, 0x0C000000, size=5000, dtype=np.uint64).astype(np.uint32)
    tiny |= rng.integers(0, 2, size=5000).astype(np.uint32) << 31
    ties = np.stack([odd, np.full(5000, 0x3FC00000, dtype=np.uint32), tiny], axis=1)
    rows = np.concatenate([grid, random, np.stack([a, b, c], axis=1), ties]).astype("<u4")
    rows.tofile(tmp_path / "ops.bin")
    outputs = []
    for name, prefix in (("cpu", ""), ("nvrtc", _CUDA_SHIMS)):
        executable = compile_host(tmp_path / name, prefix + ops_header() + _OPS_MAIN)
        done = subprocess.run(
            [str(executable), str(tmp_path / "ops.bin")], capture_output=True, text=True, check=True
        )
        outputs.append(done.stdout.splitlines())
    assert len(outputs[0]) == len(rows)
    differ = [k for k, (x, y) in enumerate(zip(*outputs)) if x != y]
    assert not differ, (rows[differ[0]], outputs[0][differ[0]], outputs[1][differ[0]])


@compiled
def test_the_backend_around_the_interpreted_kernel(tmp_path, monkeypatch):
    """``gpu-behavioural`` (stimulus, lanes, records, comparison, timing errors) with the
    kernel's host build in place of the device; a graph with cores, or above
    :data:`~gpurtl.sim.backends.sliced.gpu.STRAIGHT_LINE_GATES` gates, is interpreted."""
    host = OnHost(tmp_path)
    monkeypatch.setattr(gpu, "gpu_run", host.gpu_run)
    monkeypatch.setattr(gpu, "cuda", lambda: None)
    block = registry.get("fp32_fma")
    report = BACKENDS["gpu-behavioural"].check(block, block.resolve(), count=3000, seed=2)
    assert (report.passed, report.failed, report.free_run) == (3000, 0, 300), report.first
    assert report.gates["cores"] == 1
    monkeypatch.setattr(gpu, "STRAIGHT_LINE_GATES", 10)
    late = toy_block(claimed_latency=4)
    report = BACKENDS["gpu"].check(late, late.resolve({"stages": "3"}), count=3000, seed=2)
    assert report.latency_errors == 300 and report.first.field == "(latency)"


@needs_cuda
@pytest.mark.parametrize("unit", ["fp32_add", "fp32_fma", "fp32_div", "fp32_f2i", "fp32_minmax"])
def test_the_device_runs_the_behavioural_cores_like_the_golden_model(unit):
    block = registry.get(unit)
    report = BACKENDS["gpu-behavioural"].check(block, block.resolve(), count=200_000, seed=5)
    assert (report.passed, report.failed) == (200_000, 0), report.first
    assert report.latency_errors == report.ii_errors == 0


@needs_cuda
def test_the_device_interprets_a_netlist(monkeypatch):
    monkeypatch.setattr(gpu, "STRAIGHT_LINE_GATES", 10)
    block = registry.get("fp32_add")
    report = BACKENDS["gpu"].check(block, block.resolve(), count=200_000, seed=6)
    assert (report.passed, report.failed) == (200_000, 0), report.first
