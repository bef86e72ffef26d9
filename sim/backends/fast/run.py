"""Running a compiled model on files of packed transactions and comparing with the golden model.

No Python runs per cycle: Python writes the inputs and the golden outputs to files a chunk at a
time (:func:`write_stimulus`), one driver process per core runs an independent slice of the
transactions, each from its own reset (:func:`run_rows`), and Python compares the outputs with the
golden rows a chunk at a time (:func:`compare_slices`), so memory stays constant however many
transactions are checked. :func:`check` and :func:`run_transactions` are these steps in order;
``gpurtl bench`` times them one by one.
"""

import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np

from ...core.export import cache_dir
from ...core.files import UsageError
from ...core.progress import Every
from ...core.words import width_of, words_from_ints, words_of
from ...harness.golden_io import batches
from ...harness.lockstep import free_run_of
from ...harness.report import Comparator, Report, cycles_per_second, transaction_where
from .build import model as build_model

__all__ = [
    "FastReport",
    "check",
    "check_disk",
    "compare_slices",
    "run_rows",
    "run_transactions",
    "work_dir",
    "write_stimulus",
    "MIN_SPLIT",
]

#: Fewer transactions than this run in one process (starting a second costs more than it saves).
MIN_SPLIT = 20_000

#: Rows compared per step.
COMPARE_ROWS = 1 << 16

#: Seconds between progress lines of a long run.
PROGRESS_EVERY = 10.0

#: Share of the cache folder's free disk space a run's files may take.
DISK_SHARE = 0.5


#: How :meth:`FastReport.phases` names the FP32 cores of a model.
_CORES = {"rtl": "RTL", "behavioural": "behavioural"}


class FastReport(Report):
    """A :class:`~gpurtl.sim.harness.report.Report` with the times of the phases, in seconds."""

    def __init__(self):
        super().__init__()
        self.build_seconds = self.golden_seconds = self.sim_seconds = self.compare_seconds = 0.0
        self.processes = 1
        self.top = None
        self.fp_cores = "rtl"

    def phases(self):
        """One line: the top, the processes and the time of each phase."""
        rate = cycles_per_second(self.cycles, self.sim_seconds)
        return (
            f"fast backend ({self.top} top, {_CORES[self.fp_cores]} FP32 cores, {self.processes} "
            f"processes): build "
            f"{self.build_seconds:.1f} s, golden {self.golden_seconds:.1f} s, simulation "
            f"{self.sim_seconds:.1f} s ({rate}), compare {self.compare_seconds:.1f} s"
        )


def _processes(count, processes):
    if processes is not None:
        if processes < 1:
            raise ValueError(f"`processes` must be at least 1, not {processes}")
        return min(processes, count)
    return min(2, os.cpu_count() or 1) if count >= MIN_SPLIT else 1


def _runs_folder():
    folder = cache_dir() / "fast" / "runs"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def work_dir():
    """A temporary folder for a run's files, in the cache folder (removed on exit)."""
    return tempfile.TemporaryDirectory(dir=_runs_folder())


def check_disk(count, in_width, out_width, *, expected=True):
    """Refuse (:class:`~gpurtl.sim.core.files.UsageError`) a run whose files -- the packed inputs,
    the golden rows and the driver's output records, all written to the cache folder before they
    are compared -- would take more than :data:`DISK_SHARE` of the free space there."""
    row = 4 * (words_of(in_width) + words_of(out_width) * (2 if expected else 1) + 4)
    need = count * row
    free = shutil.disk_usage(_runs_folder()).free
    if need > DISK_SHARE * free:
        raise UsageError(
            f"{count} transactions need {need / 1e9:.1f} GB of run files ({row} bytes each) in "
            f"{_runs_folder()}, more than {DISK_SHARE:.0%} of the {free / 1e9:.1f} GB free there; "
            f"use a smaller --count, or point GPURTL_CACHE at a larger disk"
        )


def write_stimulus(block, params, seed, count, in_path, expected_path, *, log=None):
    """Write ``count`` random transactions and their golden outputs as word rows to two files;
    returns the seconds it took. ``log(text)`` hears progress."""
    started = time.monotonic()
    due = Every(PROGRESS_EVERY)
    done = 0
    with open(in_path, "wb") as inputs, open(expected_path, "wb") as expected:
        for rows, golden in batches(block, params, np.random.default_rng(seed), count):
            np.ascontiguousarray(rows, dtype="<u4").tofile(inputs)
            np.ascontiguousarray(golden, dtype="<u4").tofile(expected)
            done += len(rows)
            if log and due(force=done == count):
                log(
                    f"stimulus and golden outputs: {done}/{count} transactions "
                    f"({time.monotonic() - started:.0f} s)"
                )
    return time.monotonic() - started


def run_rows(
    model,
    in_path,
    count,
    *,
    seed=0,
    p_valid=1.0,
    p_ready=1.0,
    free_run=0,
    processes=None,
    max_idle=10_000,
    work=None,
    log=None,
):
    """Run ``count`` rows of ``in_path`` through ``model``.

    Returns a list of slices ``(first, size, out_path, summary)``; ``summary`` is the driver's
    JSON line (``cycles``, ``latency_errors``, ``first_latency_error``, ``ii_errors``,
    ``first_ii_error``, indices relative to ``first``) plus the slice's ``free_run``: each slice
    starts with its share of the ``free_run`` stall-free transactions (at least one when
    ``free_run`` is not zero). ``log(text)`` hears how many transactions the drivers have
    written, every :data:`PROGRESS_EVERY` seconds.
    """
    parts = _processes(count, processes)
    bounds = [count * k // parts for k in range(parts + 1)]
    jobs = []
    for k in range(parts):
        first, size = bounds[k], bounds[k + 1] - bounds[k]
        out_path = Path(work) / f"out{k}.bin"
        slice_free = max(1, free_run * size // count) if free_run else 0
        command = [
            str(model.executable),
            str(in_path),
            str(out_path),
            str(first),
            str(size),
            str(seed * 1_000_003 + k + 1),
            repr(float(p_valid)),
            repr(float(p_ready)),
            str(slice_free),
            str(model.latency),
            str(model.ii or 0),  # 0: the build declares no fixed interval
            str(max_idle),
        ]
        process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        jobs.append((first, size, out_path, slice_free, process))
    record = 4 * (words_of(model.out_width) + 4)
    due = Every(PROGRESS_EVERY)
    started = time.monotonic()

    def written():
        done = sum(path.stat().st_size for _, _, path, _, _ in jobs if path.exists()) // record
        return (
            f"simulation: {done}/{count} transactions "
            f"({time.monotonic() - started:.0f} s, {len(jobs)} processes)"
        )

    while log and any(process.poll() is None for *_, process in jobs):
        time.sleep(0.2)
        if due():
            log(written())
    slices = []
    for first, size, out_path, slice_free, process in jobs:
        stdout, stderr = process.communicate()
        lines = stdout.strip().splitlines()
        summary = (
            json.loads(lines[-1])
            if lines
            else {"error": stderr.strip()[-2000:] or f"exit status {process.returncode}"}
        )
        if "error" in summary:
            raise RuntimeError(
                f"the fast model `{model.top}` failed on transactions "
                f"{first}..{first + size - 1}: {summary['error']}"
            )
        summary["free_run"] = slice_free
        slices.append((first, size, out_path, summary))
    return slices


def _records(model, out_path, size):
    shape = (size, words_of(model.out_width) + 4)
    if not size:
        return np.zeros(shape, dtype="<u4")
    return np.memmap(out_path, dtype="<u4", mode="r", shape=shape)


def _cycles(records, out_words, column):
    return records[:, out_words + column].astype(np.int64) | (
        records[:, out_words + column + 1].astype(np.int64) << 32
    )


def compare_slices(report, model, out_layout, slices, expected, *, keep_outputs=False):
    """Fill ``report`` from the driver's output records of ``slices`` (see :func:`run_rows`);
    ``expected`` is an array (or memmap) of golden rows, or ``None``."""
    out_words = words_of(model.out_width)
    comparator = Comparator(
        report, out_layout, latency=model.latency, ii=model.ii, keep_outputs=keep_outputs
    )
    for first, size, out_path, summary in slices:
        records = _records(model, out_path, size)
        report.cycles += summary["cycles"]
        report.free_run += summary["free_run"]

        def where(index, records=records, first=first):
            record = records[index - first : index - first + 1]
            accept = int(_cycles(record, out_words, 0)[0])
            emit = int(_cycles(record, out_words, 2)[0])
            return transaction_where(index, accept, emit)

        for kind in ("latency", "ii"):
            errors = summary.get(f"{kind}_errors", 0)
            if not errors:
                continue
            index = first + summary[f"first_{kind}_error"]
            if kind == "latency":
                record = records[index - first : index - first + 1]
                took = int(_cycles(record, out_words, 2)[0] - _cycles(record, out_words, 0)[0])
                comparator.latency_error(index, where(index), took)
            else:
                accepts = _cycles(records[: index - first + 1], out_words, 0)
                comparator.ii_error(
                    index, where(index), int(accepts[-1] - accepts[0]), index - first
                )
            # the driver counted them all; the comparator saw the first
            setattr(report, f"{kind}_errors", getattr(report, f"{kind}_errors") + errors - 1)
        for start in range(0, size, COMPARE_ROWS):
            got = np.asarray(records[start : start + COMPARE_ROWS, :out_words])
            want = None
            if expected is not None:
                want = np.asarray(expected[first + start : first + start + len(got)])
            comparator.rows(first + start, got, want, where)
        del records
    comparator.finish()
    return report


def _simulate(report, model, out_layout, in_path, count, stalls, expected, *, work, **options):
    """Run and compare, timing each phase into ``report``."""
    started = time.monotonic()
    slices = run_rows(
        model,
        in_path,
        count,
        seed=stalls["seed"],
        p_valid=stalls["p_valid"],
        p_ready=stalls["p_ready"],
        free_run=stalls["free_run"],
        processes=options.get("processes"),
        work=work,
        log=options.get("log"),
    )
    report.processes = len(slices)
    report.sim_seconds = time.monotonic() - started
    log = options.get("log")
    if log and report.sim_seconds >= PROGRESS_EVERY:
        log(f"simulation: {count}/{count} transactions ({report.sim_seconds:.0f} s); comparing")
    started = time.monotonic()
    compare_slices(
        report, model, out_layout, slices, expected, keep_outputs=options.get("keep_outputs", False)
    )
    report.compare_seconds = time.monotonic() - started
    return report


def check(
    block,
    params,
    *,
    count=None,
    seed=0,
    top="batch",
    processes=None,
    p_valid=0.7,
    p_ready=0.7,
    free_run=None,
    log=None,
    fp_cores="rtl",
):
    """Random lockstep check of a pipeline block on the compiled model; a :class:`FastReport`.

    The same stimulus as the other backends for counts that fit one stimulus chunk; the first
    ``free_run`` (by default a tenth) of the transactions, shared out among the processes, run
    with no stalls and must take exactly the model's latency (the block's, plus one for the
    batch top's output FIFO) and be accepted every ``initiation_interval`` cycles.
    ``fp_cores``: the model's FP32 cores, ``"rtl"`` or ``"behavioural"``.
    """
    count = block.check_count if count is None else count
    if count < 1:
        raise ValueError(f"`count` must be a positive integer, not {count}")
    report = FastReport()
    report.top, report.fp_cores = top, fp_cores
    in_layout, out_layout = block.layouts(**params)
    check_disk(count, width_of(in_layout), width_of(out_layout))
    model = build_model(block, params, top=top, log=log, fp_cores=fp_cores)
    report.build_seconds = model.build_seconds
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
        _simulate(
            report,
            model,
            out_layout,
            in_path,
            count,
            stalls,
            expected,
            work=work,
            processes=processes,
            log=log,
        )
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
    top="batch",
    processes=None,
    keep_outputs=False,
    log=None,
    fp_cores="rtl",
):
    """Drive the bit patterns ``input_bits`` through the compiled model (for ``gpurtl run`` and
    the backend's ``run``); compares with ``expected_bits`` when given."""
    report = FastReport()
    report.top, report.fp_cores = top, fp_cores
    model = build_model(block, params, top=top, log=log, fp_cores=fp_cores)
    report.build_seconds = model.build_seconds
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
            processes=processes,
            keep_outputs=keep_outputs,
            log=log,
        )
    return report
