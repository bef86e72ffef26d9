"""Board top level: a pipeline block behind :class:`.harness.UARTHarness` on a board's UART."""

from amaranth.build import ResourceError
from amaranth.hdl import Elaboratable, Module, Signal

from .harness import UARTHarness

__all__ = ["UARTBoardTop", "uart_divisor"]


def uart_divisor(clk_freq, baud):
    """Clock cycles per bit for ``baud`` at ``clk_freq`` Hz; the bit rate must come within 2 %
    (8N1 tolerates about 4 % between both ends, so each end may take half)."""
    if not isinstance(baud, int) or isinstance(baud, bool) or baud <= 0:
        raise ValueError(f"`baud` must be a positive integer, not {baud!r}")
    divisor = round(clk_freq / baud)
    if divisor < 4:
        raise ValueError(
            f"`baud` must be at most {int(clk_freq // 4)} at {clk_freq / 1e6:g} MHz "
            f"(4 clock cycles per bit), not {baud}"
        )
    error = abs(clk_freq / divisor - baud) / baud
    if error > 0.02:
        raise ValueError(
            f"`baud` must be within 2 % of {clk_freq / 1e6:g} MHz / N, not {baud} "
            f"({100 * error:.1f} % off with N = {divisor})"
        )
    return divisor


class UARTBoardTop(Elaboratable):
    """The harness on the platform's ``uart`` resource, clocked by the platform's default clock.

    LED 0 shows ``busy``, LED 1 stays lit after an error, LED 7 blinks at about 1.5 Hz to show
    that the design runs (boards without LEDs leave them out).

    Parameters
    ----------
    dut : wiring.Component
        A pipeline block with ``i``/``o`` stream ports.
    baud : int
        UART bit rate; see :func:`uart_divisor`.
    """

    def __init__(self, dut, *, baud=115200):
        self._dut = dut
        self._baud = baud

    @property
    def baud(self):
        return self._baud

    def elaborate(self, platform):
        m = Module()
        divisor = uart_divisor(platform.default_clk_frequency, self.baud)
        m.submodules.harness = harness = UARTHarness(self._dut, divisor=divisor)
        uart = platform.request("uart", 0)
        m.d.comb += [harness.rx.eq(uart.rx.i), uart.tx.o.eq(harness.tx)]
        try:
            leds = [platform.request("led", index) for index in (0, 1, 7)]
        except ResourceError:  # a board with fewer LEDs runs without them
            return m
        errored = Signal()
        blink = Signal(24)
        m.d.sync += blink.eq(blink + 1)
        with m.If(harness.error):
            m.d.sync += errored.eq(1)
        m.d.comb += [leds[0].o.eq(harness.busy), leds[1].o.eq(errored), leds[2].o.eq(blink[-1])]
        return m
