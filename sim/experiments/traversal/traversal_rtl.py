"""Experiment ``traversal-rtl``: rays through the RT unit RTL with cycle timing, at the small
build or the RDNA 4-size build, on a scene that needs no optional extra.

Every intersect instruction goes through the ``rt_unit`` RTL and every stack instruction through
``ds_bvh_stack``, in the CU model's RT unit mode (:func:`gpurtl.golden.cu.rt_unit.run`), each
output checked against its golden model as it comes out, and at the end the loop's closest hits
and instruction counts against the golden traversal (the engine of ``traversal --rtl``,
:func:`.rtl.run_loop`). ``data.json`` holds ``rays``, ``instructions`` (the intersect
and stack wave instructions that went through the RTL: one per wave and loop iteration,
whatever its active lanes), ``lane_instructions`` (the same counted per lane), ``mismatches``
(RTL outputs and golden-traversal figures that differ; a mismatch stops the run with exit
status 1, so a finished run has 0),
``cycles`` (the CU's cycles from the first wave's start to the last one's end), ``cpu_seconds``
(this process and its children: Verilator builds included) and ``build``.

The engine is one function of :data:`ENGINES` (``--engine``):

* ``player`` (default): the wave-batched golden loop records every wave's instruction stream and
  expected results first (:func:`gpurtl.golden.traversal.streams.build`: a ray's path does not
  depend on timing), then the compiled player (:func:`gpurtl.sim.backends.fast.player.
  run_player`: one Verilated model of ``rt_unit`` and ``ds_bvh_stack``, a C++ driver) issues
  them under the same CU model rules, every timing decision the RTL's, every output compared
  with the expected words; ``mismatches`` counts the fields that differ and the instruction and
  result counts that are not the programs';
* ``session``: a simulator session of each block stepped a cycle at a time from Python, the
  loop taking its decisions from the RTL's outputs (about one ray a CPU second).

``cpu_seconds`` is the whole run's; the ``player`` engine also reports ``loop_cpu_seconds`` (the
golden loop alone, run once more without records), ``program_cpu_seconds`` (the programs: the
loop recorded and the expected words) and ``player_cpu_seconds`` (the driver process), and
``formulas``: the CU model's formulas (:func:`gpurtl.golden.cu.simulate`) on the same waves
against the RTL, the distributions of the per-instruction and per-wave differences
(:func:`.engines.formula_comparison`).
``--frame WxH --cus N`` times a frame's waves split over CUs on Dask instead (:mod:`.frame`).

Scenes: ``terrain`` (default; :func:`gpurtl.golden.bvh.mesh.terrain`, 51,968 triangles) or the
packaged ``bunny`` (907). Rays: camera rays of a 256x192 image of the scene (the ``traversal``
experiment's camera; for more than its 49,152 rays, the image scaled by the smallest whole
factor that holds them), whole waves of 32, the 8x4 tiles nearest the image's centre, in
dispatch order (tile index); or (``--ray-set diffuse``) the first diffuse bounce from the hits of
the fewest such tiles that give N rays (the ``traversal`` experiment's ``diffuse1`` rays,
:func:`.scenes.deriver`), in the order of their camera rays. The ``traversal`` experiment's
shadow and AO rays end at their first hit, a form the wave programs do not hold.
"""

import time

from . import frame
from .engines import (
    ENGINE,
    ENGINES,
    MODES,
    RAY_SETS,
    SCENES,
    cpu_seconds,
    load_scene,
    mode_build,
    mode_scene,
    pick_rays,
)
from .rtl import BACKENDS_RTL, RT_UNIT

NAME = "traversal-rtl"
DESCRIPTION = (
    "rays through the RT unit RTL (small or RDNA 4-size build) with cycle timing, checked "
    "against the golden models and the golden traversal"
)

__all__ = [
    "BUILDS",
    "DESCRIPTION",
    "ENGINES",
    "IN_DEMO",
    "NAME",
    "SEEDS",
    "arguments",
    "check_options",
    "measure",
    "report",
]

#: Camera rays of a fixed image: no random numbers (recorded in the run's provenance).
SEEDS: dict = {}

#: Not part of ``gpurtl demo``: even the quick run builds the RT unit RTL (minutes).
IN_DEMO = False

#: The builds of ``--build``: ``rt_unit`` parameters. ``small``: the ``traversal --rtl`` build;
#: ``rdna4``: the registry's ``preset=rdna4`` (docs/rt_unit.md).
BUILDS = {"small": dict(RT_UNIT), "rdna4": {"preset": "rdna4"}}
#: Rays of a run without ``--rays``.
RAYS = 64


def arguments(parser):
    """The experiment's own options of ``gpurtl experiment traversal-rtl``."""
    # shared with `traversal --rays PATH`: the text is checked here (check_options)
    parser.add_argument("--rays", metavar="N", help=f"rays (default {RAYS})")
    parser.add_argument("--build", choices=tuple(BUILDS), help="the RT unit build (default small)")
    parser.add_argument(
        "--rtl-param",
        action="append",
        metavar="NAME=VALUE",
        dest="rtl_param",
        help="an rt_unit parameter over the --build (repeatable; `gpurtl list rt_unit`): L0 "
        "size, ways, mshrs, replacement, id_bits (ray buffer), engines, tag_bits (waves), ...",
    )
    parser.add_argument(
        "--rtl-scene", choices=SCENES, dest="rtl_scene", help="the scene (default terrain)"
    )
    parser.add_argument(
        "--ray-set",
        choices=RAY_SETS,
        dest="ray_set",
        help="the rays (default camera; diffuse: the first diffuse bounce from the camera "
        "rays' hits, the traversal experiment's diffuse1)",
    )
    parser.add_argument(
        "--mode",
        choices=MODES,
        help="the nodes (default bvh8; bvh4x2: the same mesh as legacy BVH4 nodes, two a step "
        "through the dual instruction, on the build with dual=true)",
    )
    parser.add_argument(
        "--engine",
        choices=tuple(ENGINES),
        help=f"how the RTL runs (default {ENGINE}: the compiled player of the recorded wave "
        "programs; session: Python sessions a cycle at a time)",
    )
    parser.add_argument(
        "--simulator",
        choices=BACKENDS_RTL,
        dest="simulator",
        help="simulator of the session engine (default verilator; pysim runs some tens of cycles "
        "a second)",
    )
    frame.arguments(parser)


def check_options(options):
    """Refuse a bad value of the experiment's own options (``ValueError``)."""
    if "rays" in options:
        _count(options["rays"])
    if "rtl_param" in options:
        _changes(options)
    if "mode" in options and "frame" in options:
        raise ValueError("--mode goes with the --rays run; a --frame run is BVH8")
    frame.check_options(options)


def _changes(options):
    """The ``--rtl-param`` changes over the ``--build`` (``ValueError`` for a bad one)."""
    from .rtl import build_changes

    default = frame.BUILD if options.get("frame") else "small"
    base = BUILDS[options.get("build") or default]
    return build_changes(options.get("rtl_param"), base=base)


def _count(text):
    try:
        rays = int(text)
    except (TypeError, ValueError):
        rays = 0
    if rays < 1:
        raise ValueError(f"--rays must be a positive number of rays, not {text!r}")
    return rays


#: A ``--frame`` run keeps its per-CU results in ``store`` (``DIR/traversal-rtl.store``).
STORE = True


def measure(
    quick=False,
    progress=None,
    rays=None,
    build=None,
    rtl_scene=None,
    simulator=None,
    engine=None,
    ray_set=None,
    store=None,
    rtl_param=None,
    mode=None,
    **frame_options,
):
    """The run's data (module doc string); ``quick``: 4 rays; ``frame_options``: a ``--frame``
    run (:mod:`.frame`)."""
    given = {"build": build, "rtl_param": rtl_param, "frame": frame_options.get("frame")}
    changes = _changes(given) if rtl_param else {}
    builds = {name: dict(b, **changes) for name, b in BUILDS.items()}
    if frame_options:
        return frame.measure(
            **frame_options,
            builds=builds,
            store=store,
            build=build,
            rtl_scene=rtl_scene,
            progress=progress,
        )
    from gpurtl.sim.core import registry

    rays = _count(rays) if rays is not None else (4 if quick else RAYS)
    build = build or "small"
    name = rtl_scene or "terrain"
    backend = simulator or "verilator"
    engine = engine or ENGINE
    cpu0, wall0 = cpu_seconds(), time.monotonic()
    mode = mode or "bvh8"
    rt = registry.get("rt_unit").resolve(mode_build(builds[build], mode))
    mesh, scene = load_scene(name)
    ray_set = ray_set or "camera"
    # the same rays in both modes: picked (and bounced) on the BVH8 scene
    origins, directions = pick_rays(
        mesh, 2 if name == "terrain" else 1, rays, ray_set=ray_set, top=scene.top
    )
    scene = mode_scene(name, mode, mesh) or scene
    tell = (lambda line: progress(0, 1, line)) if progress else None
    if tell:
        where = "the compiled player" if engine == "player" else f"{backend} sessions"
        tell(f"{rays} rays through the RTL ({where}), build {build}, {name} ({len(mesh)} tris)")
    out = ENGINES[engine](scene, origins, directions, rt, backend, tell)
    if out["mismatches"]:
        from .rtl import RtlLoopError

        first = out.get("check", {}).get("first_mismatches")
        raise RtlLoopError(
            f"{out['mismatches']} RTL outputs or counts differ from the expected ones"
            + (f"; the first: {first[:3]}" if first else f": {out.get('check')}")
        )
    if progress:
        progress(1, 1, f"{out['cycles']} cycles, {out['mismatches']} mismatches")
    return {
        "rays": int(len(origins)),
        "instructions": out["instructions"],
        "lane_instructions": out.get("lane_instructions"),
        "mismatches": out["mismatches"],
        "cycles": out["cycles"],
        "cpu_seconds": cpu_seconds() - cpu0,
        "wall_seconds": time.monotonic() - wall0,
        "build": build,
        "mode": mode,
        "changes": changes,
        "rt_unit": rt,
        "backend": "fast (Verilator)" if engine == "player" else backend,
        "engine": engine,
        "scene": {"name": name, "triangles": int(len(mesh))},
        "ray_set": ray_set,
        **{k: v for k, v in out.items() if k not in _COMMON},
    }


#: The engine's keys that :func:`measure` places itself.
_COMMON = ("instructions", "lane_instructions", "mismatches", "cycles")


def _build_name(data):
    """``rdna4``, or ``rdna4 + size=16384`` for a build changed by ``--rtl-param``."""
    changes = data.get("changes") or {}
    return " + ".join([data["build"]] + [f"{k}={v}" for k, v in changes.items()])


def report(data, out_dir):
    """``summary.md`` of :func:`measure`'s data."""
    if "per_cu" in data:
        return frame.report(data, out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    rate = data["rays"] / data["cpu_seconds"] if data["cpu_seconds"] else 0.0
    lines = [
        f"# {data['rays']} rays through the RT unit RTL ({_build_name(data)} build, "
        f"{data['backend']}), {data['scene']['name']} ({data['scene']['triangles']} triangles), "
        f"{data.get('ray_set', 'camera')} rays, {data.get('mode', 'bvh8')} nodes",
        "",
        "| figure | value |",
        "|---|---|",
        f"| rays | {data['rays']} |",
        f"| RTL wave instructions (intersect and stack) | {data['instructions']} |",
        f"| the same per lane | {data.get('lane_instructions')} |",
        f"| mismatches | {data['mismatches']} |",
        f"| cycles | {data['cycles']} |",
        f"| CPU seconds (this process and its children, builds included) | "
        f"{data['cpu_seconds']:.1f} |",
        f"| rays per CPU second | {rate:.3f} |",
    ]
    if "program_cpu_seconds" in data:
        lanes = data["lane_instructions"]
        prog, play = data["program_cpu_seconds"], data["player_cpu_seconds"]
        lookups = data["lookups"]
        total = max(1, sum(lookups.values()))
        loop = data["loop_cpu_seconds"]
        lines += [
            f"| the golden loop alone (`wavefront.trace`): CPU seconds | {loop:.2f} |",
            f"| the same: rays / lane instructions per CPU second | "
            f"{data['rays'] / max(loop, 1e-9):.0f} / {lanes / max(loop, 1e-9):.0f} |",
            f"| the wave programs (the loop recorded, the expected words): CPU seconds | "
            f"{prog:.1f} |",
            f"| the same: rays / lane instructions per CPU second | "
            f"{data['rays'] / max(prog, 1e-9):.0f} / {lanes / max(prog, 1e-9):.0f} |",
            f"| the player (Verilated RTL and driver): CPU seconds | {play:.1f} |",
            f"| the same: rays / lane instructions per CPU second | "
            f"{data['rays'] / max(play, 1e-9):.0f} / {lanes / max(play, 1e-9):.0f} |",
            f"| player model build (cached after the first run): seconds | "
            f"{data['player_build_seconds']:.1f} |",
            "| steady state: rays per 1000 cycles (the middle 80% of the wave ends, 10 batches, "
            "95% interval) | "
            + (
                "{:.2f} ± {:.2f}".format(*data["steady"]["rays_per_kcycle"])
                if data.get("steady")
                else "n/a (too few waves)"
            )
            + " |",
            "| L0 hit / pending hit / miss | "
            + " / ".join(f"{100 * lookups[k] / total:.1f}%" for k in ("hit", "pending_hit", "miss"))
            + " |",
        ]
    f = data.get("formulas")
    if f:
        c = f["cycles"]
        lines += [
            "",
            f"The CU model's formulas (`golden.cu.simulate`) on the same waves: {c['formulas']} "
            f"cycles against the RTL's {c['rtl']} ({c['difference_percent']:+.2f}%). RTL minus "
            "formulas, in cycles (percentiles):",
            "",
            "| difference | count | mean | p1 | p5 | p25 | median | p75 | p95 | p99 |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        rows = [
            ("intersect: completion", f["bvh"]["completion"]),
            ("intersect: latency (completion - issue)", f["bvh"]["latency"]),
            ("stack: completion", f["ds"]["completion"]),
            ("stack: latency", f["ds"]["latency"]),
            ("wave: last completion", f["wave"]["end"]),
            ("wave: span (first issue to last completion)", f["wave"]["span"]),
            ("wave: span, percent of the formulas'", f["wave"]["span_percent"]),
        ]
        for label, d in rows:
            cells = " | ".join(f"{d[k]:.1f}" for k in ("mean", "p1", "p5", "p25", "p50", "p75",
                                                      "p95", "p99"))  # fmt: skip
            lines.append(f"| {label} | {d['count']} | {cells} |")
    lines += [
        "",
        "Build: " + ", ".join(f"{k}={v}" for k, v in data["rt_unit"].items()) + ".",
    ]
    summary = out_dir / "summary.md"
    summary.write_text("\n".join(lines) + "\n")
    return {
        "title": f"traversal-rtl: {data['rays']} rays, {_build_name(data)} build",
        "rows": [
            ("rays", data["rays"]),
            ("RTL instructions", data["instructions"]),
            ("mismatches", data["mismatches"]),
            ("cycles", data["cycles"]),
            ("CPU seconds", f"{data['cpu_seconds']:.1f}"),
        ],
        "files": [str(summary)],
    }
