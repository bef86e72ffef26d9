"""The ``pysim`` backend: Amaranth's Python simulator, in this process.

Batch runs drive the block with the coroutines of :mod:`gpurtl.sim.harness.engine`; a session
runs the simulator one clock cycle at a time from the caller's loop (:class:`Stepper`) and gives
white-box access to the design: :attr:`PysimSession.dut` and a ``before_cycle(ctx, cycle)`` hook
that may read or force any signal before a cycle's inputs are applied.
"""

import collections
import contextlib
import time

import numpy as np
from amaranth.hdl import Value
from amaranth.sim import Simulator

from ..core.files import UsageError
from ..core.words import ints_from_words, words_from_ints
from ..harness.backend import Backend, cpu_seconds
from ..harness.engine import PipelineDriver, PortIO, Source
from ..harness.golden_io import random_stream
from ..harness.lockstep import compare_events, drive_block
from ..harness.session import Exchange, Session

__all__ = [
    "PysimBackend",
    "PysimSession",
    "AmaranthIO",
    "Simulation",
    "Stepper",
    "port_map",
    "simulate",
]

#: Period of the simulated clock, in seconds (any value: only cycles are counted).
PERIOD = 1e-8


def port_map(dut):
    """Ports of a component keyed by their exported Verilog names (``i__payload``, ``o``...)."""
    ports = {}
    for path, _flow, value in dut.signature.flatten(dut):
        ports["__".join(str(part) for part in path)] = Value.cast(value)
    return ports


class AmaranthIO(PortIO):
    """The ports of a design in Amaranth's simulator; ``ctx`` is the testbench context."""

    def __init__(self, ctx, ports):
        self.ctx, self._ports = ctx, ports

    def set(self, name, value):
        self.ctx.set(self._ports[name], value)

    def get(self, name):
        return self.ctx.get(self._ports[name])

    async def settle(self):
        pass  # ctx.get() already sees settled combinational logic

    async def tick(self):
        await self.ctx.tick()


def _vcd_writer(sim, vcd, ports):
    return sim.write_vcd(vcd, traces=list(ports.values())) if vcd else contextlib.nullcontext()


def _cannot_write(error, vcd):
    """A waveform that could not be written (/dev/full, a full disk) as one error line."""
    if not vcd or error.filename not in (None, str(vcd)):
        raise error
    raise UsageError(f"cannot write `{vcd}`: {error.strerror or error}") from None


class Simulation:
    """``dut`` in Amaranth's simulator with a clock (constructing it compiles the design)."""

    def __init__(self, dut):
        self.ports = port_map(dut)
        self.sim = Simulator(dut)
        self.sim.add_clock(PERIOD)

    def run(self, driver, *, vcd=None, extra_testbenches=()):
        """Run ``await driver(io)``; return its result. ``vcd`` names a VCD file to write (the
        file is written even when the driver raises)."""
        result = {}

        async def testbench(ctx):
            result["value"] = await driver(AmaranthIO(ctx, self.ports))

        self.sim.add_testbench(testbench)
        for extra in extra_testbenches:
            self.sim.add_testbench(extra, background=True)
        try:
            # writes the named file itself: a FIFO stays a FIFO
            with _vcd_writer(self.sim, vcd, self.ports):
                self.sim.run()
        except OSError as error:
            _cannot_write(error, vcd)
        return result.get("value")


def simulate(dut, driver, *, vcd=None, extra_testbenches=()):
    """Run ``await driver(io)`` against ``dut`` in Amaranth's simulator; return its result.

    ``vcd`` names a VCD file to write (the file is written even when the driver raises).
    """
    return Simulation(dut).run(driver, vcd=vcd, extra_testbenches=extra_testbenches)


class Stepper:
    """Amaranth's simulator advanced one clock cycle at a time by the caller.

    :meth:`cycle` runs ``work(io)`` in the next cycle -- it sets that cycle's inputs and reads its
    outputs -- and returns once the outputs are read, before the clock edge; the edge is taken at
    the start of the next call. The simulator therefore never runs ahead of the caller.
    """

    def __init__(self, dut, *, vcd=None):
        self.ports = port_map(dut)
        self.sim = Simulator(dut)
        self.sim.add_clock(PERIOD)
        self.cycles = 0
        self._work = None
        self._vcd = vcd
        self.sim.add_testbench(self._testbench)
        self._writer = _vcd_writer(self.sim, vcd, self.ports)
        self._writer.__enter__()

    async def _testbench(self, ctx):
        io = AmaranthIO(ctx, self.ports)
        while True:
            work, self._work = self._work, None
            work(io)
            self.cycles += 1
            await ctx.tick()

    def cycle(self, work):
        self._work = work
        target = self.cycles + 1
        while self.cycles < target:
            self.sim.advance()

    def close(self):
        try:
            self._writer.__exit__(None, None, None)
        except OSError as error:
            _cannot_write(error, self._vcd)


class _Queue(Source):
    """The bits a session sent and the RTL has not taken yet."""

    def __init__(self):
        self.items = collections.deque()

    def next(self, cycle):
        return self.items.popleft() if self.items else None


class PysimSession(Session):
    """A :class:`~gpurtl.sim.harness.session.Session` in Amaranth's simulator.

    Attributes
    ----------
    dut : wiring.Component
        The simulated design.
    before_cycle : callable or None
        ``before_cycle(ctx, cycle)``, called in every cycle before its inputs are applied, with
        the simulator's testbench context (``ctx.get`` / ``ctx.set`` on any signal of ``dut``).
    """

    def __init__(self, block, params, *, golden, stalls, strict, vcd):
        self.dut = block.build(**params)
        pipeline = block.kind == "pipeline"
        super().__init__(
            block,
            params,
            golden=golden,
            stalls=stalls,
            strict=strict,
            latency=getattr(self.dut, "latency", None) if pipeline else None,
            initiation_interval=getattr(self.dut, "initiation_interval", 1) if pipeline else None,
        )
        self.before_cycle = None
        self._stepper = Stepper(self.dut, vcd=vcd)
        if block.kind == "pipeline":
            self._queue = _Queue()
            self._events = []
            self._driver = PipelineDriver(self._queue, self.stalls, self._events.append)
            self._started = False

    def _hook(self, io):
        if self.before_cycle is not None:
            self.before_cycle(io.ctx, self._stepper.cycles)

    def _pipeline_cycle(self, io):
        self._hook(io)
        if not self._started:
            self._driver.start(io)
            self._started = True
        self._driver.drive(io)
        self._driver.observe(io)  # Amaranth's ctx.get() sees settled logic: no settle needed

    def _exchange(self, rows, *, outputs, cycles):
        if rows is not None:
            self._queue.items.extend(ints_from_words(rows))
        events, self._events[:] = self._events, []
        start = self._driver.cycle
        while len(events) < outputs or self._driver.cycle - start < cycles:
            self._stepper.cycle(self._pipeline_cycle)
        taken = list(events)
        events.clear()
        return Exchange(
            words_from_ints(self.out_layout, [e.bits for e in taken]),
            np.array([e.accept_cycle for e in taken], dtype=np.int64),
            np.array([e.emit_cycle for e in taken], dtype=np.int64),
            self._driver.sent,
            self._driver.cycle,
        )

    def _run_cycles(self, bits):
        got = []

        def work(io, value):
            self._hook(io)
            io.set("i", value)
            got.append(io.get("o"))

        for value in bits:
            self._stepper.cycle(lambda io, value=value: work(io, value))
        return got

    def _close(self):
        self._stepper.close()


class PysimBackend(Backend):
    name = "pysim"
    summary = "Amaranth's Python simulator"
    kinds = ("pipeline", "cycle")
    waveforms = True
    tools = ()

    def _simulate(
        self, block, params, input_bits, expected_bits, stalls, *, vcd, keep, progress, timing=None
    ):
        started = time.monotonic()
        dut = block.build(**params)
        simulation = Simulation(dut)
        latency = ii = None
        if block.kind == "pipeline":
            latency, ii = dut.latency, getattr(dut, "initiation_interval", 1)
        report, on_output = compare_events(
            block,
            params,
            expected_bits,
            latency=latency,
            ii=ii,
            keep_outputs=keep,
            free_run=stalls.free_run,
        )
        if timing is not None:
            timing["build"] = time.monotonic() - started
            started, cpu = time.monotonic(), cpu_seconds()
        simulation.run(
            lambda io: drive_block(
                block, io, input_bits, stalls, report, on_output, progress=progress
            ),
            vcd=vcd,
        )
        if timing is not None:
            timing["sim"], timing["cpu"] = time.monotonic() - started, cpu_seconds() - cpu
        return report

    def run_bits(
        self,
        block,
        params,
        input_bits,
        expected_bits,
        stalls,
        *,
        vcd=None,
        keep_outputs=False,
        progress=None,
    ):
        return self._simulate(
            block,
            params,
            input_bits,
            expected_bits,
            stalls,
            vcd=vcd,
            keep=keep_outputs,
            progress=progress,
        )

    def check_stream(
        self, block, params, count, seed, stalls, *, vcd=None, progress=None, log=None
    ):
        input_bits, expected_bits = random_stream(block, params, count, seed)
        return self._simulate(
            block, params, input_bits, expected_bits, stalls, vcd=vcd, keep=False, progress=progress
        )

    def timed_run(self, block, params, in_rows, expected_rows, stalls, *, variant=None, work=None):
        timing = {}
        report = self._simulate(
            block,
            params,
            ints_from_words(in_rows),
            ints_from_words(expected_rows),
            stalls,
            vcd=None,
            keep=False,
            progress=None,
            timing=timing,
        )
        return report, timing["build"], timing["sim"], timing["cpu"]

    def session(self, block, params, *, golden=True, stalls=None, vcd=None, strict=False):
        self.require(block, vcd=vcd)
        return PysimSession(block, params, golden=golden, stalls=stalls, strict=strict, vcd=vcd)
