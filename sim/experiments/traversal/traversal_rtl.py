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

The engine is one function of :data:`ENGINES` (``session``: a simulator session stepped a cycle
at a time from Python), so a compiled cycle backend can be added beside it without changing the
experiment. ``--frame WxH --cus N`` times a frame's waves split over CUs on Dask instead
(:mod:`.frame`).

Scenes: ``terrain`` (default; :func:`gpurtl.golden.bvh.mesh.terrain`, 51,968 triangles) or the
packaged ``bunny`` (907). Rays: camera rays of a 256x192 image of the scene (the ``traversal``
experiment's camera), whole waves of 32, the 8x4 tiles nearest the image's centre.
"""

import resource
import time

import numpy as np

from . import frame
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
SEEDS = {}

#: Not part of ``gpurtl demo``: even the quick run builds the RT unit RTL (minutes).
IN_DEMO = False

#: The builds of ``--build``: ``rt_unit`` parameters. ``small``: the ``traversal --rtl`` build;
#: ``rdna4``: the registry's ``preset=rdna4`` (docs/rt_unit.md).
BUILDS = {"small": dict(RT_UNIT), "rdna4": {"preset": "rdna4"}}
SCENES = ("terrain", "bunny")
#: Rays of a run without ``--rays``.
RAYS = 64
IMAGE = (256, 192)


def _session_engine(scene, origins, directions, rt, backend, progress):
    from gpurtl.golden.traversal.loop import trace_wave

    from .rtl import check_against, run_loop

    result = run_loop(scene, origins, directions, backend=backend, rt=rt, progress=progress)
    golden = [
        trace_wave(scene, origins[k : k + 32], directions[k : k + 32])
        for k in range(0, len(origins), 32)
    ]
    check = check_against(result["traces"], golden)
    failed = result["sessions"]["rt_unit"][1] + result["sessions"]["ds_bvh_stack"][1]
    return {
        "instructions": len(result["records"]),
        "lane_instructions": check["steps"][0] + check["stack_ops"][0],
        "mismatches": int(failed + check["differ"]),
        "cycles": int(result["cycles"]),
        "check": check,
        "sessions": result["sessions"],
    }


#: ``engine(scene, origins, directions, rt, backend, progress) -> {instructions, mismatches,
#: cycles, ...}``: how the RTL is run.
ENGINES = {"session": _session_engine}


def arguments(parser):
    """The experiment's own options of ``gpurtl experiment traversal-rtl``."""
    # shared with `traversal --rays PATH`: the text is checked here (check_options)
    parser.add_argument("--rays", metavar="N", help=f"rays (default {RAYS})")
    parser.add_argument("--build", choices=tuple(BUILDS), help="the RT unit build (default small)")
    parser.add_argument(
        "--rtl-scene", choices=SCENES, dest="rtl_scene", help="the scene (default terrain)"
    )
    parser.add_argument(
        "--simulator",
        choices=BACKENDS_RTL,
        dest="simulator",
        help="simulator of the sessions (default verilator; pysim runs some tens of cycles a "
        "second)",
    )
    frame.arguments(parser)


def check_options(options):
    """Refuse a bad value of the experiment's own options (``ValueError``)."""
    if "rays" in options:
        _count(options["rays"])
    frame.check_options(options)


def _count(text):
    try:
        rays = int(text)
    except (TypeError, ValueError):
        rays = 0
    if rays < 1:
        raise ValueError(f"--rays must be a positive number of rays, not {text!r}")
    return rays


def _scene(name):
    from gpurtl.golden.bvh import mesh as M
    from gpurtl.golden.traversal.scene import build_scene

    mesh = M.terrain() if name == "terrain" else M.bunny()
    return mesh, build_scene(name, mesh, "bvh8")


def _rays(mesh, up_axis, count):
    from gpurtl.golden.traversal.rays import camera_rays

    from .scenes import camera

    cam, _, _ = camera(mesh.triangles.astype(np.float64), up_axis, False)
    o, d, pixel = camera_rays(cam, *IMAGE)
    waves = len(o) // 32
    # the waves (8x4 tiles) nearest the image's centre, where the camera looks at the scene
    w, h = IMAGE
    first = pixel[::32][:waves]
    far = np.hypot(first % w - w / 2, first // w - h / 2)
    pick = np.sort(np.argsort(far, kind="stable")[: min(waves, -(-count // 32))])
    rows = np.concatenate([np.arange(32 * w, 32 * w + 32) for w in pick])[:count]
    return o[rows], d[rows]


def _cpu():
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


#: A ``--frame`` run keeps its per-CU results in ``store`` (``DIR/traversal-rtl.store``).
STORE = True


def measure(
    quick=False,
    progress=None,
    rays=None,
    build=None,
    rtl_scene=None,
    simulator=None,
    engine="session",
    store=None,
    **frame_options,
):
    """The run's data (module doc string); ``quick``: 4 rays; ``frame_options``: a ``--frame``
    run (:mod:`.frame`)."""
    if frame_options:
        return frame.measure(
            **frame_options,
            builds=BUILDS,
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
    cpu0, wall0 = _cpu(), time.monotonic()
    rt = registry.get("rt_unit").resolve(BUILDS[build])
    mesh, scene = _scene(name)
    origins, directions = _rays(mesh, 2 if name == "terrain" else 1, rays)
    tell = (lambda line: progress(0, 1, line)) if progress else None
    if tell:
        tell(f"{rays} rays on the {backend} RTL, build {build}, {name} ({len(mesh)} tris)")
    out = ENGINES[engine](scene, origins, directions, rt, backend, tell)
    if progress:
        progress(1, 1, f"{out['cycles']} cycles, {out['mismatches']} mismatches")
    return {
        "rays": int(len(origins)),
        "instructions": out["instructions"],
        "lane_instructions": out.get("lane_instructions"),
        "mismatches": out["mismatches"],
        "cycles": out["cycles"],
        "cpu_seconds": _cpu() - cpu0,
        "wall_seconds": time.monotonic() - wall0,
        "build": build,
        "rt_unit": rt,
        "backend": backend,
        "engine": engine,
        "scene": {"name": name, "triangles": int(len(mesh))},
        "check": out.get("check"),
        "sessions": out.get("sessions"),
    }


def report(data, out_dir):
    """``summary.md`` of :func:`measure`'s data."""
    if "per_cu" in data:
        return frame.report(data, out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    rate = data["rays"] / data["cpu_seconds"] if data["cpu_seconds"] else 0.0
    lines = [
        f"# {data['rays']} rays through the RT unit RTL ({data['build']} build, "
        f"{data['backend']}), {data['scene']['name']} ({data['scene']['triangles']} triangles)",
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
        "",
        "Build: " + ", ".join(f"{k}={v}" for k, v in data["rt_unit"].items()) + ".",
    ]
    summary = out_dir / "summary.md"
    summary.write_text("\n".join(lines) + "\n")
    return {
        "title": f"traversal-rtl: {data['rays']} rays, {data['build']} build",
        "rows": [
            ("rays", data["rays"]),
            ("RTL instructions", data["instructions"]),
            ("mismatches", data["mismatches"]),
            ("cycles", data["cycles"]),
            ("CPU seconds", f"{data['cpu_seconds']:.1f}"),
        ],
        "files": [str(summary)],
    }
