"""The ``gpurtl`` command line: list, export, run, stimulus, encode, check, bench, synth, board,
sweep, experiment, demo, report.

User mistakes (unknown block or parameter, malformed input, an output path that cannot be written)
print one ``gpurtl: error: ...`` line naming the file, line and field, exit with status 2 and leave
no partial output file; they are caught before any simulation starts. A failed external tool
(a Verilator build, Yosys or nextpnr) prints its log's tail without a Python traceback and exits
with status 1. Ctrl-C prints one line and exits with status 130.
"""

import argparse
import json
import signal
import sys
import time
from pathlib import Path

from ..backends import BACKENDS
from ..backends.fast.build import BuildError
from ..backends.sliced import BuildError as SlicedBuildError
from ..backends.sliced import NetlistError
from ..core import files, layouts, ports, provenance, registry
from ..core.export import ToolchainError
from ..core.files import UsageError
from ..core.jsonio import InputError
from ..core.progress import progress
from ..harness.engine import UndefinedValue
from ..harness.report import cycles_per_second
from . import cliutil
from .bench import BENCH_ROWS, default_rows
from .synth import SynthError

__all__ = ["main"]

EXIT_FAIL, EXIT_USAGE = 1, 2


def _overrides(pairs):
    overrides = {}
    for pair in pairs or ():
        if "=" not in pair:
            raise UsageError(f"parameter `{pair}` must be written name=value")
        name, value = pair.split("=", 1)
        overrides[name.strip()] = value.strip()
    return overrides


def _params(block, pairs):
    return block.resolve(_overrides(pairs))


def _block_and_params(args):
    block = registry.get(args.block)
    return block, _params(block, args.param)


def _latency(block, params):
    """The latency of a pipeline block and the ``details`` its build reports (a dict, if any)."""
    if block.kind != "pipeline":
        return "-", {}
    try:
        return registry.component_facts(
            lambda: block.build(**params),
            lambda dut: (str(dut.latency), dict(getattr(dut, "details", None) or {})),
        )
    except Exception as error:  # a block that cannot build at defaults is reported, not fatal
        return f"? ({error})", {}


def _param_json(param):
    return {
        "name": param.name,
        "default": param.default,
        "type": type(param.default).__name__,
        "choices": list(param.choices) if param.choices is not None else None,
        "range": list(param.range) if param.range is not None else None,
        "rule": param.rule or None,
        "doc": param.doc,
    }


def _block_json(block, params, latency, in_layout, out_layout):
    notes = block.field_notes(params)
    return {
        "name": block.name,
        "kind": block.kind,
        "doc": block.doc,
        "latency": int(latency) if latency.isdigit() else None,
        "params": [_param_json(p) for p in block.params],
        "values": params,
        "in": layouts.structure(in_layout),
        "out": layouts.structure(out_layout),
        # the packing, as `gpurtl export --ports` gives it
        "fields": {
            "in": ports.fields(in_layout, notes["in"]),
            "out": ports.fields(out_layout, notes["out"]),
        },
        # what the values of fields whose type does not say it mean, by path
        "notes": notes,
        "optional_inputs": layouts.field_paths(block.input_defaults(params)),
        "check_count": block.check_count,
    }


def _width(layout):
    return sum(leaf.width for leaf in layouts.leaves(layout))


def _block_argument(p, required=True):
    p.add_argument(
        "block",
        metavar="BLOCK",
        nargs=None if required else "?",
        help="registered block name (see `gpurtl list`)",
    )
    p.add_argument(
        "-p",
        "--param",
        action="append",
        metavar="NAME=VALUE",
        help="build parameter (repeatable; `gpurtl list BLOCK` shows them)",
    )


def _backend_arguments(p):
    p.add_argument(
        "--backend",
        choices=list(BACKENDS),
        default="pysim",
        help="; ".join(f"{name}: {backend.summary}" for name, backend in BACKENDS.items()),
    )
    p.add_argument("--vcd", metavar="FILE", help="write a VCD waveform")


def _seed_argument(p):
    p.add_argument("--seed", type=int, default=0, help="random seed (a non-negative integer)")


def _backend_tools(args):
    """A backend that compiles a model needs a C++ compiler and make: say so before any work
    (after the mistakes in the command line itself, which need no tool to name)."""
    BACKENDS[args.backend].require_waveforms(getattr(args, "vcd", None))
    BACKENDS[args.backend].require_tools()


def _list_arguments(p):
    _block_argument(p, required=False)
    p.add_argument(
        "--json",
        action="store_true",
        help="as JSON: parameter ranges, layouts as structures, optional input fields",
    )


def cmd_list(args):
    if args.block:
        chosen = [registry.get(args.block)]
        params_of = {args.block: _params(chosen[0], args.param)}
    else:
        if args.param:
            raise UsageError("-p/--param needs a BLOCK: gpurtl list BLOCK -p NAME=VALUE")
        chosen = registry.blocks()
        params_of = {block.name: block.resolve() for block in chosen}
    rows = []
    for block in chosen:
        params = params_of[block.name]
        in_layout, out_layout = block.layouts(**params)
        latency, details = _latency(block, params)
        rows.append((block, params, latency, details, in_layout, out_layout))
    if args.json:
        print(
            json.dumps(
                [{**_block_json(b, p, lat, i, o), "details": det} for b, p, lat, det, i, o in rows],
                indent=1,
                default=str,
            )
        )
        return 0
    one = args.block is not None
    for block, params, latency, details, in_layout, out_layout in rows:
        kind = f"pipeline, latency {latency}" if block.kind == "pipeline" else "cycle-stepped"
        print(f"{block.name}  ({kind})")
        print(f"    {block.doc}")
        if block.params and one:
            print("    params:")
            for p in block.params:
                print(
                    f"      {p.name} = {params[p.name]}  (default {p.summary()})"
                    + (f"  {p.doc}" if p.doc else "")
                )
        elif block.params:
            print("    params: " + "  ".join(p.summary() for p in block.params))
        if one:
            for name, value in details.items():
                print(f"    {name}: {value}")
        shorten = (lambda text: text) if one else _short
        print(f"    in  ({_width(in_layout)} bits): {shorten(layouts.describe(in_layout))}")
        print(f"    out ({_width(out_layout)} bits): {shorten(layouts.describe(out_layout))}")
        if one:
            notes = block.field_notes(params)
            for side in ("in", "out"):
                for path, text in notes[side].items():
                    print(f"    {side} {path}: {text}")
            if "][" in layouts.describe(in_layout) + layouts.describe(out_layout):
                print(
                    "    arrays: outer index first, as JSON indexes them (u32[2][32]: 2 lists of 32)"
                )
            print(f"    input fields that may be left out: {_optional_text(block, params)}")
            print(f"    `gpurtl check` default --count: {block.check_count}")
    if not one:
        print("\n`gpurtl list BLOCK [-p NAME=VALUE]` shows one block in full; `--json` as data.")
    return 0


def _optional_text(block, params):
    defaults = block.input_defaults(params)
    optional = layouts.field_paths(defaults)
    if not optional:
        return "none (every field must be given)"
    in_layout, _ = block.layouts(**params)
    if set(optional) >= {leaf.path for leaf in layouts.leaves(in_layout)}:
        return "all (a missing field takes its default, e.g. {})".format(
            "an empty line `{}` is an idle cycle" if block.kind == "cycle" else "0"
        )
    kinds = {leaf.path: leaf.kind for leaf in layouts.leaves(in_layout)}
    return " ".join(
        f"{path}=0x{value:08x}" if kinds.get(path) == "f32" else f"{path}={value}"
        for path, value in zip(optional, _leaf_values(defaults))
    )


def _leaf_values(value):
    if isinstance(value, dict):
        return [leaf for item in value.values() for leaf in _leaf_values(item)]
    if isinstance(value, list):
        return [leaf for item in value for leaf in _leaf_values(item)]
    return [value]


def _short(text, limit=160):
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _export_arguments(p):
    from ..core.ports import DEFAULT_TIMESCALE

    _block_argument(p)
    p.add_argument(
        "-o",
        "--output",
        help="output .v file ('-' for stdout); with --ports/--ports-md the description "
        "(default: stdout)",
    )
    p.add_argument("--lint", action="store_true", help="also run verilator --lint-only -Wall")
    what = p.add_mutually_exclusive_group()
    what.add_argument(
        "--ports",
        action="store_true",
        help="write the port description as JSON instead of the Verilog: every payload field "
        "with its bit offset and width, clock, reset, latency and II or the sampling rule",
    )
    what.add_argument("--ports-md", action="store_true", help="the same as a Markdown table")
    p.add_argument(
        "--wrapper",
        action="store_true",
        help="also write a module BLOCK_fields with one port per payload field (i_a, o_z, ...)",
    )
    p.add_argument(
        "--timescale",
        default=DEFAULT_TIMESCALE,
        help="the file's `timescale unit/precision, or `none`",
    )


def _export_validate(args):
    from ..core.ports import PortsError, check_timescale

    if args.output is None and not (args.ports or args.ports_md):
        raise UsageError("export needs -o/--output (a .v file, or '-' for stdout)")
    if (args.ports or args.ports_md) and (args.wrapper or args.lint):
        raise UsageError("--wrapper and --lint go with the Verilog, not with --ports/--ports-md")
    try:
        args.timescale = check_timescale(args.timescale)
    except PortsError as error:
        raise UsageError(f"--timescale: {error}") from None
    if args.output is not None:
        files.check_output_file(args.output, "--output")


def _export_ports(args, block, params):
    """``gpurtl export --ports`` / ``--ports-md``: the port description instead of the Verilog."""
    description = ports.describe(block, params, timescale=args.timescale)
    text = ports.markdown(description) if args.ports_md else json.dumps(description, indent=1)
    text = text if text.endswith("\n") else text + "\n"
    if args.output in (None, "-"):
        sys.stdout.write(text)
    else:
        files.write_atomic(args.output, text)
        print(f"wrote {args.output} (ports of `{block.name}`)", file=sys.stderr)
    return 0


def cmd_export(args):
    from ..core.export import lint, to_verilog

    block, params = _block_and_params(args)
    if args.ports or args.ports_md:
        return _export_ports(args, block, params)
    text = to_verilog(block, params)
    if args.lint:
        ok, messages = lint(text, block.name)
        if not ok:
            print(messages, file=sys.stderr)
            print(f"gpurtl: lint of `{block.name}` failed", file=sys.stderr)
            return EXIT_FAIL
        print(
            f"verilator --lint-only -Wall: clean ({len(text.splitlines())} lines)", file=sys.stderr
        )
    text = ports.verilog_file(
        text, block, params, timescale=args.timescale, with_wrapper=args.wrapper
    )
    if args.output == "-":
        sys.stdout.write(text)
    else:
        files.write_atomic(args.output, text)
        also = f", wrapper `{ports.wrapper_name(block)}`" if args.wrapper else ""
        print(f"wrote {args.output} (top module `{block.name}`, clk, rst{also})", file=sys.stderr)
    return 0


def _emit_jsonl(path, shape, values):
    """JSON Lines to ``path`` (atomically), or to stdout when ``path`` is None or ``-``."""
    from ..core.jsonio import to_jsonable, write_jsonl

    if path in (None, "-"):
        for value in values:
            print(json.dumps(to_jsonable(shape, value)))
    else:
        write_jsonl(path, shape, values)


def _run_arguments(p):
    _block_argument(p)
    p.add_argument("--input", required=True, help="JSON Lines input file ('-' for stdin)")
    p.add_argument("-o", "--output", help="JSON Lines output file (default: stdout)")
    _backend_arguments(p)
    p.add_argument("--no-golden", action="store_true", help="do not compare with the golden model")


def cmd_run(args):
    from ..backends import get
    from ..core.jsonio import read_jsonl
    from ..harness.engine import StallPattern
    from ..harness.golden_io import golden_outputs

    block, params = _block_and_params(args)
    in_layout, out_layout = block.layouts(**params)
    inputs = read_jsonl(args.input, in_layout, block.input_defaults(params))
    progress(
        f"run: {cliutil.plural(len(inputs), 'input')} through `{block.name}` on {args.backend}"
    )
    expected = None if args.no_golden else golden_outputs(block, params, inputs)
    report = get(args.backend).run(
        block,
        params,
        inputs,
        expected=expected,
        stalls=StallPattern(),
        vcd=args.vcd,
        keep_outputs=True,
        progress=_cycle_progress("run", len(inputs)),
    )
    outputs = [layouts.unpack(out_layout, bits) for bits in report.outputs]
    _emit_jsonl(args.output, out_layout, outputs)
    unit = "transaction" if block.kind == "pipeline" else "cycle"
    print(
        f"{cliutil.plural(len(outputs), unit)} through `{block.name}` on {args.backend} "
        f"({cliutil.plural(report.cycles, getattr(report, 'cycle_unit', 'clock cycle'))})",
        file=sys.stderr,
    )
    if expected is not None:
        if report.first:
            print(f"RTL differs from the golden model: {report.first}", file=sys.stderr)
        print(f"golden model agreement: {report.line()}", file=sys.stderr)
        return EXIT_FAIL if report.failed else 0
    return 0


def _cycle_progress(command, total):
    def report_cycles(cycles, report):
        progress(f"{command}: cycle {cycles}, {report.passed + report.failed} of {total} compared")

    return report_cycles


def _stimulus_arguments(p):
    _block_argument(p)
    p.add_argument("--count", type=int, default=4, help="how many inputs")
    _seed_argument(p)
    p.add_argument("-o", "--output", required=True, help="output .jsonl file ('-' for stdout)")


def cmd_stimulus(args):
    """Write ``count`` of the block's own random inputs as JSON Lines: a template of real
    transactions (real node bytes for ``ray_accel``) to edit and feed to ``gpurtl run``."""
    import numpy as np

    from ..harness.golden_io import CHUNK

    block, params = _block_and_params(args)
    in_layout, _ = block.layouts(**params)
    rng = np.random.default_rng(args.seed)
    written = [0]

    def inputs():
        # In chunks, as `check` does: memory stays flat for any --count.
        while written[0] < args.count:
            size = max(CHUNK, block.check_count) if written[0] == 0 else CHUNK
            batch = block.stimulus(rng, min(size, args.count - written[0]), **params)
            written[0] += len(batch)
            yield from batch

    _emit_jsonl(args.output, in_layout, inputs())
    if args.output != "-":
        print(
            f"{cliutil.plural(written[0], 'input')} of `{block.name}` written to {args.output}",
            file=sys.stderr,
        )
    return 0


#: What ``gpurtl encode`` and ``gpurtl decode`` convert, and the block whose ``-p`` parameters
#: they take (the wait word's generation, the matrix family and preset).
CODECS = {
    "ray": ("ray_accel", "nodes and rays written by hand -> `ray_accel` input lines"),
    "waitcnt": ("waitcnt", "wait instructions as text (`s_wait_loadcnt 0`) <-> their words"),
    "matrix": ("matrix_core", "matrices of numbers <-> `matrix_core` VGPR lanes"),
}


def _codec_arguments(p, decode=False):
    p.add_argument(
        "what",
        nargs="?",
        choices=list(CODECS),
        default=None if decode else "ray",
        metavar="WHAT",
        help="; ".join(f"{name}: {text}" for name, (_, text) in CODECS.items()),
    )
    p.add_argument(
        "values",
        nargs="*",
        metavar="VALUE",
        help="waitcnt only: instructions ("
        + ("words, decimal or 0x..." if decode else "'s_wait_loadcnt 0'")
        + ") given here instead of --input, one a line out",
    )
    p.add_argument(
        "--input",
        help="JSON Lines file ('-' for stdin); for waitcnt a text file of one "
        + ("word" if decode else "instruction")
        + " a line",
    )
    p.add_argument("-o", "--output", help="output file (default: stdout)")
    p.add_argument(
        "-p",
        "--param",
        action="append",
        metavar="NAME=VALUE",
        help="waitcnt: generation=gfx12|gfx11|gfx10|gfx9; matrix: family=..., preset=... "
        "(as `gpurtl list waitcnt` / `gpurtl list matrix_core` show them)",
    )
    if decode:
        p.add_argument(
            "--instructions",
            metavar="FILE",
            help="ray: the `ray_accel` input lines that gave the results, one a line (each "
            "result is read as the node it tested: box, triangles, instance, dual)",
        )
        p.add_argument(
            "--node",
            choices=("box", "triangles", "instance", "dual"),
            help="ray: read every result as this node kind (instead of --instructions)",
        )


def _encode_arguments(p):
    _codec_arguments(p)


def _decode_arguments(p):
    _codec_arguments(p, decode=True)


def _codec_validate(args):
    if getattr(args, "what", None) is None:
        raise UsageError(f"decode needs WHAT: one of {', '.join(CODECS)}")
    if args.values and args.what != "waitcnt":
        raise UsageError(f"values on the command line are for waitcnt; `{args.what}` reads --input")
    if args.values and args.input:
        raise UsageError("give the instructions on the command line or with --input, not both")
    if not args.values and not args.input:
        example = {
            "waitcnt": "gpurtl encode waitcnt 's_wait_loadcnt 0'",
            "ray": "gpurtl encode --input nodes.jsonl",
            "matrix": "gpurtl encode matrix --input tiles.jsonl",
        }[args.what]
        raise UsageError(f"{args.what} needs --input FILE ('-' for stdin), e.g. {example}")
    if args.param and args.what == "ray":
        raise UsageError("-p/--param is for waitcnt and matrix (ray takes the node's own fields)")
    if getattr(args, "instructions", None) or getattr(args, "node", None):
        if args.what != "ray":
            raise UsageError("--instructions and --node are for `gpurtl decode ray`")
        if args.instructions and args.node:
            raise UsageError("give --instructions or --node, not both")
    elif getattr(args, "node", "absent") is None and args.what == "ray":
        raise UsageError(
            "decode ray needs --instructions FILE (the `ray_accel` input lines) or --node KIND "
            "(box, triangles, instance, dual): the dwords mean different things per node"
        )
    if args.output is not None:
        files.check_output_file(args.output, "--output")
        files.check_not_input(args.output, [("--input", getattr(args, "input", None))], "--output")


def _codec_params(args):
    block = registry.get(CODECS[args.what][0])
    return block.resolve(_overrides(args.param))


def _text_lines(args):
    """``(where, text)`` of the waitcnt values: the command line's, or the lines of --input
    (blank lines and ``#`` comments skipped)."""
    from ..core.jsonio import read_text

    if args.values:
        return [(f"argument {n}", text) for n, text in enumerate(args.values, 1)]
    name = "<stdin>" if args.input == "-" else args.input
    lines = [
        (f"{name}:{n}", line.strip())
        for n, line in enumerate(read_text(args.input).splitlines(), 1)
        if line.strip() and not line.strip().startswith("#")
    ]
    if not lines:
        raise InputError(f"{name}: nothing to convert (no lines)")
    return lines


def _write_lines(args, lines, what):
    if args.output in (None, "-"):
        sys.stdout.writelines(lines)
    else:
        files.write_atomic(args.output, lines)
        print(f"{cliutil.plural(len(lines), what)} written to {args.output}", file=sys.stderr)


def cmd_encode(args):
    """``ray``: ``ray_accel`` input lines from hand-written nodes and rays (see
    :mod:`.ray_encode`); ``waitcnt``: wait words from their text (:mod:`.waitcnt_text`);
    ``matrix``: ``matrix_core`` input lines from matrices (:mod:`.matrix_tiles`)."""
    from ..core.jsonio import read_json_objects

    if args.what == "ray":
        from .ray_encode import encode_file

        lines = [json.dumps(value) + "\n" for value in encode_file(args.input)]
        _write_lines(args, lines, "ray_accel instruction")
    elif args.what == "waitcnt":
        from .waitcnt_text import WaitTextError, encode_text

        generation = _codec_params(args)["generation"]
        lines = []
        for where, text in _text_lines(args):
            try:
                word = encode_text(text, generation)
            except WaitTextError as error:
                raise InputError(f"{where}: {error}") from None
            lines.append(f"{word}  # 0x{word:08x} {text}\n")
        _write_lines(args, lines, "wait word")
    else:
        from .matrix_tiles import encode_line

        params = _codec_params(args)
        lines = [
            json.dumps(encode_line(obj, where, family=params["family"], preset=params["preset"]))
            + "\n"
            for where, obj in read_json_objects(args.input)
        ]
        if not lines:
            raise InputError(f"{args.input}: no matrices (the input has no JSON lines)")
        _write_lines(args, lines, "matrix_core transaction")
    return 0


def _wait_word(where, text):
    text = text.split("#", 1)[0].strip()
    try:
        return int(text, 0)
    except ValueError:
        raise InputError(
            f"{where}: a wait word must be an integer (decimal or 0x...), not {text!r}"
        ) from None


def cmd_decode(args):
    """``waitcnt``: wait words as text; ``matrix``: ``matrix_core`` lines as matrices; ``ray``:
    ``ray_accel`` results in words (:mod:`.ray_results`)."""
    from ..core.jsonio import parse_value, read_json_objects

    if args.what == "waitcnt":
        from .waitcnt_text import WaitTextError, decode_word

        generation = _codec_params(args)["generation"]
        lines = []
        for where, text in _text_lines(args):
            try:
                lines.append(decode_word(_wait_word(where, text), generation) + "\n")
            except WaitTextError as error:
                raise InputError(f"{where}: {error}") from None
        _write_lines(args, lines, "wait instruction")
        return 0
    if args.what == "matrix":
        from .matrix_tiles import decode_line

        params = _codec_params(args)
        lines = [
            json.dumps(decode_line(obj, where, family=params["family"], preset=params["preset"]))
            + "\n"
            for where, obj in read_json_objects(args.input)
        ]
        _write_lines(args, lines, "matrix line")
        return 0
    from gpurtl.facts.ray_accel import INSTR_LAYOUT, OUT_LAYOUT

    from .ray_results import decode_result, node_kind

    results = [(w, parse_value(OUT_LAYOUT, obj, w)) for w, obj in read_json_objects(args.input)]
    if args.instructions:
        block = registry.get("ray_accel")
        defaults = block.input_defaults(block.resolve())
        instructions = [
            (w, parse_value(INSTR_LAYOUT, obj, w, defaults))
            for w, obj in read_json_objects(args.instructions)
        ]
        if len(instructions) != len(results):
            raise InputError(
                f"{args.instructions}: {cliutil.plural(len(instructions), 'instruction')} for "
                f"{cliutil.plural(len(results), 'result')} in {args.input}: one each, in order"
            )
        kinds = []
        for where, instruction in instructions:
            kind = node_kind(instruction)
            if kind is None:
                raise InputError(
                    f"{where}: the node (pointer 0x{int(instruction['node_ptr'][0]):08x}, "
                    f"dual {instruction['dual']}) has no decoded result form: box, triangles, "
                    "instance or dual box nodes"
                )
            kinds.append(kind)
    else:
        kinds = [args.node] * len(results)
    lines = [json.dumps(decode_result(r, k)) + "\n" for (_, r), k in zip(results, kinds)]
    _write_lines(args, lines, "ray result")
    return 0


class _CheckCounts:
    """Each block's default ``gpurtl check --count``, as help text (the registry is loaded only
    when the help is printed)."""

    def __str__(self):
        return ", ".join(f"{b.name} {b.check_count}" for b in registry.blocks())


def _check_arguments(p):
    _block_argument(p)
    count = p.add_argument(
        "--count",
        type=int,
        help="transactions (pipelines) or cycles (default: the block's own `check_count`, "
        "shown by `gpurtl list BLOCK`: %(check_counts)s)",
    )
    count.check_counts = _CheckCounts()
    _seed_argument(p)
    _backend_arguments(p)


def _simulation_seconds(report, elapsed):
    """The seconds of ``elapsed`` that the simulation took: the fast backend times its phases
    (build, golden, simulation, compare); the cocotb backends leave out their build (minutes the
    first time, cached after), which is not simulation speed."""
    if hasattr(report, "sim_seconds"):
        return report.sim_seconds
    return elapsed - getattr(report, "build_s", 0.0)


def cmd_check(args):
    from ..backends import get

    block = registry.get(args.block)
    params = block.check_params(_overrides(args.param))
    shown = " ".join(f"{k}={v}" for k, v in params.items())
    print(f"check {block.name} [{shown}] on {args.backend}, seed {args.seed}", file=sys.stderr)
    started = time.monotonic()
    count = block.check_count if args.count is None else args.count
    report = get(args.backend).check(
        block,
        params,
        count=count,
        seed=args.seed,
        vcd=args.vcd,
        progress=_cycle_progress("check", count),
        log=lambda text: progress(f"check: {text}"),
    )
    elapsed = time.monotonic() - started
    # A cycle block's compared cycles are its clock cycles: one count, not the same one twice.
    compared = report.passed + report.failed - report.timing_errors
    # a bit-sliced run counts lane-cycles: clock cycles times the lanes that ran
    unit = getattr(report, "cycle_unit", "clock cycle")
    counts = (
        f"{cliutil.plural(compared, 'transaction')}, {cliutil.plural(report.cycles, unit)}"
        if block.kind == "pipeline"
        else cliutil.plural(report.cycles, "clock cycle")
    )
    rate = cycles_per_second(report.cycles, _simulation_seconds(report, elapsed))
    print(f"{counts}, {elapsed:.1f} s ({rate})")
    if report.first:
        print(f"first mismatch: {report.first}")
        if not args.vcd:
            print("rerun with --vcd wave.vcd to record the waveform")
    if report.stream_error:
        print(f"stream rule broken: {report.stream_error}")
    if hasattr(report, "phases"):
        print(report.phases())
    print(report.line())
    return EXIT_FAIL if report.failed else 0


def _bench_arguments(p):
    _block_argument(p)
    p.add_argument("--count", type=int, default=100_000, help="transactions for the fast backend")
    p.add_argument(
        "--slow-count",
        type=int,
        help="transactions for pysim and cocotb, a positive integer (default: 2000 for blocks "
        "whose input is at most 256 bits wide, 40 for wider ones)",
    )
    _seed_argument(p)
    p.add_argument(
        "--backends",
        help=f"comma-separated subset of {','.join(BENCH_ROWS)} "
        f"(default: {','.join(default_rows())})",
    )
    p.add_argument(
        "--session",
        nargs="?",
        const="fast-batch",
        metavar="BACKEND",
        help="instead: a co-simulation session against the batch run of the same model, in "
        "batches of 1, 32 and 1024 transactions (BACKEND: a --backends name, by default "
        "fast-batch)",
    )
    p.add_argument("--session-count", type=int, default=20_000, help="transactions for --session")
    p.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="runs of each compiled row, in turn on the same stimulus; the run of median CPU "
        "time is shown",
    )
    p.add_argument("--json", action="store_true", help="print the rows as JSON")


def _bench_tools(args):
    from ..core.export import cxx_toolchain

    if args.session_count < 1:
        raise UsageError(f"--session-count must be a positive integer, not {args.session_count}")
    if args.repeat < 1:
        raise UsageError(f"--repeat must be a positive integer, not {args.repeat}")
    chosen = [args.session] if args.session else args.backends.split(",") if args.backends else []
    chosen = [name for name in chosen or default_rows() if name in BENCH_ROWS]
    compiled = [name for name in chosen if "c++" in BENCH_ROWS[name][0].tools]
    if compiled:
        cxx_toolchain(f"`gpurtl bench` (backends {', '.join(compiled)})")
    for name in chosen:
        BENCH_ROWS[name][0].require_tools()


def cmd_bench(args):
    from .bench import bench, bench_sessions, format_session_table, format_table

    block, params = _block_and_params(args)

    def log(text):
        print(text, file=sys.stderr)

    if args.session:
        result = bench_sessions(
            block, params, count=args.session_count, seed=args.seed, backend=args.session, log=log
        )
        result["provenance"] = provenance.provenance(seeds={"stimulus": args.seed})
        print(json.dumps(result, indent=1) if args.json else format_session_table(result))
        return EXIT_FAIL if result["batch"]["failed"] else 0
    result = bench(
        block,
        params,
        count=args.count,
        slow_count=args.slow_count,
        seed=args.seed,
        backends=args.backends.split(",") if args.backends else None,
        log=log,
        repeat=args.repeat,
    )
    result["provenance"] = provenance.provenance(seeds={"stimulus": args.seed})
    print(json.dumps(result, indent=1) if args.json else format_table(result))
    return EXIT_FAIL if any(row.get("failed") for row in result["rows"]) else 0


def _synth_arguments(p):
    _block_argument(p)
    p.add_argument(
        "--device", choices=("ecp5-85k", "ice40-up5k"), default="ecp5-85k", help="target FPGA"
    )
    p.add_argument("--freq", type=float, default=100.0, help="target clock, MHz")
    p.add_argument("--nodsp", action="store_true", help="map multipliers to LUTs")
    p.add_argument(
        "--synth-only",
        action="store_true",
        help="ECP5: stop after yosys (designs larger than the device); no Fmax",
    )
    p.add_argument(
        "--keep-hierarchy",
        action="store_true",
        help="with --synth-only: map each distinct module once (yosys -noflatten); faster for "
        "large designs, an upper bound (no optimisation across module boundaries)",
    )
    p.add_argument("--json", action="store_true", help="print the result as JSON")


def _synth_validate(args):
    cliutil.check_positive(args.freq, "--freq")


def cmd_synth(args):
    from .synth import synthesize

    block, params = _block_and_params(args)
    if args.keep_hierarchy and not (args.synth_only and args.device == "ecp5-85k"):
        raise UsageError(
            "--keep-hierarchy needs --synth-only on ecp5-85k (place and route takes a flat netlist)"
        )
    if not args.json:
        progress(
            f"synthesizing {block.name} for {args.device} at {args.freq:g} MHz "
            f"(yosys, then nextpnr: a minute for small blocks, more for large ones)"
        )
    result = synthesize(
        block,
        params,
        device=args.device,
        freq=args.freq,
        nodsp=args.nodsp,
        synth_only=args.synth_only,
        keep_hierarchy=args.keep_hierarchy,
        progress=_progress_lines("synth"),
    )
    if args.json:
        print(json.dumps(result, indent=1))
        return 0
    fmax = "n/a (synthesis only)" if result["fmax_mhz"] is None else f"{result['fmax_mhz']} MHz"
    print(
        f"{block.name} on {result['device']}: LUT4 {result['lut4']}  FF {result['ff']}  "
        f"DSP {result['dsp']}  BRAM {result['bram']}  Fmax {fmax}"
    )
    if result.get("timed"):
        print(f"Fmax timed: {result['timed']}")
    if result.get("note"):
        print(f"Note: {result['note']}")
    print(f"Yosys flow: {result['flow']}")
    _print_critical_path(result.get("critical_path"))
    return 0


def _board_exchange(args, block, params):
    """``--port``: the transactions of ``--input`` through a programmed board, one at a time."""
    from ..core.jsonio import read_jsonl
    from ..harness.golden_io import golden_outputs
    from . import board_rt
    from .board import BoardError, exchange_serial

    if not args.input:
        raise UsageError("--port needs --input (a JSON Lines file of transactions)")
    if block.kind == "pipeline":
        in_layout, out_layout = block.layouts(**params)
        inputs = read_jsonl(args.input, in_layout, block.input_defaults(params))
    else:  # the RT unit board: instructions in, results out (sim/tools/board_rt.py)
        in_layout, out_layout = board_rt.board_layouts(params)
        inputs = read_jsonl(args.input, in_layout, layouts.unpack(in_layout, 0))  # missing: 0
    try:
        outputs = exchange_serial(args.port, args.baud, in_layout, out_layout, inputs)
    except BoardError as error:
        print(f"gpurtl: error: {error}", file=sys.stderr)
        return EXIT_FAIL
    _emit_jsonl(args.results, out_layout, outputs)
    if block.kind == "pipeline":
        expected = golden_outputs(block, params, inputs)
    else:
        expected = board_rt.expected_outputs(params, inputs)
    differ = [
        index
        for index, (got, want) in enumerate(zip(outputs, expected))
        if layouts.pack(out_layout, got) != layouts.pack(out_layout, want)
    ]
    print(
        f"{cliutil.plural(len(outputs), 'transaction')} through `{block.name}` on {args.port}; "
        f"golden model "
        f"agreement: {len(outputs) - len(differ)} passed, {len(differ)} failed"
        f"{f' (first: transaction {differ[0]})' if differ else ''}",
        file=sys.stderr,
    )
    return EXIT_FAIL if differ else 0


def _progress_lines(command):
    """``gpurtl: COMMAND: ...`` progress lines on stderr (see :func:`~gpurtl.sim.core.progress.progress`)."""
    return lambda line: progress(f"{command}: {line}")


def _print_critical_path(path):
    if path:
        print(
            f"critical path: {path['delay_ns']} ns ({path['logic_levels']} logic levels, "
            f"{path['logic_ns']} ns logic, {path['routing_ns']} ns routing) "
            f"from {path['from']} to {path['to']}"
        )
        if path["sources"]:
            print(
                f"  through {', '.join(path['sources'][:8])}"
                f"{' ...' if len(path['sources']) > 8 else ''}"
            )


def _board_arguments(p):
    p.add_argument(
        "board_name",
        metavar="BOARD",
        choices=("ulx3s",),
        help="ulx3s (ULX3S-85F, 25 MHz clock, FTDI UART)",
    )
    p.add_argument(
        "block",
        metavar="BLOCK",
        nargs="?",
        default="ray_accel",
        help="registered pipeline block, or rt_unit (with a scene's BVH in block RAM)",
    )
    p.add_argument(
        "-p", "--param", action="append", metavar="NAME=VALUE", help="build parameter (repeatable)"
    )
    p.add_argument("--baud", type=int, default=115200, help="UART bit rate")
    p.add_argument("--seed", type=int, default=1, help="nextpnr placement seed")
    p.add_argument("-o", "--output", default="ulx3s.bit", help="bitstream file")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.add_argument(
        "--port",
        help="instead of building: send --input's transactions to the "
        "programmed board on this serial port (e.g. /dev/ttyUSB0)",
    )
    p.add_argument(
        "--input", help="with --port: JSON Lines transactions (as for `gpurtl run`; '-' for stdin)"
    )
    p.add_argument("--results", help="with --port: JSON Lines output file (default: stdout)")


def _board_validate(args):
    if args.port is None:
        files.check_output_file(args.output, "--output")
    elif args.results:
        files.check_output_file(args.results, "--results")


def cmd_board(args):
    from gpurtl.hdl.board.top import uart_divisor

    from .board import BoardError, build_ulx3s
    from .board_rt import board_block

    try:
        block = board_block(registry.get(args.block))
    except ValueError as error:
        raise UsageError(str(error)) from None
    params = _params(block, args.param)
    try:
        uart_divisor(25e6, args.baud)
    except ValueError as error:
        raise UsageError(f"--baud: {error}") from None
    if args.port:
        return _board_exchange(args, block, params)
    if args.input:
        raise UsageError("--input needs --port (the board's serial port)")
    if not args.output.endswith(".bit") or Path(args.output).is_dir():
        raise UsageError(f"-o/--output must name a .bit file, not {args.output!r}")
    try:
        result = build_ulx3s(
            block,
            params,
            baud=args.baud,
            output=args.output,
            seed=args.seed,
            progress=_progress_lines("board"),
        )
    except BoardError as error:
        print(f"gpurtl: error: {error}", file=sys.stderr)
        return EXIT_FAIL
    if args.json:
        print(json.dumps(result, indent=1))
        return 0
    print(
        f"{block.name} on {result['board']} at {result['clock_mhz']:g} MHz, "
        f"{result['baud']} baud: LUT4 {result['lut4']}  FF {result['ff']}  "
        f"DSP {result['dsp']}  BRAM {result['bram']}  Fmax {result['fmax_mhz']} MHz  "
        f"build {result['total_s']:.0f} s -> {result['bitstream']}"
    )
    _print_critical_path(result.get("critical_path"))
    return 0


def cmd_experiment(args):
    from .. import experiments
    from . import demo

    if args.list or not args.name:
        for name, module in experiments.experiments().items():
            print(f"{name}: {module.DESCRIPTION}")
        return 0
    module = experiments.get(args.name)
    out = Path(args.out) / module.NAME
    progress(f"experiment {module.NAME}{' (quick)' if args.quick else ''} -> {out}")
    options = _experiment_options(args).get(module.NAME, {})
    try:
        result = demo.run_experiment(module, out, args.quick, options)
    except experiments.ExperimentFailed as error:
        print(f"gpurtl: error: experiment `{module.NAME}`: {error}", file=sys.stderr)
        return EXIT_FAIL
    demo.print_result(module.NAME, result)
    return 0


def cmd_demo(args):
    from . import demo

    return demo.demo(args.out, quick=args.quick, vcd_count=args.vcd_count)


def _report_arguments(p):
    p.add_argument(
        "folder",
        metavar="DIR",
        help="a folder written by `gpurtl demo --out DIR`, or `gpurtl experiment`'s DIR/NAME",
    )


def cmd_report(args):
    from . import demo

    return demo.report(args.folder)


def _sweep_arguments(p):
    p.add_argument(
        "spec",
        metavar="SPEC.toml",
        help="the sweep spec (see gpurtl.sim.sweep), or the name of a shipped "
        "example: fp32-depth, ray-accel-builds, ooo-memory-latency",
    )
    p.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help="a Dask scheduler (tcp://host:8786) (default: a local cluster)",
    )
    p.add_argument("--workers", type=int, default=2, help="local cluster workers")
    p.add_argument("--out", metavar="DIR", help="output folder (default: gpurtl-out/sweep/NAME)")
    p.add_argument(
        "--resume", action="store_true", help="skip the points that already have a result in DIR"
    )


def _sweep_validate(args):
    if args.out:
        files.check_output_folder(args.out, "--out")


def cmd_sweep(args):
    from ..sweep import SpecError, load_spec, pending, run_sweep, shipped

    if args.workers < 1:
        raise UsageError(f"--workers must be a positive integer, not {args.workers}")
    spec_path = Path(args.spec)
    builtin = shipped(args.spec)
    if not spec_path.exists() and builtin is not None:
        spec_path = builtin  # an example shipped with the package, by name
    try:
        spec = load_spec(spec_path)
    except SpecError as error:
        raise UsageError(str(error)) from None
    out = Path(args.out) if args.out else Path("gpurtl-out") / "sweep" / spec.name
    plural = "" if args.workers == 1 else "s"
    where = args.scheduler or f"a local Dask cluster ({args.workers} worker{plural})"
    total = len(spec.tasks())
    left = len(pending(spec, out)) if args.resume else total
    if left == 0:
        print(
            f"gpurtl sweep: all {cliutil.plural(total, 'point')} of `{spec.name}` are already "
            f"in {out}/points; nothing to run (the table and report are written again)",
            file=sys.stderr,
        )
    else:
        print(
            f"gpurtl sweep: {cliutil.plural(left, 'point')} of `{spec.name}` "
            f"({spec.run}){f' ({total - left} already on disk)' if left < total else ''} "
            f"on {where} -> {out}/",
            file=sys.stderr,
        )
    try:
        counts = run_sweep(
            spec, out, scheduler=args.scheduler, workers=args.workers, resume=args.resume
        )
    except KeyboardInterrupt:
        done = len(list((out / "points").glob("*.json"))) if (out / "points").is_dir() else 0
        print(
            f"gpurtl: interrupted; {done} finished points are in {out}/points "
            f"(run again with --resume)",
            file=sys.stderr,
        )
        return cliutil.EXIT_INTERRUPTED
    except OSError as error:
        raise UsageError(f"cannot reach the Dask scheduler {args.scheduler}: {error}") from None
    print(
        f"{counts['done']} done, {counts['failed']} failed, {counts['lost']} lost, "
        f"{counts['skipped']} already on disk; table: {out / 'results.csv'}, "
        f"report: {out / 'report.md'}"
    )
    return EXIT_FAIL if counts["failed"] or counts["lost"] else 0


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows ``(default: ...)`` for options that have a meaningful default."""

    def _get_help_string(self, action):
        # `is`, not `in`: a default of 0 (`--seed`) equals False but is shown.
        if any(action.default is v for v in (None, False, argparse.SUPPRESS)) or not action.help:
            return action.help
        return super()._get_help_string(action)


def _version():
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("gpurtl")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "unknown"


def _experiment_arguments(p):
    from .. import experiments

    p.add_argument("name", nargs="?", metavar="NAME", help="experiment (see --list)")
    p.add_argument("--list", action="store_true", help="list the experiments")
    p.add_argument("--out", default="gpurtl-out", help="output folder")
    p.add_argument("--quick", action="store_true", help="small sizes (seconds)")
    declared, known = {}, {}
    for name, module in experiments.experiments().items():
        if hasattr(module, "arguments"):
            group = _Declared(p.add_argument_group(f"options of experiment {name}"), known)
            module.arguments(group)
            declared[name] = group.dests
    p.set_defaults(experiment_options=declared)


class _Declared:
    """An argument group that remembers the destinations of the options added to it. An option
    that an earlier experiment declared already (``known``: option string -> action) is shared:
    the first declaration parses it (each experiment checks the value its own way), and it
    belongs to both experiments."""

    def __init__(self, group, known=None):
        self.group, self.dests = group, []
        self.known = {} if known is None else known

    def add_argument(self, *args, **kwargs):
        earlier = next((self.known[a] for a in args if a in self.known), None)
        if earlier is not None:
            self.dests.append(earlier.dest)
            return earlier
        action = self.group.add_argument(*args, **kwargs)
        self.known.update(dict.fromkeys(action.option_strings, action))
        self.dests.append(action.dest)
        return action


def _experiment_options(args):
    """``{experiment: {dest: value}}`` of the experiments' own options that were given."""
    given = {}
    for name, dests in args.experiment_options.items():
        values = {d: getattr(args, d, None) for d in dests}
        values = {d: v for d, v in values.items() if v is not None}
        if values:
            given[name] = values
    return given


def _experiment_validate(args):
    from .. import experiments

    own = set(args.experiment_options.get(args.name, ()))
    for name, values in _experiment_options(args).items():
        if name != args.name and set(values) <= own:
            continue  # an option both experiments declare
        if name != args.name:
            option = "--" + next(iter(values)).replace("_", "-")
            other = f"not `{args.name}`" if args.name else "name it: gpurtl experiment " + name
            raise UsageError(f"{option} is an option of experiment `{name}`, {other}")
        check = getattr(experiments.get(name), "check_options", None)
        if check is not None:
            try:
                check(values)
            except ValueError as error:
                raise UsageError(str(error)) from None
    if args.name:
        files.check_output_folder(args.out, "--out")


def _demo_arguments(p):
    p.add_argument("--out", default="gpurtl-out", help="output folder")
    p.add_argument(
        "--quick", action="store_true", help="small sizes and short waveforms (under a minute)"
    )
    p.add_argument("--vcd-count", type=int, help=argparse.SUPPRESS)


def _demo_validate(args):
    files.check_output_folder(args.out, "--out")


def _output_file(args):
    files.check_output_file(args.output, "--output")
    files.check_not_input(args.output, [("--input", getattr(args, "input", None))], "--output")


class Command:
    """One ``gpurtl`` command: its name and help, ``arguments(parser)`` that declares its own
    arguments, ``checks``: functions of the parsed arguments that refuse bad values before any
    work starts (:class:`~gpurtl.sim.core.files.UsageError`), and ``run(args)``."""

    def __init__(self, name, help, arguments, run, checks=()):
        self.name, self.help, self.arguments, self.run = name, help, arguments, run
        self.checks = checks


#: The commands, in the order ``gpurtl --help`` lists them.
COMMANDS = (
    Command("list", "blocks, parameters, latency, interfaces", _list_arguments, cmd_list),
    Command(
        "export", "write Verilog of a block", _export_arguments, cmd_export, (_export_validate,)
    ),
    Command(
        "run",
        "run your own transactions / per-cycle events through the RTL",
        _run_arguments,
        cmd_run,
        (_output_file, _backend_tools),
    ),
    Command(
        "stimulus",
        "write random inputs of a block as JSON Lines (a template for `run --input`)",
        _stimulus_arguments,
        cmd_stimulus,
        (_output_file,),
    ),
    Command(
        "encode",
        "readable values to what the blocks take: `ray_accel` instructions from nodes and rays "
        "written by hand (boxes as floats, triangles as vertices, instances with a matrix), wait "
        "words from wait instructions, `matrix_core` VGPR lanes from matrices (docs/cli.md)",
        _encode_arguments,
        cmd_encode,
        (_codec_validate,),
    ),
    Command(
        "decode",
        "what the blocks give back, readable: wait words as instructions, `matrix_core` D (and "
        "inputs) as matrices, `ray_accel` results as hits, child order, t and primitive ids",
        _decode_arguments,
        cmd_decode,
        (_codec_validate,),
    ),
    Command(
        "check",
        "random lockstep check against the golden model",
        _check_arguments,
        cmd_check,
        (_backend_tools,),
    ),
    Command(
        "bench",
        "simulation speed of every backend on the same stimulus; --session: a co-simulation "
        "session against the batch run",
        _bench_arguments,
        cmd_bench,
        (_bench_tools,),
    ),
    Command(
        "synth",
        "out-of-context FPGA synthesis and place-and-route",
        _synth_arguments,
        cmd_synth,
        (_synth_validate,),
    ),
    Command(
        "board",
        "bitstream: a pipeline block (or the RT unit with its node memory) behind a UART harness "
        "on a board",
        _board_arguments,
        cmd_board,
        (_board_validate,),
    ),
    Command(
        "experiment",
        "run one experiment",
        _experiment_arguments,
        cmd_experiment,
        (_experiment_validate,),
    ),
    Command(
        "sweep",
        "run a parameter sweep (synth, check or an experiment) on Dask",
        _sweep_arguments,
        cmd_sweep,
        (_sweep_validate,),
    ),
    Command(
        "demo",
        "every experiment on its default, summary, plots, VCDs",
        _demo_arguments,
        cmd_demo,
        (_demo_validate,),
    ),
    Command(
        "report",
        "write the tables, plots and summaries again from saved data",
        _report_arguments,
        cmd_report,
    ),
)


def build_parser(command_name=None):
    """The command line's parser; with ``command_name``, the options of that command only (the
    others' subparsers keep their name and help), so that a command does not import what only
    another command's options need (``experiment`` imports every experiment)."""
    parser = argparse.ArgumentParser(
        prog="gpurtl",
        description="Cycle-accurate RTL models of RDNA 4 / Xe3 GPU blocks",
        formatter_class=_HelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        p = sub.add_parser(
            command.name,
            help=command.help,
            description=command.help,
            formatter_class=_HelpFormatter,
        )
        if command_name is None or command.name == command_name:
            command.arguments(p)
        p.set_defaults(command_object=command)
    return parser


def _command_name(argv):
    """The command named on the command line ``argv``, if it names one."""
    first = next((word for word in argv if not word.startswith("-")), None)
    return first if any(command.name == first for command in COMMANDS) else None


def _validate(args):
    """Every check of the command line that needs no simulation, before any work starts: the
    options several commands share, then the command's own checks."""
    for option in ("count", "slow_count"):
        value = getattr(args, option, None)
        if value is not None and value < 1:
            name = "--" + option.replace("_", "-")
            raise UsageError(f"{name} must be a positive integer, not {value}")
    cliutil.check_seed(getattr(args, "seed", None))
    if getattr(args, "vcd", None):
        files.check_output_file(args.vcd, "--vcd")
    for check in args.command_object.checks:
        check(args)


def _first_sigint(signum, frame):
    """The first Ctrl-C: ignore any further one at once (so it cannot interrupt the clean-up that
    the resulting KeyboardInterrupt runs), then stop the command."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    raise KeyboardInterrupt


def main(argv=None):
    previous = signal.getsignal(signal.SIGINT)
    if previous is signal.default_int_handler:  # not when started with SIGINT ignored
        signal.signal(signal.SIGINT, _first_sigint)
    try:
        words = sys.argv[1:] if argv is None else argv
        provenance.set_command(words)
        args = build_parser(_command_name(words)).parse_args(argv)
        _validate(args)
        return args.command_object.run(args)
    except (registry.RegistryError, InputError, UsageError, ToolchainError) as error:
        print(f"gpurtl: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    except (
        BuildError,
        SlicedBuildError,
        NetlistError,
        SynthError,
    ) as error:  # names the tool, its log and the log's tail
        print(f"gpurtl: {error}", file=sys.stderr)
        return EXIT_FAIL
    except UndefinedValue as error:  # an X or Z on a four-state simulator: the RTL's fault
        print(f"gpurtl: error: {error}", file=sys.stderr)
        return EXIT_FAIL
    except KeyboardInterrupt:
        previous = None  # keep ignoring Ctrl-C until the process has exited
        return cliutil.interrupted()
    except BrokenPipeError:
        return 0
    finally:
        if previous is signal.default_int_handler:
            signal.signal(signal.SIGINT, previous)


if __name__ == "__main__":
    sys.exit(main())
