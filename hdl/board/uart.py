"""8N1 UART receiver and transmitter with ``lib.stream`` byte interfaces.

One bit lasts ``divisor`` clock cycles (``divisor = round(f_clk / baud)``). A frame is a low start
bit, eight data bits least significant first and a high stop bit; the line idles high.
"""

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.cdc import FFSynchronizer
from amaranth.lib.wiring import In, Out

__all__ = ["UARTReceiver", "UARTTransmitter"]


def _check_divisor(divisor):
    if not isinstance(divisor, int) or isinstance(divisor, bool) or divisor < 4:
        raise TypeError(f"`divisor` must be an integer of at least 4, not {divisor!r}")
    return divisor


class UARTReceiver(wiring.Component):
    """8N1 receiver.

    The line goes through a two-register synchroniser; a start bit is confirmed in the middle of
    its bit period and every data bit and the stop bit are sampled in the middle of theirs. A
    UART cannot be paused, so a byte that completes while the previous one still waits on ``o``
    is dropped and ``overrun`` pulses; a low stop bit drops the byte and pulses ``frame_error``.

    Parameters
    ----------
    divisor : int
        Clock cycles per bit, at least 4.

    Attributes
    ----------
    rx : In(1)
        The serial line (asynchronous to the clock).
    o : Out(stream.Signature(8))
        Received bytes.
    overrun, frame_error : Out(1)
        One-cycle pulses for a dropped byte.
    """

    def __init__(self, divisor):
        self._divisor = _check_divisor(divisor)
        super().__init__(
            {
                "rx": In(1, init=1),
                "o": Out(stream.Signature(8)),
                "overrun": Out(1),
                "frame_error": Out(1),
            }
        )

    @property
    def divisor(self):
        return self._divisor

    def elaborate(self, platform):
        m = Module()
        line = Signal(init=1)
        m.submodules.sync_rx = FFSynchronizer(self.rx, line, init=1)
        timer = Signal(range(self.divisor))
        bits = Signal(range(9))
        shift = Signal(8)
        with m.If(self.o.ready):
            m.d.sync += self.o.valid.eq(0)
        m.d.sync += [self.overrun.eq(0), self.frame_error.eq(0)]
        with m.FSM():
            with m.State("IDLE"):
                with m.If(~line):
                    m.d.sync += timer.eq(self.divisor // 2 - 1)
                    m.next = "START"
            with m.State("START"):
                with m.If(timer != 0):
                    m.d.sync += timer.eq(timer - 1)
                with m.Elif(line):  # a glitch, not a start bit
                    m.next = "IDLE"
                with m.Else():
                    m.d.sync += [timer.eq(self.divisor - 1), bits.eq(0)]
                    m.next = "DATA"
            with m.State("DATA"):
                with m.If(timer != 0):
                    m.d.sync += timer.eq(timer - 1)
                with m.Else():
                    m.d.sync += [
                        timer.eq(self.divisor - 1),
                        shift.eq(Cat(shift[1:], line)),
                        bits.eq(bits + 1),
                    ]
                    with m.If(bits == 7):
                        m.next = "STOP"
            with m.State("STOP"):
                with m.If(timer != 0):
                    m.d.sync += timer.eq(timer - 1)
                with m.Else():
                    with m.If(~line):
                        m.d.sync += self.frame_error.eq(1)
                        m.next = "BREAK"
                    with m.Else():
                        with m.If(self.o.valid & ~self.o.ready):
                            m.d.sync += self.overrun.eq(1)
                        with m.Else():
                            m.d.sync += [self.o.payload.eq(shift), self.o.valid.eq(1)]
                        m.next = "IDLE"
            with m.State("BREAK"):
                # a low stop bit (or a break): wait for the idle level, so that the rest of the
                # low period is not taken for a start bit
                with m.If(line):
                    m.next = "IDLE"
        return m


class UARTTransmitter(wiring.Component):
    """8N1 transmitter: takes one byte from ``i`` whenever it is idle.

    Parameters
    ----------
    divisor : int
        Clock cycles per bit, at least 4.

    Attributes
    ----------
    i : In(stream.Signature(8))
        Bytes to send.
    tx : Out(1)
        The serial line, high when idle.
    """

    def __init__(self, divisor):
        self._divisor = _check_divisor(divisor)
        super().__init__({"i": In(stream.Signature(8)), "tx": Out(1, init=1)})

    @property
    def divisor(self):
        return self._divisor

    def elaborate(self, platform):
        m = Module()
        timer = Signal(range(self.divisor))
        # start bit, 8 data bits, stop bit; shifted out least significant first
        frame = Signal(10, init=1)
        left = Signal(range(11))
        m.d.comb += self.i.ready.eq(left == 0)
        m.d.comb += self.tx.eq(frame[0] | (left == 0))
        with m.If(left == 0):
            with m.If(self.i.valid):
                m.d.sync += [
                    frame.eq(Cat(0, self.i.payload, 1)),
                    left.eq(10),
                    timer.eq(self.divisor - 1),
                ]
        with m.Elif(timer != 0):
            m.d.sync += timer.eq(timer - 1)
        with m.Else():
            m.d.sync += [frame.eq(Cat(frame[1:], 1)), left.eq(left - 1), timer.eq(self.divisor - 1)]
        return m
