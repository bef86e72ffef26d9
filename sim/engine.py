"""Backend-independent drivers that push values through a block's ports clock by clock.

The same coroutine drives the Amaranth simulator and cocotb on Verilator: a backend only provides
a small port-access object (:class:`PortIO`). Values travel as flat bit patterns; the ports are
named as in the exported Verilog (``i__valid``, ``i__payload``, ``o__ready`` ... for pipelines,
``i`` and ``o`` for cycle-stepped blocks).

Per clock cycle the drivers: set the inputs, let combinational logic settle, read the outputs,
then wait for the clock edge. A transfer on a stream happens in a cycle where ``valid`` and
``ready`` are both high when read.
"""

import random

__all__ = ["PortIO", "StallPattern", "PipelineEvent", "drive_pipeline", "drive_cycles"]


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
    """Random valid/ready stalls: ``p_valid`` and ``p_ready`` are the chances, per cycle, that the
    source offers a pending transaction and that the sink accepts an output. ``free_run`` first
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


async def drive_pipeline(io, inputs, stalls, on_output, *, max_idle=10_000):
    """Send every bit pattern of ``inputs`` into ``i`` and collect as many outputs from ``o``.

    ``on_output(event)`` is called for each output in order. Returns the number of cycles run.
    Raises ``TimeoutError`` when no output appears for ``max_idle`` cycles.
    """
    accepted = []
    sent = received = cycle = idle = 0
    total = len(inputs)
    io.set("i__valid", 0)
    io.set("o__ready", 0)
    while received < total:
        offer = sent < total and stalls.valid(sent)
        take = stalls.ready(received)
        io.set("i__valid", int(offer))
        if offer:
            io.set("i__payload", inputs[sent])
        io.set("o__ready", int(take))
        await io.settle()
        in_fire = offer and io.get("i__ready")
        out_fire = take and io.get("o__valid")
        if out_fire:
            if received >= len(accepted):
                raise AssertionError(f"cycle {cycle}: output {received} appeared before its input "
                                     f"was accepted")
            on_output(PipelineEvent(received, io.get("o__payload"), accepted[received], cycle))
            received += 1
            idle = 0
        else:
            idle += 1
            if idle > max_idle:
                raise TimeoutError(f"no output for {max_idle} cycles after {received} of {total}")
        if in_fire:
            accepted.append(cycle)
            sent += 1
        await io.tick()
        cycle += 1
    io.set("i__valid", 0)
    return cycle


async def drive_cycles(io, inputs, on_output):
    """Apply ``inputs[t]`` in cycle ``t`` and pass the outputs read in that cycle to
    ``on_output(t, bits)``. Returns the number of cycles run."""
    for cycle, bits in enumerate(inputs):
        io.set("i", bits)
        await io.settle()
        on_output(cycle, io.get("o"))
        await io.tick()
    return len(inputs)
