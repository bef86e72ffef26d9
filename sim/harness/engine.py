"""Backend-independent drivers that push values through a block's ports clock by clock.

The same drivers run in Amaranth's simulator, in cocotb on Verilator and in the sessions of
:mod:`gpurtl.sim.harness.session`: a backend only provides a small port-access object
(:class:`PortIO`). Values travel as flat bit patterns; the ports are named as in the exported
Verilog (``i__valid``, ``i__payload``, ``o__ready`` ... for pipelines, ``i`` and ``o`` for
cycle-stepped blocks).

Per clock cycle a driver sets the inputs (:meth:`PipelineDriver.drive`), lets combinational logic
settle, reads the outputs (:meth:`PipelineDriver.observe`), then the clock ticks. A transfer on a
stream happens in a cycle where ``valid`` and ``ready`` are both high when read.

Inputs come from a *source*: any iterable of bit patterns, read lazily, or a :class:`Source`
that is asked for the next transaction (pipelines) or the next cycle's inputs (cycle blocks) and
told every output, so that inputs can depend on earlier outputs.
"""

import collections
import random

__all__ = [
    "DONE",
    "PortIO",
    "Source",
    "StallPattern",
    "PipelineEvent",
    "CycleEvent",
    "StreamRuleError",
    "UndefinedValue",
    "PipelineDriver",
    "CycleDriver",
    "as_source",
    "drive_pipeline",
    "drive_cycles",
]

#: What :meth:`Source.next` returns once it has nothing more to send.
DONE = type("Done", (), {"__repr__": lambda self: "DONE"})()


class UndefinedValue(RuntimeError):
    """A port read as X or Z (a four-state simulator such as Icarus Verilog): ``signal`` (the
    port's name in the exported Verilog), ``cycle`` (clock cycles since reset ended, the first is
    0), ``bits`` (the undefined bit indices, least significant first) and ``value`` (the
    simulator's text of it, most significant bit first); ``block`` and ``backend`` name what
    read it once known. Its text is one line."""

    def __init__(self, signal, cycle, bits, value, *, block=None, backend=None, field=None):
        self.signal, self.cycle, self.bits, self.value = signal, cycle, list(bits), value
        self.block, self.backend, self.field = block, backend, field
        super().__init__(self._text())

    def _text(self):
        where = f"`{self.block}` on {self.backend}: " if self.block else ""
        kinds = "/".join(sorted({self.value[len(self.value) - 1 - b].upper() for b in self.bits}))
        bits, when = self.bits, f"in cycle {self.cycle} after reset"
        if len(self.value) == 1:
            return f"{where}output `{self.signal}` is {kinds} {when}"
        which = f"bit {bits[0]}" if len(bits) == 1 else f"{len(bits)} bits from bit {bits[0]}"
        field = f" (field `{self.field}`)" if self.field else ""
        return f"{where}output `{self.signal}` has {kinds} in {which}{field} {when}"

    def to_json(self):
        return {"signal": self.signal, "cycle": self.cycle, "bits": self.bits, "value": self.value}

    @classmethod
    def from_json(cls, data, **where):
        return cls(data["signal"], data["cycle"], data["bits"], data["value"], **where)


class PortIO:
    """What a simulator backend provides to the drivers. A four-state simulator's :meth:`get`
    raises :class:`UndefinedValue` for a port with an X or Z bit."""

    def set(self, name, value):  # pragma: no cover - interface
        raise NotImplementedError

    def get(self, name):  # pragma: no cover - interface
        raise NotImplementedError

    async def settle(self):  # pragma: no cover - interface
        raise NotImplementedError

    async def tick(self):  # pragma: no cover - interface
        raise NotImplementedError


class Source:
    """Inputs that may depend on earlier outputs.

    A pipeline driver calls :meth:`next` whenever it has no transaction waiting to be offered (at
    the start, and after each transfer on ``i``); a cycle driver calls it once per cycle. Each
    output is passed to :meth:`output` in order, in the cycle it is read.
    """

    def next(self, cycle):
        """The next transaction's (pipelines) or this cycle's (cycle blocks) bits; ``None`` when
        a pipeline source has nothing to send in this cycle (it is asked again next cycle);
        :data:`DONE` when it has nothing more to send."""
        raise NotImplementedError  # pragma: no cover - interface

    def output(self, event):
        """Hear one output: a :class:`PipelineEvent` or a :class:`CycleEvent`."""


class _IterSource(Source):
    def __init__(self, iterable):
        self._items = iter(iterable)

    def next(self, cycle):
        return next(self._items, DONE)


def as_source(inputs):
    """``inputs`` as a :class:`Source` (an iterable of bit patterns is read lazily, in order)."""
    return inputs if isinstance(inputs, Source) else _IterSource(inputs)


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


class CycleEvent:
    """The outputs of a cycle-stepped block read in cycle ``index``."""

    __slots__ = ("index", "bits")

    def __init__(self, index, bits):
        self.index, self.bits = index, bits


class StreamRuleError(AssertionError):
    """The block broke the ``lib.stream`` rules on its output in clock cycle ``cycle``.

    ``field`` names the port (``o.valid``, ``o.payload``); ``expected`` and ``got`` are the values
    that the rule required and the one read.
    """

    def __init__(self, cycle, field, expected, got, message):
        self.cycle, self.field, self.expected, self.got = cycle, field, expected, got
        super().__init__(f"cycle {cycle}: {message}")


class PipelineDriver:
    """The two streams of a pipeline, one cycle at a time.

    As a producer the driver obeys the stream rules: once it offers a transaction it holds
    ``i.valid`` and ``i.payload`` until the transfer happens; random stalls (``stalls.valid``) only
    delay the next offer. It checks the same rules on the block's output: after a cycle with
    ``o.valid`` high and ``o.ready`` low, ``o.valid`` must stay high and ``o.payload`` must not
    change, otherwise :class:`StreamRuleError` is raised with the cycle. ``on_output(event)`` is
    called for each output in order, after the source heard it. ``TimeoutError`` is raised when
    no output appears for ``max_idle`` cycles while one is awaited.
    """

    def __init__(self, source, stalls, on_output=None, *, max_idle=10_000):
        self.source, self.stalls = as_source(source), stalls
        self.on_output, self.max_idle = on_output, max_idle
        self.cycle = self.sent = self.received = 0
        self.exhausted = False  # the source said DONE
        self._pending = None  # bits of the next transaction, not yet offered or being offered
        self._offering = False
        self._held = None  # payload offered on o and not taken in the previous cycle
        self._idle = 0
        self._accept_cycles = collections.deque()

    @property
    def finished(self):
        """The source is done and every transaction sent has come out."""
        self._pull()
        return self.exhausted and self._pending is None and self.received == self.sent

    @property
    def in_flight(self):
        """Transactions accepted by the block whose outputs have not been read yet."""
        return self.sent - self.received

    def _pull(self):
        if self._pending is None and not self.exhausted:
            value = self.source.next(self.cycle)
            if value is DONE:
                self.exhausted = True
            else:
                self._pending = value

    def start(self, io):
        io.set("i__valid", 0)
        io.set("o__ready", 0)

    def drive(self, io):
        """Set this cycle's inputs."""
        self._pull()
        if not self._offering and self._pending is not None and self.stalls.valid(self.sent):
            self._offering = True
            io.set("i__payload", self._pending)
        self._take = self.stalls.ready(self.received)
        io.set("i__valid", int(self._offering))
        io.set("o__ready", int(self._take))

    def observe(self, io):
        """Read this cycle's handshakes and outputs (after the inputs settled); the clock ticks
        next."""
        cycle = self.cycle
        in_fire = self._offering and io.get("i__ready")
        out_valid = io.get("o__valid")
        held = self._held
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
        if self._take and out_valid:
            if not self._accept_cycles:
                raise StreamRuleError(
                    cycle,
                    "o.valid",
                    0,
                    1,
                    f"output {self.received} appeared before its input was accepted",
                )
            event = PipelineEvent(self.received, payload, self._accept_cycles.popleft(), cycle)
            self.received += 1
            self._idle = 0
            self.source.output(event)
            if self.on_output is not None:
                self.on_output(event)
        elif self.sent > self.received or self._pending is not None:
            self._idle += 1
            if self._idle > self.max_idle:
                raise TimeoutError(
                    f"no output for {self.max_idle} cycles after {self.received} of "
                    f"{self.sent + (self._pending is not None)} or more"
                )
        else:
            self._idle += 1  # nothing awaited: a reactive source is thinking
            if self._idle > self.max_idle:
                raise TimeoutError(
                    f"the source sent nothing for {self.max_idle} cycles with nothing in flight"
                )
        self._held = payload if out_valid and not self._take else None
        if in_fire:
            self._accept_cycles.append(cycle)
            self.sent += 1
            self._offering = False
            self._pending = None
        self.cycle += 1

    def stop(self, io):
        io.set("i__valid", 0)


class CycleDriver:
    """A cycle-stepped block: the source's bits for cycle ``t`` are applied in cycle ``t`` and
    the outputs read in that cycle are passed to ``source.output`` and ``on_output``."""

    def __init__(self, source, on_output=None):
        self.source, self.on_output = as_source(source), on_output
        self.cycle = 0
        self.exhausted = False
        self._bits = None

    @property
    def finished(self):
        if self._bits is None and not self.exhausted:
            value = self.source.next(self.cycle)
            if value is DONE or value is None:
                self.exhausted = True
            else:
                self._bits = value
        return self.exhausted

    def start(self, io):
        pass

    def drive(self, io):
        if self.finished:
            raise RuntimeError("the source of a cycle-stepped block has no more inputs")
        io.set("i", self._bits)

    def observe(self, io):
        event = CycleEvent(self.cycle, io.get("o"))
        self._bits = None
        self.cycle += 1
        self.source.output(event)
        if self.on_output is not None:
            self.on_output(event)

    def stop(self, io):
        pass


async def run_driver(io, driver):
    """Run ``driver`` (a :class:`PipelineDriver` or :class:`CycleDriver`) until it is finished;
    returns the number of cycles run."""
    driver.start(io)
    while not driver.finished:
        driver.drive(io)
        await io.settle()
        driver.observe(io)
        await io.tick()
    driver.stop(io)
    return driver.cycle


async def drive_pipeline(io, inputs, stalls, on_output, *, max_idle=10_000):
    """Send the bit patterns of ``inputs`` (an iterable, read lazily, or a :class:`Source`) into
    ``i`` and collect every output from ``o`` (see :class:`PipelineDriver`); ``on_output(event)``
    hears each :class:`PipelineEvent`. Returns the number of cycles run."""
    return await run_driver(io, PipelineDriver(inputs, stalls, on_output, max_idle=max_idle))


async def drive_cycles(io, inputs, on_output):
    """Apply the ``t``-th bit pattern of ``inputs`` (an iterable, read lazily, or a
    :class:`Source`) in cycle ``t`` and pass the outputs read in that cycle to
    ``on_output(cycle, bits)``. Returns the number of cycles run."""
    return await run_driver(
        io, CycleDriver(inputs, lambda event: on_output(event.index, event.bits))
    )
