"""The 8N1 UART receiver and transmitter on the Amaranth simulator: bit timing, loopback, a low
stop bit and an overrun."""

import pytest
from amaranth.hdl import Module
from amaranth.sim import Simulator

from gpurtl.hdl.board.uart import UARTReceiver, UARTTransmitter

DIVISOR = 5


def _bits(byte, stop=1):
    return [0] + [(byte >> bit) & 1 for bit in range(8)] + [stop]


def _run(dut, testbench):
    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(testbench)
    sim.run()


async def _send(ctx, rx, byte, stop=1):
    for level in _bits(byte, stop):
        ctx.set(rx, level)
        await ctx.tick().repeat(DIVISOR)
    ctx.set(rx, 1)


def test_transmitter_bit_timing():
    dut = UARTTransmitter(DIVISOR)
    seen = []

    async def testbench(ctx):
        assert ctx.get(dut.tx) == 1
        ctx.set(dut.i.payload, 0xC5)
        ctx.set(dut.i.valid, 1)
        await ctx.tick().until(dut.i.ready)  # the transfer happens on this edge
        ctx.set(dut.i.valid, 0)
        for _ in range(11 * DIVISOR):
            seen.append(ctx.get(dut.tx))
            await ctx.tick()

    _run(dut, testbench)
    # each bit holds for exactly `DIVISOR` cycles, then the line idles high
    assert seen == [level for level in _bits(0xC5) for _ in range(DIVISOR)] + [1] * DIVISOR


def test_receiver_decodes_and_flags_errors():
    dut = UARTReceiver(DIVISOR)
    got, errors = [], []

    async def testbench(ctx):
        async def tick():
            if ctx.get(dut.o.valid):
                got.append(ctx.get(dut.o.payload))
            if ctx.get(dut.frame_error):
                errors.append(len(got))
            await ctx.tick()

        ctx.set(dut.o.ready, 1)
        for byte, stop in [(0x00, 1), (0xFF, 1), (0x5A, 0), (0x3C, 1)]:
            for level in _bits(byte, stop):
                ctx.set(dut.rx, level)
                for _ in range(DIVISOR):
                    await tick()
            ctx.set(dut.rx, 1)
            for _ in range(2 * DIVISOR):
                await tick()

    _run(dut, testbench)
    assert got == [0x00, 0xFF, 0x3C]
    assert errors == [2]  # the third byte, and only it


def test_receiver_overrun_keeps_the_first_byte():
    dut = UARTReceiver(DIVISOR)
    result = {}

    async def testbench(ctx):
        overruns = 0
        for byte in (0x11, 0x22):
            for level in _bits(byte):
                ctx.set(dut.rx, level)
                for _ in range(DIVISOR):
                    overruns += ctx.get(dut.overrun)
                    await ctx.tick()
            ctx.set(dut.rx, 1)
        for _ in range(DIVISOR):
            overruns += ctx.get(dut.overrun)
            await ctx.tick()
        result["payload"], result["valid"], result["overruns"] = (
            ctx.get(dut.o.payload),
            ctx.get(dut.o.valid),
            overruns,
        )

    _run(dut, testbench)
    assert result == {"payload": 0x11, "valid": 1, "overruns": 1}


def test_loopback_every_byte():
    m = Module()
    m.submodules.tx = tx = UARTTransmitter(DIVISOR)
    m.submodules.rx = rx = UARTReceiver(DIVISOR)
    m.d.comb += rx.rx.eq(tx.tx)
    got = []

    async def testbench(ctx):
        ctx.set(rx.o.ready, 1)
        for byte in range(256):
            ctx.set(tx.i.payload, byte)
            ctx.set(tx.i.valid, 1)
            await ctx.tick().until(tx.i.ready)
        ctx.set(tx.i.valid, 0)
        await ctx.tick().repeat(12 * DIVISOR)

    async def collect(ctx):
        async for _clk, _rst, valid, payload in ctx.tick().sample(rx.o.valid, rx.o.payload):
            if valid:
                got.append(payload)

    sim = Simulator(m)
    sim.add_clock(1e-6)
    sim.add_testbench(testbench)
    sim.add_testbench(collect, background=True)
    sim.run()
    assert got == list(range(256))


@pytest.mark.parametrize("divisor", [3, 4.0, True])
def test_bad_divisor_is_refused(divisor):
    with pytest.raises(TypeError, match="`divisor` must be an integer of at least 4"):
        UARTReceiver(divisor)
