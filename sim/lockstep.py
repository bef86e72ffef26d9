"""Lockstep checking of a block's RTL against its golden model.

:func:`check` draws random stimuli from the block's registry entry, computes the golden outputs,
drives the RTL on the chosen backend (Amaranth's simulator or cocotb on Verilator) and compares
every transaction (pipelines) or every cycle (cycle-stepped blocks), field by field.
"""

import numpy as np

from . import layouts, registry
from .engine import StallPattern, drive_cycles, drive_pipeline

__all__ = ["BACKENDS", "Mismatch", "Report", "golden_outputs", "compare_events", "check",
           "run_block"]

#: Simulation backends: Amaranth's simulator, cocotb on Verilator, and the compiled batch driver
#: (:mod:`gpurtl.sim.fast`, pipeline blocks only).
BACKENDS = ("pysim", "verilator", "fast")


class Mismatch:
    """The first difference between RTL and golden model."""

    def __init__(self, where, field, expected, got):
        self.where, self.field, self.expected, self.got = where, field, expected, got

    def __str__(self):
        return f"{self.where}: field `{self.field}` expected {self.expected}, got {self.got}"

    def to_json(self):
        return {"where": self.where, "field": self.field, "expected": self.expected, "got": self.got}


class Report:
    """Outcome of a lockstep run: counts, the first mismatch, cycles run and RTL outputs."""

    def __init__(self):
        self.passed = self.failed = self.cycles = 0
        self.first = None
        self.outputs = []
        self.latency_errors = 0
        self.free_run = 0        # leading pipeline transactions sent with no stalls

    def line(self):
        return f"{self.passed} passed, {self.failed} failed"

    def to_json(self):
        return {"passed": self.passed, "failed": self.failed, "cycles": self.cycles,
                "first": self.first.to_json() if self.first else None,
                "latency_errors": self.latency_errors,
                "outputs": [f"{bits:x}" for bits in self.outputs]}

    @classmethod
    def from_json(cls, obj):
        report = cls()
        report.passed, report.failed = obj["passed"], obj["failed"]
        report.cycles, report.latency_errors = obj["cycles"], obj["latency_errors"]
        first = obj["first"]
        report.first = Mismatch(**first) if first else None
        report.outputs = [int(text, 16) for text in obj["outputs"]]
        return report


def golden_outputs(block, params, inputs):
    """Golden outputs (dictionaries) for a list of input dictionaries."""
    model = block.golden(**params)
    if block.kind == "pipeline":
        if hasattr(model, "batch"):
            return list(model.batch(inputs))
        return [model(tx) for tx in inputs]
    return [model.step(tx) for tx in inputs]


def compare_events(block, params, expected_bits, *, latency=None, keep_outputs=False):
    """A (report, callback) pair: feed the callback to a driver, then read the report."""
    _, out_layout = block.layouts(**params)
    report = Report()

    def record(where, index, got):
        if keep_outputs:
            report.outputs.append(got)
        if expected_bits is None:
            report.passed += 1
            return
        difference = layouts.diff(out_layout, expected_bits[index], got)
        if difference is None:
            report.passed += 1
            return
        report.failed += 1
        if report.first is None:
            leaf, e, g = difference
            report.first = Mismatch(where, leaf.path or "(whole value)",
                                    layouts.format_leaf_value(leaf, e),
                                    layouts.format_leaf_value(leaf, g))

    if block.kind == "pipeline":
        def on_output(event):
            where = f"transaction {event.index} (accepted cycle {event.accept_cycle}, " \
                    f"emitted cycle {event.emit_cycle})"
            record(where, event.index, event.bits)
            if latency is not None and event.emit_cycle - event.accept_cycle != latency and \
                    event.index < report.free_run:
                report.latency_errors += 1
                if report.first is None:
                    report.first = Mismatch(where, "(latency)", latency,
                                            event.emit_cycle - event.accept_cycle)
    else:
        def on_output(cycle, bits):
            record(f"cycle {cycle}", cycle, bits)
    return report, on_output


def _pack_all(layout, values):
    return [layouts.pack(layout, value) for value in values]


def run_block(block, params, inputs, *, backend="pysim", expected=None, stalls=None, vcd=None,
              keep_outputs=False):
    """Drive ``inputs`` (dictionaries) through the block's RTL on ``backend``.

    ``expected`` (dictionaries) enables comparison. Returns a :class:`Report`.
    """
    in_layout, out_layout = block.layouts(**params)
    input_bits = _pack_all(in_layout, inputs)
    expected_bits = _pack_all(out_layout, expected) if expected is not None else None
    stalls = stalls or StallPattern()
    if backend == "pysim":
        dut = block.build(**params)
        latency = getattr(dut, "latency", None)
        report, on_output = compare_events(block, params, expected_bits, latency=latency,
                                           keep_outputs=keep_outputs)
        if block.kind == "pipeline":
            report.free_run = stalls.free_run
            driver = lambda io: drive_pipeline(io, input_bits, stalls, on_output)
        else:
            driver = lambda io: drive_cycles(io, input_bits, on_output)
        from .pysim import simulate
        report.cycles = simulate(dut, driver, vcd=vcd)
        report.failed += report.latency_errors
        return report
    if backend == "verilator":
        from .verilator import run_cocotb
        return run_cocotb(block, params, input_bits, expected_bits, stalls,
                          vcd=vcd, keep_outputs=keep_outputs)
    if backend == "fast":
        from .fast.dispatch import run_block_fast
        return run_block_fast(block, params, input_bits, expected_bits, stalls, vcd=vcd,
                              keep_outputs=keep_outputs)
    raise registry.RegistryError(f"backend must be one of {', '.join(BACKENDS)}, not {backend!r}")


def check(block, params, *, count=None, seed=0, backend="pysim", vcd=None,
          p_valid=0.7, p_ready=0.7):
    """Random lockstep check; returns a :class:`Report`.

    Pipelines: the first tenth of the transactions run with no stalls (and must each take exactly
    ``latency`` cycles), the rest with random valid/ready stalls.
    """
    count = block.check_count if count is None else count
    if backend == "fast":       # streams packed words from files: never a list of dictionaries
        from .fast.dispatch import check_fast
        return check_fast(block, params, count=count, seed=seed, vcd=vcd, p_valid=p_valid,
                          p_ready=p_ready)
    rng = np.random.default_rng(seed)
    inputs = block.stimulus(rng, count, **params)
    expected = golden_outputs(block, params, inputs)
    stalls = StallPattern(seed=seed, p_valid=p_valid, p_ready=p_ready,
                          free_run=max(1, len(inputs) // 10))
    return run_block(block, params, inputs, backend=backend, expected=expected,
                     stalls=stalls, vcd=vcd)
