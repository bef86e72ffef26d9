"""The ``fast`` backend: a block's Verilog compiled by Verilator with a C++ driver, so that no
Python runs per simulated cycle.

* :mod:`.top`: :class:`BatchTop`, the simulation wrapper that keeps ``o.ready`` out of the
  block's registers;
* :mod:`.driver`: the generated C++ driver (batch mode from files, session mode over pipes);
* :mod:`.build`: export, Verilator build and the build cache;
* :mod:`.run`: running the model on a file of transactions and comparing with the golden model;
* :mod:`.session`: a session on the driver's session mode;
* :mod:`.cycle` and :mod:`.cycle_source`: cycle-stepped blocks: the compiled cycle driver, its
  sources, and the golden check of its recorded trace;
* :mod:`.behavioural`: the behavioural FP32 cores of the ``fast-behavioural`` backend.

Which model runs -- ``batch`` (the block inside :class:`BatchTop`) or ``stalled`` (the block
itself) -- is ``$GPURTL_FAST_TOP`` (:func:`default_top`).
"""

import os
import time
from pathlib import Path

import numpy as np

from ...core.registry import RegistryError
from ...harness.backend import Backend, cpu_seconds
from . import cycle
from .build import TOPS, BuildError
from .build import model as build_model
from .run import FastReport, check, compare_slices, run_rows, run_transactions
from .session import FastCycleSession, FastSession
from .top import BatchTop

__all__ = [
    "TOPS",
    "TOP_ENV",
    "BatchTop",
    "BuildError",
    "FastBackend",
    "FastBehaviouralBackend",
    "FastCycleSession",
    "FastReport",
    "FastSession",
    "default_top",
]

#: Environment variable choosing the top of ``--backend fast`` (``batch`` or ``stalled``).
TOP_ENV = "GPURTL_FAST_TOP"


def default_top():
    """``$GPURTL_FAST_TOP`` or ``batch`` (the faster top; see :class:`~.top.BatchTop`)."""
    top = os.environ.get(TOP_ENV, "batch")
    if top not in TOPS:
        raise RegistryError(f"${TOP_ENV} must be one of {', '.join(TOPS)}, not {top!r}")
    return top


class FastBackend(Backend):
    name = "fast"
    summary = "the Verilator model with a compiled C++ driver (no Python per simulated cycle)"
    kinds = ("pipeline", "cycle")
    waveforms = False
    tools = ("c++", "make")
    variants = TOPS
    python_per_cycle = False
    #: How the model's FP32 cores are built (see :mod:`.behavioural`).
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
        top=None,
    ):
        if block.kind == "cycle":
            return cycle.run_bits(
                block,
                params,
                list(input_bits),
                None if expected_bits is None else list(expected_bits),
                keep_outputs=keep_outputs,
                fp_cores=self.fp_cores,
            )
        return run_transactions(
            block,
            params,
            list(input_bits),
            None if expected_bits is None else list(expected_bits),
            seed=stalls.rng.getrandbits(31),
            p_valid=stalls.p_valid,
            p_ready=stalls.p_ready,
            free_run=stalls.free_run,
            top=top or default_top(),
            keep_outputs=keep_outputs,
            fp_cores=self.fp_cores,
        )

    def check_stream(
        self, block, params, count, seed, stalls, *, vcd=None, progress=None, log=None, top=None
    ):
        if block.kind == "cycle":
            return cycle.check(
                block, params, count=count, seed=seed, log=log, fp_cores=self.fp_cores
            )
        return check(
            block,
            params,
            count=count,
            seed=seed,
            top=top or default_top(),
            p_valid=stalls.p_valid,
            p_ready=stalls.p_ready,
            free_run=stalls.free_run,
            log=log,
            fp_cores=self.fp_cores,
        )

    def timed_run(self, block, params, in_rows, expected_rows, stalls, *, variant=None, work=None):
        """The batch driver on ``in_rows`` with the model ``variant`` (a top, see :data:`TOPS`);
        the simulation time is that of the driver processes, the comparison is not timed."""
        if block.kind == "cycle":
            return cycle.timed_run(block, params, in_rows, expected_rows, self.fp_cores, work)
        model = build_model(block, params, top=variant or default_top(), fp_cores=self.fp_cores)
        count = len(in_rows)
        in_path = Path(work) / f"in-{model.top}.bin"
        np.ascontiguousarray(in_rows, dtype="<u4").tofile(in_path)
        report = FastReport()
        report.top, report.fp_cores = model.top, model.fp_cores
        started, cpu = time.monotonic(), cpu_seconds()
        slices = run_rows(
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
        compare_slices(report, model, out_layout, slices, expected_rows)
        return report, model.build_seconds, sim_seconds, cpu

    def session(
        self, block, params, *, golden=True, stalls=None, vcd=None, strict=False, top=None, log=None
    ):
        self.require(block, vcd=vcd)
        if block.kind == "cycle":
            return FastCycleSession(
                block, params, golden=golden, strict=strict, log=log, fp_cores=self.fp_cores
            )
        return FastSession(
            block,
            params,
            golden=golden,
            stalls=stalls,
            strict=strict,
            top=top or default_top(),
            seed=stalls.rng.getrandbits(31) if stalls is not None else 0,
            log=log,
            fp_cores=self.fp_cores,
        )


class FastBehaviouralBackend(FastBackend):
    """The fast backend with behavioural FP32 cores: every FP32 core with at least one stage is
    a C++ operation behind a delay line of its latency (:mod:`.behavioural`), bit-exact with
    the golden model and tested against the RTL cores."""

    name = "fast-behavioural"
    summary = "the fast backend with behavioural (C++) FP32 cores of the RTL's latency"
    fp_cores = "behavioural"
