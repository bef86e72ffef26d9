"""The pipeline library :mod:`gpurtl.hdl.pipe`: each delay helper against a Python model of the
same clock-enabled registers, cycle by cycle under a random enable; the clock-enable core
signature; and the stream wrapper under random valid/ready (its latency, II = 1, valid and payload
held until the transfer, nothing lost, duplicated or reordered)."""

import random

import pytest
from amaranth.hdl import ClockDomain, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from amaranth.sim import Simulator

from gpurtl.hdl.pipe import (
    SIDEBAND_MIN_CYCLES,
    EnableCoreSignature,
    EnableCoreStream,
    delay,
    reg,
    sideband,
)


def _run(module, bench):
    sim = Simulator(module)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()


def _check_line(make, cycles, seed):
    """Drive a delay line built by ``make(m, en, x)`` with a random enable and input; compare
    its output after every clock with a Python shift register of ``cycles`` entries."""
    m = Module()
    m.domains.sync = ClockDomain()  # also there for a line of no register
    en, x = Signal(), Signal(16)
    out = make(m, en, x)
    wrong = []

    async def bench(ctx):
        rng = random.Random(seed)
        state = [0] * cycles
        for step in range(300):
            value, enable = rng.randrange(1 << 16), rng.random() < 0.6
            ctx.set(en, enable)
            ctx.set(x, value)
            await ctx.tick()
            if enable and cycles:
                state = [value] + state[:-1]
            expected = state[-1] if cycles else value
            if ctx.get(out) != expected:
                wrong.append(step)

    _run(m, bench)
    return wrong


def test_reg_loads_only_with_the_enable():
    assert _check_line(lambda m, en, x: reg(m, en, x, "r"), 1, seed=1) == []


def test_reg_takes_the_given_shape():
    m = Module()
    r = reg(m, Signal(), Signal(16), "r", shape=4)
    assert len(r) == 4


@pytest.mark.parametrize("cycles", [0, 1, 3])
def test_delay_is_a_chain_of_enabled_registers(cycles):
    assert _check_line(lambda m, en, x: delay(m, en, x, cycles, "d"), cycles, seed=cycles) == []


def test_a_delay_one_register_short_is_caught():
    assert _check_line(lambda m, en, x: delay(m, en, x, 2, "d"), 3, seed=7) != []


@pytest.mark.parametrize("cycles", [-1, 1.5, True])
def test_delay_refuses_a_bad_length(cycles):
    with pytest.raises(ValueError, match="`cycles` must be a non-negative integer"):
        delay(Module(), Signal(), Signal(4), cycles, "d")


@pytest.mark.parametrize("cycles", [2, SIDEBAND_MIN_CYCLES, 5, 9])
def test_sideband_delays_like_a_register_chain(cycles):
    """Short lines are registers, long ones memory rings; both match the model, stalls included."""
    assert _check_line(lambda m, en, x: sideband(m, en, x, cycles, "s"), cycles, seed=cycles) == []


def test_a_sideband_ring_one_entry_short_is_caught():
    cycles = SIDEBAND_MIN_CYCLES + 2
    line = lambda m, en, x: sideband(m, en, x, cycles - 1, "s")  # noqa: E731
    assert _check_line(line, cycles, seed=3) != []


def test_enable_core_signature_members():
    sig = EnableCoreSignature(8, 9, inv_dir=In(3))
    assert set(sig.members) == {"en", "i", "o", "inv_dir"}
    assert sig.members["en"] == In(1)
    assert sig.members["i"] == In(8)
    assert sig.members["o"] == Out(9)
    with pytest.raises(ValueError, match="`en` is a member of every clock-enable core"):
        EnableCoreSignature(8, 9, en=In(1))


class _AddOne(wiring.Component):
    """A clock-enable core: ``o = i + 1``, ``latency`` enabled cycles later."""

    def __init__(self, latency):
        self._latency = latency
        super().__init__(EnableCoreSignature(8, 9))

    @property
    def latency(self):
        return self._latency

    def elaborate(self, platform):
        m = Module()
        m.d.comb += self.o.eq(delay(m, self.en, self.i, self._latency, "x") + 1)
        return m


def _stream_run(latency, *, p_valid, p_ready, cycles, seed):
    """Drive ``EnableCoreStream(_AddOne(latency))``; return what the wrapper did."""
    dut = EnableCoreStream(_AddOne(latency))
    seen = {"taken": [], "given": [], "take_cycles": [], "give_cycles": [], "broken": []}

    async def bench(ctx):
        rng = random.Random(seed)
        offer, held = None, None
        drain = cycles - latency - 4  # from here on: no new offers, the output always taken
        for cycle in range(cycles):
            if offer is None and cycle < drain and rng.random() < p_valid:
                offer = rng.randrange(256)
            ready = int(rng.random() < p_ready) if cycle < drain else 1
            ctx.set(dut.i.valid, offer is not None)
            ctx.set(dut.i.payload, offer or 0)
            ctx.set(dut.o.ready, ready)
            o_valid, o_payload = ctx.get(dut.o.valid), ctx.get(dut.o.payload)
            if held is not None and (o_valid, o_payload) != (1, held):
                seen["broken"].append(cycle)  # a refused output changed before its transfer
            if ctx.get(dut.i.ready) != int(not o_valid or ready):
                seen["broken"].append(cycle)
            held = o_payload if o_valid and not ready else None
            if o_valid and ready:
                seen["given"].append(o_payload)
                seen["give_cycles"].append(cycle)
            if offer is not None and ctx.get(dut.i.ready):
                seen["taken"].append(offer)
                seen["take_cycles"].append(cycle)
                offer = None
            await ctx.tick()

    _run(dut, bench)
    assert dut.latency == latency
    return seen


@pytest.mark.parametrize("latency", [1, 3])
def test_stream_wrapper_under_random_valid_and_ready(latency):
    seen = _stream_run(latency, p_valid=0.7, p_ready=0.5, cycles=400, seed=latency)
    assert seen["broken"] == []
    assert len(seen["taken"]) > 100
    assert seen["given"] == [v + 1 for v in seen["taken"]]


@pytest.mark.parametrize("latency", [1, 4])
def test_stream_wrapper_latency_and_full_rate(latency):
    """With the output always taken, a transfer every cycle, each result ``latency`` later."""
    seen = _stream_run(latency, p_valid=1.0, p_ready=1.0, cycles=60, seed=9)
    assert seen["take_cycles"] == list(range(60 - latency - 4))  # II = 1
    assert seen["give_cycles"] == [c + latency for c in seen["take_cycles"]]
    assert seen["given"] == [v + 1 for v in seen["taken"]]
