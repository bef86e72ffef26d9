"""A programmed board played on a pseudo-terminal, for the tests of ``gpurtl board --port``."""

import os

from amaranth.hdl import Shape

from gpurtl.hdl.board.harness import RESPONSE
from gpurtl.sim.core import layouts


def serve(master, in_layout, out_layout, answer):
    """Read the harness's requests from ``master`` until it closes and write an answer to each:
    ``answer(index, value)`` gives the output (a dictionary of ``out_layout``) of the
    ``index``-th request ``value``, or an int, sent alone as the board's error code."""
    size = 1 + (Shape.cast(in_layout).width + 7) // 8
    out_size = (Shape.cast(out_layout).width + 7) // 8
    data, index = b"", 0
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:
            return
        if not chunk:
            return
        data += chunk
        while len(data) >= size:
            frame, data = data[:size], data[size:]
            value = layouts.unpack(in_layout, int.from_bytes(frame[1:], "little"))
            output = answer(index, value)
            index += 1
            if isinstance(output, int):
                os.write(master, bytes([output]))
            else:
                bits = layouts.pack(out_layout, output)
                os.write(master, bytes([RESPONSE]) + bits.to_bytes(out_size, "little"))
