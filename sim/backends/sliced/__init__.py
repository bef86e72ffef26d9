"""The ``sliced`` backend: a pipeline block's netlist as bit-sliced C++, many independent
stimuli per machine word.

* :mod:`.netlist`: Yosys synthesis of the exported Verilog to an and-inverter graph with latches,
  read and levelised (cached per exported text);
* :mod:`.driver`: the generated C++ (the graph as vector operations on words of 128 to 512 lanes,
  inside a batch driver with per-lane valid/ready stalls);
* :mod:`.build`: the cached compilation;
* :mod:`.run`: running the model on a file of transactions and comparing with the golden model.

It runs batches (``check``, ``run``, ``bench``) of pipeline blocks; a session feeds one
transaction at a time and waits on its outputs, which one lane of a bit-sliced word does no
faster than a one-stimulus simulator, so it has no session mode (use ``--backend fast``).
"""

import time
from pathlib import Path

import numpy as np

from ...core.registry import RegistryError
from ...harness.backend import Backend, cpu_seconds
from .build import BuildError
from .build import model as build_model
from .netlist import NetlistError
from .run import SlicedReport, check, compare, run_rows, run_transactions

__all__ = ["BuildError", "NetlistError", "SlicedBackend", "SlicedReport"]


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
        )

    def timed_run(self, block, params, in_rows, expected_rows, stalls, *, variant=None, work=None):
        """The sliced driver on ``in_rows``; the simulation time is that of the driver process,
        the comparison is not timed."""
        self.require(block)
        model = build_model(block, params)
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
