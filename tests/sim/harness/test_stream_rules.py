"""The ``lib.stream`` rules, in both directions: the driver holds its offer until the transfer,
and a block whose output breaks the rules is reported with the cycle."""

import asyncio
import random

from amaranth.hdl import Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from gpurtl.sim.backends import BACKENDS
from gpurtl.sim.harness.engine import PortIO, StallPattern, StreamRuleError, drive_pipeline

from ..toy import IN, OUT, ToyAdder, toy_block


class RecordingSink(PortIO):
    """A pipeline model in plain Python (2 cycles, 2 deep) whose input ``ready`` is random; it
    records what the driver offers on ``i`` in every cycle."""

    def __init__(self, seed):
        self.rng = random.Random(seed)
        self.values = {"i__valid": 0, "i__payload": 0, "o__ready": 0}
        self.in_ready = 1
        self.queue = []  # [cycles left, payload]
        self.offers = []  # (valid, payload, ready) per cycle

    def set(self, name, value):
        self.values[name] = value

    def get(self, name):
        head = self.queue[0] if self.queue else None
        return {
            "i__ready": self.in_ready,
            "o__valid": int(head is not None and head[0] <= 0),
            "o__payload": head[1] if head is not None else 0,
        }[name]

    async def settle(self):
        pass

    async def tick(self):
        valid, payload = self.values["i__valid"], self.values["i__payload"]
        self.offers.append((valid, payload, self.in_ready))
        if self.get("o__valid") and self.values["o__ready"]:
            self.queue.pop(0)
        for entry in self.queue:
            entry[0] -= 1
        if valid and self.in_ready:
            self.queue.append([2, payload])
        self.in_ready = int(len(self.queue) < 2 and self.rng.random() < 0.5)


def test_driver_holds_valid_and_payload_until_the_transfer():
    sink = RecordingSink(seed=3)
    outputs = []
    stalls = StallPattern(seed=4, p_valid=0.5, p_ready=0.5)
    asyncio.run(drive_pipeline(sink, range(1, 300), stalls, lambda e: outputs.append(e.bits)))
    assert outputs == list(range(1, 300))
    held = 0
    for (valid, payload, ready), (next_valid, next_payload, _) in zip(sink.offers, sink.offers[1:]):
        if valid and not ready:
            held += 1
            assert next_valid == 1 and next_payload == payload
    assert held > 50  # the sink really refused offers, so the rule was exercised


class DropsValid(wiring.Component):
    """Breaks the output rule: one register stage that loads whatever arrives and takes a new
    input every cycle, whether or not the output was taken (``o.ready`` is ignored)."""

    latency = 1

    def __init__(self):
        super().__init__({"i": In(stream.Signature(IN)), "o": Out(stream.Signature(OUT))})

    def elaborate(self, platform):
        m = Module()
        s0_valid, s0_sum, s0_f = Signal(), Signal(9), Signal(32)
        m.d.comb += self.i.ready.eq(1)
        m.d.sync += [
            s0_valid.eq(self.i.valid),
            s0_sum.eq(self.i.payload.a + self.i.payload.b),
            s0_f.eq(self.i.payload.f),
        ]
        m.d.comb += [
            self.o.valid.eq(s0_valid),
            self.o.payload.s.eq(s0_sum),
            self.o.payload.f.eq(s0_f),
        ]
        return m


def _block_of(component_class):
    block = toy_block()
    return block.__class__(**{**block.__dict__, "build": lambda stages: component_class()})


def test_output_rule_violation_fails_with_its_cycle():
    block = _block_of(DropsValid)
    report = BACKENDS["pysim"].check(block, block.resolve(), count=200, seed=2)
    assert report.failed > 0
    assert report.first.field in ("o.valid", "o.payload")
    assert report.first.where.startswith("cycle ") and "stream rule" in report.first.where
    assert report.stream_error and "cycle" in report.stream_error


def test_the_same_block_passes_without_back_pressure():
    # DropsValid is a correct pipeline while o.ready stays high: the check above is about the rule.
    block = _block_of(DropsValid)
    report = BACKENDS["pysim"].check(block, block.resolve(), count=200, seed=2, p_ready=1.0)
    assert (report.passed, report.failed, report.stream_error) == (200, 0, None)


def test_a_correct_pipeline_keeps_the_rule_under_stalls():
    block = _block_of(lambda: ToyAdder(2))
    report = BACKENDS["pysim"].check(
        block, block.resolve(), count=300, seed=7, p_valid=0.5, p_ready=0.3
    )
    assert (report.failed, report.stream_error) == (0, None)


def test_driver_raises_stream_rule_error_directly():
    class Dropper(RecordingSink):
        def get(self, name):
            value = super().get(name)
            if name == "o__valid" and len(self.offers) == 5:
                return 0  # drop an output that was offered in cycle 4 and not taken
            return value

    sink = Dropper(seed=1)
    stalls = StallPattern(seed=0, p_valid=1.0, p_ready=0.0)
    try:
        asyncio.run(drive_pipeline(sink, range(1, 10), stalls, lambda e: None, max_idle=50))
    except StreamRuleError as error:
        assert error.cycle == 5 and error.field == "o.valid"
    else:
        raise AssertionError("the dropped output was not reported")
