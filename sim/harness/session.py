"""Co-simulation sessions: the RTL inside the caller's loop.

A session is opened by a backend (``BACKENDS[name].session(block, params)``) and used as a
context manager. The caller sends transactions (one, or a batch such as a wave's 32 lanes),
advances the clock and reads the outputs in order; or, for a cycle-stepped block, applies one
cycle's inputs and reads that cycle's outputs. Values are dictionaries (as in
:mod:`gpurtl.sim.core.layouts`), bit patterns or word rows (:mod:`gpurtl.sim.core.words`).

With ``golden=True`` every output is compared with the block's golden model as it is produced,
and the first difference becomes ``session.report.first`` as in a lockstep check (``strict=True``
raises :class:`MismatchError` at once). The latency of every transaction that saw no output
stall is checked too, and so is the initiation interval: a transaction that was waiting in the
input queue when the one before it was accepted, with no stalls, must be accepted exactly
``initiation_interval`` cycles after it. A session keeps only what is in flight, so it runs in constant memory for
any number of transactions.

A backend implements two primitives: :meth:`Session._exchange` (pipelines: push input rows, run
the clock until enough outputs came out) and :meth:`Session._run_cycles` (cycle blocks).
"""

from __future__ import annotations

import abc
import collections
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

import numpy as np

from ..core import layouts
from ..core.words import (
    dicts_from_words,
    ints_from_words,
    word_count,
    words_from_dicts,
    words_from_ints,
)
from .engine import DONE, StallPattern
from .golden_io import GoldenModel
from .report import Comparator, Report, transaction_where

if TYPE_CHECKING:
    from ..core.registry import Block, Params

__all__ = ["Exchange", "MismatchError", "Output", "Session", "Source"]

#: A transaction or one cycle's inputs (or outputs): a dictionary of the block's layout fields.
Value = dict[str, Any]

#: ``free_run`` of a session without output stalls: every transaction's latency is checked.
EVERY = 1 << 62


class MismatchError(AssertionError):
    """A strict session's RTL output differs from the golden model (or took the wrong number of
    cycles); ``mismatch`` is the :class:`~.report.Mismatch`."""

    def __init__(self, mismatch):
        self.mismatch = mismatch
        super().__init__(str(mismatch))


class Exchange(NamedTuple):
    """What a backend's :meth:`Session._exchange` returns: the outputs that came out during the
    call (word rows and, per row, the cycles its input was accepted and it was emitted), how
    many inputs the RTL has accepted since the session opened, and the current cycle."""

    rows: np.ndarray
    accept: np.ndarray
    emit: np.ndarray
    accepted: int
    cycle: int


class Output(NamedTuple):
    """One output handed to a source by :meth:`Session.drive`: its index, value (dictionary),
    and the cycles its input was accepted and it was read (equal for a cycle block)."""

    index: int  # type: ignore[assignment]  # the output's index, not tuple.index
    value: dict
    accept_cycle: int
    emit_cycle: int


class Source(Protocol):
    """What :meth:`Session.drive` runs: the next input when asked, and every output."""

    def next(self, cycle: int) -> Any:
        """The next transaction or cycle's inputs, ``None`` or :data:`~.engine.DONE`."""

    def output(self, output: Output) -> None:
        """Hear one output."""


class Session(abc.ABC):
    """An open co-simulation of one block (see the module doc string).

    Parameters
    ----------
    block, params
        The registered block and its full parameter dictionary.
    golden : bool
        Compare every output with the golden model.
    stalls : StallPattern, optional
        Random valid/ready stalls of a pipeline's streams (none by default).
    strict : bool
        Raise :class:`MismatchError` at the first mismatch.
    latency : int, optional
        Cycles from an accepted input to its output without output stalls, as the backend's model
        has them; checked when given.
    initiation_interval : int, optional
        Cycles between the acceptance of back-to-back transactions, as the block's build declares
        it; checked when given (module doc string).
    """

    def __init__(
        self,
        block: Block,
        params: Params,
        *,
        golden: bool = True,
        stalls: StallPattern | None = None,
        strict: bool = False,
        latency: int | None = None,
        initiation_interval: int | None = None,
    ) -> None:
        self.block, self.params, self.kind = block, params, block.kind
        self.in_layout, self.out_layout = block.layouts(**params)
        self._in_words, self._out_words = word_count(self.in_layout), word_count(self.out_layout)
        self.stalls = stalls or StallPattern()
        self.strict = strict
        self.golden = GoldenModel(block, params) if golden else None
        self.report = Report()
        self.report.free_run = self.stalls.free_run if self.stalls.p_ready < 1 else EVERY
        self._comparator = Comparator(self.report, self.out_layout, latency=latency, live=True)
        self.initiation_interval = initiation_interval
        # transactions sent with no stalls of either stream: their acceptance is checked
        stalled = self.stalls.p_valid < 1 or self.stalls.p_ready < 1
        self._ii_free = self.stalls.free_run if stalled else EVERY
        self._pushed: collections.deque[Any] = (
            collections.deque()
        )  # (cycle, rows) pushed to the backend, not yet out
        self._last_accept = None  # the cycle the previous output's input was accepted
        self.cycle = 0
        self.sent = 0  # transactions the caller sent
        self.accepted = 0  # ... that the RTL accepted
        self.produced = 0  # outputs the RTL produced (and the session compared)
        self.received = 0  # outputs handed to the caller
        self._inbox: list[np.ndarray] = []  # rows sent and not yet pushed to the backend
        self._expected: collections.deque[Any] = (
            collections.deque()
        )  # golden rows of the outputs not yet produced
        self._outbox: collections.deque[Any] = (
            collections.deque()
        )  # (rows, accept, emit) produced, not yet received
        self._closed = False

    # --- context manager ------------------------------------------------------------------------

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """End the simulation (writes the waveform of a backend that records one)."""
        if not self._closed:
            self._closed = True
            self._close()

    def _close(self):
        """Release what the backend holds (a simulator process, a waveform file)."""
        return None

    def _need(self, kind):
        if self._closed:
            raise RuntimeError("the session is closed")
        if self.kind != kind:
            other = "send/receive" if self.kind == "pipeline" else "apply"
            raise TypeError(f"`{self.block.name}` is a {self.kind} block: use {other}")

    # --- pipelines ------------------------------------------------------------------------------

    @property
    def in_flight(self) -> int:
        """Transactions sent whose outputs the caller has not received yet."""
        return self.sent - self.received

    def send(self, transactions: Value | Sequence[Value]) -> None:
        """Queue one transaction (a dictionary) or a list of them for the input stream."""
        self._need("pipeline")
        if isinstance(transactions, dict):
            transactions = [transactions]
        expected = None
        if self.golden is not None:
            outputs = self.golden.outputs(transactions)
            expected = words_from_ints(
                self.out_layout, [layouts.pack(self.out_layout, value) for value in outputs]
            )
        self._enqueue(words_from_dicts(self.in_layout, transactions), expected)

    def send_bits(self, values: Sequence[int]) -> None:
        """:meth:`send` for bit patterns."""
        self.send_words(words_from_ints(self.in_layout, values))

    def send_words(self, rows: np.ndarray) -> None:
        """:meth:`send` for word rows (``(N, W)`` uint32)."""
        self._need("pipeline")
        rows = np.ascontiguousarray(rows, dtype=np.uint32).reshape(-1, self._in_words)
        self._enqueue(rows, None if self.golden is None else self.golden.rows(rows))

    def _enqueue(self, rows, expected):
        if not len(rows):
            return
        if expected is not None:
            self._expected.append(expected)
        self._inbox.append(rows)
        self.sent += len(rows)

    def step(self, cycles: int = 1) -> None:
        """Advance the clock ``cycles`` cycles; outputs that come out wait for :meth:`receive`."""
        self._need("pipeline")
        self._run(outputs=0, cycles=cycles)

    def receive(self, count: int | None = None) -> list[Value]:
        """The next ``count`` outputs (dictionaries), in order; the clock runs until they are
        out. ``count=None``: every transaction in flight."""
        return dicts_from_words(self.out_layout, self.receive_words(count))

    def receive_bits(self, count: int | None = None) -> list[int]:
        """:meth:`receive` as bit patterns."""
        return ints_from_words(self.receive_words(count))

    def receive_words(self, count: int | None = None) -> np.ndarray:
        """:meth:`receive` as word rows."""
        self._need("pipeline")
        count = self.in_flight if count is None else count
        if not 0 <= count <= self.in_flight:
            raise ValueError(
                f"`count` must be at most the {self.in_flight} transactions in flight, not {count}"
            )
        waiting = sum(len(rows) for rows, _, _ in self._outbox)
        if count > waiting:
            self._run(outputs=count - waiting, cycles=0)
        taken, need = [], count
        while need:
            rows, accept, emit = self._outbox.popleft()
            if len(rows) > need:
                self._outbox.appendleft((rows[need:], accept[need:], emit[need:]))
                rows, accept, emit = rows[:need], accept[:need], emit[:need]
            taken.append((rows, accept, emit))
            need -= len(rows)
        self.received += count
        self.last_timing = (
            np.concatenate([a for _, a, _ in taken]) if taken else np.zeros(0, np.int64),
            np.concatenate([e for _, _, e in taken]) if taken else np.zeros(0, np.int64),
        )
        if not taken:
            return np.zeros((0, self._out_words), dtype=np.uint32)
        return np.concatenate([rows for rows, _, _ in taken])

    def _run(self, outputs, cycles):
        rows = np.concatenate(self._inbox) if self._inbox else None
        self._inbox: list[np.ndarray] = []
        if rows is not None:
            self._pushed.append([self.cycle, len(rows)])
        result = self._exchange(rows, outputs=outputs, cycles=cycles)
        self.accepted, self.cycle = result.accepted, result.cycle
        self.report.cycles = self.cycle
        if len(result.rows):
            self._compare(result)
            self._outbox.append((result.rows, result.accept, result.emit))

    def _compare(self, result):
        first, n = self.produced, len(result.rows)
        expected = None
        if self.golden is not None:
            parts, need = [], n
            while need:
                chunk = self._expected.popleft()
                if len(chunk) > need:
                    self._expected.appendleft(chunk[need:])
                    chunk = chunk[:need]
                parts.append(chunk)
                need -= len(chunk)
            expected = np.concatenate(parts)

        def where(index):
            k = index - first
            return transaction_where(index, int(result.accept[k]), int(result.emit[k]))

        self._comparator.rows(first, result.rows, expected, where)
        latency = self._comparator.latency
        if latency is not None:
            took = result.emit - result.accept
            index = first + np.arange(n)
            for k in np.flatnonzero((took != latency) & (index < self.report.free_run)):
                self._comparator.latency_error(first + int(k), where(first + int(k)), int(took[k]))
        for k in range(n):
            self._interval(first + k, int(result.accept[k]), where)
        self.produced += n
        if self.strict and self.report.first is not None:
            raise MismatchError(self.report.first)

    def _interval(self, index, accept, where):
        """Check that transaction ``index``, accepted in cycle ``accept``, came
        ``initiation_interval`` cycles after the one before when it was already waiting."""
        pushed = self._pushed[0]
        pushed_cycle = pushed[0]
        pushed[1] -= 1
        if not pushed[1]:
            self._pushed.popleft()
        previous, self._last_accept = self._last_accept, accept
        ii = self.initiation_interval
        if ii is None or previous is None or index >= self._ii_free or pushed_cycle > previous:
            return
        if accept - previous != ii:
            self._comparator.ii_error(
                index, where(index), accept - previous, 1, ii=ii, after="the transaction before"
            )

    # --- cycle-stepped blocks -------------------------------------------------------------------

    def apply(self, inputs: Value) -> Value:
        """Apply one cycle's inputs (a dictionary); returns the outputs read in that cycle."""
        return self.apply_all([inputs])[0]

    def apply_all(self, inputs: Sequence[Value]) -> list[Value]:
        """Apply a list of per-cycle inputs, one per cycle; returns the outputs of each cycle."""
        self._need("cycle")
        bits = [layouts.pack(self.in_layout, value) for value in inputs]
        expected = None
        if self.golden is not None:
            outputs = self.golden.outputs(inputs)
            expected = [layouts.pack(self.out_layout, value) for value in outputs]
        return [layouts.unpack(self.out_layout, got) for got in self._cycles(bits, expected)]

    def apply_bits(self, bits: Sequence[int]) -> list[int]:
        """:meth:`apply_all` on bit patterns."""
        self._need("cycle")
        return self._cycles(bits, None if self.golden is None else self.golden.bits(bits))

    def apply_words(self, rows: np.ndarray) -> np.ndarray:
        """:meth:`apply_all` on word rows."""
        return words_from_ints(self.out_layout, self.apply_bits(ints_from_words(rows)))

    def _cycles(self, bits, expected):
        got = self._run_cycles(list(bits))
        for k, value in enumerate(got):
            index = self.cycle + k
            want = None if expected is None else expected[k]
            self._comparator.output(index, f"cycle {index}", value, want)
        self.cycle += len(got)
        self.report.cycles = self.cycle
        self.produced += len(got)
        self.received += len(got)
        if self.strict and self.report.first is not None:
            raise MismatchError(self.report.first)
        return got

    # --- a source in the loop -------------------------------------------------------------------

    def drive(self, source: Source, *, max_cycles: int | None = None) -> Report:
        """Run until ``source`` is done: it is asked for the next transaction whenever the
        previous one was accepted (pipelines) or for every cycle's inputs (cycle blocks), as a
        dictionary, ``None`` (a pipeline source with nothing to send in this cycle) or
        :data:`~.engine.DONE`; it hears every :class:`Output`. A pipeline runs until everything
        sent came out. Returns the report."""
        start = self.cycle
        if self.kind == "cycle":
            while max_cycles is None or self.cycle - start < max_cycles:
                value = source.next(self.cycle)
                if value is DONE or value is None:
                    break
                cycle = self.cycle
                source.output(Output(cycle, self.apply(value), cycle, cycle))
            return self.report
        done = False
        while max_cycles is None or self.cycle - start < max_cycles:
            if not done and self.accepted == self.sent:
                value = source.next(self.cycle)
                if value is DONE:
                    done = True
                elif value is not None:
                    self.send(value)
            if done and self.received == self.sent:
                break
            self.step(1)
            while self._outbox:
                index = self.received
                (value,) = self.receive(1)
                accept, emit = self.last_timing
                source.output(Output(index, value, int(accept[0]), int(emit[0])))
        return self.report

    # --- what a backend provides ----------------------------------------------------------------

    @abc.abstractmethod
    def _exchange(self, rows, *, outputs, cycles):
        """Push the input rows ``rows`` (or ``None``) onto the RTL's input queue, then run the
        clock until at least ``outputs`` outputs came out and at least ``cycles`` cycles ran
        during this call; returns an :class:`Exchange`."""

    def _run_cycles(self, bits):
        """Apply the input bit patterns one per cycle; return the output bit patterns read in each
        cycle."""
        raise NotImplementedError(f"{type(self).__name__} runs pipeline blocks only")
