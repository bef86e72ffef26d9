"""What a lockstep run found: :class:`Report` and its first :class:`Mismatch`, and the
:class:`Comparator` that every backend fills them with (one output at a time or a whole array of
word rows at once)."""

import numpy as np

from ..core import layouts
from ..core.words import ints_from_words

__all__ = ["Mismatch", "Report", "Comparator", "cycles_per_second", "transaction_where"]


def cycles_per_second(cycles, seconds):
    """``"1234 cycles/s"``, or to three significant figures below 100 (``"0.42 cycles/s"``),
    never a rate rounded to 0; ``"not timed"`` when no time was measured."""
    if seconds <= 0:
        return "not timed"
    rate = cycles / seconds
    return f"{rate:.0f} cycles/s" if rate >= 100 or rate == 0 else f"{rate:.3g} cycles/s"


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
    """Outcome of a lockstep run: counts, the first mismatch, cycles run and RTL outputs.

    ``failed`` counts the outputs that differ from the golden model plus every timing error
    (``latency_errors``: a stall-free transaction that did not take exactly the block's latency;
    ``ii_errors``: one that was not accepted ``initiation_interval`` cycles after the previous
    one) and a broken stream rule.
    """

    def __init__(self):
        self.passed = self.failed = self.cycles = 0
        self.first = None
        self.outputs = []
        self.latency_errors = 0
        self.ii_errors = 0
        self.free_run = 0  # leading pipeline transactions sent with no stalls
        self.stream_error = None  # the stream-rule violation that stopped the run, if any
        self.build_s = 0.0  # seconds spent compiling the simulation model (Verilator)

    @property
    def timing_errors(self):
        return self.latency_errors + self.ii_errors

    def line(self):
        return f"{self.passed} passed, {self.failed} failed"

    def to_json(self):
        return {
            "passed": self.passed,
            "failed": self.failed,
            "cycles": self.cycles,
            "first": self.first.to_json() if self.first else None,
            "latency_errors": self.latency_errors,
            "ii_errors": self.ii_errors,
            "stream_error": self.stream_error,
            "outputs": [f"{bits:x}" for bits in self.outputs],
        }

    @classmethod
    def from_json(cls, obj):
        report = cls()
        report.passed, report.failed = obj["passed"], obj["failed"]
        report.cycles, report.latency_errors = obj["cycles"], obj["latency_errors"]
        report.ii_errors = obj.get("ii_errors", 0)
        first = obj["first"]
        report.first = Mismatch(**first) if first else None
        report.stream_error = obj.get("stream_error")
        report.outputs = [int(text, 16) for text in obj["outputs"]]
        return report


def transaction_where(index, accept_cycle, emit_cycle):
    return f"transaction {index} (accepted cycle {accept_cycle}, emitted cycle {emit_cycle})"


class Comparator:
    """Fills ``report`` with the comparison of RTL outputs and golden outputs of one block.

    The report's ``first`` mismatch is the one of the smallest index, whatever the order in which
    outputs are compared (the fast backend compares slices that ran in parallel). The timing of a
    pipeline's first ``report.free_run`` transactions is checked against ``latency`` and ``ii``
    (either may be ``None``: not checked). Timing errors count as failures at :meth:`finish`, or
    at once when ``live`` (a session, whose report is read while it runs).
    """

    def __init__(
        self, report, out_layout, *, latency=None, ii=None, keep_outputs=False, live=False
    ):
        self.report, self.out_layout = report, out_layout
        self.latency, self.ii, self.keep_outputs = latency, ii, keep_outputs
        self.live = live
        self._first_index = None
        self._first_accept = None  # accept cycle of transaction 0 (the II reference)

    def _mismatch(self, index, mismatch):
        if self._first_index is None or index < self._first_index:
            self._first_index, self.report.first = index, mismatch

    def value_mismatch(self, index, where, expected_bits, got_bits):
        """A :class:`Mismatch` naming the first differing field, or ``None`` when equal."""
        difference = layouts.diff(self.out_layout, expected_bits, got_bits)
        if difference is None:
            return None
        leaf, e, g = difference
        return Mismatch(
            where,
            leaf.path or "(whole value)",
            layouts.format_leaf_value(leaf, e),
            layouts.format_leaf_value(leaf, g),
        )

    def output(self, index, where, got_bits, expected_bits=None):
        """Compare one output (``expected_bits=None``: nothing to compare with, counts as
        passed)."""
        if self.keep_outputs:
            self.report.outputs.append(got_bits)
        if expected_bits is None or expected_bits == got_bits:
            self.report.passed += 1
            return
        mismatch = self.value_mismatch(index, where, expected_bits, got_bits)
        if mismatch is None:
            self.report.passed += 1
            return
        self.report.failed += 1
        self._mismatch(index, mismatch)

    def rows(self, first, got, expected=None, where=None):
        """Compare word rows ``got`` (outputs ``first``, ``first + 1`` ...) with ``expected``
        rows (or nothing); ``where(index)`` describes an output for the first mismatch."""
        got = np.asarray(got)
        if self.keep_outputs:
            self.report.outputs.extend(ints_from_words(got))
        if expected is None:
            self.report.passed += len(got)
            return
        expected = np.asarray(expected)
        bad = np.flatnonzero(np.any(got != expected, axis=1))
        self.report.failed += len(bad)
        self.report.passed += len(got) - len(bad)
        if len(bad) and (self._first_index is None or first + int(bad[0]) < self._first_index):
            row = int(bad[0])
            e, g = (
                ints_from_words(expected[row : row + 1])[0],
                ints_from_words(got[row : row + 1])[0],
            )
            index = first + row
            self._mismatch(index, self.value_mismatch(index, where(index), e, g))

    def timing(self, index, accept_cycle, emit_cycle, where):
        """Check a stall-free transaction's latency and initiation interval."""
        if index == 0:
            self._first_accept = accept_cycle
        if index >= self.report.free_run:
            return
        took = emit_cycle - accept_cycle
        if self.latency is not None and took != self.latency:
            self.latency_error(index, where, took)
        if self.ii is not None and self._first_accept is not None:
            expected = self._first_accept + self.ii * index
            if accept_cycle != expected:
                self.ii_error(index, where, accept_cycle - self._first_accept, index)

    def latency_error(self, index, where, took):
        self.report.latency_errors += 1
        self.report.failed += self.live
        self._mismatch(index, Mismatch(where, "(latency)", self.latency, took))

    def ii_error(self, index, where, since_first, count, *, ii=None, after="transaction 0"):
        """Transaction ``index`` was accepted ``since_first`` cycles after ``after``, not ``ii *
        count`` (``ii``: by default the comparator's)."""
        ii = self.ii if ii is None else ii
        self.report.ii_errors += 1
        self.report.failed += self.live
        self._mismatch(
            index,
            Mismatch(
                where,
                "(initiation interval)",
                f"accepted {ii * count} cycles after {after}",
                f"{since_first} cycles",
            ),
        )

    def finish(self):
        """Count the timing errors as failures (once, at the end of a run that is not live)."""
        if not self.live:
            self.report.failed += self.report.timing_errors
        return self.report
