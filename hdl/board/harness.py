"""Run any pipeline block over a UART: one request frame in, one response frame out.

Protocol (8N1, both directions; multi-byte values little-endian, byte 0 = bits 0..7):

=========  ============================================================================
host ->    ``0xA5`` (:data:`REQUEST`), then ``ceil(in_width / 8)`` bytes of the packed input
           payload of the block (bits above ``in_width`` are ignored)
<- board   ``0x5A`` (:data:`RESPONSE`), then ``ceil(out_width / 8)`` bytes of the packed output
           payload (bits above ``out_width`` are zero)
<- board   or a single error byte, sent between responses, never inside one:
           ``0xE1`` (:data:`ERR_COMMAND`) a byte other than ``0xA5`` arrived where a request
           must start (the byte is dropped);
           ``0xE2`` (:data:`ERR_TIMEOUT`) a request stopped for ``timeout`` clock cycles before
           its last byte (the partial request is dropped);
           ``0xE3`` (:data:`ERR_LINE`) a byte had a low stop bit or arrived while the
           previous one could not be taken (it is dropped)
=========  ============================================================================

Responses come in request order (the block is an order-preserving pipeline); a host may send
further requests before the responses arrive, as long as responses drain at least as fast as
requests arrive: while a whole request waits for a stalled block, the receiver keeps one more
byte and drops the next with an overrun (``0xE3``). To resynchronise after an error, a host stays
silent for longer than ``timeout`` clock cycles (any partial request is then dropped) and starts
again with ``0xA5``. An error of a kind that is already waiting to be sent is reported once.
"""

from amaranth.hdl import Cat, Const, Module, Shape, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .uart import UARTReceiver, UARTTransmitter

__all__ = ["UARTHarness", "REQUEST", "RESPONSE", "ERR_COMMAND", "ERR_TIMEOUT", "ERR_LINE"]

REQUEST = 0xA5
RESPONSE = 0x5A
ERR_COMMAND = 0xE1
ERR_TIMEOUT = 0xE2
ERR_LINE = 0xE3
_ERRORS = (ERR_COMMAND, ERR_TIMEOUT, ERR_LINE)


def _stream_port(dut, name, flow):
    member = dut.signature.members.get(name)
    if (
        member is None
        or member.flow != flow
        or not member.is_signature
        or set(member.signature.members.keys()) != {"payload", "valid", "ready"}
    ):
        raise TypeError(
            f"`dut` must have a `{name}: {flow.name}(stream.Signature(...))` port, not {member!r}"
        )
    return Shape.cast(member.signature.members["payload"].shape).width


class UARTHarness(wiring.Component):
    """UART front end around a pipeline block (protocol in the module doc string).

    Parameters
    ----------
    dut : wiring.Component
        The block: ports ``i: In(stream.Signature(in_layout))`` and
        ``o: Out(stream.Signature(out_layout))``. It becomes a submodule named ``dut``.
    divisor : int
        Clock cycles per UART bit (``round(f_clk / baud)``), at least 4.
    timeout : int or None
        Clock cycles of silence that drop a partial request; default 1024 byte periods.

    Attributes
    ----------
    rx : In(1)
        Serial line from the host.
    tx : Out(1)
        Serial line to the host.
    busy : Out(1)
        A request is being received, waits for the block or a response is being sent.
    error : Out(1)
        Pulses when an error is detected.
    """

    def __init__(self, dut, *, divisor, timeout=None):
        if not isinstance(dut, wiring.Component):
            raise TypeError(f"`dut` must be a wiring.Component, not {dut!r}")
        self._in_width = _stream_port(dut, "i", In)
        self._out_width = _stream_port(dut, "o", Out)
        self._dut = dut
        self._rx = UARTReceiver(divisor)
        self._tx = UARTTransmitter(divisor)
        if timeout is None:
            timeout = 1024 * 10 * divisor
        if not isinstance(timeout, int) or isinstance(timeout, bool) or timeout < 20 * divisor:
            raise TypeError(
                f"`timeout` must be an integer of at least two byte periods "
                f"({20 * divisor} cycles), not {timeout!r}"
            )
        self._timeout = timeout
        super().__init__(
            {"rx": In(1, init=1), "tx": Out(1, init=1), "busy": Out(1), "error": Out(1)}
        )

    @property
    def divisor(self):
        return self._rx.divisor

    @property
    def timeout(self):
        return self._timeout

    @property
    def in_bytes(self):
        """Payload bytes of a request (after the ``0xA5`` byte)."""
        return (self._in_width + 7) // 8

    @property
    def out_bytes(self):
        """Payload bytes of a response (after the ``0x5A`` byte)."""
        return (self._out_width + 7) // 8

    def elaborate(self, platform):
        m = Module()
        m.submodules.dut = dut = self._dut
        m.submodules.uart_rx = rx = self._rx
        m.submodules.uart_tx = tx = self._tx
        m.d.comb += [rx.rx.eq(self.rx), self.tx.eq(tx.tx)]

        # request side: command byte, payload bytes shifted in from the top, hold for the block
        in_shift = Signal(8 * self.in_bytes)
        in_left = Signal(range(self.in_bytes + 1))
        silent = Signal(range(self.timeout + 1))
        holding = Signal()
        err_command, err_timeout = Signal(), Signal()
        m.d.comb += [
            rx.o.ready.eq(~holding),
            dut.i.valid.eq(holding),
            dut.i.payload.eq(in_shift[: self._in_width]),
        ]
        with m.If(holding):
            with m.If(dut.i.ready):
                m.d.sync += holding.eq(0)
        with m.Elif(rx.o.valid):
            m.d.sync += silent.eq(0)
            with m.If(in_left == 0):
                with m.If(rx.o.payload == REQUEST):
                    m.d.sync += in_left.eq(self.in_bytes)
                with m.Else():
                    m.d.comb += err_command.eq(1)
            with m.Else():
                m.d.sync += [in_shift.eq(Cat(in_shift[8:], rx.o.payload)), in_left.eq(in_left - 1)]
                with m.If(in_left == 1):
                    m.d.sync += holding.eq(1)
        with m.Elif(in_left != 0):
            with m.If(silent == self.timeout - 1):
                m.d.sync += [in_left.eq(0), silent.eq(0)]
                m.d.comb += err_timeout.eq(1)
            with m.Else():
                m.d.sync += silent.eq(silent + 1)

        # response side: one shift register for a whole response or a single error byte
        out_shift = Signal(8 * (self.out_bytes + 1))
        out_left = Signal(range(self.out_bytes + 2))
        pending = Signal(len(_ERRORS))
        raised = Cat(err_command, err_timeout, rx.overrun | rx.frame_error)
        m.d.comb += [
            tx.i.valid.eq(out_left != 0),
            tx.i.payload.eq(out_shift[:8]),
            dut.o.ready.eq(out_left == 0),
            self.error.eq(raised != 0),
            self.busy.eq(holding | (in_left != 0) | (out_left != 0)),
        ]
        cleared = Signal.like(pending)
        with m.If(out_left == 0):
            with m.If(dut.o.valid):
                m.d.sync += [
                    out_shift.eq(Cat(Const(RESPONSE, 8), dut.o.payload)),
                    out_left.eq(self.out_bytes + 1),
                ]
            with m.Else():
                with m.Switch(pending):
                    for index, code in enumerate(_ERRORS):
                        with m.Case(
                            *[
                                value
                                for value in range(1 << len(_ERRORS))
                                if value & ((2 << index) - 1) == 1 << index
                            ]
                        ):
                            m.d.sync += [out_shift.eq(code), out_left.eq(1)]
                            m.d.comb += cleared.eq(1 << index)
        with m.Elif(tx.i.ready):
            m.d.sync += [out_shift.eq(out_shift >> 8), out_left.eq(out_left - 1)]
        m.d.sync += pending.eq((pending & ~cleared) | raised)
        return m
