"""The ``gpurtl`` command line: list, export, run, check, bench, synth, experiment, demo.

User mistakes (unknown block or parameter, malformed input) print one ``gpurtl: error: ...`` line
naming the file, line and field, exit with status 2 and leave no partial output file.
"""

import argparse
import json
import sys
import time
from pathlib import Path

from . import layouts, registry
from .jsonio import InputError
from .lockstep import BACKENDS

__all__ = ["main"]

EXIT_FAIL, EXIT_USAGE = 1, 2


class UsageError(Exception):
    pass


def _params(block, pairs):
    overrides = {}
    for pair in pairs or ():
        if "=" not in pair:
            raise UsageError(f"parameter `{pair}` must be written name=value")
        name, value = pair.split("=", 1)
        overrides[name.strip()] = value.strip()
    return block.resolve(overrides)


def _block_and_params(args):
    block = registry.get(args.block)
    return block, _params(block, args.param)


def _latency(block, params):
    if block.kind != "pipeline":
        return "-"
    try:
        return str(block.build(**params).latency)
    except Exception as error:  # a block that cannot build at defaults is reported, not fatal
        return f"? ({error})"


def cmd_list(args):
    rows = []
    for block in registry.blocks():
        params = block.resolve()
        in_layout, out_layout = block.layouts(**params)
        rows.append((block, _latency(block, params), in_layout, out_layout))
    if args.json:
        print(json.dumps([{"name": b.name, "kind": b.kind, "doc": b.doc, "latency": lat,
                           "params": {p.name: p.default for p in b.params},
                           "in": layouts.describe(i), "out": layouts.describe(o)}
                          for b, lat, i, o in rows], indent=1))
        return 0
    for block, latency, in_layout, out_layout in rows:
        kind = f"pipeline, latency {latency}" if block.kind == "pipeline" else "cycle-stepped"
        print(f"{block.name}  ({kind})")
        print(f"    {block.doc}")
        if block.params:
            print("    params: " + "  ".join(p.summary() for p in block.params))
        print(f"    in  ({sum(leaf.width for leaf in layouts.leaves(in_layout))} bits): "
              f"{_short(layouts.describe(in_layout))}")
        print(f"    out ({sum(leaf.width for leaf in layouts.leaves(out_layout))} bits): "
              f"{_short(layouts.describe(out_layout))}")
    return 0


def _short(text, limit=160):
    return text if len(text) <= limit else text[:limit - 3] + "..."


def cmd_export(args):
    from .export import lint, to_verilog
    from .jsonio import write_text_atomic
    block, params = _block_and_params(args)
    text = to_verilog(block, params)
    if args.lint:
        ok, messages = lint(text, block.name)
        if not ok:
            print(messages, file=sys.stderr)
            print(f"gpurtl: lint of `{block.name}` failed", file=sys.stderr)
            return EXIT_FAIL
        print(f"verilator --lint-only -Wall: clean ({len(text.splitlines())} lines)",
              file=sys.stderr)
    if args.output == "-":
        sys.stdout.write(text)
    else:
        write_text_atomic(args.output, text)
        print(f"wrote {args.output} (top module `{block.name}`, clk, rst)", file=sys.stderr)
    return 0


def _emit_jsonl(path, shape, values):
    """JSON Lines to ``path`` (atomically), or to stdout when ``path`` is None or ``-``."""
    from .jsonio import to_jsonable, write_jsonl
    if path in (None, "-"):
        for value in values:
            print(json.dumps(to_jsonable(shape, value)))
    else:
        write_jsonl(path, shape, values)


def cmd_run(args):
    from .engine import StallPattern
    from .jsonio import read_jsonl
    from .lockstep import golden_outputs, run_block
    block, params = _block_and_params(args)
    in_layout, out_layout = block.layouts(**params)
    inputs = read_jsonl(args.input, in_layout, block.input_defaults(params))
    expected = None if args.no_golden else golden_outputs(block, params, inputs)
    report = run_block(block, params, inputs, backend=args.backend, expected=expected,
                       stalls=StallPattern(), vcd=args.vcd, keep_outputs=True)
    outputs = [layouts.unpack(out_layout, bits) for bits in report.outputs]
    _emit_jsonl(args.output, out_layout, outputs)
    unit = "transactions" if block.kind == "pipeline" else "cycles"
    print(f"{len(outputs)} {unit} through `{block.name}` on {args.backend} "
          f"({report.cycles} clock cycles)", file=sys.stderr)
    if expected is not None:
        if report.first:
            print(f"RTL differs from the golden model: {report.first}", file=sys.stderr)
        print(f"golden model agreement: {report.line()}", file=sys.stderr)
        return EXIT_FAIL if report.failed else 0
    return 0


def cmd_stimulus(args):
    """Write ``count`` of the block's own random inputs as JSON Lines: a template of real
    transactions (real node bytes for ``ray_accel``) to edit and feed to ``gpurtl run``."""
    import numpy as np
    block, params = _block_and_params(args)
    in_layout, _ = block.layouts(**params)
    inputs = block.stimulus(np.random.default_rng(args.seed), args.count, **params)
    _emit_jsonl(args.output, in_layout, inputs)
    if args.output != "-":
        print(f"{len(inputs)} inputs of `{block.name}` written to {args.output}", file=sys.stderr)
    return 0


def cmd_check(args):
    from .lockstep import check
    block, params = _block_and_params(args)
    shown = " ".join(f"{k}={v}" for k, v in params.items())
    print(f"check {block.name} [{shown}] on {args.backend}, seed {args.seed}", file=sys.stderr)
    started = time.monotonic()
    report = check(block, params, count=args.count, seed=args.seed, backend=args.backend,
                   vcd=args.vcd)
    elapsed = time.monotonic() - started
    unit = "transactions" if block.kind == "pipeline" else "cycles"
    print(f"{report.passed + report.failed - report.latency_errors} {unit}, "
          f"{report.cycles} clock cycles, {elapsed:.1f} s "
          f"({report.cycles / max(elapsed, 1e-9):.0f} cycles/s)")
    if report.first:
        print(f"first mismatch: {report.first}")
        if not args.vcd:
            print("rerun with --vcd wave.vcd to record the waveform")
    if args.backend == "fast":
        print(f"fast backend ({report.top} top, {report.processes} processes): build "
              f"{report.build_seconds:.1f} s, golden {report.golden_seconds:.1f} s, simulation "
              f"{report.sim_seconds:.1f} s ({report.cycles / max(report.sim_seconds, 1e-9):.0f} "
              f"cycles/s), compare {report.compare_seconds:.1f} s")
    print(report.line())
    return EXIT_FAIL if report.failed else 0


def cmd_bench(args):
    from .bench import bench, format_table
    block, params = _block_and_params(args)
    result = bench(block, params, count=args.count, slow_count=args.slow_count, seed=args.seed,
                   backends=args.backends.split(",") if args.backends else None,
                   log=lambda text: print(text, file=sys.stderr))
    print(json.dumps(result, indent=1) if args.json else format_table(result))
    return EXIT_FAIL if any(row.get("failed") for row in result["rows"]) else 0


def cmd_synth(args):
    from .synth import synthesize
    block, params = _block_and_params(args)
    if not args.json:
        print(f"synthesizing {block.name} for {args.device} at {args.freq} MHz...",
              file=sys.stderr)
    result = synthesize(block, params, device=args.device, freq=args.freq, nodsp=args.nodsp,
                        synth_only=args.synth_only)
    if args.json:
        print(json.dumps(result, indent=1))
        return 0
    fmax = "n/a (synthesis only)" if result["fmax_mhz"] is None else f"{result['fmax_mhz']} MHz"
    print(f"{block.name} on {result['device']}: LUT4 {result['lut4']}  FF {result['ff']}  "
          f"DSP {result['dsp']}  BRAM {result['bram']}  Fmax {fmax}")
    return 0


def _progress_bar(description):
    try:
        from tqdm import tqdm
    except ImportError:  # pragma: no cover - tqdm is a dev dependency
        return None, lambda done, total, what: None
    bar = {"bar": None}

    def progress(done, total, what):
        if bar["bar"] is None:
            bar["bar"] = tqdm(total=total, desc=description, unit="step", leave=False,
                              file=sys.stderr, disable=None)
        bar["bar"].total = total
        bar["bar"].n = done
        bar["bar"].set_postfix_str(str(what)[:40], refresh=True)

    def close():
        if bar["bar"] is not None:
            bar["bar"].close()
    return close, progress


def _run_experiment(module, out_dir, quick):
    out_dir.mkdir(parents=True, exist_ok=True)
    close, progress = _progress_bar(module.NAME)
    try:
        result = module.run(out_dir, quick=quick, progress=progress)
    finally:
        if close:
            close()
    return result


def _print_result(name, result):
    print(f"\n## {name}: {result.get('title', '')}")
    for metric, value in result.get("rows", []):
        print(f"  {metric}: {value}")
    for path in result.get("files", []):
        print(f"  file: {path}")


def cmd_experiment(args):
    from . import experiments
    if args.list or not args.name:
        for name, module in experiments.experiments().items():
            print(f"{name}: {module.DESCRIPTION}")
        return 0
    module = experiments.get(args.name)
    out = Path(args.out) / module.NAME
    result = _run_experiment(module, out, args.quick)
    _print_result(module.NAME, result)
    return 0


def cmd_demo(args):
    from . import experiments
    from .lockstep import check
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    summary = ["# gpurtl demo", "", "| experiment | metric | value |", "|---|---|---|"]
    found = experiments.experiments()
    print(f"gpurtl demo: {len(found)} experiments -> {out}/", file=sys.stderr)
    failures = []
    for index, (name, module) in enumerate(found.items(), 1):
        print(f"[{index}/{len(found)}] {name}: {module.DESCRIPTION}", file=sys.stderr)
        started = time.monotonic()
        try:
            result = _run_experiment(module, out / name, args.quick)
        except Exception as error:  # one broken experiment must not hide the others
            failures.append(name)
            print(f"gpurtl: experiment `{name}` failed: {error}", file=sys.stderr)
            summary.append(f"| {name} | FAILED | {error} |")
            continue
        _print_result(name, result)
        for metric, value in result.get("rows", []):
            summary.append(f"| {name} | {metric} | {value} |")
        print(f"   ({time.monotonic() - started:.0f} s)", file=sys.stderr)
    # A short waveform of every block, for a first look in a VCD viewer.
    vcd_dir = out / "vcd"
    vcd_dir.mkdir(exist_ok=True)
    summary += ["", "| block | short lockstep run (pysim) | VCD |", "|---|---|---|"]
    for block in registry.blocks():
        params = block.resolve()
        path = vcd_dir / f"{block.name}.vcd"
        try:
            report = check(block, params, count=args.vcd_count, seed=1, vcd=str(path))
            summary.append(f"| {block.name} | {report.line()} | vcd/{path.name} |")
            print(f"   vcd {block.name}: {report.line()}", file=sys.stderr)
        except Exception as error:
            summary.append(f"| {block.name} | error: {error} | |")
    (out / "summary.md").write_text("\n".join(summary) + "\n")
    print(f"\nsummary: {out / 'summary.md'}")
    return EXIT_FAIL if failures else 0


def build_parser():
    parser = argparse.ArgumentParser(
        prog="gpurtl", description="Cycle-accurate RTL models of RDNA 4 / Xe3 GPU blocks")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def with_block(p):
        p.add_argument("block", metavar="BLOCK", help="registered block name (see `gpurtl list`)")
        p.add_argument("-p", "--param", action="append", metavar="NAME=VALUE",
                       help="build parameter (repeatable)")

    p = sub.add_parser("list", help="blocks, parameters, latency, interfaces")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_list)

    p = sub.add_parser("export", help="write Verilog of a block")
    with_block(p)
    p.add_argument("-o", "--output", required=True, help="output .v file ('-' for stdout)")
    p.add_argument("--lint", action="store_true", help="also run verilator --lint-only -Wall")
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("run", help="run your own transactions / per-cycle events through the RTL")
    with_block(p)
    p.add_argument("--input", required=True, help="JSON Lines input file")
    p.add_argument("--output", help="JSON Lines output file (default: stdout)")
    p.add_argument("--backend", choices=BACKENDS, default="pysim")
    p.add_argument("--vcd", help="write a VCD waveform")
    p.add_argument("--no-golden", action="store_true", help="do not compare with the golden model")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("stimulus", help="write random inputs of a block as JSON Lines (a "
                       "template for `run --input`)")
    with_block(p)
    p.add_argument("--count", type=int, default=4, help="how many inputs (default 4)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("-o", "--output", required=True, help="output .jsonl file ('-' for stdout)")
    p.set_defaults(func=cmd_stimulus)

    p = sub.add_parser("check", help="random lockstep check against the golden model")
    with_block(p)
    p.add_argument("--count", type=int, help="transactions (pipelines) or cycles")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--backend", choices=BACKENDS, default="pysim")
    p.add_argument("--vcd", help="write a VCD waveform")
    p.set_defaults(func=cmd_check)

    p = sub.add_parser("bench", help="simulation speed of every backend on the same stimulus")
    with_block(p)
    p.add_argument("--count", type=int, default=100_000,
                   help="transactions for the fast backend (default 100000)")
    p.add_argument("--slow-count", type=int,
                   help="transactions for pysim and cocotb (default: by block size)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--backends", help="comma-separated subset of "
                   "pysim,verilator,fast-stalled,fast-batch (default: all)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_bench)

    p = sub.add_parser("synth", help="out-of-context FPGA synthesis and place-and-route")
    with_block(p)
    p.add_argument("--device", choices=("ecp5-85k", "ice40-up5k"), default="ecp5-85k")
    p.add_argument("--freq", type=float, default=100.0, help="target clock, MHz")
    p.add_argument("--nodsp", action="store_true", help="map multipliers to LUTs")
    p.add_argument("--synth-only", action="store_true",
                   help="ECP5: stop after yosys (designs larger than the device); no Fmax")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_synth)

    p = sub.add_parser("experiment", help="run one experiment")
    p.add_argument("name", nargs="?", metavar="NAME")
    p.add_argument("--list", action="store_true")
    p.add_argument("--out", default="gpurtl-out")
    p.add_argument("--quick", action="store_true", help="small sizes (seconds)")
    p.set_defaults(func=cmd_experiment)

    p = sub.add_parser("demo", help="every experiment on its default, summary, plots, VCDs")
    p.add_argument("--out", default="gpurtl-out")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--vcd-count", type=int, default=50, help=argparse.SUPPRESS)
    p.set_defaults(func=cmd_demo)
    return parser


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "count", None) is not None and args.count < 1:
        parser.error(f"--count must be a positive integer, not {args.count}")
    try:
        return args.func(args)
    except (registry.RegistryError, InputError, UsageError) as error:
        print(f"gpurtl: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("gpurtl: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
