"""Running a compiled model on files of packed transactions and comparing with the golden model.

No Python runs per cycle: Python writes the inputs and the golden outputs to files a chunk at a
time, one driver process per core runs an independent slice of the transactions (each from its
own reset), and Python compares the outputs with the golden rows a chunk at a time, so memory
stays constant however many transactions are checked.
"""

import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np
from amaranth.hdl import Shape

from ...core import layouts
from ...core.export import cache_dir
from ...core.progress import Every
from ...harness.lockstep import Mismatch, Report
from .build import model as build_model
from .driver import words_of
from .words import batches, from_words, to_words

__all__ = ["FastReport", "check", "check_disk", "run_rows", "run_transactions", "MIN_SPLIT"]

#: Fewer transactions than this run in one process (starting a second costs more than it saves).
MIN_SPLIT = 20_000

#: Rows compared per step.
COMPARE_ROWS = 1 << 16

#: Seconds between progress lines of a long run.
PROGRESS_EVERY = 10.0

#: Share of the cache folder's free disk space a run's files may take.
DISK_SHARE = 0.5


class FastReport(Report):
    """A :class:`~gpurtl.sim.harness.lockstep.Report` with the times of the phases, in seconds."""

    def __init__(self):
        super().__init__()
        self.build_seconds = self.golden_seconds = self.sim_seconds = self.compare_seconds = 0.0
        self.processes = 1
        self.top = None


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


def _work_dir():
    return tempfile.TemporaryDirectory(dir=_runs_folder())


def check_disk(count, in_width, out_width, *, expected=True):
    """Refuse (:class:`~gpurtl.sim.core.files.UsageError`) a run whose files -- the packed inputs,
    the golden rows and the driver's output records, all written to the cache folder before they
    are compared -- would take more than :data:`DISK_SHARE` of the free space there."""
    from ...core.files import UsageError

    row = 4 * (words_of(in_width) + words_of(out_width) * (2 if expected else 1) + 4)
    need = count * row
    free = shutil.disk_usage(_runs_folder()).free
    if need > DISK_SHARE * free:
        raise UsageError(
            f"{count} transactions need {need / 1e9:.1f} GB of run files ({row} bytes each) in "
            f"{_runs_folder()}, more than {DISK_SHARE:.0%} of the {free / 1e9:.1f} GB free there; "
            f"use a smaller --count, or point GPURTL_CACHE at a larger disk"
        )


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
    JSON line (``cycles``, ``latency_errors``, ``first_latency_error`` relative to ``first``)
    plus the slice's ``free_run``: each slice starts with its share of the ``free_run``
    stall-free transactions (at least one when ``free_run`` is not zero). ``log(text)`` hears
    how many transactions the drivers have written, every :data:`PROGRESS_EVERY` seconds.
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
            str(max_idle),
        ]
        jobs.append(
            (
                first,
                size,
                out_path,
                slice_free,
                subprocess.Popen(
                    command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
                ),
            )
        )
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
    return (
        np.memmap(out_path, dtype="<u4", mode="r", shape=(size, words_of(model.out_width) + 4))
        if size
        else np.zeros((0, words_of(model.out_width) + 4), dtype="<u4")
    )


def _where(index, record, out_words):
    accept = int(record[out_words]) | int(record[out_words + 1]) << 32
    emit = int(record[out_words + 2]) | int(record[out_words + 3]) << 32
    return (f"transaction {index} (accepted cycle {accept}, emitted cycle {emit})", emit - accept)


def _compare(report, model, out_layout, slices, expected, keep_outputs):
    """Fill ``report`` from the driver outputs; ``expected`` is a uint32 array (or memmap) of
    golden rows or None."""
    out_words = words_of(model.out_width)
    first_bad = None  # (global index, Mismatch)
    for first, size, out_path, summary in slices:
        records = _records(model, out_path, size)
        report.cycles += summary["cycles"]
        report.latency_errors += summary["latency_errors"]
        report.free_run += summary["free_run"]
        if summary["latency_errors"]:
            index = summary["first_latency_error"]
            where, took = _where(first + index, records[index], out_words)
            if first_bad is None or first + index < first_bad[0]:
                first_bad = (first + index, Mismatch(where, "(latency)", model.latency, took))
        for start in range(0, size, COMPARE_ROWS):
            got = np.asarray(records[start : start + COMPARE_ROWS, :out_words])
            if keep_outputs:
                report.outputs.extend(from_words(got))
            if expected is None:
                report.passed += len(got)
                continue
            want = np.asarray(expected[first + start : first + start + len(got)])
            bad = np.flatnonzero(np.any(got != want, axis=1))
            report.failed += len(bad)
            report.passed += len(got) - len(bad)
            if len(bad) and (first_bad is None or first + start + bad[0] < first_bad[0]):
                row = int(bad[0])
                index = first + start + row
                leaf, e, g = layouts.diff(
                    out_layout,
                    from_words(want[row : row + 1])[0],
                    from_words(got[row : row + 1])[0],
                )
                where, _ = _where(index, records[start + row], out_words)
                first_bad = (
                    index,
                    Mismatch(
                        where,
                        leaf.path or "(whole value)",
                        layouts.format_leaf_value(leaf, e),
                        layouts.format_leaf_value(leaf, g),
                    ),
                )
        del records
    report.failed += report.latency_errors
    report.first = first_bad[1] if first_bad else None


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
    log=None,
):
    """Random lockstep check of a pipeline block on the compiled model; a :class:`FastReport`.

    The same stimulus as the other backends for counts that fit one stimulus chunk; the first
    tenth of each process's transactions run with no stalls and must take exactly the model's
    latency (the block's, plus one for the batch top's output FIFO).
    """
    count = block.check_count if count is None else count
    if count < 1:
        raise ValueError(f"`count` must be a positive integer, not {count}")
    report = FastReport()
    report.top = top
    in_layout, out_layout = block.layouts(**params)
    check_disk(count, Shape.cast(in_layout).width, Shape.cast(out_layout).width)
    model = build_model(block, params, top=top, log=log)
    report.build_seconds = model.build_seconds
    rng = np.random.default_rng(seed)
    due = Every(PROGRESS_EVERY)
    with _work_dir() as work:
        in_path, expected_path = Path(work) / "in.bin", Path(work) / "expected.bin"
        started = time.monotonic()
        done = 0
        with open(in_path, "wb") as inputs, open(expected_path, "wb") as expected:
            for rows, golden in batches(block, params, rng, count):
                np.ascontiguousarray(rows, dtype="<u4").tofile(inputs)
                np.ascontiguousarray(golden, dtype="<u4").tofile(expected)
                done += len(rows)
                if log and due(force=done == count):
                    log(
                        f"stimulus and golden outputs: {done}/{count} transactions "
                        f"({time.monotonic() - started:.0f} s)"
                    )
        report.golden_seconds = time.monotonic() - started
        _simulate_and_compare(
            report,
            model,
            out_layout,
            in_path,
            count,
            seed,
            p_valid,
            p_ready,
            max(1, count // 10),
            processes,
            work,
            np.memmap(
                expected_path, dtype="<u4", mode="r", shape=(count, words_of(model.out_width))
            ),
            keep_outputs=False,
            log=log,
        )
    return report


def _simulate_and_compare(
    report,
    model,
    out_layout,
    in_path,
    count,
    seed,
    p_valid,
    p_ready,
    free_run,
    processes,
    work,
    expected,
    keep_outputs,
    log=None,
):
    started = time.monotonic()
    slices = run_rows(
        model,
        in_path,
        count,
        seed=seed,
        p_valid=p_valid,
        p_ready=p_ready,
        free_run=free_run,
        processes=processes,
        work=work,
        log=log,
    )
    report.processes = len(slices)
    report.sim_seconds = time.monotonic() - started
    if log and report.sim_seconds >= PROGRESS_EVERY:
        log(f"simulation: {count}/{count} transactions ({report.sim_seconds:.0f} s); comparing")
    started = time.monotonic()
    _compare(report, model, out_layout, slices, expected, keep_outputs)
    report.compare_seconds = time.monotonic() - started


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
):
    """Drive the bit patterns ``input_bits`` through the compiled model (for ``gpurtl run`` and
    the harness's ``run_block``); compares with ``expected_bits`` when given."""
    report = FastReport()
    report.top = top
    model = build_model(block, params, top=top, log=log)
    report.build_seconds = model.build_seconds
    in_layout, out_layout = block.layouts(**params)
    count = len(input_bits)
    if count == 0:
        return report
    with _work_dir() as work:
        in_path = Path(work) / "in.bin"
        to_words(model.in_width, input_bits).tofile(in_path)
        expected = None if expected_bits is None else to_words(model.out_width, expected_bits)
        _simulate_and_compare(
            report,
            model,
            out_layout,
            in_path,
            count,
            seed,
            p_valid,
            p_ready,
            free_run,
            processes,
            work,
            expected,
            keep_outputs,
        )
    return report
