"""Amaranth Python-simulator backend of the drivers in :mod:`gpurtl.sim.harness.engine`."""

import contextlib

from amaranth.hdl import Value
from amaranth.sim import Simulator

from ..core.files import UsageError
from ..harness.engine import PortIO

__all__ = ["port_map", "AmaranthIO", "simulate"]


def port_map(dut):
    """Ports of a component keyed by their exported Verilog names (``i__payload``, ``o``...)."""
    ports = {}
    for path, _flow, value in dut.signature.flatten(dut):
        ports["__".join(str(part) for part in path)] = Value.cast(value)
    return ports


class AmaranthIO(PortIO):
    def __init__(self, ctx, ports):
        self._ctx, self._ports = ctx, ports

    def set(self, name, value):
        self._ctx.set(self._ports[name], value)

    def get(self, name):
        return self._ctx.get(self._ports[name])

    async def settle(self):
        pass  # ctx.get() already sees settled combinational logic

    async def tick(self):
        await self._ctx.tick()


def simulate(dut, driver, *, vcd=None, extra_testbenches=()):
    """Run ``await driver(io)`` against ``dut`` in Amaranth's simulator; return its result.

    ``vcd`` names a VCD file to write (the file is written even when the driver raises).
    """
    ports = port_map(dut)
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    result = {}

    async def testbench(ctx):
        result["value"] = await driver(AmaranthIO(ctx, ports))

    sim.add_testbench(testbench)
    for extra in extra_testbenches:
        sim.add_testbench(extra, background=True)
    writer = sim.write_vcd(vcd, traces=list(ports.values())) if vcd else contextlib.nullcontext()
    try:
        with writer:  # writes to the named file itself: a device or FIFO is never replaced
            sim.run()
    except OSError as error:  # the waveform could not be written (/dev/full, a full disk)
        if not vcd or error.filename not in (None, str(vcd)):
            raise
        raise UsageError(f"cannot write `{vcd}`: {error.strerror or error}") from None
    return result.get("value")
