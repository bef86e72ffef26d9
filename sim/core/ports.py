"""What an outside user needs to wire an exported block: the port description (JSON and a
Markdown table), the `` `timescale `` line and a wrapper module with one port per field.

Every export has the ports Amaranth writes for the block's signature: ``clk`` (rising edge),
``rst`` (synchronous, active high) and, for a pipeline, the two streams ``i__valid``,
``i__ready``, ``i__payload``, ``o__valid``, ``o__ready``, ``o__payload``; for a cycle-stepped
block the two vectors ``i`` and ``o``. A payload packs the fields of its layout least
significant bit first, at the offsets of :func:`gpurtl.sim.layouts.leaves`.
"""

import re

from amaranth.hdl import Shape

from . import layouts as L
from .registry import timing_facts

__all__ = [
    "DEFAULT_TIMESCALE",
    "PortsError",
    "check_timescale",
    "time_zero_trigger",
    "describe",
    "fields",
    "markdown",
    "verilog_file",
    "wrapper",
    "wrapper_name",
]

#: The `` `timescale `` of an exported file: the unit cocotb's examples use, 1 ps precision. The
#: design has no delays, so the value only matters next to a user's own timescaled files.
DEFAULT_TIMESCALE = "1ns/1ps"

_TIME = re.compile(r"^(1|10|100)(s|ms|us|ns|ps|fs)$")
_UNITS = ("s", "ms", "us", "ns", "ps", "fs")


class PortsError(ValueError):
    """A bad option for the export (a timescale that Verilog does not accept)."""


def check_timescale(text):
    """``text`` if it is a Verilog timescale ``unit/precision`` (``1ns/1ps``) with the precision
    no coarser than the unit, or ``"none"``; raises :class:`PortsError` otherwise."""
    if text == "none":
        return text
    parts = text.replace(" ", "").split("/")
    matches = [_TIME.match(part) for part in parts]
    if len(parts) != 2 or not all(matches):
        raise PortsError(
            f"timescale must be unit/precision with 1, 10 or 100 of s, ms, us, ns, ps or fs "
            f"(e.g. {DEFAULT_TIMESCALE}) or `none`, not {text!r}"
        )

    def seconds_exponent(match):
        return len(match[1]) - 1 - 3 * _UNITS.index(match[2])

    if seconds_exponent(matches[1]) > seconds_exponent(matches[0]):
        raise PortsError(f"timescale precision must not be coarser than its unit, not {text!r}")
    return "/".join(parts)


def _kind_text(leaf):
    if leaf.kind == "f32":
        return "f32"
    if leaf.kind == "enum":
        return leaf.enum.__name__
    return f"{'s' if leaf.kind == 'signed' else 'u'}{leaf.width}"


def _meaning(leaf):
    if leaf.kind == "f32":
        return "IEEE 754 binary32 bits"
    if leaf.kind == "enum":
        return ", ".join(f"{member.name}={member.value}" for member in leaf.enum)
    if leaf.kind == "signed":
        return "two's complement"
    return "unsigned" if leaf.width > 1 else "flag"


def _select(offset, width):
    return f"[{offset + width - 1}:{offset}]" if width > 1 else f"[{offset}]"


def fields(shape, notes=None):
    """Every scalar field of the payload ``shape``: its path, bit offset and width inside the
    packed payload, the Verilog bit range, type and meaning (what ``gpurtl export --ports`` and
    ``gpurtl list --json`` give). ``notes`` (``{path: text}``, a block's
    :meth:`~gpurtl.sim.core.registry.Block.field_notes`) gives the meaning of a field whose type
    does not say it (the members of an integer that selects an operation)."""
    notes = notes or {}
    return [
        {
            "field": leaf.path,
            "offset": leaf.offset,
            "width": leaf.width,
            "bits": _select(leaf.offset, leaf.width),
            "type": _kind_text(leaf),
            "meaning": notes.get(leaf.path) or _meaning(leaf),
        }
        for leaf in L.leaves(shape)
    ]


def describe(block, params, *, timescale=DEFAULT_TIMESCALE):
    """The JSON-ready port description of ``block`` built with ``params``."""
    in_layout, out_layout = block.layouts(**params)
    win, wout = Shape.cast(in_layout).width, Shape.cast(out_layout).width
    notes = block.field_notes(params)
    result = {
        "block": block.name,
        "top": block.name,
        "kind": block.kind,
        "params": params,
        "timescale": None if timescale == "none" else timescale,
        "clock": {"port": "clk", "edge": "rising"},
        "reset": {
            "port": "rst",
            "active": "high",
            "synchronous": True,
            "rule": "hold rst high over at least one rising edge of clk before the first input",
        },
        "packing": "fields least significant bit first at the offsets below; a field's own bits "
        "in its natural order (an f32 field holds the IEEE 754 bits)",
    }
    if block.kind == "pipeline":
        latency, ii = timing_facts(block, params)
        result |= {
            "latency": latency,
            "ii": ii,
            "handshake": "valid/ready (amaranth.lib.stream): a transfer happens at a rising edge "
            "where valid and ready are both high; a producer holds valid and the payload until "
            "the transfer; o__ready low stalls the pipeline (back-pressure, i__ready may fall); "
            "outputs leave in input order",
            "ports": [
                _port("i__valid", "input", 1, "an input transaction is offered"),
                _port("i__ready", "output", 1, "the block takes i__payload at this edge"),
                _port("i__payload", "input", win, "input fields, see payloads"),
                _port("o__valid", "output", 1, "an output transaction is offered"),
                _port("o__ready", "input", 1, "the consumer takes o__payload at this edge"),
                _port("o__payload", "output", wout, "output fields, see payloads"),
            ],
            "payloads": {
                "i__payload": fields(in_layout, notes["in"]),
                "o__payload": fields(out_layout, notes["out"]),
            },
            "notes": {"i__payload": notes["in"], "o__payload": notes["out"]},
        }
    else:
        result |= {
            "latency": None,
            "ii": None,
            "sampling": "cycle-stepped: set i, let it settle, read o (it may depend "
            "combinationally on i) before the rising edge of clk, then the edge updates the state",
            "ports": [
                _port("i", "input", win, "this cycle's input fields, see payloads"),
                _port("o", "output", wout, "this cycle's output fields, see payloads"),
            ],
            "payloads": {
                "i": fields(in_layout, notes["in"]),
                "o": fields(out_layout, notes["out"]),
            },
            "notes": {"i": notes["in"], "o": notes["out"]},
        }
    result["ports"] = [
        _port("clk", "input", 1, "clock, rising edge"),
        _port("rst", "input", 1, "synchronous reset, active high"),
        *result["ports"],
    ]
    return result


def _port(name, direction, width, meaning):
    return {"name": name, "direction": direction, "width": width, "meaning": meaning}


def markdown(description):
    """A short Markdown page of a :func:`describe` result."""
    d = description
    lines = [f"# `{d['top']}`: ports", ""]
    shown = " ".join(f"{k}={v}" for k, v in d["params"].items()) or "none"
    lines.append(f"Parameters: {shown}. Timescale: {d['timescale'] or 'none'}.")
    lines.append(
        "Clock `clk`, rising edge. Reset `rst`: synchronous, active high; " + "hold it "
        "high over at least one rising edge before the first input."
    )
    if d["kind"] == "pipeline":
        ii = d["ii"] if d["ii"] is not None else "varies from one transaction to the next"
        lines.append(f"Pipeline: latency {d['latency']} cycles (with `o__ready` high), II {ii}.")
        lines.append("Handshake: " + d["handshake"] + ".")
    else:
        lines.append("Sampling: " + d["sampling"] + ".")
    lines.append("Packing: " + d["packing"] + ".")
    lines += ["", "| port | direction | width | meaning |", "|---|---|---|---|"]
    lines += [
        f"| `{p['name']}` | {p['direction']} | {p['width']} | {p['meaning']} |" for p in d["ports"]
    ]
    for port, fields in d["payloads"].items():
        lines += ["", f"## `{port}`", "", "| field | bits | type | meaning |", "|---|---|---|---|"]
        lines += [
            f"| `{f['field']}` | {f['bits']} | {f['type']} | {f['meaning']} |" for f in fields
        ]
        leaves = {f["field"] for f in fields}
        grouped = {k: v for k, v in d.get("notes", {}).get(port, {}).items() if k not in leaves}
        if grouped:  # notes on arrays and structures (a leaf's note is in its meaning column)
            lines += [""] + [f"* `{path}`: {text}" for path, text in grouped.items()]
    return "\n".join(lines) + "\n"


def _flat(prefix, path):
    name = re.sub(r"[^0-9A-Za-z]+", "_", path).strip("_")
    return f"{prefix}_{name}" if name else f"{prefix}_data"


def wrapper_name(block):
    return f"{block.name}_fields"


def wrapper(block, params):
    """Verilog of a module ``<block>_fields`` with one port per payload field (``i_a``,
    ``o_ray_origin_0``, ...) around the exported top module."""
    in_layout, out_layout = block.layouts(**params)
    pipeline = block.kind == "pipeline"
    in_port, out_port = ("i__payload", "o__payload") if pipeline else ("i", "o")
    header = ["    input wire clk", "    input wire rst"]
    body = []
    seen = set()

    def ports(prefix, shape, port, direction):
        width = Shape.cast(shape).width
        body.append(f"  wire [{width - 1}:0] {port}_bits;")
        covered = 0
        for leaf in L.leaves(shape):
            name = _flat(prefix, leaf.path)
            if name in seen:
                raise PortsError(f"block `{block.name}`: two fields flatten to `{name}`")
            seen.add(name)
            vector = f"[{leaf.width - 1}:0] " if leaf.width > 1 else ""
            header.append(f"    {direction} wire {vector}{name}")
            select = f"{port}_bits{_select(leaf.offset, leaf.width)}"
            if direction == "input":
                body.append(f"  assign {select} = {name};")
            else:
                body.append(f"  assign {name} = {select};")
            covered |= ((1 << leaf.width) - 1) << leaf.offset
        if direction == "input":  # bits no field covers (none in a struct layout) are zero
            for bit in range(width):
                if not covered >> bit & 1:
                    body.append(f"  assign {port}_bits[{bit}] = 1'b0;")

    if pipeline:
        header += ["    input wire i_valid", "    output wire i_ready"]
    ports("i", in_layout, in_port, "input")
    if pipeline:
        header += ["    output wire o_valid", "    input wire o_ready"]
    ports("o", out_layout, out_port, "output")
    connections = [".clk(clk)", ".rst(rst)", f".{in_port}({in_port}_bits)"]
    connections.append(f".{out_port}({out_port}_bits)")
    if pipeline:
        connections += [".i__valid(i_valid)", ".i__ready(i_ready)"]
        connections += [".o__valid(o_valid)", ".o__ready(o_ready)"]
    lines = [
        f"// {wrapper_name(block)}: `{block.name}` with one port per payload field",
        f"module {wrapper_name(block)} (",
        ",\n".join(header),
        ");",
        *body,
        f"  {block.name} u_block (",
        "    " + ",\n    ".join(connections),
        "  );",
        "endmodule",
    ]
    return "\n".join(lines) + "\n"


#: Yosys's Verilog writer makes every ``always @*`` block read a register declared ``reg t = 0;``
#: so that the block runs once at time 0. In SystemVerilog a declaration's initial value is set
#: before time 0 without an event (Icarus Verilog with ``-g2012``, cocotb's default for Icarus),
#: so the blocks do not run and their outputs stay x until an input they read changes.
_TIME_ZERO = re.compile(
    r"^(\s*)reg (\\\$auto\$verilog_backend\.cc:\d+:dump_module\$\d+ ) = 0;$", re.M
)


#: Yosys writes a register that is driven partly by a process and partly by connections as a
#: bare ``always @*`` of one assignment (``always @* out_next[0] = s3[0];``), which does not read
#: the trigger: a four-state simulator runs it only when its right-hand side changes, so the bits
#: stay x while the right-hand side keeps its reset value.
_BARE_ALWAYS = re.compile(r"^( *)always @\*\n( +)(?!begin\b)([^\n]*;)$", re.M)

_MODULE = re.compile(r"^module [^;]*;\n.*?^endmodule$", re.M | re.S)

_TRIGGER = re.compile(r"^ *initial (\\\S+ ) = 1'b0;$", re.M)

#: The trigger declared in a module whose only processes are bare ``always @*`` blocks.
_OWN_TRIGGER = "\\$gpurtl$time0 "


def _trigger_bare_always(module):
    if not _BARE_ALWAYS.search(module):
        return module
    found = _TRIGGER.search(module)
    if found:
        trigger = found[1]
    else:
        trigger = _OWN_TRIGGER
        header = module.index(";\n") + 2
        declare = f"  reg {trigger};\n  initial {trigger} = 1'b0;\n"
        module = module[:header] + declare + module[header:]
    return _BARE_ALWAYS.sub(
        lambda m: f"{m[1]}always @* begin\n{m[2]}if ({trigger}) begin end\n{m[2]}{m[3]}\n{m[1]}end",
        module,
    )


def time_zero_trigger(verilog):
    """``verilog`` with Yosys's time-0 trigger registers set by an ``initial`` statement, which
    is an event at time 0 in Verilog-2005 and SystemVerilog alike, and read by every
    combinational ``always @*`` block (also the bare one-assignment blocks, which Yosys writes
    without it), so that a four-state simulator evaluates each block once at time 0 and every
    output is defined from the first cycle after reset."""
    verilog = _TIME_ZERO.sub(lambda m: f"{m[1]}reg {m[2]};\n{m[1]}initial {m[2]} = 1'b0;", verilog)
    return _MODULE.sub(lambda m: _trigger_bare_always(m[0]), verilog)


def verilog_file(verilog, block, params, *, timescale=DEFAULT_TIMESCALE, with_wrapper=False):
    """The text ``gpurtl export`` writes: the `` `timescale `` line (unless ``"none"``), the
    exported ``verilog`` (with :func:`time_zero_trigger`) and, with ``with_wrapper``, the
    :func:`wrapper` module."""
    head = "" if timescale == "none" else f"`timescale {timescale}\n"
    tail = "\n" + wrapper(block, params) if with_wrapper else ""
    return head + time_zero_trigger(verilog) + tail
