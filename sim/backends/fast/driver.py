"""The C++ ``main()`` that drives a verilated pipeline block: a batch mode and a session mode.

The driver is ``pipeline_driver.cpp`` (package data beside this module), a template whose
generated parts are six ``@NAME@`` fields filled per design from the payload widths (the
module's name, the word counts, the evaluations per cycle, the lines that set and read the
payload ports); one executable has both modes. A
transaction is a row of little-endian 32-bit words (word 0 = payload bits 0..31). The driver
offers rows on ``i`` with seeded random valid stalls (holding ``valid`` and the payload until the
transfer, as ``lib.stream`` requires) and takes outputs from ``o`` with random ready stalls; each
output becomes a record: the payload words, then the accept and emit cycles as two 64-bit numbers
(four words).

Batch mode (``sim IN OUT FIRST COUNT SEED P_VALID P_READY FREE_RUN LATENCY II MAX_IDLE``) reads
``COUNT`` rows from the file ``IN`` starting at row ``FIRST`` and writes the records to ``OUT``.
The first ``FREE_RUN`` transactions run with no stalls; each must take exactly ``LATENCY``
cycles and be accepted ``II`` cycles after the one before; the driver counts violations. Its last
line on stdout is a JSON summary.

Session mode (``sim --session REQUEST_FD ANSWER_FD SEED P_VALID P_READY FREE_RUN MAX_IDLE``)
serves :class:`~gpurtl.sim.backends.fast.session.FastSession` over two pipes (stdout stays free
for Verilator's own messages). A request is ``u32 op, u32 rows, u32 outputs, u64 cycles``; op 1
(exchange) continues with the rows: they join the input queue, then the clock runs
until at least ``outputs`` records came out and at least ``cycles`` cycles ran. The answer is
``u32 status, u32 size, u64 accepted, u64 cycle``, then ``size`` records (status 0) or an error
message of ``size`` bytes (status 1). Op 2 ends the session.

Per clock (``evals=2``, any top): inputs are set with ``clk`` low and evaluated, the handshakes
are read, then ``clk`` rises and the design is evaluated again -- the same order as
:mod:`gpurtl.sim.harness.engine`.

Per clock (``evals=1``, a top whose outputs come only from registers, as
:class:`~gpurtl.sim.backends.fast.top.BatchTop`'s do): the handshakes are read from the outputs
of the previous evaluation (they cannot depend on the inputs just set), the inputs are set, and
one evaluation with ``clk`` toggled makes the clock edge. The Verilog of such a model has its
registers clocked on both edges of ``clk`` (:func:`both_edges`), so every toggle is one cycle
and Verilator runs its input-combinational region once per cycle instead of twice.
"""

from pathlib import Path

from ...core.words import words_of

__all__ = ["driver_source", "both_edges", "DRIVER_VERSION", "EVALS"]

#: Bumped when the driver's protocol changes (the source itself keys the build cache).
DRIVER_VERSION = 2

#: Evaluations per clock cycle the driver can make (see the module doc string).
EVALS = (1, 2)

_POSEDGE = "always @(posedge clk)"
_HERE = Path(__file__).parent


def both_edges(text):
    """Exported Verilog ``text`` with every ``always @(posedge clk)`` clocked on both edges of
    ``clk``: the model a one-evaluation driver (``evals=1``) steps by toggling ``clk``."""
    if _POSEDGE not in text or "negedge" in text:
        raise ValueError("the design must clock every register on `posedge clk` alone")
    return text.replace(_POSEDGE, "always @(edge clk)")


def _member(port):
    """The C++ member of a Verilog port: Verilator escapes ``__`` in names as ``___05F``."""
    return port.replace("__", "___05F")


def _set_port(port, width, row):
    port = _member(port)
    words = words_of(width)
    top_mask = (1 << (width - 32 * (words - 1))) - 1
    if width > 64:
        lines = [f"top->{port}[{k}] = {row}[{k}];" for k in range(words - 1)]
        lines.append(f"top->{port}[{words - 1}] = {row}[{words - 1}] & 0x{top_mask:x}u;")
        return "\n            ".join(lines)
    if width > 32:
        return f"top->{port} = (uint64_t){row}[0] | ((uint64_t)({row}[1] & 0x{top_mask:x}u) << 32);"
    return f"top->{port} = {row}[0] & 0x{top_mask:x}u;"


def _get_port(port, width, row):
    port = _member(port)
    words = words_of(width)
    if width > 64:
        return "\n            ".join(f"{row}[{k}] = top->{port}[{k}];" for k in range(words))
    if width > 32:
        return (
            f"{row}[0] = (uint32_t)top->{port}; {row}[1] = (uint32_t)((uint64_t)top->{port} >> 32);"
        )
    return f"{row}[0] = (uint32_t)top->{port};"


def driver_source(top, in_width, out_width, evals=2):
    """C++ source of the driver for the verilated module ``V<top>``, making ``evals``
    evaluations per clock cycle (see the module doc string)."""
    if evals not in EVALS:
        raise ValueError(f"`evals` must be one of {EVALS}, not {evals!r}")
    in_words, out_words = words_of(in_width), words_of(out_width)
    one_eval = "true" if evals == 1 else "false"
    return _render(
        (_HERE / "pipeline_driver.cpp").read_text(),
        {
            "TOP": top,
            "IN_WORDS": str(in_words),
            "OUT_WORDS": str(out_words),
            "ONE_EVAL": one_eval,
            "SET_PAYLOAD": _set_port("i__payload", in_width, "in_row"),
            "GET_PAYLOAD": _get_port("o__payload", out_width, "record"),
        },
    )


def _render(template, values):
    """``template`` with every ``@NAME@`` replaced by ``values[NAME]`` (each must occur)."""
    for name, value in values.items():
        if f"@{name}@" not in template:
            raise ValueError(f"the driver template has no @{name}@")
        template = template.replace(f"@{name}@", value)
    return template
