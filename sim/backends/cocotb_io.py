"""The ports of a design in cocotb, for the drivers of :mod:`gpurtl.sim.harness.engine` (imported
inside the simulator process by the cocotb test modules)."""

from cocotb.triggers import RisingEdge, Timer

from ..harness.engine import PortIO

__all__ = ["CocotbIO"]


class CocotbIO(PortIO):
    def __init__(self, dut):
        self._dut = dut
        self._handles = {}

    def _handle(self, name):
        handle = self._handles.get(name)
        if handle is None:
            handle = self._handles[name] = getattr(self._dut, name)
        return handle

    def set(self, name, value):
        self._handle(name).value = value

    def get(self, name):
        value = self._handle(name).value
        # 1-bit ports read as `Logic`, wider ones as `LogicArray`.
        return value.to_unsigned() if hasattr(value, "to_unsigned") else int(value)

    async def settle(self):
        await Timer(1, unit="ns")

    async def tick(self):
        await RisingEdge(self._dut.clk)
