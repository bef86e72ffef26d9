"""Experiment ``traversal-rtl-sensitivity``: the RDNA 4-size RT unit changed one build choice at a
time, each row at least 10^5 rays timed on the RTL through the compiled player, in steady state,
with intervals.

A sensitivity study, not a calibration: every row is the ``rdna4`` build (``gpurtl list
rt_unit``, :data:`gpurtl.facts.rt_unit.RDNA4_RT_UNIT`) with the changes of one :data:`ROWS`
entry, most of which are themselves CHOICES there (MSHRs, replacement, ray buffer slots); the
rows vary them to show which ones a frame's time depends on; the last two compare BVH8 and
BVH4x2 nodes of the same mesh on one build (the dual node fetch). Every row runs the same rays (the
``traversal-rtl`` rays, :func:`.engines.pick_rays`: camera rays of the waves nearest the image's
centre, or their first diffuse bounce) through the same engine as ``traversal-rtl``
(:func:`.engines.player_engine`): every RTL output checked against the wave programs' expected
words, every timing decision the RTL's. A row whose RTL differs from the expected words ends the
run with exit status 1.

Steady state (:func:`.engines.steady_state`): the waves ordered by the cycle they end, the
middle 80% cut into 10 batches of equal wave counts; each batch's throughput is its rays per
1000 cycles, and a row's figure is the batches' mean with its 95% t-interval (batch means).
Every row runs the same waves in the same dispatch order, so a row's *effect* is the mean of its
per-batch differences from the default row with that mean's 95% interval (paired): an effect
smaller than its interval is inside the noise.

Each row is one Dask task (:func:`row_task`; a local cluster by default, ``--scheduler ADDRESS``
for a running one) and is stored as it finishes in ``DIR/traversal-rtl-sensitivity.store``
(``--resume`` runs only the rows not there). Each row's task builds its own player model (a
Verilator build of minutes, cached) and its own wave programs.
"""

import json
import time
from pathlib import Path

import numpy as np

from .engines import RAY_SETS, SCENES, cpu_seconds, interval, load_scene, pick_rays

NAME = "traversal-rtl-sensitivity"
DESCRIPTION = (
    "the RDNA 4-size RT unit with one build choice changed a row, 10^5 rays a row on the RTL, "
    "steady-state throughput with paired intervals"
)

__all__ = [
    "DESCRIPTION",
    "IN_DEMO",
    "NAME",
    "RAYS",
    "ROWS",
    "SEEDS",
    "STORE",
    "arguments",
    "check_options",
    "measure",
    "report",
    "row_task",
]

#: The rays are a fixed image's: no random numbers.
SEEDS: dict = {}
#: Not part of ``gpurtl demo``: every row is a Verilator build and 10^5 rays.
IN_DEMO = False
#: Rows are kept in ``DIR/traversal-rtl-sensitivity.store`` as they finish.
STORE = True

#: The build every row starts from.
BASE = {"preset": "rdna4"}
#: ``name -> (label, rt_unit changes over the rdna4 build, traversal mode)``; the first is the
#: default row. The last two compare the nodes on one build: ``dual=true`` (the node fetch's
#: dual path, which BVH8 programs never take) with BVH8 nodes, and the same build with the mesh
#: as legacy BVH4 nodes, two a step (``image_bvh_dual_intersect_ray``, ``push8_pop2``).
ROWS = {
    "default": ("rdna4 build", {}, "bvh8"),
    "l0-16k": ("L0 16 KB", {"size": 16384}, "bvh8"),
    "l0-64k": ("L0 64 KB", {"size": 65536}, "bvh8"),
    "mshrs-8": ("8 MSHRs", {"mshrs": 8}, "bvh8"),
    "mshrs-16": ("16 MSHRs", {"mshrs": 16}, "bvh8"),
    "plru": ("tree pseudo-LRU", {"replacement": "plru"}, "bvh8"),
    "engines-1": ("1 engine x 4 boxes", {"engines": 1}, "bvh8"),
    "slots-16": ("16 wave slots", {"tag_bits": 4}, "bvh8"),
    "raybuf-32": ("32 ray buffer slots", {"id_bits": 5}, "bvh8"),
    "raybuf-128": ("128 ray buffer slots", {"id_bits": 7}, "bvh8"),
    "dual-build": ("dual node fetch, BVH8 nodes", {"dual": True}, "bvh8"),
    "bvh4x2": ("dual node fetch, BVH4x2 nodes", {"dual": True}, "bvh4x2"),
}
#: Rays a row (the issue's floor); a quick run takes :data:`QUICK_RAYS`.
RAYS = 100_000
QUICK_RAYS = 2048


def arguments(parser):
    """The experiment's own options."""
    import argparse

    parser.add_argument("--rays", metavar="N", help=f"rays a row (default {RAYS})")
    parser.add_argument(
        "--ray-set", choices=RAY_SETS, dest="ray_set", help="the rays (default camera)"
    )
    parser.add_argument(
        "--rtl-scene", choices=SCENES, dest="rtl_scene", help="the scene (default terrain)"
    )
    parser.add_argument(
        "--rows",
        metavar="NAME,...",
        help=f"the rows to run (default all: {', '.join(ROWS)}); the default row is always run",
    )
    parser.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help="a Dask scheduler (tcp://host:8786) to run the rows on (default: a local cluster)",
    )
    parser.add_argument(
        "--workers", metavar="N", help="workers of the local cluster (default: one per core)"
    )
    parser.add_argument(
        "--resume",
        action="store_true",
        default=argparse.SUPPRESS,
        help="run only the rows with no result in DIR/traversal-rtl-sensitivity.store",
    )


def _positive(name, text):
    try:
        value = int(text)
    except (TypeError, ValueError):
        value = 0
    if value < 1:
        raise ValueError(f"--{name} must be a positive whole number, not {text!r}")
    return value


def _rows(text):
    if text is None:
        return list(ROWS)
    names = [n.strip() for n in str(text).split(",") if n.strip()]
    for n in names:
        if n not in ROWS:
            raise ValueError(f"--rows: unknown row {n!r}; the rows are {', '.join(ROWS)}")
    return ["default"] + [n for n in dict.fromkeys(names) if n != "default"]


def check_options(options):
    """Refuse a bad option before any work (``ValueError``, one line)."""
    if "rays" in options:
        _positive("rays", options["rays"])
    if "workers" in options:
        _positive("workers", options["workers"])
    _rows(options.get("rows"))
    if "scheduler" in options and not str(options["scheduler"]).strip():
        raise ValueError("--scheduler must be a Dask scheduler's address (tcp://host:8786)")


def row_task(name, rt, rays, ray_set, scene_name, mode="bvh8"):
    """One row on a Dask worker: ``rays`` rays of ``ray_set`` through the RT unit build ``rt``
    (resolved ``rt_unit`` parameters) in traversal ``mode`` on the compiled player; the player
    engine's figures without the per-instruction distributions, with ``name``, the task's CPU
    and wall time. The rays are picked on the BVH8 scene in every mode (the same rays)."""
    from ...core.provenance import provenance
    from .engines import mode_scene, player_engine

    cpu, wall = cpu_seconds(), time.monotonic()
    mesh, scene = load_scene(scene_name)
    up = 2 if scene_name == "terrain" else 1
    origins, directions = pick_rays(mesh, up, rays, ray_set=ray_set, top=scene.top)
    scene = mode_scene(scene_name, mode, mesh) or scene
    out = player_engine(scene, origins, directions, rt, None, None, formulas=False)
    keep = (
        "instructions", "lane_instructions", "mismatches", "cycles", "lookups", "refused",
        "busy", "in_flight", "steady", "player_cpu_seconds", "player_build_seconds",
        "program_cpu_seconds", "box_tests", "tri_tests",
    )  # fmt: skip
    return {
        "name": name,
        "rays": int(len(origins)),
        **{k: out[k] for k in keep},
        "first_mismatches": out["check"]["first_mismatches"],
        "cpu_seconds": cpu_seconds() - cpu,
        "wall_seconds": time.monotonic() - wall,
        "provenance": provenance(seeds={}),
    }


def _key(name, rt, rays, ray_set, scene_name):
    from ...sweep.run import point_key

    what = {"row": name, "rt": rt, "rays": rays, "ray_set": ray_set, "scene": scene_name}
    what["mode"] = ROWS[name][2]
    return point_key("experiment", NAME, what, {})


def _load(path):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):  # none, or damaged: run again
        return None


def measure(
    quick=False,
    progress=None,
    rays=None,
    ray_set=None,
    rtl_scene=None,
    rows=None,
    scheduler=None,
    workers=None,
    resume=False,
    store=None,
):
    """The rows' data (module doc string); ``store``: the folder of finished rows (default a
    temporary one: no resume)."""
    import os
    import tempfile

    from ...core import registry
    from ...core.files import write_atomic
    from .cluster import run_tasks

    rays = _positive("rays", rays) if rays is not None else (QUICK_RAYS if quick else RAYS)
    names = _rows(rows)
    if quick and rows is None:
        names = ["default", "mshrs-8"]
    ray_set = ray_set or "camera"
    scene_name = rtl_scene or "terrain"
    builds = {n: registry.get("rt_unit").resolve(dict(BASE, **ROWS[n][1])) for n in names}
    started, cpu0, self0 = time.monotonic(), cpu_seconds(), _own_cpu()
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(store) if store is not None else Path(scratch)
        paths = {
            n: folder / f"row-{_key(n, builds[n], rays, ray_set, scene_name)}.json" for n in names
        }
        todo = [n for n in names if not (resume and _load(paths[n]))]
        tell = (lambda k, line: progress(k, len(names), line)) if progress else (lambda k, l: None)
        tell(len(names) - len(todo), f"{len(todo)} rows of {rays} {ray_set} rays to run")
        done, ran_cpu = [len(names) - len(todo)], [0.0]

        def keep(result):
            folder.mkdir(parents=True, exist_ok=True)
            write_atomic(paths[result["name"]], json.dumps(result) + "\n")
            done[0] += 1
            ran_cpu[0] += result["cpu_seconds"]
            tell(done[0], f"{result['name']}: {result['cycles']} cycles, "
                 f"{result['mismatches']} mismatches")  # fmt: skip

        def args(n):
            return n, builds[n], rays, ray_set, scene_name, ROWS[n][2]

        count = int(workers) if workers is not None else min(len(todo), os.cpu_count() or 1)
        if todo:
            run_tasks(row_task, todo, args, keep, scheduler=scheduler, workers=count, what="rows")
        results = {n: _load(paths[n]) for n in names}
    bad = {n: r["mismatches"] for n, r in results.items() if r["mismatches"]}
    if bad:
        from .rtl import RtlLoopError

        first = next(iter(bad))
        raise RtlLoopError(
            f"row {first}: {bad[first]} RTL outputs or counts differ from the expected ones; "
            f"the first: {results[first]['first_mismatches'][:3]}"
        )
    return {
        "rays": rays,
        "ray_set": ray_set,
        "scene": scene_name,
        "build": "rdna4",
        "rows": [_row(n, results[n], results["default"], builds[n]) for n in names],
        "instructions": int(sum(r["instructions"] for r in results.values())),
        "mismatches": 0,
        "cpu_seconds": _own_cpu() - self0 + ran_cpu[0],
        "cpu_seconds_all_rows": float(sum(r["cpu_seconds"] for r in results.values())),
        "wall_seconds": time.monotonic() - started,
        "ran": len(todo),
        "scheduler": scheduler or f"local cluster, {count if todo else 0} workers",
        "process_cpu_seconds": cpu_seconds() - cpu0,
    }


def _own_cpu():
    import resource

    u = resource.getrusage(resource.RUSAGE_SELF)
    return u.ru_utime + u.ru_stime


def _row(name, r, base, rt):
    """A row's figures, with its paired effect against the default row."""
    lookups = r["lookups"]
    total = max(1, sum(lookups.values()))
    out = {
        "name": name,
        "label": ROWS[name][0],
        "changes": ROWS[name][1],
        "mode": ROWS[name][2],
        "rt_unit": rt,
        "rays": r["rays"],
        "instructions": r["instructions"],
        "mismatches": r["mismatches"],
        "cycles": r["cycles"],
        "l0_hit_percent": 100.0 * lookups["hit"] / total,
        "l0_miss_percent": 100.0 * lookups["miss"] / total,
        "refused_percent": 100.0 * r["refused"]["other"] / max(1, r["cycles"]),
        "busy_percent": 100.0 * r["busy"] / max(1, r["cycles"]),
        "in_flight_mean": r["in_flight"]["mean"],
        "steady": r["steady"],
        "cpu_seconds": r["cpu_seconds"],
        "player_cpu_seconds": r["player_cpu_seconds"],
        "player_build_seconds": r["player_build_seconds"],
    }
    if name != "default" and r["steady"] and base["steady"]:
        diff = np.subtract(r["steady"]["batches"], base["steady"]["batches"])
        mean, half = interval(diff)
        ref = base["steady"]["rays_per_kcycle"][0]
        out["effect"] = [mean, half]
        out["effect_percent"] = [100 * mean / ref, 100 * half / ref]
    return out


def _reading(row):
    if "effect" not in row:
        return ""
    mean, half = row["effect"]
    return "beyond its interval" if abs(mean) > half else "inside the noise"


def report(data, out_dir):
    """``summary.md`` and ``rows.csv`` of :func:`measure`'s data."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    lines = [
        f"# The RDNA 4-size RT unit, one build choice changed a row: {data['rays']} "
        f"{data['ray_set']} rays a row on the RTL ({data['scene']})",
        "",
        "Steady state: rays per 1000 cycles over the middle 80% of the wave ends, mean of 10 "
        "batches with its 95% interval; effect: paired difference from the default row "
        "(sensitivity, not agreement).",
        "",
        "| row | change | cycles (whole run) | steady rays / kcycle | effect | effect % | reading "
        "| L0 hit % | L0 miss % | cycles refusing a lane % | RT unit busy % | lanes in flight "
        "(mean) | mismatches | CPU s |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    csv = ["row,change,cycles,rays_per_kcycle,half_width,effect,effect_half_width,l0_hit_percent,"
           "refused_percent,busy_percent,in_flight_mean,mismatches,cpu_seconds"]  # fmt: skip
    for r in data["rows"]:
        change = ", ".join(f"{k}={v}" for k, v in r["changes"].items()) or "(none)"
        if r.get("mode", "bvh8") != "bvh8":
            change += f", --mode {r['mode']}"
        s = r["steady"]
        rate = f"{s['rays_per_kcycle'][0]:.2f} ± {s['rays_per_kcycle'][1]:.2f}" if s else "n/a"
        eff = f"{r['effect'][0]:+.2f} ± {r['effect'][1]:.2f}" if "effect" in r else ""
        pct = (
            f"{r['effect_percent'][0]:+.1f} ± {r['effect_percent'][1]:.1f}" if "effect" in r else ""
        )
        lines.append(
            f"| {r['label']} | `{change}` | {r['cycles']} | {rate} | {eff} | {pct} | "
            f"{_reading(r)} | {r['l0_hit_percent']:.1f} | {r['l0_miss_percent']:.2f} | "
            f"{r['refused_percent']:.1f} | {r['busy_percent']:.1f} | {r['in_flight_mean']:.1f} | "
            f"{r['mismatches']} | {r['cpu_seconds']:.0f} |"
        )
        csv.append(",".join(str(x) for x in (
            r["name"], change.replace(",", ";"), r["cycles"],
            s["rays_per_kcycle"][0] if s else "", s["rays_per_kcycle"][1] if s else "",
            r.get("effect", ["", ""])[0], r.get("effect", ["", ""])[1],
            f"{r['l0_hit_percent']:.3f}", f"{r['refused_percent']:.3f}",
            f"{r['busy_percent']:.3f}", f"{r['in_flight_mean']:.3f}", r["mismatches"],
            f"{r['cpu_seconds']:.1f}",
        )))  # fmt: skip
    lines += [
        "",
        f"{data['instructions']} RTL wave instructions in all, {data['mismatches']} mismatches; "
        f"{data['cpu_seconds']:.0f} CPU s for the rows run now ({data['ran']} of "
        f"{len(data['rows'])}, on {data['scheduler']}), {data['wall_seconds']:.0f} s wall.",
    ]
    summary = out_dir / "summary.md"
    summary.write_text("\n".join(lines) + "\n")
    (out_dir / "rows.csv").write_text("\n".join(csv) + "\n")
    base = data["rows"][0]
    return {
        "title": f"traversal-rtl-sensitivity: {len(data['rows'])} rows of {data['rays']} rays",
        "rows": [(r["label"], f"{r['cycles']} cycles" + (
            f", effect {r['effect_percent'][0]:+.1f}% ± {r['effect_percent'][1]:.1f}"
            if "effect" in r else "")) for r in data["rows"]] + [
            ("default cycles", base["cycles"]), ("mismatches", data["mismatches"])],
        "files": [str(summary), str(out_dir / "rows.csv")],
    }  # fmt: skip
