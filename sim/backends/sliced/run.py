"""Running a sliced model on a file of packed transactions and comparing with the golden model.

Python writes the inputs and the golden outputs to files (the fast backend's
:func:`~gpurtl.sim.backends.fast.run.write_stimulus`), one driver process runs every transaction
in its lanes (:func:`run_rows`) and Python compares its records with the golden rows a chunk at a
time (:func:`compare`). The driver reads its rows and writes its records through rings of a
few thousand transactions (:func:`.driver.window_size`), so its memory does not grow with the
count.
"""

import json
import subprocess
import time
from pathlib import Path

import numpy as np

from ...core.registry import RegistryError
from ...core.words import width_of, words_from_ints, words_of
from ...harness.golden_io import golden_outputs
from ...harness.lockstep import free_run_of
from ...harness.report import Comparator, Report, cycles_per_second, transaction_where
from ..fast.run import check_disk, work_dir, write_stimulus
from .build import model as build_model

__all__ = [
    "COMPARE_ROWS",
    "INDEPENDENCE_PROBE",
    "SlicedReport",
    "check",
    "compare",
    "require_independent",
    "run_rows",
    "run_transactions",
]

#: Rows compared per step.
COMPARE_ROWS = 1 << 16

#: Random transactions :func:`require_independent` gives the golden model.
INDEPENDENCE_PROBE = 64

_independent = {}


def require_independent(block, params):
    """Raise :class:`~gpurtl.sim.core.registry.RegistryError` when the outputs of ``block``
    depend on the transactions before them (a stack, a cache: its golden model keeps state).

    The lanes of a bit-sliced run each take some of the transactions, so each lane's block sees
    another history than the one golden model that computed the expected outputs; only blocks
    whose every output is a function of its own input can run so. The test: the golden outputs of
    :data:`INDEPENDENCE_PROBE` random transactions in one sequence equal those of a fresh golden
    model per transaction (kept per block and parameters).
    """
    # The golden function itself, not its id: the key keeps it alive, so a later block's
    # golden model cannot reuse a collected one's id and its cached answer.
    key = (block.name, json.dumps(params, sort_keys=True, default=str), block.golden)
    if key not in _independent:
        inputs = block.stimulus(np.random.default_rng(0), INDEPENDENCE_PROBE, **params)
        together = golden_outputs(block, params, inputs)
        alone = [golden_outputs(block, params, [value])[0] for value in inputs]
        _independent[key] = together == alone
    if not _independent[key]:
        raise RegistryError(
            f"the outputs of `{block.name}` depend on the transactions before them (its golden "
            "model keeps state); the sliced backends run transactions independently in many "
            "lanes: use --backend fast"
        )


class SlicedReport(Report):
    """A :class:`~gpurtl.sim.harness.report.Report` with the sliced model's facts and the times
    of the phases, in seconds. ``cycles`` counts lane-cycles (clock cycles times lanes used)."""

    cycle_unit = "lane-cycle"

    def __init__(self):
        super().__init__()
        self.build_seconds = self.golden_seconds = self.sim_seconds = self.compare_seconds = 0.0
        self.synthesis_seconds = self.compile_seconds = 0.0
        self.lanes = self.lanes_used = self.clock_cycles = 0
        self.gates = {}

    def phases(self):
        """One line: the netlist, the lanes and the time of each phase."""
        rate = cycles_per_second(self.cycles, self.sim_seconds)
        gates = self.gates
        return (
            f"sliced backend ({gates.get('ands', 0)} AND gates, {gates.get('latches', 0)} "
            f"latches, {gates.get('levels', 0)} levels; {self.lanes_used} of {self.lanes} lanes, "
            f"{self.clock_cycles} clock cycles): build {self.build_seconds:.1f} s (synthesis "
            f"{self.synthesis_seconds:.1f} s, compile {self.compile_seconds:.1f} s), golden "
            f"{self.golden_seconds:.1f} s, simulation {self.sim_seconds:.2f} s ({rate} of "
            f"lane-cycles), compare {self.compare_seconds:.1f} s"
        )


def _fill_build(report, model):
    report.build_seconds = model.build_seconds
    report.synthesis_seconds, report.compile_seconds = (
        model.synthesis_seconds,
        model.compile_seconds,
    )
    report.lanes, report.gates = model.lanes, dict(model.summary)


def run_rows(
    model, in_path, count, *, seed=0, p_valid=1.0, p_ready=1.0, free_run=0, max_idle=10_000, work
):
    """Run ``count`` rows of ``in_path`` through ``model``; returns ``(out_path, summary)``,
    the driver's JSON line (``cycles``, ``clock_cycles``, ``lanes``, ``latency_errors``,
    ``first_latency_error``, ``ii_errors``, ``first_ii_error``) with ``free_run`` added."""
    out_path = Path(work) / "out.bin"
    command = [
        str(model.executable),
        str(in_path),
        str(out_path),
        str(count),
        str(seed),
        repr(float(p_valid)),
        repr(float(p_ready)),
        str(free_run),
        str(model.latency),
        str(model.ii or 0),
        str(max_idle),
    ]
    done = subprocess.run(command, capture_output=True, text=True)
    lines = done.stdout.strip().splitlines()
    summary = (
        json.loads(lines[-1])
        if lines
        else {"error": done.stderr.strip()[-2000:] or f"exit status {done.returncode}"}
    )
    if "error" in summary:
        raise RuntimeError(f"the sliced model of `{model.top}` failed: {summary['error']}")
    summary["free_run"] = min(free_run, count)
    return out_path, summary


def _cycles(records, out_words, column):
    return records[:, out_words + column].astype(np.int64) | (
        records[:, out_words + column + 1].astype(np.int64) << 32
    )


def compare(report, model, out_layout, records, summary, count, expected, *, keep_outputs=False):
    """Fill ``report`` from the driver's records (see :func:`run_rows`: a path of the record
    file, or an array of records); ``expected`` is an array (or memmap) of golden rows, or
    ``None``."""
    out_words = words_of(model.out_width)
    comparator = Comparator(
        report, out_layout, latency=model.latency, ii=model.ii, keep_outputs=keep_outputs
    )
    report.cycles += summary["cycles"]
    report.clock_cycles += summary["clock_cycles"]
    report.lanes_used = summary["lanes"]
    report.free_run += summary["free_run"]
    if isinstance(records, (str, Path)):
        records = np.memmap(records, dtype="<u4", mode="r", shape=(count, out_words + 4))

    def at(index, column):
        return int(_cycles(records[index : index + 1], out_words, column)[0])

    def where(index):
        return transaction_where(index, at(index, 0), at(index, 2))

    for kind in ("latency", "ii"):
        errors = summary.get(f"{kind}_errors", 0)
        if not errors:
            continue
        index = summary[f"first_{kind}_error"]
        if kind == "latency":
            comparator.latency_error(index, where(index), at(index, 2) - at(index, 0))
        else:
            comparator.ii_error(
                index,
                where(index),
                summary["first_ii_gap"],
                1,
                after="the lane's stall-free transaction before it",
            )
        # the driver counted them all; the comparator saw the first
        setattr(report, f"{kind}_errors", getattr(report, f"{kind}_errors") + errors - 1)
    for start in range(0, count, COMPARE_ROWS):
        got = np.asarray(records[start : start + COMPARE_ROWS, :out_words])
        want = None if expected is None else np.asarray(expected[start : start + len(got)])
        comparator.rows(start, got, want, where)
    comparator.finish()
    return report


def _simulate(report, model, out_layout, in_path, count, stalls, expected, *, work, **options):
    started = time.monotonic()
    out_path, summary = run_rows(model, in_path, count, work=work, **stalls)
    report.sim_seconds = time.monotonic() - started
    started = time.monotonic()
    compare(
        report,
        model,
        out_layout,
        out_path,
        summary,
        count,
        expected,
        keep_outputs=options.get("keep_outputs", False),
    )
    report.compare_seconds = time.monotonic() - started
    return report


def check(
    block,
    params,
    *,
    count=None,
    seed=0,
    p_valid=0.7,
    p_ready=0.7,
    free_run=None,
    log=None,
    graph_filter=None,
    fp_cores="rtl",
):
    """Random lockstep check of a pipeline block on its sliced model; a :class:`SlicedReport`.

    The stimulus is the other backends' (the same seed gives the same transactions and golden
    outputs); the first ``free_run`` (by default a tenth) of the transactions run with no
    stalls, each lane's share of them back to back, and must take exactly the block's latency and
    be accepted every ``initiation_interval`` cycles. ``graph_filter``, ``fp_cores``: see
    :func:`.build.model`.
    """
    count = block.check_count if count is None else count
    if count < 1:
        raise ValueError(f"`count` must be a positive integer, not {count}")
    require_independent(block, params)
    report = SlicedReport()
    in_layout, out_layout = block.layouts(**params)
    check_disk(count, width_of(in_layout), width_of(out_layout))
    model = build_model(block, params, log=log, graph_filter=graph_filter, fp_cores=fp_cores)
    _fill_build(report, model)
    with work_dir() as work:
        in_path, expected_path = Path(work) / "in.bin", Path(work) / "expected.bin"
        report.golden_seconds = write_stimulus(
            block, params, seed, count, in_path, expected_path, log=log
        )
        expected = np.memmap(
            expected_path, dtype="<u4", mode="r", shape=(count, words_of(model.out_width))
        )
        stalls = {
            "seed": seed,
            "p_valid": p_valid,
            "p_ready": p_ready,
            "free_run": free_run_of(count) if free_run is None else free_run,
        }
        _simulate(report, model, out_layout, in_path, count, stalls, expected, work=work)
        del expected
    return report


def run_transactions(
    block,
    params,
    input_bits,
    expected_bits=None,
    *,
    seed=0,
    p_valid=1.0,
    p_ready=1.0,
    free_run=0,
    keep_outputs=False,
    log=None,
    fp_cores="rtl",
):
    """Drive the bit patterns ``input_bits`` through the sliced model (the backend's ``run``);
    compares with ``expected_bits`` when given. ``fp_cores``: see :func:`.build.model`."""
    require_independent(block, params)
    report = SlicedReport()
    model = build_model(block, params, log=log, fp_cores=fp_cores)
    _fill_build(report, model)
    _, out_layout = block.layouts(**params)
    count = len(input_bits)
    if count == 0:
        return report
    with work_dir() as work:
        in_path = Path(work) / "in.bin"
        words_from_ints(model.in_width, input_bits).tofile(in_path)
        expected = None
        if expected_bits is not None:
            expected = words_from_ints(model.out_width, expected_bits)
        stalls = {"seed": seed, "p_valid": p_valid, "p_ready": p_ready, "free_run": free_run}
        _simulate(
            report,
            model,
            out_layout,
            in_path,
            count,
            stalls,
            expected,
            work=work,
            keep_outputs=keep_outputs,
        )
    return report
