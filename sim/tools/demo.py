"""What ``gpurtl experiment``, ``gpurtl demo`` and ``gpurtl report`` do.

An experiment writes into ``OUT/NAME/``: its ``data.json`` (what ``measure()`` returned), its
tables, CSV files, plots and ``summary.md``. The folder is written in a staging folder that
replaces it when the experiment succeeds, so an interrupted or failed run leaves nothing behind.

The demo runs every experiment, records a short lockstep waveform of every block into ``OUT/vcd/``,
keeps the waveform results in ``OUT/demo.json`` and writes ``OUT/summary.md``. :func:`report`
writes every table, plot and summary again from the saved data, without measuring.
"""

import json
import sys
import time
from pathlib import Path

from .. import experiments
from ..backends import BACKENDS
from ..core import files, registry
from ..core.files import UsageError
from ..core.progress import Progress, progress
from ..core.provenance import markdown, provenance
from . import tables

__all__ = ["DEMO_VCD_COUNT", "QUICK_VCD_BLOCKS", "run_experiment", "demo", "report"]

#: Transactions (or cycles) per block in the demo's waveforms: enough to see the pipeline fill,
#: stall and drain in a viewer; ``--quick`` records fewer.
DEMO_VCD_COUNT = {False: 50, True: 8}

#: The blocks whose waveform ``demo --quick`` records: one small block per family, a few seconds
#: each. The large ray-accelerator blocks take a minute or more each in Amaranth's simulator
#: (mostly building the simulation).
QUICK_VCD_BLOCKS = ("fp32_add", "omm_index", "ray_sort", "stoc", "vgpr_dyn", "waitcnt")

#: The seed of the demo's waveform runs.
WAVEFORM_SEED = 1

#: The demo's own results (the waveform runs), beside the experiments' folders.
DEMO_DATA = "demo.json"


def _staged(out_dir, write):
    """``write(staging)`` into a staging folder that replaces ``out_dir`` when it succeeds; the
    paths in its result name ``out_dir``."""
    with files.staged_folder(out_dir) as staging:
        result = write(staging)

    def moved(value):
        return str(value).replace(str(staging), str(out_dir))

    result = dict(result)
    result["files"] = [moved(path) for path in result.get("files", [])]
    result["rows"] = [
        (metric, moved(value) if isinstance(value, (str, Path)) else value)
        for metric, value in result.get("rows", [])
    ]
    return result


def run_experiment(module, out_dir, quick=False, options=None):
    """Measure ``module`` and write its report and data into ``out_dir`` (replaced when done);
    ``options``: the experiment's own options that were given."""
    reporter = Progress(module.NAME)
    return _staged(
        out_dir,
        lambda staging: experiments.run(
            module, staging, quick=quick, progress=reporter, options=options
        ),
    )


def _report_experiment(module, out_dir):
    """Write ``module``'s report in ``out_dir`` again from its ``data.json``."""
    return _staged(out_dir, lambda staging: experiments.report(module, staging, data_dir=out_dir))


def print_result(name, result):
    print(f"\n## {name}: {result.get('title', '')}")
    for metric, value in result.get("rows", []):
        print(f"  {metric}: {value}")
    for path in result.get("files", []):
        print(f"  file: {path}")


def demo(out, *, quick=False, vcd_count=None):
    """Every experiment on its default (``quick``: small sizes), a short waveform of every block
    and ``summary.md``; returns the exit status (1 if an experiment failed)."""
    out = Path(out)
    started_demo = time.monotonic()
    # an experiment whose quick run still builds an RTL model of minutes stays out of the demo
    found = {n: m for n, m in experiments.experiments().items() if getattr(m, "IN_DEMO", True)}
    progress(
        f"demo{' (quick)' if quick else ''}: {len(found)} experiments and a "
        f"waveform of every block -> {out}/"
    )
    results, failed = {}, {}
    for index, (name, module) in enumerate(found.items(), 1):
        progress(f"[{index}/{len(found)}] {name}: {module.DESCRIPTION}")
        started = time.monotonic()
        try:
            results[name] = run_experiment(module, out / name, quick)
        except Exception as error:  # one broken experiment must not hide the others
            failed[name] = str(error)
            print(f"gpurtl: experiment `{name}` failed: {error}", file=sys.stderr)
            continue
        print_result(name, results[name])
        progress(f"[{index}/{len(found)}] {name} done in {time.monotonic() - started:.0f} s")
    count = vcd_count or DEMO_VCD_COUNT[quick]
    started_vcd = time.monotonic()
    waves = _waveforms(out / "vcd", count, quick)
    saved = {
        "quick": quick,
        "vcd_count": count,
        "vcd": waves,
        "failed": failed,
        "provenance": provenance(seeds={"waveform stimulus": WAVEFORM_SEED}),
    }
    files.write_atomic(out / DEMO_DATA, json.dumps(saved, indent=1) + "\n")
    files.write_atomic(out / "summary.md", _summary(out, saved, results))
    vcd_s, total_s = time.monotonic() - started_vcd, time.monotonic() - started_demo
    progress(f"demo done in {total_s:.0f} s ({vcd_s:.0f} s of it writing waveforms)")
    print(f"\nsummary: {out / 'summary.md'}")
    return 1 if failed else 0


def _waveforms(folder, count, quick):
    """A short lockstep run of every block with its VCD, for a first look in a viewer:
    ``[{"block", "result", "vcd"}]``."""
    rows = []
    with files.staged_folder(folder) as vcd_dir:
        for block in registry.blocks():
            if quick and block.name not in QUICK_VCD_BLOCKS:
                rows.append({"block": block.name, "result": None, "vcd": None})
                continue
            path = vcd_dir / f"{block.name}.vcd"
            started = time.monotonic()
            try:
                line = (
                    BACKENDS["pysim"]
                    .check(block, block.resolve(), count=count, seed=WAVEFORM_SEED, vcd=str(path))
                    .line()
                )
                rows.append({"block": block.name, "result": line, "vcd": f"vcd/{path.name}"})
                progress(f"vcd {block.name}: {line} ({time.monotonic() - started:.1f} s)")
            except Exception as error:
                rows.append({"block": block.name, "result": f"error: {error}", "vcd": None})
                progress(f"vcd {block.name}: error: {error}")
    return rows


def _summary(out, saved, results):
    """``summary.md`` of a demo folder: every experiment's headline rows and the waveforms."""
    rows = []
    for name, result in results.items():
        rows += [
            {"experiment": name, "metric": metric, "value": value}
            for metric, value in result.get("rows", [])
        ]
    rows += [
        {"experiment": name, "metric": "FAILED", "value": error}
        for name, error in saved["failed"].items()
    ]
    rows += [
        {"experiment": name, "metric": "not written again", "value": why}
        for name, why in saved.get("missing", {}).items()
    ]
    count = saved["vcd_count"]
    waves = [
        {
            **row,
            "result": row["result"]
            or f"not recorded by `--quick`: `gpurtl check {row['block']} --count {count} "
            f"--vcd {row['block']}.vcd`",
        }
        for row in saved["vcd"]
    ]
    return (
        "# gpurtl demo\n\n"
        f"The tables below, and every experiment's own `summary.md`, tables and plots, are written "
        f"from the saved data (`data.json`, `{DEMO_DATA}`); `gpurtl report {out}` writes them "
        f"again without measuring.\n\n"
        + tables.markdown(rows, ["experiment", "metric", "value"])
        + "\n\n"
        + tables.markdown(
            waves,
            [
                tables.Column("block"),
                tables.Column(
                    "result", f"short lockstep run (pysim, {count} transactions or cycles)"
                ),
                tables.Column("vcd", "VCD", get=lambda row: row["vcd"] or ""),
            ],
        )
        + "\n"
        + (f"\n{markdown(saved['provenance'])}" if saved.get("provenance") else "")
    )


def report(folder):
    """Write the reports in ``folder`` again from its saved data: one experiment's folder (it holds
    a ``data.json``; its name is the experiment's) or a demo's (every experiment folder in it,
    then ``summary.md``). Returns the exit status."""
    folder = Path(folder)
    if not folder.is_dir():
        raise UsageError(f"`{folder}` must be a folder written by `gpurtl demo` or `experiment`")
    found = experiments.experiments()
    if (folder / experiments.DATA).is_file():
        module = found.get(folder.name)
        if module is None:
            raise UsageError(
                f"`{folder}`: the folder's name must be an experiment's "
                f"({', '.join(found)}), not `{folder.name}`"
            )
        print_result(module.NAME, _report_experiment(module, folder))
        return 0
    demo_data = folder / DEMO_DATA
    saved = json.loads(demo_data.read_text()) if demo_data.is_file() else None
    names = [name for name in found if (folder / name / experiments.DATA).is_file()]
    if not names and saved is None:
        raise UsageError(
            f"`{folder}` holds no {experiments.DATA} and no experiment folder with one; "
            f"run `gpurtl demo --out {folder}` or `gpurtl experiment NAME --out {folder}`"
        )
    results = {}
    for name in names:
        results[name] = _report_experiment(found[name], folder / name)
        print_result(name, results[name])
    if saved is not None:
        saved["missing"] = {
            name: f"no saved data: `gpurtl experiment {name}` measures it again"
            for name in found
            if name not in results and name not in saved["failed"]
        }
        files.write_atomic(folder / "summary.md", _summary(folder, saved, results))
        print(f"\nsummary: {folder / 'summary.md'}")
    return 0
