"""The results of a sweep: ``results.csv`` (and Parquet), and ``report.md`` with its plots (a
Pareto front of synthesis points, heat maps over the last two grid parameters)."""

import csv
import io
import math
from pathlib import Path

from ..core.files import write_atomic
from ..core.provenance import markdown

__all__ = ["pareto_front", "untimed_datapath", "write_report", "write_table"]


def _flat(row):
    flat = {"key": row.get("key"), "target": row["target"], "status": row["status"]}
    flat.update({f"param.{k}": v for k, v in row["params"].items()})
    flat.update({k: v for k, v in row.get("metrics", {}).items()})
    flat["seconds"] = row.get("seconds")
    flat["error"] = row.get("error") or ""
    return flat


def write_table(rows, out_dir):
    """``results.csv`` (and ``results.parquet`` when pyarrow is installed); returns the paths."""
    out_dir = Path(out_dir)
    flat = [_flat(r) for r in rows]
    fields = []
    for row in flat:
        fields += [k for k in row if k not in fields]
    table = io.StringIO(newline="")
    writer = csv.DictWriter(table, fieldnames=fields)
    writer.writeheader()
    writer.writerows(flat)
    write_atomic(out_dir / "results.csv", table.getvalue())
    paths = [out_dir / "results.csv"]
    try:
        import pyarrow
        import pyarrow.parquet
    except ImportError:
        return paths
    columns = {
        f: [
            None if r.get(f) is None else str(r.get(f)) if isinstance(r.get(f), str) else r.get(f)
            for r in flat
        ]
        for f in fields
    }
    try:
        table = pyarrow.table(columns)
    except (pyarrow.ArrowInvalid, pyarrow.ArrowTypeError):
        table = pyarrow.table(
            {f: [None if v is None else str(v) for v in vs] for f, vs in columns.items()}
        )
    pyarrow.parquet.write_table(table, out_dir / "results.parquet")
    return paths + [out_dir / "results.parquet"]


def pareto_front(points):
    """Indices of the points not dominated in (smaller LUT4, higher Fmax)."""
    front = []
    for i, (lut_i, f_i) in enumerate(points):
        dominated = any(
            lut_j <= lut_i and f_j >= f_i and (lut_j, f_j) != (lut_i, f_i)
            for j, (lut_j, f_j) in enumerate(points)
            if j != i
        )
        if not dominated:
            front.append(i)
    return sorted(front, key=lambda i: points[i][0])


def _label(params, names):
    return ", ".join(f"{n}={params[n]}" for n in names if n in params) or "defaults"


def _shared_params(rows):
    """The parameters that every row has with one value (a spec's ``[sweep.fixed]``)."""
    if not rows:
        return {}
    first = rows[0]["params"]
    return {
        k: v
        for k, v in first.items()
        if all(k in r["params"] and r["params"][k] == v for r in rows)
    }


def write_report(spec, rows, out_dir):
    """``report.md`` with the table and the plots for the sweep's kind; returns the paths."""
    out_dir = Path(out_dir)
    files = []
    ok = [r for r in rows if r["status"] == "ok"]
    metric_names = []
    for r in ok:
        metric_names += [k for k in r["metrics"] if k not in metric_names and k != "first_mismatch"]
    shared = _shared_params(rows)
    varying = [n for n in (spec.grid_names or sorted({k for r in rows for k in r["params"]}))]
    varying = [n for n in varying if n not in shared] or varying
    # A metric named like a parameter (an experiment's measured `y_accesses` beside the
    # requested one) is labelled as measured, so that the two are not read as one.
    param_names = {k for r in rows for k in r["params"]}
    headers = [f"{m} (measured)" if m in param_names else m for m in metric_names]
    every = ", ".join(f"{k}={v}" for k, v in shared.items())
    lines = [
        f"# Sweep `{spec.name}`",
        "",
        f"{spec.run} of {', '.join(spec.targets)}; {len(rows)} points on disk "
        f"({len(ok)} ok, {len(rows) - len(ok)} failed or lost)"
        + (f"; every point: {every}." if every and len(rows) > 1 else "."),
        "",
        "| target | parameters | status | " + " | ".join(headers) + " | seconds |",
        "|---" * (4 + len(metric_names)) + "|",
    ]
    for r in rows:
        values = [str(r.get("metrics", {}).get(m, "")) for m in metric_names]
        status = r["status"] if r["status"] == "ok" else f"{r['status']}: {r.get('error', '')}"
        lines.append(
            f"| {r['target']} | {_label(r['params'], varying)} | {status} | "
            + " | ".join(values)
            + f" | {r.get('seconds', '')} |"
        )
    plots = []
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:  # pragma: no cover - matplotlib is a dev dependency
        plt = None
    if plt is not None and spec.run == "synth":
        path = _pareto_plot(plt, spec, ok, varying, out_dir)
        if path:
            plots.append(path)
    if plt is not None and len(spec.grid_names) >= 2:
        metric = spec.metric or (metric_names[0] if metric_names else None)
        *others, a, b = spec.grid_names
        for target in spec.targets:
            mine = [
                r for r in rows if r["target"] == target and a in r["params"] and b in r["params"]
            ]
            groups = {}
            for r in mine:
                groups.setdefault(tuple(r["params"].get(n) for n in others), []).append(r)
            for values, group in groups.items():
                title = ", ".join([target] + [f"{n}={v}" for n, v in zip(others, values)])
                path = _heat_map(plt, spec, group, metric, (a, b), title, out_dir)
                if path:
                    plots.append(path)
    untimed = [r for r in ok if spec.run == "synth" and untimed_datapath(r)]
    if untimed:
        lines += [
            "",
            f"{len(untimed)} point(s) with a latency of 1 cycle are left out of the Pareto plot: "
            "all their logic lies between the unregistered inputs and the one register stage, "
            "and out of context only register-to-register paths are timed, so their Fmax "
            "measures no datapath (`gpurtl experiment fp32-synth` adds an input register).",
        ]
    if plots:
        lines += [""] + [f"![{p.stem}]({p.name})" for p in plots]
    # The provenance of the newest point (each point's own is in its JSON file).
    newest = [r["provenance"] for r in rows if r.get("provenance")]
    if newest:
        lines += ["", markdown(max(newest, key=lambda record: record.get("date", ""))).rstrip()]
    write_atomic(out_dir / "report.md", "\n".join(lines) + "\n")
    return [out_dir / "report.md"] + plots + files


def untimed_datapath(row):
    """Whether a synthesis point's Fmax times none of its datapath: with a latency of one cycle
    all of the logic lies between the unregistered input ports and the one register stage, and an
    out-of-context place and route times register-to-register paths only
    (:data:`gpurtl.sim.tools.synth.TIMED`), so the figure (hundreds of MHz) says nothing about the
    logic."""
    latency = row["metrics"].get("latency")
    return latency is not None and latency <= 1


def _pareto_plot(plt, spec, ok, varying, out_dir):
    usable = [r for r in ok if r["metrics"].get("lut4") and r["metrics"].get("fmax_mhz")]
    left_out = [r for r in usable if untimed_datapath(r)]
    usable = [r for r in usable if not untimed_datapath(r)]
    if not usable:
        return None
    figure, axes = plt.subplots(figsize=(7.5, 5))
    latencies = [r["metrics"].get("latency") or 0 for r in usable]
    norm = plt.Normalize(min(latencies), max(max(latencies), min(latencies) + 1))
    markers = "osD^vP*Xh<>"
    scatter = None
    for index, target in enumerate(spec.targets):
        rows = [r for r in usable if r["target"] == target]
        if not rows:
            continue
        xy = [(r["metrics"]["lut4"], r["metrics"]["fmax_mhz"]) for r in rows]
        scatter = axes.scatter(
            [x for x, _ in xy],
            [y for _, y in xy],
            c=[r["metrics"].get("latency") or 0 for r in rows],
            cmap="viridis",
            norm=norm,
            marker=markers[index % len(markers)],
            s=45,
            edgecolors="black",
            linewidths=0.5,
            label=target,
            zorder=3,
        )
        front = pareto_front(xy)
        axes.step(
            [xy[i][0] for i in front],
            [xy[i][1] for i in front],
            where="post",
            color="grey",
            linewidth=0.8,
            zorder=2,
        )
    if scatter is not None:
        colorbar = figure.colorbar(scatter, ax=axes)
        colorbar.set_label("latency (cycles)")
    axes.set_xlabel("LUT4 (cells)")
    axes.set_ylabel("Fmax (MHz)")
    axes.set_title(f"{spec.name}: Pareto front of LUT4 vs Fmax (grey steps), colour = latency")
    if left_out:
        fmax = [r["metrics"]["fmax_mhz"] for r in left_out]
        axes.annotate(
            f"not shown: {len(left_out)} latency-1 point{'s' if len(left_out) > 1 else ''} "
            f"({min(fmax):g}-{max(fmax):g} MHz), whose Fmax times none of the datapath\n"
            "(out of context only register-to-register paths are timed)",
            xy=(0.01, 0.01),
            xycoords="figure fraction",
            fontsize=7,
            color="dimgrey",
        )
    axes.grid(True, linewidth=0.3)
    axes.legend(fontsize=8, title="block", title_fontsize=8)
    figure.tight_layout(rect=(0, 0.06 if left_out else 0, 1, 1))
    path = out_dir / "pareto.png"
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path


def _heat_map(plt, spec, rows, metric, axes_names, title, out_dir):
    if not metric or not rows:
        return None
    a, b = axes_names
    xs = sorted({r["params"][a] for r in rows}, key=_sort_key)
    ys = sorted({r["params"][b] for r in rows}, key=_sort_key)
    grid = [[math.nan] * len(xs) for _ in ys]
    for r in rows:
        value = r.get("metrics", {}).get(metric)
        if r["status"] == "ok" and isinstance(value, (int, float)):
            grid[ys.index(r["params"][b])][xs.index(r["params"][a])] = value
    figure, axes = plt.subplots(
        figsize=(max(5.0, 2.2 + 1.1 * len(xs)), max(3.8, 1.8 + 0.7 * len(ys)))
    )
    image = axes.imshow(grid, cmap="viridis", aspect="auto", origin="lower")
    values = [v for row in grid for v in row if not math.isnan(v)]
    low, high = (min(values), max(values)) if values else (0.0, 1.0)
    axes.set_xticks(range(len(xs)), [str(x) for x in xs])
    axes.set_yticks(range(len(ys)), [str(y) for y in ys])
    axes.set_xlabel(_param_label(spec, a))
    axes.set_ylabel(_param_label(spec, b))
    for j, row in enumerate(grid):
        for i, value in enumerate(row):
            if math.isnan(value):
                text, light = "n/a", False
            else:
                whole = float(value).is_integer() and abs(value) >= 1000
                text = f"{value:,.0f}" if whole else f"{value:.3g}"
                # dark text on the bright (high) end of viridis
                light = high > low and (value - low) / (high - low) > 0.6
            axes.text(
                i,
                j,
                text,
                ha="center",
                va="center",
                fontsize=8,
                color="black" if light else "white",
            )
    colorbar = figure.colorbar(image, ax=axes)
    colorbar.set_label(_metric_label(metric, spec))
    axes.set_title(f"{spec.name}\n{title}: {_metric_label(metric, spec)}", fontsize=9)
    figure.tight_layout()
    slug = "".join(c if c.isalnum() else "_" for c in title).strip("_")
    path = out_dir / f"heatmap_{slug}.png"
    figure.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(figure)
    return path


def _metric_label(metric, spec=None):
    if spec is not None and spec.run == "experiment":
        from .. import experiments

        described = getattr(experiments.get(spec.targets[0]), "METRICS", {})
        if metric in described:
            return described[metric]
    return {
        "fmax_mhz": "Fmax (MHz)",
        "lut4": "LUT4 (cells)",
        "ff": "flip-flops",
        "latency": "latency (cycles)",
        "failed": "failed transactions",
    }.get(metric, metric)


def _param_label(spec, name):
    """Axis label of a parameter: its name and its meaning (experiment ``PARAMS`` or the
    block's ``Param`` doc)."""
    try:
        if spec.run == "experiment":
            from .. import experiments

            meaning = experiments.get(spec.targets[0]).PARAMS[name][1]
        else:
            from ..core import registry

            meaning = registry.get(spec.targets[0]).param(name).doc
    except Exception:  # a label without its meaning is still a label
        meaning = ""
    return f"{name} ({meaning})" if meaning else name


def _sort_key(value):
    return (0, value, "") if isinstance(value, (int, float)) else (1, 0, str(value))
