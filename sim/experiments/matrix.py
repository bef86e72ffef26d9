"""RDNA 4 matrix core: cycles per instruction, FLOPs per clock per CU, sparse speed-up, the cost
of each format and algorithm on ECP5, and each preset's error against exact arithmetic.

Tables (each with a CSV file and a plot):

1. ``rates``: cycles per instruction measured on the RTL (Amaranth simulator, back-to-back
   instructions of every op, output always taken), FLOPs per clock per CU (2 SIMDs per CU, 2
   FLOPs per logical multiply-add, SWMMAC counted at its logical K) against GPUOpen's table, and
   SWMMAC's effective speed-up over WMMA of the same format.
2. ``synth``: LUT4, FF and DSP of one dot-product unit (:class:`gpurtl.hdl.matrix.unit.DotUnit`)
   per format and algorithm, ECP5-85k synthesis only (no place and route); results are cached by
   the Verilog's hash in the per-user cache folder, so only the first run pays for Yosys.
   Only the full run synthesises; the others show the newest cached figures.

Sizes: ``--quick`` (seconds), the default (what ``gpurtl demo`` runs: the IU8 core at both rates,
1000 dot products per format and preset as the full run; under a minute of CPU) and the full run
(``gpurtl experiment matrix --full``: every build of :data:`RATE_BUILDS` and
:data:`SYNTH_BUILDS`, 1000 dot products; tens of minutes).
3. ``errors``: per preset and input format, the error in FP32 ulps of random dot products
   (depth 16) against the exact rational result, and the FTTN-style targeted cases with each
   preset's output, marked where the presets disagree.
"""

import csv
import hashlib
import json
import time

import numpy as np

from gpurtl.facts.matrix import PEAK_PER_CU, PRESETS, VARIANT_BY_NAME, family_variants
from gpurtl.golden.matrix.arith import dot
from gpurtl.golden.matrix.exact import exact_dot, ulp_error
from gpurtl.golden.matrix.formats import to_float
from gpurtl.golden.matrix.samples import encode, random_elements, targeted

#: The seeds of the random stimulus of the rates table and of the error table's dot products.
SEEDS = {"rates stimulus": 0, "error dot products": 0}

NAME = "matrix"
DESCRIPTION = "matrix core: cycles/instruction, FLOPs/clk/CU vs GPUOpen, sparse speed-up, ECP5 cost, preset errors"

__all__ = [
    "NAME",
    "DESCRIPTION",
    "arguments",
    "measure",
    "report",
    "main",
    "RATE_BUILDS",
    "SYNTH_BUILDS",
]

#: (family, rate) builds whose cycles are measured with ``full``; ``--quick`` measures the first
#: only, the default run :data:`DEFAULT_RATE_BUILDS`.
RATE_BUILDS = (
    ("iu8_i32", "rdna3"),
    ("f16_f32", "rdna4"),
    ("bf16_f32", "rdna4"),
    ("f16_f16", "rdna4"),
    ("fp8_f32", "rdna4"),
    ("iu8_i32", "rdna4"),
    ("iu4_i32", "rdna4"),
    ("f16_f32", "rdna3"),
)

#: The default run's builds: the integer family at both rates (dense and sparse, 8 and 16 dot
#: units); the float builds at the RDNA 4 rate take minutes each on the Amaranth simulator.
DEFAULT_RATE_BUILDS = (("iu8_i32", "rdna3"), ("iu8_i32", "rdna4"))

#: (family, preset) dot units synthesised (ECP5, synthesis only, 2 stages) with ``full``; the
#: default and ``--quick`` runs show the newest cached figures of each (blank, with a note, when
#: none were ever made).
SYNTH_BUILDS = (
    ("f16_f32", "rdna4"),
    ("f16_f32", "cdna3"),
    ("f16_f32", "rdna3_dot2"),
    ("f16_f32", "rz_narrow"),
    ("bf16_f32", "rdna4"),
    ("fp8_f32", "rdna4"),
    ("iu8_i32", "rdna4"),
    ("iu4_i32", "rdna4"),
)

#: Random dot products per preset and format in the error table: ``--quick``, default, ``full``.
ERROR_COUNTS = {"quick": 60, "default": 1000, "full": 1000}

_CLASS = {"f16": "f16", "bf16": "bf16", "fp8": "fp8", "bf8": "fp8", "iu8": "iu8", "iu4": "iu4"}


def _measure_rate(family, rate, count=2):
    """Cycles per instruction of every op of one build: ``count`` instructions per op, no
    stalls; the interval between consecutive outputs of one op (its median)."""
    from gpurtl.sim.backends import BACKENDS
    from gpurtl.sim.core import registry
    from gpurtl.sim.harness import golden_io
    from gpurtl.sim.harness.engine import StallPattern

    block = registry.get("matrix_core")
    params = block.resolve({"family": family, "rate": rate})
    # built for its latency and unit count, dropped unelaborated: the run below builds its own
    latency, dots = registry.component_facts(
        lambda: block.build(**params), lambda dut: (dut.latency, dut._dots)
    )
    rng = np.random.default_rng(0)
    txs = []
    for op in range(len(family_variants(family))):
        batch = block.stimulus(rng, count * 6, **params)
        txs += [tx for tx in batch if tx["op"] == op][:count]
    expected = golden_io.golden_outputs(block, params, txs)
    report = BACKENDS["pysim"].run(
        block, params, txs, expected=expected, stalls=StallPattern(free_run=len(txs))
    )
    # with no stalls the last of N back-to-back instructions is accepted N - 1 intervals after
    # the first and leaves `latency` cycles later; the run ends in the cycle after that
    if report.failed:
        raise RuntimeError(f"matrix_core {family} {rate}: {report.line()}: {report.first}")
    cycles_per = (report.cycles - latency - 1) / (len(txs) - 1)
    rows = []
    for v in family_variants(family):
        flops = v.flops * 2 / cycles_per  # 2 SIMDs per CU
        peak = PEAK_PER_CU["RX 9070 XT (RDNA 4)" if rate == "rdna4" else "RX 7900 XTX (RDNA 3)"]
        rows.append(
            {
                "instruction": v.name,
                "rate": rate,
                "dots": params["dots"] or dots,
                "cycles": cycles_per,
                "latency": latency,
                "flops_per_clk_cu": flops,
                "gpuopen": peak.get(_CLASS[v.a]) if not v.sparse else None,
                "sparse": v.sparse,
                "passed": report.passed,
            }
        )
    return rows


def _dot_unit_block():
    """A registry-style block of one dot unit; its parameters name the build (the Verilog
    export is cached by block name and parameters)."""
    from gpurtl.hdl.matrix.unit import DotUnit
    from gpurtl.sim.core.registry import Block, Param

    return Block(
        name="matrix_dot_unit",
        doc="one dot-product unit",
        kind="pipeline",
        build=lambda family, preset: DotUnit(family, preset, 2),
        golden=None,
        layouts=None,
        stimulus=None,
        params=(Param("family", "f16_f32"), Param("preset", "rdna4")),
    )


def _synth(family, preset, progress=None):
    """Synthesis-only ECP5 figures of one dot unit, cached by the Verilog's hash."""
    from gpurtl.sim.core.export import cache_dir, to_verilog
    from gpurtl.sim.tools.synth import ABC_LUTS, SynthError, synthesize

    block = _dot_unit_block()
    params = {"family": family, "preset": preset}
    text = to_verilog(block, params)
    key = hashlib.sha1(text.encode()).hexdigest()[:16]
    path = cache_dir() / "matrix-synth" / f"{family}-{preset}-{key}.json"
    if path.exists():
        return json.loads(path.read_text()) | {"cached": True}, None
    start = time.monotonic()
    note = ""
    try:
        # (a unit that stops Yosys 0.70's abc9 is mapped again with abc by synthesize)
        r = synthesize(block, params, synth_only=True)
        if ABC_LUTS in r.get("flow", ""):
            note = "abc9 failed: LUTs mapped with abc"
    except SynthError:
        # the same unit with LUT multipliers may still have a figure
        try:
            r = synthesize(block, params, synth_only=True, nodsp=True)
        except SynthError as error:  # a tool failure is a row of the table, not the end
            first = str(error).splitlines()[0]
            return {
                "family": family,
                "preset": preset,
                "lut4": None,
                "ff": None,
                "dsp": None,
            }, first
        note = "Yosys failed with DSPs: multipliers in LUTs (--nodsp)"
    out = {
        "family": family,
        "preset": preset,
        "lut4": r["lut4"],
        "ff": r["ff"],
        "dsp": r["dsp"],
        "yosys_s": round(time.monotonic() - start, 1),
        "note": note,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out))
    return out | {"cached": False}, None


def _cached_synth(family, preset):
    from gpurtl.sim.core.export import cache_dir

    folder = cache_dir() / "matrix-synth"
    found = folder.glob(f"{family}-{preset}-*.json") if folder.exists() else []
    found = sorted(found, key=lambda path: path.stat().st_mtime)
    return json.loads(found[-1].read_text()) | {"cached": True} if found else None


def _fp8_values(rng, shape):
    """FP8 values that both the OCP and the FNUZ E4M3 encodings hold (|x| <= 240, no NaN)."""
    x = random_elements(rng, "fp8", shape, span=(1, 14), special=0.0)
    return to_float(x, "fp8")


def _errors(count, seed=0):
    """Per preset and format: ulp errors of random depth-16 dot products against exact
    rationals, and the targeted cases' outputs."""
    rng = np.random.default_rng(seed)
    rows, cases = [], []
    for fa in ("f16", "bf16", "fp8"):
        if fa == "fp8":
            a_val, b_val = _fp8_values(rng, (count, 16)), _fp8_values(rng, (count, 16))
        else:
            span = (8, 22) if fa == "f16" else (118, 136)
            a_val = to_float(random_elements(rng, fa, (count, 16), span=span, special=0), fa)
            b_val = to_float(random_elements(rng, fa, (count, 16), span=span, special=0), fa)
        c_bits = random_elements(rng, "f32", count, span=(110, 140), special=0)
        for name, p in PRESETS.items():
            alg = p.algorithm(fa)
            ef = alg.element_format(fa)
            a, b = encode(a_val, ef), encode(b_val, ef)
            got = dot(alg, a, b, c_bits, fa, fa, "f32")
            errs = []
            for i in range(count):
                exact = exact_dot(a[i], b[i], c_bits[i], ef, ef, "f32")
                errs.append(ulp_error(got[i], exact, "f32"))
            errs = np.array(errs)
            rows.append(
                {
                    "preset": name,
                    "format": fa,
                    "mean_ulp": float(errs.mean()),
                    "median_ulp": float(np.median(errs)),
                    "max_ulp": float(errs.max()),
                    "within_half_ulp": float((errs <= 0.5).mean()),
                    "count": count,
                }
            )
        # targeted cases under every preset (inputs in each preset's own encoding)
        outs = {}
        for name, p in PRESETS.items():
            alg = p.algorithm(fa)
            names, a, b, c = targeted(fa, fa, "f32", 16, fp8=alg.fp8)
            outs[name] = dict(zip(names, dot(alg, a, b, c, fa, fa, "f32").tolist()))
        for case in outs["rdna4"]:
            values = {name: outs[name].get(case) for name in PRESETS}
            known = {v for v in values.values() if v is not None}
            cases.append({"format": fa, "case": case, **values, "disagree": len(known) > 1})
    return rows, cases


def measure(quick=False, progress=None, full=False):
    """All figures as a dictionary (see the module doc string). The default run is a sample
    (:data:`DEFAULT_RATE_BUILDS`, synthesis figures from the cache, :data:`ERROR_COUNTS`) that
    takes a minute or two; ``full`` measures every build (tens of minutes)."""

    def tell(done, total, what):
        if progress:
            progress(done, total, what)

    size = "full" if full else "quick" if quick else "default"
    builds = {"quick": RATE_BUILDS[:1], "default": DEFAULT_RATE_BUILDS, "full": RATE_BUILDS}[size]
    steps = len(builds) + len(SYNTH_BUILDS) + 1
    data = {"rates": [], "synth": [], "quick": quick, "size": size}
    for index, (family, rate) in enumerate(builds):
        tell(index, steps, f"cycles of {family} at {rate}")
        data["rates"] += _measure_rate(family, rate)
    for index, (family, preset) in enumerate(SYNTH_BUILDS):
        tell(len(builds) + index, steps, f"ECP5 synthesis of {family} / {preset}")
        error = None
        if full:
            r, error = _synth(family, preset)
        else:
            r = _cached_synth(family, preset)
        blank = {"family": family, "preset": preset, "lut4": None, "ff": None, "dsp": None}
        row = (r or blank) | {"cached": bool(r and r.get("cached"))}
        if error:
            row["note"] = error
        elif not r:
            row["note"] = "not in the cache (`--full` synthesises it)"
        elif not full:  # the newest cached figures, of whichever version of the unit
            row["note"] = "; ".join(x for x in ("from the cache", r.get("note")) if x)
        data["synth"].append(row)
    tell(steps - 1, steps, "errors against exact arithmetic")
    data["errors"], data["cases"] = _errors(ERROR_COUNTS[size])
    tell(steps, steps, "done")
    return data


def _table(header, rows):
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join("" if x is None else str(x) for x in row) + " |" for row in rows]
    return "\n".join(lines)


def _csv(path, rows):
    if not rows:
        return
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def _save(fig, out_dir, stem, files):
    """Write ``stem.png`` (its table is ``stem.csv``) and list both."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(out_dir / f"{stem}.png", dpi=120)
    plt.close(fig)
    files += [f"{stem}.csv", f"{stem}.png"]


def _synth_report(synth, out_dir, files, plt):
    """``matrix_synth.csv`` and ``.png`` of the units with synthesis figures, and the summary's
    text: their table, or a sentence saying why there are none (no empty chart or blank rows)."""
    measured = [s for s in synth if s["lut4"] is not None]
    missing = [f"{s['family']} / {s['preset']}" for s in synth if s["lut4"] is None]
    if not measured:
        return (
            f"No synthesis figures: none of the {len(synth)} units ({', '.join(missing)}) has "
            f"been synthesised on this machine (they are read from the build cache, which "
            f"{_COMMANDS['full']} fills; tens of minutes)."
        )
    _csv(out_dir / "matrix_synth.csv", measured)
    text = _table(
        ["family", "preset", "LUT4", "FF", "DSP", "cached", "note"],
        [
            (s["family"], s["preset"], s["lut4"], s["ff"], s["dsp"], s.get("cached"), s.get("note"))
            for s in measured
        ],
    )
    if missing:
        text += (
            f"\n\nNot in the build cache, so not shown: {', '.join(missing)} "
            f"({_COMMANDS['full']} synthesises them)."
        )
    fig, ax = plt.subplots(figsize=(9, 4))
    x = np.arange(len(measured))
    ax.bar(x - 0.25, [s["lut4"] for s in measured], 0.25, label="LUT4")
    ax.bar(x, [s["ff"] or 0 for s in measured], 0.25, label="FF")
    ax2 = ax.twinx()
    ax2.bar(x + 0.25, [s["dsp"] or 0 for s in measured], 0.25, color="tab:green", label="DSP")
    ax.set_xticks(x, [f"{s['family']}\n{s['preset']}" for s in measured], fontsize=7)
    ax.set_ylabel("LUT4 / FF")
    ax2.set_ylabel("DSP (MULT18X18D)")
    ax.legend(loc="upper left")
    ax2.legend(loc="upper right")
    ax.set_title("one dot-product unit, ECP5-85k synthesis only")
    _save(fig, out_dir, "matrix_synth", files)
    return text


def report(data, out_dir):
    """Write the CSV files, plots and ``summary.md``; return the experiment summary."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir.mkdir(parents=True, exist_ok=True)
    files = []
    rates = data["rates"]
    _csv(out_dir / "matrix_rates.csv", rates)
    rate_rows = []
    for r in rates:
        speed = ""
        if r["sparse"]:
            v = VARIANT_BY_NAME[r["instruction"]]
            twin = [
                d
                for d in rates
                if not d["sparse"]
                and d["rate"] == r["rate"]
                and (w := VARIANT_BY_NAME[d["instruction"]]).k == v.k // 2
                and (w.a, w.b, w.cd) == (v.a, v.b, v.cd)
            ]
            if twin:
                speed = f"{r['flops_per_clk_cu'] / twin[0]['flops_per_clk_cu']:.2f}x"
        rate_rows.append(
            (
                r["instruction"],
                r["rate"],
                r["dots"],
                f"{r['cycles']:g}",
                r["latency"],
                f"{r['flops_per_clk_cu']:g}",
                r["gpuopen"],
                speed,
            )
        )
    t1 = _table(
        [
            "instruction",
            "rate",
            "dot units",
            "cycles/instr",
            "latency",
            "FLOPs/clk/CU",
            "GPUOpen",
            "sparse speed-up",
        ],
        rate_rows,
    )
    fig, ax = plt.subplots(figsize=(10, 4.5))
    labels = [f"{r['instruction'].replace('v_', '')}\n{r['rate']}" for r in rates]
    x = np.arange(len(rates))
    ax.bar(x - 0.2, [r["flops_per_clk_cu"] for r in rates], 0.4, label="measured on the RTL")
    ax.bar(x + 0.2, [r["gpuopen"] or 0 for r in rates], 0.4, label="GPUOpen table (dense)")
    ax.set_xticks(x, labels, rotation=70, fontsize=6)
    ax.set_ylabel("FLOPs per clock per CU")
    ax.legend()
    _save(fig, out_dir, "matrix_rates", files)

    t2 = _synth_report(data["synth"], out_dir, files, plt)

    errors = data["errors"]
    _csv(out_dir / "matrix_errors.csv", errors)
    t3 = _table(
        ["preset", "format", "mean ulp", "median ulp", "max ulp", "within 0.5 ulp", "dots"],
        [
            (
                e["preset"],
                e["format"],
                f"{e['mean_ulp']:.3f}",
                f"{e['median_ulp']:.3f}",
                f"{e['max_ulp']:.3f}",
                f"{e['within_half_ulp']:.3f}",
                e["count"],
            )
            for e in errors
        ],
    )
    fig, ax = plt.subplots(figsize=(9, 4))
    names = list(PRESETS)
    fmts = ("f16", "bf16", "fp8")
    for i, fa in enumerate(fmts):
        vals = [
            next(e["mean_ulp"] for e in errors if e["preset"] == n and e["format"] == fa)
            for n in names
        ]
        ax.bar(np.arange(len(names)) + 0.25 * (i - 1), vals, 0.25, label=fa)
    ax.set_xticks(np.arange(len(names)), names)
    ax.set_ylabel("mean error (FP32 ulps)")
    ax.set_title("random depth-16 dot products against exact arithmetic")
    ax.legend()
    _save(fig, out_dir, "matrix_errors", files)

    cases = data["cases"]
    _csv(out_dir / "matrix_targeted.csv", cases)
    t4 = _table(
        ["format", "case", *names, "presets disagree"],
        [
            (
                c["format"],
                c["case"],
                *(f"0x{c[n]:08x}" if c[n] is not None else "" for n in names),
                "yes" if c["disagree"] else "",
            )
            for c in cases
        ],
    )
    fig, ax = plt.subplots(figsize=(9, 6))
    grid = np.array([[1.0 if c[n] != c["rdna4"] else 0.0 for n in names] for c in cases])
    ax.imshow(grid, aspect="auto", cmap="Reds", vmin=0, vmax=1.5)
    ax.set_xticks(np.arange(len(names)), names)
    ax.set_yticks(np.arange(len(cases)), [f"{c['format']} {c['case']}" for c in cases], fontsize=5)
    ax.set_title("targeted cases: output differs from rdna4 (red)")
    _save(fig, out_dir, "matrix_targeted", files)

    summary = "\n\n".join(
        [
            f"# Matrix core ({_COMMANDS[data.get('size', 'quick' if data['quick'] else 'full')]})",
            "## Cycles per instruction and FLOPs per clock per CU\n\n" + t1,
            "## One dot-product unit on ECP5-85k (synthesis only)\n\n" + t2,
            "## Error against exact arithmetic\n\n" + t3,
            "## Targeted cases\n\n" + t4,
        ]
    )
    (out_dir / "summary.md").write_text(summary + "\n")
    files.append("summary.md")
    first = rates[0]
    rows = [
        (
            f"{first['instruction']} at {first['rate']}",
            f"{first['cycles']:g} cycles, {first['flops_per_clk_cu']:g} FLOPs/clk/CU",
        ),
        ("targeted cases where presets disagree", sum(c["disagree"] for c in cases)),
    ]
    return {"title": "RDNA 4 matrix core", "rows": rows, "files": files}


_COMMANDS = {
    "quick": "`gpurtl experiment matrix --quick`",
    "default": "`gpurtl experiment matrix`",
    "full": "`gpurtl experiment matrix --full`",
}


def arguments(parser):
    """The experiment's own option of ``gpurtl experiment matrix``."""
    import argparse

    parser.add_argument(
        "--full",
        action="store_true",
        default=argparse.SUPPRESS,
        help="every build of the rates table and every ECP5 synthesis (tens of minutes)",
    )


def main(argv=None):
    """``python -m gpurtl.sim.experiments.matrix --full [--out DIR]``: every build, as
    ``gpurtl experiment matrix --full`` (``gpurtl experiment matrix`` without ``--full`` runs
    the default sample); writes ``DIR/matrix/data.json`` and the report like ``gpurtl
    experiment``, so ``gpurtl report DIR/matrix`` writes it again."""
    import argparse
    import sys
    from pathlib import Path

    from gpurtl.sim import experiments

    parser = argparse.ArgumentParser(prog="python -m gpurtl.sim.experiments.matrix")
    parser.add_argument("--full", action="store_true", help="every build (tens of minutes)")
    parser.add_argument(
        "--out", default="gpurtl-out/full", help="output folder (default: %(default)s)"
    )
    args = parser.parse_args(argv)
    out = Path(args.out) / NAME  # as `gpurtl experiment`, so that `gpurtl report` reads it

    def progress(done, total, what):
        print(f"[{done}/{total}] {what}", flush=True)

    module = sys.modules[__name__]
    result = experiments.run(module, out, progress=progress, options={"full": args.full})
    for metric, value in result["rows"]:
        print(f"{metric}: {value}")
    print(f"report: {out / 'summary.md'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
