"""Backend-independent drivers that push values through a block's ports clock by clock.

The same coroutine drives the Amaranth simulator and cocotb on Verilator: a backend only provides
a small port-access object (:class:`PortIO`). Values travel as flat bit patterns; the ports are
named as in the exported Verilog (``i__valid``, ``i__payload``, ``o__ready`` ... for pipelines,
``i`` and ``o`` for cycle-stepped blocks).

Per clock cycle the drivers: set the inputs, let combinational logic settle, read the outputs,
then wait for the clock edge. A transfer on a stream happens in a cycle where ``valid`` and
``ready`` are both high when read.
"""

import collections
import random

__all__ = [
    "PortIO",
    "StallPattern",
    "PipelineEvent",
    "StreamRuleError",
    "drive_pipeline",
    "drive_cycles",
]


class PortIO:
    """What a simulator backend provides to the drivers."""

    def set(self, name, value):  # pragma: no cover - interface
        raise NotImplementedError

    def get(self, name):  # pragma: no cover - interface
        raise NotImplementedError

    async def settle(self):  # pragma: no cover - interface
        raise NotImplementedError

    async def tick(self):  # pragma: no cover - interface
        raise NotImplementedError


class StallPattern:
    """Random valid/ready stalls: ``p_valid`` is the chance, per cycle, that the source offers its
    next transaction once the previous one was transferred (an offer is then held until taken),
    ``p_ready`` the chance that the sink accepts an output. ``free_run`` first
    transactions are sent with no stalls at all (to measure latency and II)."""

    def __init__(self, seed=0, p_valid=1.0, p_ready=1.0, free_run=0):
        self.rng = random.Random(seed)
        self.p_valid, self.p_ready, self.free_run = p_valid, p_ready, free_run

    def valid(self, index):
        return index < self.free_run or self.rng.random() < self.p_valid

    def ready(self, index):
        return index < self.free_run or self.rng.random() < self.p_ready

    def to_json(self):
        return {"p_valid": self.p_valid, "p_ready": self.p_ready, "free_run": self.free_run}


class PipelineEvent:
    """One output of a pipeline: its index, bits, and the cycles it was accepted and emitted."""

    __slots__ = ("index", "bits", "accept_cycle", "emit_cycle")

    def __init__(self, index, bits, accept_cycle, emit_cycle):
        self.index, self.bits = index, bits
        self.accept_cycle, self.emit_cycle = accept_cycle, emit_cycle


class Abort(Exception):
    """Raised by an ``on_output`` callback to stop a run early (e.g. at the first mismatch)."""


class StreamRuleError(AssertionError):
    """The block broke the ``lib.stream`` rules on its output in clock cycle ``cycle``.

    ``field`` names the port (``o.valid``, ``o.payload``); ``expected`` and ``got`` are the values
    that the rule required and the one read.
    """

    def __init__(self, cycle, field, expected, got, message):
        self.cycle, self.field, self.expected, self.got = cycle, field, expected, got
        super().__init__(f"cycle {cycle}: {message}")


async def drive_pipeline(io, inputs, stalls, on_output, *, max_idle=10_000):
    """Send every bit pattern of ``inputs`` (any iterable, read lazily) into ``i`` and collect as
    many outputs from ``o``.

    The driver obeys the stream rules as a producer: once it offers a transaction it holds
    ``i.valid`` and ``i.payload`` until the transfer happens; random stalls (``stalls.valid``) only
    delay the next offer. It checks the same rules on the block's output: after a cycle with
    ``o.valid`` high and ``o.ready`` low, ``o.valid`` must stay high and ``o.payload`` must not
    change, otherwise :class:`StreamRuleError` is raised with the cycle.

    ``on_output(event)`` is called for each output in order. Returns the number of cycles run.
    Raises ``TimeoutError`` when no output appears for ``max_idle`` cycles.
    """
    source = iter(inputs)
    pending = next(source, None)  # the next transaction's bits; None once all are sent
    accept_cycles = collections.deque()
    sent = received = cycle = idle = 0
    offering = False
    held = None  # payload offered on o and not taken in the previous cycle
    io.set("i__valid", 0)
    io.set("o__ready", 0)
    while pending is not None or received < sent:
        if not offering and pending is not None and stalls.valid(sent):
            offering = True
            io.set("i__payload", pending)
        take = stalls.ready(received)
        io.set("i__valid", int(offering))
        io.set("o__ready", int(take))
        await io.settle()
        in_fire = offering and io.get("i__ready")
        out_valid = io.get("o__valid")
        payload = io.get("o__payload") if out_valid or held is not None else None
        if held is not None:
            if not out_valid:
                raise StreamRuleError(
                    cycle,
                    "o.valid",
                    1,
                    0,
                    "o.valid fell while an output was offered and o.ready was "
                    "low (a stream must hold valid until the transfer)",
                )
            if payload != held:
                raise StreamRuleError(
                    cycle,
                    "o.payload",
                    f"0x{held:x}",
                    f"0x{payload:x}",
                    f"o.payload changed from 0x{held:x} to 0x{payload:x} "
                    f"while o.valid was high and o.ready low",
                )
        if take and out_valid:
            if not accept_cycles:
                raise StreamRuleError(
                    cycle,
                    "o.valid",
                    0,
                    1,
                    f"output {received} appeared before its input was accepted",
                )
            on_output(PipelineEvent(received, payload, accept_cycles.popleft(), cycle))
            received += 1
            idle = 0
        else:
            idle += 1
            if idle > max_idle:
                raise TimeoutError(
                    f"no output for {max_idle} cycles after {received} of "
                    f"{sent + (pending is not None)} or more"
                )
        held = payload if out_valid and not take else None
        if in_fire:
            accept_cycles.append(cycle)
            sent += 1
            offering = False
            pending = next(source, None)
        await io.tick()
        cycle += 1
    io.set("i__valid", 0)
    return cycle


async def drive_cycles(io, inputs, on_output):
    """Apply the ``t``-th bit pattern of ``inputs`` (any iterable, read lazily) in cycle ``t`` and
    pass the outputs read in that cycle to ``on_output(t, bits)``. Returns the number of cycles
    run."""
    cycles = 0
    for cycle, bits in enumerate(inputs):
        io.set("i", bits)
        await io.settle()
        on_output(cycle, io.get("o"))
        await io.tick()
        cycles = cycle + 1
    return cycles
