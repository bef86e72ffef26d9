"""The gpu backend's kernel: its logic compiled for the host (``SLICED_HOST``, every thread in
turn) against the golden model under random per-lane stalls, with a corrupted netlist and wrong
timing declarations caught; on a CUDA device (skipped with the reason elsewhere) the backend
itself; and the one-line refusal where there is none."""

import subprocess

import numpy as np
import pytest

from gpurtl.sim.backends import BACKENDS
from gpurtl.sim.backends.fast.run import write_stimulus
from gpurtl.sim.backends.sliced import build, gpu, netlist
from gpurtl.sim.core import layouts, registry
from gpurtl.sim.core.export import to_verilog
from gpurtl.sim.core.words import words_of
from gpurtl.sim.harness.golden_io import golden_outputs
from gpurtl.sim.tools import cli

from ...toy import toy_block
from .device import NO_CUDA, OnHost, compile_host, needs_cuda


def _host_run(tmp_path, block, params, count, *, seed=3, p=0.7, corrupt=None, rows=None):
    """The kernel on the host: ``(records, expected rows, lanes, latency, ii)``."""
    graph, _ = netlist.aig(to_verilog(block, params), block.name)
    if corrupt:
        graph = corrupt(graph)
    latency, ii, in_width, out_width = build._facts(block, params)
    compile_host(tmp_path / "kernel", gpu.host_source(graph, in_width, out_width))
    rows = rows or count
    write_stimulus(block, params, seed, rows, tmp_path / "in.bin", tmp_path / "expected.bin")
    lanes = gpu.lanes_for(count)
    command = [
        str(tmp_path / "kernel"),
        str(tmp_path / "in.bin"),
        str(tmp_path / "out.bin"),
        str(count),
        str(rows),
        str(lanes),
        str(seed),
        str(gpu.threshold_of(p)),
        str(gpu.threshold_of(p)),
        str(count // 10),
        "10000",
    ]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    assert '"flags": 0' in done.stdout, done.stdout
    out_words = words_of(out_width)
    records = np.fromfile(tmp_path / "out.bin", dtype="<u4").reshape(count, out_words + 4)
    expected = np.fromfile(tmp_path / "expected.bin", dtype="<u4").reshape(rows, out_words)
    return records, expected, lanes, latency, ii


def _mismatches(records, expected):
    out_words = expected.shape[1]
    want = expected[np.arange(len(records)) % len(expected)]
    return int(np.count_nonzero(np.any(records[:, :out_words] != want, axis=1)))


@pytest.mark.verilator
@pytest.mark.parametrize("p", [1.0, 0.7, 0.3])
def test_the_kernel_on_the_host_matches_the_golden_model(tmp_path, p):
    block = toy_block()
    params = block.resolve({"stages": "3"})
    records, expected, lanes, latency, ii = _host_run(tmp_path, block, params, 3000, p=p)
    assert _mismatches(records, expected) == 0
    summary = gpu.timing_summary(records, expected.shape[1], lanes, 300, latency, ii)
    assert summary["latency_errors"] == summary["ii_errors"] == 0
    # the same records checked against a wrong declaration: every stall-free one is late
    wrong = gpu.timing_summary(records, expected.shape[1], lanes, 300, latency + 1, 2)
    assert wrong["latency_errors"] == 300 and wrong["first_latency_error"] == 0
    assert wrong["ii_errors"] == 300 - lanes and wrong["first_ii_gap"] == 1


@pytest.mark.verilator
def test_the_kernel_on_the_host_repeats_its_rows(tmp_path):
    block = toy_block()
    params = block.resolve({"stages": "2"})
    records, expected, *_ = _host_run(tmp_path, block, params, 4000, rows=1000)
    assert _mismatches(records, expected) == 0


@pytest.mark.verilator
def test_a_corrupted_gate_is_caught_by_the_kernel(tmp_path):
    def corrupt(graph):
        ands = list(graph.ands)
        ands[len(ands) // 2] = (ands[len(ands) // 2][0] ^ 1, ands[len(ands) // 2][1])
        return graph.replace(ands=ands)

    block = toy_block()
    params = block.resolve({"stages": "3"})
    records, expected, *_ = _host_run(tmp_path, block, params, 2000, corrupt=corrupt)
    assert _mismatches(records, expected) > 0


def test_the_thresholds_and_lanes():
    assert [gpu.threshold_of(p) for p in (0.0, 1e-9, 0.7, 0.999, 1.0)] == [0, 1, 179, 255, 256]
    assert gpu.lanes_for(1) == 32
    assert gpu.lanes_for(32 * gpu.GPU_LANES_PER_TRANSACTION + 1) == 64


@pytest.mark.skipif(NO_CUDA is None, reason="a CUDA device is present")
def test_without_a_device_the_command_line_says_so_in_one_line(capsys):
    assert cli.main(["check", "fp32_add", "--backend", "gpu", "--count", "10"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("gpurtl: error: the gpu backend needs")
    assert "Traceback" not in "\n".join(err)


@needs_cuda
def test_the_device_matches_the_golden_model_under_stalls():
    block = registry.get("fp32_add")
    report = BACKENDS["gpu"].check(block, block.resolve(), count=200_000, seed=5)
    assert (report.passed, report.failed) == (200_000, 0), report.first
    assert report.latency_errors == report.ii_errors == 0


@needs_cuda
def test_the_device_catches_a_wrong_latency():
    block = toy_block(claimed_latency=4)
    params = block.resolve({"stages": "3"})
    report = BACKENDS["gpu"].check(block, params, count=20_000, seed=1)
    assert report.latency_errors == 2000 and report.first.field == "(latency)"


@pytest.mark.verilator
def test_the_backend_around_the_kernel_checks_and_runs(tmp_path, monkeypatch):
    """The gpu backend's own code (stimulus, lanes, records, comparison, timing errors) with the
    kernel's host build in place of the device."""
    host = OnHost(tmp_path)
    monkeypatch.setattr(gpu, "gpu_run", host.gpu_run)
    monkeypatch.setattr(gpu, "cuda", lambda: None)
    backend = BACKENDS["gpu"]
    block = toy_block()
    params = block.resolve({"stages": "3"})
    report = backend.check(block, params, count=3000, seed=2)
    assert (report.passed, report.failed, report.free_run) == (3000, 0, 300), report.first
    assert report.lanes == gpu.lanes_for(3000) and report.cycles > 3000
    late = toy_block(claimed_latency=4)
    report = backend.check(late, late.resolve({"stages": "3"}), count=3000, seed=2)
    assert report.latency_errors == 300 and report.first.field == "(latency)"
    txs = block.stimulus(np.random.default_rng(4), 50, **params)
    expected = golden_outputs(block, params, txs)
    report = backend.run(block, params, txs, expected=expected, keep_outputs=True)
    _, out_layout = block.layouts(**params)
    assert report.failed == 0
    assert report.outputs == [layouts.pack(out_layout, out) for out in expected]
