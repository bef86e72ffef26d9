"""Lockstep checking of a block's RTL against its golden model, on any backend.

:func:`compare_events` turns the outputs a driver reads into a :class:`~.report.Report` (every
transaction or cycle compared field by field, the latency and initiation interval of the
stall-free transactions checked); :func:`drive_block` runs a driver on a backend's ports and
completes the report. The backends (:mod:`gpurtl.sim.backends`) call these; the tools reach them
through :class:`~.backend.Backend` objects.
"""

from ..core.progress import Every
from ..core.registry import timing_facts
from .engine import (
    CycleDriver,
    PipelineDriver,
    PortIO,
    StreamRuleError,
    run_driver,
)
from .report import Comparator, Mismatch, Report, transaction_where

__all__ = [
    "PROGRESS_INTERVAL",
    "compare_events",
    "drive_block",
    "free_run_of",
    "timing_facts",
]

#: Seconds between progress calls of a long simulation (see :func:`drive_block`).
PROGRESS_INTERVAL = 10.0


def free_run_of(count):
    """Stall-free leading transactions of a random check of ``count``: the first tenth."""
    return max(1, count // 10)


def compare_events(
    block, params, expected_bits, *, latency=None, ii=None, keep_outputs=False, free_run=0
):
    """A ``(report, on_output)`` pair: give ``on_output`` to a driver, then read the report.

    ``expected_bits`` is ``None`` (no comparison) or an iterable of bit patterns read in order,
    one per output. The first ``free_run`` transactions of a pipeline must each take exactly
    ``latency`` cycles and be accepted every ``ii`` cycles (``None``: not checked).
    """
    _, out_layout = block.layouts(**params)
    report = Report()
    report.free_run = free_run
    comparator = Comparator(report, out_layout, latency=latency, ii=ii, keep_outputs=keep_outputs)
    expected = None if expected_bits is None else iter(expected_bits)

    if block.kind == "pipeline":

        def on_output(event):
            where = transaction_where(event.index, event.accept_cycle, event.emit_cycle)
            want = None if expected is None else next(expected)
            comparator.output(event.index, where, event.bits, want)
            comparator.timing(event.index, event.accept_cycle, event.emit_cycle, where)
    else:

        def on_output(event):
            want = None if expected is None else next(expected)
            comparator.output(event.index, f"cycle {event.index}", event.bits, want)

    on_output.comparator = comparator
    return report, on_output


class _ProgressIO(PortIO):
    """``io`` that calls ``progress(cycles, report)`` at most every ``interval`` seconds."""

    def __init__(self, io, progress, report, interval):
        self._io, self._progress, self._report = io, progress, report
        self._due = Every(interval)
        self._cycles = 0

    def set(self, name, value):
        self._io.set(name, value)

    def get(self, name):
        return self._io.get(name)

    async def settle(self):
        await self._io.settle()

    async def tick(self):
        await self._io.tick()
        self._cycles += 1
        if self._due():
            self._progress(self._cycles, self._report)


async def drive_block(
    block, io, input_bits, stalls, report, on_output, *, progress=None, interval=None
):
    """Drive ``input_bits`` (an iterable or an :class:`~.engine.Source`) through ``block`` on any
    backend's ``io`` and complete ``report`` (made with ``on_output`` by :func:`compare_events`).

    Every backend calls this, so they apply the same stream-rule checks: a violation is counted as
    a failure and becomes the report's first mismatch (with its cycle) unless one came before.
    ``progress(cycles, report)``, if given, is called every ``interval`` seconds of a long run.
    """
    if progress is not None:
        io = _ProgressIO(io, progress, report, interval or PROGRESS_INTERVAL)
    if block.kind == "pipeline":
        driver = PipelineDriver(input_bits, stalls, on_output)
    else:
        driver = CycleDriver(input_bits, on_output)
    try:
        report.cycles = await run_driver(io, driver)
    except StreamRuleError as error:
        report.cycles = error.cycle + 1
        report.failed += 1
        report.stream_error = str(error)
        if report.first is None:
            report.first = Mismatch(
                f"cycle {error.cycle} (stream rule)", error.field, error.expected, error.got
            )
    comparator = getattr(on_output, "comparator", None)
    if comparator is not None:
        comparator.finish()
    return report
