"""What a simulation backend provides: the :class:`Backend` interface.

The harness and the tools work with any object that implements it; the concrete backends live in
:mod:`gpurtl.sim.backends` (listed, by name, in its ``BACKENDS`` table), and nothing below that
package imports them.
"""

from __future__ import annotations

import abc
import resource
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ..core import layouts
from ..core.export import cxx_toolchain
from ..core.registry import Block, Params, RegistryError
from .engine import StallPattern
from .lockstep import free_run_of

if TYPE_CHECKING:
    from .report import Report
    from .session import Session

#: ``progress(cycles, report)``: hears a long run every few seconds.
Progress = Callable[[int, Any], None]

__all__ = ["Backend", "cpu_seconds"]


def cpu_seconds() -> float:
    """CPU time of this process and its finished children (drivers, cocotb, compilers)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


class Backend(abc.ABC):
    """A simulator that runs registered blocks.

    Attributes
    ----------
    name : str
        The name the command line and ``BACKENDS`` use.
    summary : str
        One line for the command line's help.
    kinds : tuple of str
        The block kinds it runs (``"pipeline"``, ``"cycle"``).
    waveforms : bool
        Whether it writes a VCD (``vcd=``).
    tools : tuple of str
        System tools it needs besides PyPI packages (``("c++", "make")``); :meth:`require_tools`
        checks them.
    variants : tuple
        The models it can run a block as (``(None,)``: one); ``gpurtl bench`` times each
        (:meth:`timed_run`).
    python_per_cycle : bool
        Whether Python code runs in every simulated cycle (thousands of cycles per second, not
        millions): ``gpurtl bench`` gives such a backend fewer transactions.
    benched : bool
        Whether ``gpurtl bench`` measures it when no ``--backends`` are named.
    sessions : bool
        Whether it opens co-simulation sessions (:meth:`session`); a batch-only backend refuses
        with a :class:`~gpurtl.sim.core.registry.RegistryError`.
    """

    name: str | None = None
    summary: str = ""
    kinds: tuple[str, ...] = ("pipeline", "cycle")
    waveforms: bool = True
    tools: tuple[str, ...] = ()
    variants: tuple[str | None, ...] = (None,)
    python_per_cycle: bool = True
    benched: bool = True
    sessions: bool = True

    def __repr__(self) -> str:
        return f"<backend {self.name}>"

    # --- what every caller checks first ---------------------------------------------------------

    def require(self, block: Block, *, vcd: str | None = None) -> None:
        """Raise :class:`~gpurtl.sim.core.registry.RegistryError` when this backend cannot run
        ``block`` (its kind) or write the waveform ``vcd``."""
        if block.kind not in self.kinds:
            kind = "cycle-stepped" if block.kind == "cycle" else "a pipeline"
            raise RegistryError(
                f"the {self.name} backend runs {' and '.join(self.kinds)} blocks only; "
                f"`{block.name}` is {kind} (use another --backend)"
            )
        self.require_waveforms(vcd)

    def require_waveforms(self, vcd: str | None) -> None:
        """Raise :class:`~gpurtl.sim.core.registry.RegistryError` when ``vcd`` names a waveform
        and this backend writes none."""
        if vcd and not self.waveforms:
            raise RegistryError(
                f"the {self.name} backend writes no waveform; use a backend that does with --vcd"
            )

    def require_tools(self) -> None:
        """Raise :class:`~gpurtl.sim.core.export.ToolchainError` naming what to install when a
        system tool this backend needs is missing."""
        if self.tools:
            cxx_toolchain(f"the {self.name} backend")

    # --- batch runs -----------------------------------------------------------------------------

    def run(
        self,
        block: Block,
        params: Params,
        inputs: Sequence[dict[str, Any]],
        *,
        expected: Sequence[dict[str, Any]] | None = None,
        stalls: StallPattern | None = None,
        vcd: str | None = None,
        keep_outputs: bool = False,
        progress: Progress | None = None,
    ) -> Report:
        """Drive ``inputs`` (a list of dictionaries) through the block's RTL; returns a
        :class:`~.report.Report`.

        ``expected`` (dictionaries) enables comparison; ``stalls`` (a
        :class:`~.engine.StallPattern`, by default none) applies to pipelines; ``progress(cycles,
        report)`` hears a long run every few seconds where the backend can tell.
        """
        self.require(block, vcd=vcd)
        in_layout, out_layout = block.layouts(**params)
        input_bits = [layouts.pack(in_layout, value) for value in inputs]
        expected_bits = (
            None if expected is None else [layouts.pack(out_layout, value) for value in expected]
        )
        return self.run_bits(
            block,
            params,
            input_bits,
            expected_bits,
            stalls or StallPattern(),
            vcd=vcd,
            keep_outputs=keep_outputs,
            progress=progress,
        )

    @abc.abstractmethod
    def run_bits(
        self,
        block: Block,
        params: Params,
        input_bits: Sequence[int],
        expected_bits: Sequence[int] | None,
        stalls: StallPattern,
        *,
        vcd: str | None = None,
        keep_outputs: bool = False,
        progress: Progress | None = None,
    ) -> Report:
        """:meth:`run` on packed bit patterns (``expected_bits`` may be ``None``)."""

    def check(
        self,
        block: Block,
        params: Params,
        *,
        count: int | None = None,
        seed: int = 0,
        vcd: str | None = None,
        p_valid: float = 0.7,
        p_ready: float = 0.7,
        free_run: int | None = None,
        progress: Progress | None = None,
        log: Callable[[str], None] | None = None,
    ) -> Report:
        """Random lockstep check; returns a :class:`~.report.Report`.

        Pipelines: the first ``free_run`` transactions (by default the first tenth) run with no
        stalls and must each take exactly the block's ``latency`` cycles and be accepted every
        ``initiation_interval`` cycles (1 unless the build declares another); the rest run with
        random valid/ready stalls (``p_valid``, ``p_ready``). Stimulus and golden outputs are
        produced in chunks as the run goes, so memory does not grow with ``count``.
        ``progress(cycles, report)`` hears a long simulation, ``log(text)`` the phases of a
        backend that has phases (build, stimulus, simulation).
        """
        self.require(block, vcd=vcd)
        count = block.check_count if count is None else count
        if count < 1:
            raise ValueError(f"`count` must be a positive integer, not {count}")
        stalls = StallPattern(
            seed=seed,
            p_valid=p_valid,
            p_ready=p_ready,
            free_run=free_run_of(count) if free_run is None else free_run,
        )
        return self.check_stream(
            block, params, count, seed, stalls, vcd=vcd, progress=progress, log=log
        )

    @abc.abstractmethod
    def check_stream(
        self,
        block: Block,
        params: Params,
        count: int,
        seed: int,
        stalls: StallPattern,
        *,
        vcd: str | None = None,
        progress: Progress | None = None,
        log: Callable[[str], None] | None = None,
    ) -> Report:
        """:meth:`check` once its arguments are checked: ``count`` random transactions (or
        cycles) drawn with ``seed``, under ``stalls``."""

    # --- measurement ----------------------------------------------------------------------------

    def variant_name(self, variant: str | None) -> str:
        """The name ``gpurtl bench`` gives a variant (``fast-batch``)."""
        return str(self.name) if variant is None else f"{self.name}-{variant}"

    @abc.abstractmethod
    def timed_run(
        self,
        block: Block,
        params: Params,
        in_rows: Any,
        expected_rows: Any,
        stalls: StallPattern,
        *,
        variant: str | None = None,
        work: str | None = None,
    ) -> tuple[Report, float, float, float]:
        """Run the word rows ``in_rows`` and compare with ``expected_rows``, timing the build
        (elaboration, export, compilation) apart from the simulation; returns ``(report,
        build_seconds, sim_seconds, sim_cpu_seconds)``. The CPU time is that of every process
        that simulates (this one and its children). ``work`` is a scratch folder."""

    # --- co-simulation --------------------------------------------------------------------------

    @abc.abstractmethod
    def session(
        self,
        block: Block,
        params: Params,
        *,
        golden: bool = True,
        stalls: StallPattern | None = None,
        vcd: str | None = None,
        strict: bool = False,
    ) -> Session:
        """An open :class:`~.session.Session` on ``block``: the caller sends transactions (or
        applies a cycle's inputs), advances the clock and reads the outputs in order; with
        ``golden`` every output is compared with the golden model (``strict``: a mismatch raises
        :class:`~.session.MismatchError` at once). Use it as a context manager."""
