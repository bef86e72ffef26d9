"""The ports of a design in cocotb, for the drivers of :mod:`gpurtl.sim.harness.engine` (imported
inside the simulator process by the cocotb test modules)."""

from cocotb.triggers import RisingEdge, Timer

from ..harness.engine import PortIO, UndefinedValue

__all__ = ["INPUTS", "OUTPUTS", "CocotbIO"]


#: The outputs of each kind of block, as the exported Verilog names them.
OUTPUTS = {"pipeline": ("i__ready", "o__valid", "o__payload"), "cycle": ("o",)}

#: The inputs, driven to 0 from the start of reset: an input no one drives is Z on a four-state
#: simulator, and the X it makes would be the testbench's, not the design's.
INPUTS = {"pipeline": ("i__valid", "i__payload", "o__ready"), "cycle": ("i",)}


class CocotbIO(PortIO):
    """Port access in cocotb. ``outputs``: ports read in every cycle once the inputs settled,
    so that an X or Z on any of them raises :class:`UndefinedValue` in the cycle it appears (the
    drivers read a payload only when it is valid)."""

    def __init__(self, dut, outputs=()):
        self._dut = dut
        self._handles = {}
        self._outputs = tuple(outputs)
        self.cycle = 0  # clock edges since the drivers started, after reset

    def _handle(self, name):
        handle = self._handles.get(name)
        if handle is None:
            handle = self._handles[name] = getattr(self._dut, name)
        return handle

    def set(self, name, value):
        self._handle(name).value = value

    def get(self, name):
        value = self._handle(name).value
        try:
            # 1-bit ports read as `Logic`, wider ones as `LogicArray`.
            return value.to_unsigned() if hasattr(value, "to_unsigned") else int(value)
        except ValueError:  # an X or Z bit, from a four-state simulator
            text = str(value)
            bits = [i for i, bit in enumerate(reversed(text)) if bit not in "01"]
            raise UndefinedValue(name, self.cycle, bits, text) from None

    async def settle(self):
        await Timer(1, unit="ns")
        for name in self._outputs:
            self.get(name)

    async def tick(self):
        await RisingEdge(self._dut.clk)
        self.cycle += 1
