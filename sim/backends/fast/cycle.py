"""Cycle-stepped blocks on the fast backend: a compiled driver that steps the block one clock
cycle per input row, and the golden check of its recorded trace afterwards.

The driver (``cycle_driver.cpp``, a package data file beside this module) has two modes:

* **replay**: the input rows of every cycle come from a file. :func:`check` writes there the
  stimulus the other backends apply (:func:`gpurtl.sim.harness.golden_io.random_stream`: the
  block's own ``stimulus``, with the same seed, and its golden outputs), so a replayed check
  sees the same cycles as ``pysim`` or ``verilator``.
* **generate**: for a block with a compiled stimulus (:data:`STIMULI`: a C++ header in
  ``stimulus/`` that follows the rules of the block's ``stimulus`` and may react to the
  block's outputs), the inputs are made inside the compiled process and written out with the
  outputs; the golden model then runs over the recorded inputs, a chunk at a time, and every
  cycle's outputs are compared field by field with its, as in every other check.

Either way no Python runs per simulated cycle in the simulation itself; the golden model runs
per cycle in Python, after the simulation, on word rows.
"""

import json
import subprocess
import time
from pathlib import Path

import numpy as np

from ...core.words import width_of, words_from_ints, words_of
from ...harness.backend import cpu_seconds
from ...harness.golden_io import CHUNK, GoldenModel, random_stream
from ...harness.report import Comparator
from .build import model as build_model
from .cycle_source import (
    STIMULI,
    STIMULUS_ENV,
    config_header,
    driver_files,
    stimulus_data,
    stimulus_mode,
)
from .run import COMPARE_ROWS, FastReport, check_disk, work_dir

__all__ = [
    "STIMULI",
    "STIMULUS_ENV",
    "check",
    "config_header",
    "driver_files",
    "replay",
    "model_of",
    "run_bits",
    "stimulus_mode",
    "timed_run",
]


def _run(model, arguments):
    result = subprocess.run(
        [str(model.executable), *map(str, arguments)], capture_output=True, text=True
    )
    lines = result.stdout.strip().splitlines()
    summary = (
        json.loads(lines[-1])
        if lines and lines[-1].startswith("{")
        else {"error": result.stderr.strip()[-2000:] or f"exit status {result.returncode}"}
    )
    if "error" in summary or result.returncode != 0:
        raise RuntimeError(f"the fast model `{model.top}` failed: {summary.get('error')}")
    return summary


def replay(model, in_path, out_path, cycles):
    """Step ``model`` through ``cycles`` input rows of ``in_path``, writing the output rows to
    ``out_path``; returns the driver's summary."""
    return _run(model, ["--replay", in_path, out_path, cycles])


def _rows(path, count, width):
    if not count:
        return np.zeros((0, words_of(width)), dtype="<u4")
    return np.memmap(path, dtype="<u4", mode="r", shape=(count, words_of(width)))


def _where(index):
    return f"cycle {index}"


def model_of(block, params, *, fp_cores="rtl", log=None):
    """The compiled model of a cycle-stepped ``block`` (its own ports, the cycle driver)."""
    return build_model(block, params, top="stalled", log=log, fp_cores=fp_cores)


def check(block, params, *, count=None, seed=0, log=None, fp_cores="rtl", model=None):
    """Random lockstep check of a cycle-stepped block on its compiled model; a
    :class:`~.run.FastReport` (``golden_seconds``: stimulus and golden model; see the module
    doc string for where the stimulus is made)."""
    count = block.check_count if count is None else count
    if count < 1:
        raise ValueError(f"`count` must be a positive integer, not {count}")
    in_layout, out_layout = block.layouts(**params)
    check_disk(count, width_of(in_layout), width_of(out_layout))
    report = FastReport()
    report.top, report.fp_cores = "cycle", fp_cores
    model = model or build_model(block, params, top="stalled", log=log, fp_cores=fp_cores)
    report.build_seconds = model.build_seconds
    mode = stimulus_mode(block)
    comparator = Comparator(report, out_layout)
    with work_dir() as work:
        in_path, out_path = Path(work) / "in.bin", Path(work) / "out.bin"
        if mode == "compiled":
            started = time.monotonic()
            image = stimulus_data(block, params, seed, Path(work) / "stimulus.bin")
            summary = _run(model, ["--generate", in_path, out_path, count, seed, *image])
            report.sim_seconds = time.monotonic() - started
            started = time.monotonic()
            golden = GoldenModel(block, params)
            inputs = _rows(in_path, count, width_of(in_layout))
            outputs = _rows(out_path, count, width_of(out_layout))
            for first in range(0, count, golden.row_chunk):
                want = golden.rows(np.asarray(inputs[first : first + golden.row_chunk]))
                comparator.rows(first, outputs[first : first + len(want)], want, _where)
            report.golden_seconds = time.monotonic() - started
            del inputs, outputs
        else:
            expected_path = Path(work) / "expected.bin"
            started = time.monotonic()
            stream, expected = random_stream(block, params, count, seed)
            with open(in_path, "wb") as rows, open(expected_path, "wb") as golden_rows:
                batch = []
                for bits in stream:
                    batch.append(bits)
                    if len(batch) == CHUNK:
                        words_from_ints(in_layout, batch).tofile(rows)
                        words_from_ints(out_layout, [next(expected) for _ in batch]).tofile(
                            golden_rows
                        )
                        batch = []
                if batch:
                    words_from_ints(in_layout, batch).tofile(rows)
                    words_from_ints(out_layout, [next(expected) for _ in batch]).tofile(golden_rows)
            report.golden_seconds = time.monotonic() - started
            started = time.monotonic()
            summary = replay(model, in_path, out_path, count)
            report.sim_seconds = time.monotonic() - started
            started = time.monotonic()
            outputs = _rows(out_path, count, width_of(out_layout))
            want = _rows(expected_path, count, width_of(out_layout))
            for first in range(0, count, COMPARE_ROWS):
                comparator.rows(
                    first,
                    outputs[first : first + COMPARE_ROWS],
                    want[first : first + COMPARE_ROWS],
                    _where,
                )
            report.compare_seconds = time.monotonic() - started
            del outputs, want
        report.cycles = summary["cycles"]
    comparator.finish()
    report.stimulus = mode
    return report


def _compare_file(report, out_layout, out_path, count, expected, keep_outputs=False):
    comparator = Comparator(report, out_layout, keep_outputs=keep_outputs)
    outputs = _rows(out_path, count, width_of(out_layout))
    for first in range(0, count, COMPARE_ROWS):
        want = None if expected is None else expected[first : first + COMPARE_ROWS]
        comparator.rows(first, outputs[first : first + COMPARE_ROWS], want, _where)
    del outputs
    comparator.finish()
    return report


def run_bits(block, params, input_bits, expected_bits=None, *, keep_outputs=False, fp_cores="rtl"):
    """Apply the bit patterns ``input_bits``, one a cycle, to the compiled model (``gpurtl
    run``, the backend's ``run``); compares with ``expected_bits`` when given."""
    in_layout, out_layout = block.layouts(**params)
    report = FastReport()
    report.top, report.fp_cores = "cycle", fp_cores
    model = build_model(block, params, top="stalled", fp_cores=fp_cores)
    report.build_seconds = model.build_seconds
    if not input_bits:
        return report
    expected = None if expected_bits is None else words_from_ints(out_layout, expected_bits)
    with work_dir() as work:
        in_path, out_path = Path(work) / "in.bin", Path(work) / "out.bin"
        words_from_ints(in_layout, input_bits).tofile(in_path)
        started = time.monotonic()
        report.cycles = replay(model, in_path, out_path, len(input_bits))["cycles"]
        report.sim_seconds = time.monotonic() - started
        _compare_file(report, out_layout, out_path, len(input_bits), expected, keep_outputs)
    return report


def timed_run(block, params, in_rows, expected_rows, fp_cores, work):
    """``Backend.timed_run`` of a cycle block: the replay of ``in_rows`` (one a cycle), the
    simulation time and CPU time that of the driver process."""
    model = build_model(block, params, top="stalled", fp_cores=fp_cores)
    _, out_layout = block.layouts(**params)
    in_path, out_path = Path(work) / "in-cycle.bin", Path(work) / "out-cycle.bin"
    np.ascontiguousarray(in_rows, dtype="<u4").tofile(in_path)
    report = FastReport()
    report.top, report.fp_cores = "cycle", fp_cores
    started, cpu = time.monotonic(), cpu_seconds()
    report.cycles = replay(model, in_path, out_path, len(in_rows))["cycles"]
    sim_seconds, cpu = time.monotonic() - started, cpu_seconds() - cpu
    _compare_file(report, out_layout, out_path, len(in_rows), expected_rows)
    return report, model.build_seconds, sim_seconds, cpu
