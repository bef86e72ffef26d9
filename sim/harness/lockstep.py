"""Lockstep checking of a block's RTL against its golden model.

:func:`check` draws random stimuli from the block's registry entry, computes the golden outputs,
drives the RTL on the chosen backend (Amaranth's simulator or cocotb on Verilator) and compares
every transaction (pipelines) or every cycle (cycle-stepped blocks), field by field.
"""

import collections

import numpy as np

from ..core import layouts, registry
from ..core.progress import Every
from .engine import PortIO, StallPattern, StreamRuleError, drive_cycles, drive_pipeline

__all__ = [
    "BACKENDS",
    "Mismatch",
    "Report",
    "GoldenModel",
    "golden_outputs",
    "compare_events",
    "drive_block",
    "random_stream",
    "check",
    "run_block",
    "CHUNK",
]

#: Simulation backends: Amaranth's simulator, cocotb on Verilator, and the compiled batch driver
#: (:mod:`gpurtl.sim.backends.fast`, pipeline blocks only).
BACKENDS = ("pysim", "verilator", "fast")


class Mismatch:
    """The first difference between RTL and golden model."""

    def __init__(self, where, field, expected, got):
        self.where, self.field, self.expected, self.got = where, field, expected, got

    def __str__(self):
        return f"{self.where}: field `{self.field}` expected {self.expected}, got {self.got}"

    def to_json(self):
        return {
            "where": self.where,
            "field": self.field,
            "expected": self.expected,
            "got": self.got,
        }


class Report:
    """Outcome of a lockstep run: counts, the first mismatch, cycles run and RTL outputs."""

    def __init__(self):
        self.passed = self.failed = self.cycles = 0
        self.first = None
        self.outputs = []
        self.latency_errors = 0
        self.free_run = 0  # leading pipeline transactions sent with no stalls
        self.stream_error = None  # the stream-rule violation that stopped the run, if any
        self.build_s = 0.0  # seconds spent compiling the simulation model (Verilator)

    def line(self):
        return f"{self.passed} passed, {self.failed} failed"

    def to_json(self):
        return {
            "passed": self.passed,
            "failed": self.failed,
            "cycles": self.cycles,
            "first": self.first.to_json() if self.first else None,
            "latency_errors": self.latency_errors,
            "stream_error": self.stream_error,
            "outputs": [f"{bits:x}" for bits in self.outputs],
        }

    @classmethod
    def from_json(cls, obj):
        report = cls()
        report.passed, report.failed = obj["passed"], obj["failed"]
        report.cycles, report.latency_errors = obj["cycles"], obj["latency_errors"]
        first = obj["first"]
        report.first = Mismatch(**first) if first else None
        report.stream_error = obj.get("stream_error")
        report.outputs = [int(text, 16) for text in obj["outputs"]]
        return report


#: Transactions (or cycles) generated, run through the golden model and packed at a time by
#: :func:`check`: memory stays flat for any ``count``. Each chunk is one call of the block's
#: ``stimulus``, so the corner cases it puts first recur once per chunk. The first chunk is at
#: least the block's ``check_count``, so a run of up to that many is one call, as it always was
#: (the FP32 units' default run is their whole special-value cross product plus random vectors).
CHUNK = 4096

#: Seconds between progress calls of a long simulation (see :func:`drive_block`).
PROGRESS_INTERVAL = 10.0


class GoldenModel:
    """One golden model instance of ``block`` (state carries over between calls of cycle blocks)."""

    def __init__(self, block, params):
        self.kind = block.kind
        self.model = block.golden(**params)

    def outputs(self, inputs):
        """Golden outputs (dictionaries) for a list of input dictionaries."""
        if self.kind == "pipeline":
            if hasattr(self.model, "batch"):
                return list(self.model.batch(inputs))
            return [self.model(tx) for tx in inputs]
        return [self.model.step(tx) for tx in inputs]


def golden_outputs(block, params, inputs):
    """Golden outputs (dictionaries) for a list of input dictionaries."""
    return GoldenModel(block, params).outputs(inputs)


def compare_events(block, params, expected_bits, *, latency=None, keep_outputs=False):
    """A (report, callback) pair: feed the callback to a driver, then read the report.

    ``expected_bits`` is ``None`` (no comparison) or an iterable of bit patterns read in order,
    one per output.
    """
    _, out_layout = block.layouts(**params)
    report = Report()
    expected = None if expected_bits is None else iter(expected_bits)

    def record(where, got):
        if keep_outputs:
            report.outputs.append(got)
        if expected is None:
            report.passed += 1
            return
        difference = layouts.diff(out_layout, next(expected), got)
        if difference is None:
            report.passed += 1
            return
        report.failed += 1
        if report.first is None:
            leaf, e, g = difference
            report.first = Mismatch(
                where,
                leaf.path or "(whole value)",
                layouts.format_leaf_value(leaf, e),
                layouts.format_leaf_value(leaf, g),
            )

    if block.kind == "pipeline":

        def on_output(event):
            where = (
                f"transaction {event.index} (accepted cycle {event.accept_cycle}, "
                f"emitted cycle {event.emit_cycle})"
            )
            record(where, event.bits)
            if (
                latency is not None
                and event.emit_cycle - event.accept_cycle != latency
                and event.index < report.free_run
            ):
                report.latency_errors += 1
                if report.first is None:
                    report.first = Mismatch(
                        where, "(latency)", latency, event.emit_cycle - event.accept_cycle
                    )
    else:

        def on_output(cycle, bits):
            record(f"cycle {cycle}", bits)

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
    """Drive ``input_bits`` through ``block`` on any backend's ``io`` and complete ``report``.

    Both backends call this, so they apply the same stream-rule checks: a violation is counted as
    a failure and becomes the report's first mismatch (with its cycle) unless one came before.
    ``progress(cycles, report)``, if given, is called every ``interval`` seconds of a long run.
    """
    if progress is not None:
        io = _ProgressIO(io, progress, report, interval or PROGRESS_INTERVAL)
    try:
        if block.kind == "pipeline":
            report.free_run = stalls.free_run
            report.cycles = await drive_pipeline(io, input_bits, stalls, on_output)
        else:
            report.cycles = await drive_cycles(io, input_bits, on_output)
    except StreamRuleError as error:
        report.cycles = error.cycle + 1
        report.failed += 1
        report.stream_error = str(error)
        if report.first is None:
            report.first = Mismatch(
                f"cycle {error.cycle} (stream rule)", error.field, error.expected, error.got
            )
    report.failed += report.latency_errors
    return report


def random_stream(block, params, count, seed, *, chunk=None):
    """``(input_bits, expected_bits)``: two iterators over ``count`` random transactions (or
    cycles) of ``block`` and their golden outputs, produced ``chunk`` at a time.

    Reading ``input_bits`` generates the expected outputs of each chunk, so the driver must read an
    input before its output is compared (true for both drivers); memory holds one chunk.
    """
    chunk = chunk or CHUNK
    first = max(chunk, block.check_count)
    in_layout, out_layout = block.layouts(**params)
    rng = np.random.default_rng(seed)
    model = GoldenModel(block, params)
    expected = collections.deque()

    def inputs():
        done = 0
        while done < count:
            batch = block.stimulus(rng, min(first if done == 0 else chunk, count - done), **params)
            if not batch:
                raise ValueError(f"`stimulus` of block `{block.name}` returned no inputs")
            for value in model.outputs(batch):
                expected.append(layouts.pack(out_layout, value))
            for value in batch:
                yield layouts.pack(in_layout, value)
            done += len(batch)
            del batch

    def outputs():
        while True:
            yield expected.popleft()

    return inputs(), outputs()


def _pack_all(layout, values):
    return (layouts.pack(layout, value) for value in values)


def _simulate_pysim(block, params, input_bits, expected_bits, stalls, vcd, keep_outputs, progress):
    dut = block.build(**params)
    report, on_output = compare_events(
        block,
        params,
        expected_bits,
        latency=getattr(dut, "latency", None),
        keep_outputs=keep_outputs,
    )
    from ..backends.pysim import simulate

    simulate(
        dut,
        lambda io: drive_block(block, io, input_bits, stalls, report, on_output, progress=progress),
        vcd=vcd,
    )
    return report


def run_block(
    block,
    params,
    inputs,
    *,
    backend="pysim",
    expected=None,
    stalls=None,
    vcd=None,
    keep_outputs=False,
    progress=None,
):
    """Drive ``inputs`` (dictionaries) through the block's RTL on ``backend``.

    ``expected`` (dictionaries) enables comparison. ``progress(cycles, report)`` is called every
    few seconds of a long Amaranth-simulator run. Returns a :class:`Report`.
    """
    in_layout, out_layout = block.layouts(**params)
    stalls = stalls or StallPattern()
    if backend == "pysim":
        expected_bits = _pack_all(out_layout, expected) if expected is not None else None
        return _simulate_pysim(
            block,
            params,
            _pack_all(in_layout, inputs),
            expected_bits,
            stalls,
            vcd,
            keep_outputs,
            progress,
        )
    if backend == "verilator":
        from ..backends.verilator import run_cocotb

        expected_bits = None if expected is None else list(_pack_all(out_layout, expected))
        return run_cocotb(
            block,
            params,
            list(_pack_all(in_layout, inputs)),
            expected_bits,
            stalls,
            vcd=vcd,
            keep_outputs=keep_outputs,
        )
    if backend == "fast":
        from ..backends.fast.dispatch import run_block_fast

        expected_bits = None if expected is None else list(_pack_all(out_layout, expected))
        return run_block_fast(
            block,
            params,
            list(_pack_all(in_layout, inputs)),
            expected_bits,
            stalls,
            vcd=vcd,
            keep_outputs=keep_outputs,
        )
    raise registry.RegistryError(f"backend must be one of {', '.join(BACKENDS)}, not {backend!r}")


def check(
    block,
    params,
    *,
    count=None,
    seed=0,
    backend="pysim",
    vcd=None,
    p_valid=0.7,
    p_ready=0.7,
    progress=None,
    log=None,
):
    """Random lockstep check; returns a :class:`Report`.

    ``progress(cycles, report)`` hears a long Amaranth-simulator run; ``log(text)`` the phases
    of a fast-backend run (build, stimulus and golden outputs, simulation).

    Pipelines: the first tenth of the transactions run with no stalls (and must each take exactly
    ``latency`` cycles), the rest with random valid/ready stalls. Stimulus and golden outputs are
    produced in chunks (:data:`CHUNK`) as the run goes, so memory does not grow with ``count``.
    """
    count = block.check_count if count is None else count
    if backend == "fast":  # streams packed words from files: never a list of dictionaries
        from ..backends.fast.dispatch import check_fast

        return check_fast(
            block,
            params,
            count=count,
            seed=seed,
            vcd=vcd,
            p_valid=p_valid,
            p_ready=p_ready,
            log=log,
        )
    stalls = StallPattern(seed=seed, p_valid=p_valid, p_ready=p_ready, free_run=max(1, count // 10))
    if backend == "pysim":
        input_bits, expected_bits = random_stream(block, params, count, seed)
        return _simulate_pysim(
            block, params, input_bits, expected_bits, stalls, vcd, False, progress
        )
    if backend == "verilator":
        from ..backends.verilator import run_cocotb

        return run_cocotb(
            block, params, None, None, stalls, vcd=vcd, generate={"count": count, "seed": seed}
        )
    raise registry.RegistryError(f"backend must be one of {', '.join(BACKENDS)}, not {backend!r}")
