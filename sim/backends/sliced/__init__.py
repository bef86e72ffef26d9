"""The ``sliced`` backend: a pipeline block's netlist as bit-sliced C++, many independent
stimuli per machine word.

* :mod:`.netlist`: Yosys synthesis of the exported Verilog to an and-inverter graph with latches,
  read and levelised (cached per exported text);
* :mod:`.driver`: the generated C++ (the graph as vector operations on words of 128 to 512 lanes,
  inside a batch driver with per-lane valid/ready stalls);
* :mod:`.build`: the cached compilation;
* :mod:`.run`: running the model on a file of transactions and comparing with the golden model;
* :mod:`.gpu`: the same graph as a CUDA kernel through CuPy (the ``gpu`` backend).

It runs batches (``check``, ``run``, ``bench``) of pipeline blocks; a session feeds one
transaction at a time and waits on its outputs, which one lane of a bit-sliced word does no
faster than a one-stimulus simulator, so it has no session mode (use ``--backend fast``).
"""

import time
from pathlib import Path

import numpy as np
from amaranth.hdl import Shape

from ...core.registry import RegistryError
from ...core.words import words_from_ints
from ...harness.backend import Backend, cpu_seconds
from . import gpu
from .build import BuildError
from .build import model as build_model
from .netlist import NetlistError
from .run import (
    SlicedReport,
    check,
    compare,
    require_independent,
    run_rows,
    run_transactions,
)

__all__ = [
    "BuildError",
    "GpuBackend",
    "GpuBehaviouralBackend",
    "NetlistError",
    "SlicedBackend",
    "SlicedBehaviouralBackend",
    "SlicedReport",
]


def layouts_width(layout):
    return Shape.cast(layout).width


class SlicedBackend(Backend):
    name = "sliced"
    summary = (
        "the netlist (Yosys AIG) as bit-sliced C++: 128-512 independent stimuli per word "
        "(pipelines, batches only)"
    )
    kinds = ("pipeline",)
    waveforms = False
    tools = ("c++", "make")
    python_per_cycle = False
    benched = False  # synthesis on first use; measured when named (--backends ...,sliced)
    sessions = False
    #: How the FP32 cores are built (:data:`.build.FP_CORES`).
    fp_cores = "rtl"

    def run_bits(
        self,
        block,
        params,
        input_bits,
        expected_bits,
        stalls,
        *,
        vcd=None,
        keep_outputs=False,
        progress=None,
    ):
        self.require(block, vcd=vcd)
        return run_transactions(
            block,
            params,
            list(input_bits),
            None if expected_bits is None else list(expected_bits),
            seed=stalls.rng.getrandbits(31),
            p_valid=stalls.p_valid,
            p_ready=stalls.p_ready,
            free_run=stalls.free_run,
            keep_outputs=keep_outputs,
            fp_cores=self.fp_cores,
        )

    def check_stream(
        self, block, params, count, seed, stalls, *, vcd=None, progress=None, log=None
    ):
        return check(
            block,
            params,
            count=count,
            seed=seed,
            p_valid=stalls.p_valid,
            p_ready=stalls.p_ready,
            free_run=stalls.free_run,
            log=log,
            fp_cores=self.fp_cores,
        )

    def timed_run(self, block, params, in_rows, expected_rows, stalls, *, variant=None, work=None):
        """The sliced driver on ``in_rows``; the simulation time is that of the driver process,
        the comparison is not timed."""
        self.require(block)
        require_independent(block, params)
        model = build_model(block, params, fp_cores=self.fp_cores)
        count = len(in_rows)
        in_path = Path(work) / "in-sliced.bin"
        np.ascontiguousarray(in_rows, dtype="<u4").tofile(in_path)
        report = SlicedReport()
        report.build_seconds = model.build_seconds
        report.lanes, report.gates = model.lanes, dict(model.summary)
        started, cpu = time.monotonic(), cpu_seconds()
        out_path, summary = run_rows(
            model,
            in_path,
            count,
            seed=stalls.rng.getrandbits(31),
            p_valid=stalls.p_valid,
            p_ready=stalls.p_ready,
            free_run=stalls.free_run,
            work=work,
        )
        sim_seconds, cpu = time.monotonic() - started, cpu_seconds() - cpu
        _, out_layout = block.layouts(**params)
        compare(report, model, out_layout, out_path, summary, count, expected_rows)
        return report, model.build_seconds, sim_seconds, cpu

    def session(self, block, params, *, golden=True, stalls=None, vcd=None, strict=False):
        raise RegistryError(
            "the sliced backend runs batches only (check, run, bench); use --backend fast for "
            "a session"
        )


class SlicedBehaviouralBackend(SlicedBackend):
    """The sliced backend with the FP32 cores kept whole: the rest of the netlist bit-sliced,
    each core's operation computed on values for a vector of lanes at a time
    (``sliced_fp32.h``), behind a delay line of the core's depth -- the fast backend's
    behavioural cores (:mod:`gpurtl.sim.backends.fast.behavioural`), on many lanes."""

    name = "sliced-behavioural"
    summary = (
        "the sliced backend with behavioural FP32 cores (computed on values, many lanes at a "
        "time); the rest of the netlist bit-sliced"
    )
    fp_cores = "behavioural"


class GpuBackend(SlicedBackend):
    """The sliced backend's graph as a CUDA kernel (:mod:`.gpu`): 32 lanes per thread, one
    thread per 32 x :data:`~.gpu.GPU_LANES_PER_TRANSACTION` transactions. Needs CuPy and a
    CUDA device (:meth:`require_tools` says so in one line)."""

    name = "gpu"
    summary = "the sliced backend's netlist as a CUDA kernel through CuPy (needs a CUDA device)"
    tools = ()

    def require(self, block, *, vcd=None):
        super().require(block, vcd=vcd)
        self.require_tools()

    def require_tools(self):
        """CuPy with a CUDA device. (Yosys is asked for when a netlist is missing from the
        cache: a GPU host may have none, and use the graphs synthesised elsewhere.)"""
        gpu.cuda()

    def _run(self, block, params, rows, expected, stalls, *, keep_outputs=False, log=None):
        require_independent(block, params)
        model = gpu.GpuModel(block, params, log=log, fp_cores=self.fp_cores)
        report = SlicedReport()
        count = len(rows)
        _, out_layout = block.layouts(**params)
        if count == 0:
            return report, model, 0.0, 0.0
        started = cpu_seconds()
        records, summary, seconds = gpu.run_rows_gpu(
            model,
            rows,
            count,
            seed=stalls["seed"],
            p_valid=stalls["p_valid"],
            p_ready=stalls["p_ready"],
            free_run=stalls["free_run"],
        )
        cpu = cpu_seconds() - started
        report.sim_seconds = seconds
        report.build_seconds, report.synthesis_seconds = (
            model.build_seconds,
            model.synthesis_seconds,
        )
        report.lanes, report.gates = model.lanes, dict(model.summary)
        compare(
            report, model, out_layout, records, summary, count, expected, keep_outputs=keep_outputs
        )
        return report, model, seconds, cpu

    def run_bits(
        self,
        block,
        params,
        input_bits,
        expected_bits,
        stalls,
        *,
        vcd=None,
        keep_outputs=False,
        progress=None,
    ):
        self.require(block, vcd=vcd)
        in_width, out_width = (layouts_width(layout) for layout in block.layouts(**params))
        rows = words_from_ints(in_width, list(input_bits))
        expected = (
            None if expected_bits is None else words_from_ints(out_width, list(expected_bits))
        )
        options = {
            "seed": stalls.rng.getrandbits(31),
            "p_valid": stalls.p_valid,
            "p_ready": stalls.p_ready,
            "free_run": stalls.free_run,
        }
        report, *_ = self._run(block, params, rows, expected, options, keep_outputs=keep_outputs)
        return report

    def check_stream(
        self, block, params, count, seed, stalls, *, vcd=None, progress=None, log=None
    ):
        from ..fast.run import work_dir, write_stimulus

        self.require(block, vcd=vcd)
        with work_dir() as work:
            in_path, expected_path = Path(work) / "in.bin", Path(work) / "expected.bin"
            golden = write_stimulus(block, params, seed, count, in_path, expected_path, log=log)
            rows = np.fromfile(in_path, dtype="<u4").reshape(count, -1)
            expected = np.fromfile(expected_path, dtype="<u4").reshape(count, -1)
        options = {
            "seed": seed,
            "p_valid": stalls.p_valid,
            "p_ready": stalls.p_ready,
            "free_run": stalls.free_run,
        }
        report, *_ = self._run(block, params, rows, expected, options, log=log)
        report.golden_seconds = golden
        return report

    def timed_run(self, block, params, in_rows, expected_rows, stalls, *, variant=None, work=None):
        """The kernel on ``in_rows``; the simulation time is the kernel's (CUDA events), the CPU
        time that of this process while it waits for the device."""
        self.require(block)
        options = {
            "seed": stalls.rng.getrandbits(31),
            "p_valid": stalls.p_valid,
            "p_ready": stalls.p_ready,
            "free_run": stalls.free_run,
        }
        report, model, seconds, cpu = self._run(
            block, params, np.asarray(in_rows), expected_rows, options
        )
        return report, model.build_seconds, seconds, cpu


class GpuBehaviouralBackend(GpuBackend):
    """The ``gpu`` backend with the FP32 cores kept whole (as ``sliced-behavioural``): the
    interpreted kernel (``sliced_interp.cu``) runs the rest of the netlist bit-sliced and each
    core's operation on values, lane by lane, with the fast backend's ``fp32_ops.h``."""

    name = "gpu-behavioural"
    summary = (
        "the gpu backend with behavioural FP32 cores (the interpreted kernel; needs a CUDA device)"
    )
    fp_cores = "behavioural"
