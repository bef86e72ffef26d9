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
(:func:`formula_comparison`).
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
SEEDS: dict = {}

#: Not part of ``gpurtl demo``: even the quick run builds the RT unit RTL (minutes).
IN_DEMO = False

#: The builds of ``--build``: ``rt_unit`` parameters. ``small``: the ``traversal --rtl`` build;
#: ``rdna4``: the registry's ``preset=rdna4`` (docs/rt_unit.md).
BUILDS = {"small": dict(RT_UNIT), "rdna4": {"preset": "rdna4"}}
SCENES = ("terrain", "bunny")
#: The ray sets of ``--ray-set``: the camera rays, or the first diffuse bounce from their hits.
RAY_SETS = ("camera", "diffuse")
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


def _player_engine(scene, origins, directions, rt, backend, progress):
    from gpurtl.golden.bvh.wavefront import Tables, trace
    from gpurtl.golden.traversal import streams

    from ...backends.fast import player
    from .rtl import cu_params

    params = cu_params(rt)
    tables = Tables(scene.top)
    cpu0 = _cpu()
    trace(tables, origins, directions)  # the golden loop alone, for the figures beside it
    loop_cpu = _cpu() - cpu0
    programs = streams.build(tables, origins, directions, params)
    program_cpu = _cpu() - cpu0 - loop_cpu
    if progress:
        progress(
            f"programs: {programs.waves} waves, {programs.iterations} wave instructions, "
            f"{programs.entries} lane instructions in {program_cpu:.1f} CPU s; the player"
        )
    try:
        out = player.run_player(programs, rt, params, log=progress)
    except player.PlayerError as error:
        from .rtl import RtlLoopError

        raise RtlLoopError(f"the player: {error}") from None
    # the counts the programs fix: every wave instruction (intersect and stack) and every lane
    want = {
        "bvh": programs.iterations,
        "ds": programs.iterations,
        "results": programs.entries,
        "stack_checked": programs.entries,
    }
    got = {
        "bvh": sum(1 for r in out.instructions if r[1] == "bvh"),
        "ds": sum(1 for r in out.instructions if r[1] == "ds"),
        "results": out.results,
        "stack_checked": out.stack_checked,
    }
    counts_differ = sum(got[k] != want[k] for k in want)
    formulas = None
    if not (out.mismatches or counts_differ):
        if progress:
            progress(f"the RTL: {out.cycles} cycles, 0 mismatches; the formulas")
        formulas = formula_comparison(programs, out.instructions, params, out.cycles)
    return {
        "formulas": formulas,
        "instructions": len(out.instructions),
        "lane_instructions": 2 * programs.entries,
        "mismatches": int(out.mismatches + counts_differ),
        "cycles": int(out.cycles),
        "check": {
            "counts": {k: [got[k], want[k]] for k in want},
            "first_mismatches": out.first_mismatches,
            "hits": int((programs.result.prim >= 0).sum()),
        },
        "loop_cpu_seconds": loop_cpu,
        "program_cpu_seconds": program_cpu,
        "player_cpu_seconds": out.cpu_seconds,
        "player_wall_seconds": out.sim_seconds,
        "player_build_seconds": out.build_seconds,
        "lookups": out.lookups,
        "refused": out.refused,
        "busy": out.busy,
        "in_flight": out.in_flight,
        "memory": out.memory,
        "box_tests": int(programs.box_tests.sum()),
        "tri_tests": int(programs.tri_tests.sum()),
        "pair_nodes": int((programs.lane_kind == 1).sum()),
    }


def _waves_of(programs):
    """The CU model's :class:`gpurtl.golden.cu.WaveTrace` of each wave of ``programs`` (no
    shading loads: the RT unit mode's waves)."""
    from gpurtl.golden.cu import WaveTrace

    p = programs
    line = (p.node_ptr[:, 0] >> 4).astype(np.int64)
    rows = list(
        zip(p.lane.tolist(), line.tolist(), p.lane_kind.tolist(), p.box_tests.tolist(),
            p.tri_tests.tolist())
    )  # fmt: skip
    cuts = p.iter_lanes.tolist()
    its = [rows[a:b] for a, b in zip(cuts[:-1], cuts[1:])]
    bounds = p.wave_iters.tolist()
    return [WaveTrace(its[a:b], [], tag=w) for w, (a, b) in enumerate(zip(bounds, bounds[1:]))]


def _records(records):
    """``(wave, kind (0 bvh, 1 ds), n-th of its wave and kind, issue, complete)`` arrays of
    instruction records ``(wave, kind, issue, complete)``, sorted by wave, kind and order."""
    a = np.array([(w, k == "ds", i, c) for w, k, i, c in records], np.int64).reshape(-1, 4)
    a = a[np.lexsort((a[:, 2], a[:, 1], a[:, 0]))]
    group = a[:, 0] * 2 + a[:, 1]
    start = np.r_[0, np.flatnonzero(group[1:] != group[:-1]) + 1]
    nth = np.arange(len(a)) - np.repeat(start, np.diff(np.r_[start, len(a)]))
    return a[:, 0], a[:, 1], nth, a[:, 2], a[:, 3]


_QUANTILES = (0, 1, 5, 25, 50, 75, 95, 99, 100)


def _distribution(values):
    """Quantiles (``p0`` .. ``p100``), mean and count of ``values``."""
    v = np.asarray(values, np.float64)
    if not len(v):
        return {"count": 0}
    q = np.percentile(v, _QUANTILES)
    return {
        "count": len(v),
        "mean": float(v.mean()),
        **{f"p{k}": float(x) for k, x in zip(_QUANTILES, q)},
    }


def formula_comparison(programs, records, params, rtl_cycles):
    """The CU model's formulas (:func:`gpurtl.golden.cu.simulate` with ``params``: the L0 a
    level of the hierarchy, the accelerator's slot and latency) on the waves of ``programs``,
    against the RTL's instruction records ``records`` (``(wave, kind, issue, complete)``):
    total cycles, and the distributions of the differences RTL - formulas per instruction
    (completion, issue, latency = completion - issue; intersect and stack apart) and per wave
    (the last completion, and the span from the first issue to the last completion). Every
    instruction of one run must be in the other (``ValueError``)."""
    from gpurtl.golden.cu import simulate

    model = simulate(_waves_of(programs), params, warm_lines=programs.lines.tolist())
    a, b = _records(records), _records(model.instructions)
    if not all(np.array_equal(x, y) for x, y in zip(a[:3], b[:3])):
        raise ValueError("the RTL and the formulas ran different instructions")
    wave, kind, _, issue, done = a
    _, _, _, m_issue, m_done = b
    out = {"cycles": {"rtl": int(rtl_cycles), "formulas": int(model.cycles)}}
    out["cycles"]["difference_percent"] = 100 * (rtl_cycles - model.cycles) / max(1, model.cycles)
    for k, name in ((0, "bvh"), (1, "ds")):
        sel = kind == k
        out[name] = {
            "completion": _distribution(done[sel] - m_done[sel]),
            "issue": _distribution(issue[sel] - m_issue[sel]),
            "latency": _distribution((done - issue)[sel] - (m_done - m_issue)[sel]),
            "latency_rtl": _distribution((done - issue)[sel]),
            "equal": int((done[sel] == m_done[sel]).sum()),
        }
    waves = programs.waves
    last = np.full(waves, -1, np.int64)
    first = np.full(waves, np.iinfo(np.int64).max, np.int64)
    m_last, m_first = last.copy(), first.copy()
    np.maximum.at(last, wave, done)
    np.minimum.at(first, wave, issue)
    np.maximum.at(m_last, wave, m_done)
    np.minimum.at(m_first, wave, m_issue)
    span, m_span = last - first, m_last - m_first
    out["wave"] = {
        "end": _distribution(last - m_last),
        "span": _distribution(span - m_span),
        "span_percent": _distribution(100 * (span - m_span) / np.maximum(1, m_span)),
        "span_rtl": _distribution(span),
    }
    return out


#: ``engine(scene, origins, directions, rt, backend, progress) -> {instructions, mismatches,
#: cycles, ...}``: how the RTL is run (``--engine``; the first is the default).
ENGINES = {"player": _player_engine, "session": _session_engine}
ENGINE = "player"


def arguments(parser):
    """The experiment's own options of ``gpurtl experiment traversal-rtl``."""
    # shared with `traversal --rays PATH`: the text is checked here (check_options)
    parser.add_argument("--rays", metavar="N", help=f"rays (default {RAYS})")
    parser.add_argument("--build", choices=tuple(BUILDS), help="the RT unit build (default small)")
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


def _rays(mesh, up_axis, count, ray_set="camera", top=None):
    """``count`` rays of set ``ray_set`` (:data:`RAY_SETS`; ``diffuse`` needs the scene's BVH
    ``top``) in dispatch order (module doc string)."""
    from gpurtl.golden.traversal.rays import camera_rays

    from .scenes import camera

    world = mesh.triangles.astype(np.float64)
    cam, center, ext = camera(world, up_axis, False)
    scale = 1
    while True:
        w, h = IMAGE[0] * scale, IMAGE[1] * scale
        o, d, pixel = camera_rays(cam, w, h)
        waves = len(o) // 32
        # the waves (8x4 tiles) nearest the image's centre, where the camera looks at the scene
        first = pixel[::32][:waves]
        far = np.hypot(first % w - w / 2, first // w - h / 2)
        near = np.argsort(far, kind="stable")
        if ray_set == "camera":
            if len(o) >= count:
                pick = np.sort(near[: -(-count // 32)])
                rows = (32 * pick[:, None] + np.arange(32)).ravel()[:count]
                return o[rows], d[rows]
        else:
            found = _bounces(top, world, center, ext, up_axis, o, d, near, count)
            if found is not None:
                return found
        scale += 1


def _bounces(top, world, center, ext, up_axis, o, d, near, count):
    """The first diffuse bounce (the ``traversal`` experiment's ``diffuse1`` set, :func:`.scenes.
    deriver`) from the hits of the camera waves nearest the centre, as few as give ``count``
    rays, in the order of their camera rays; ``None`` when the image has fewer hits."""
    from gpurtl.golden.bvh.wavefront import Tables, trace

    from .scenes import deriver

    res = trace(Tables(top), o, d)
    hits = (res.prim >= 0).reshape(-1, 32).sum(axis=1)
    enough = np.flatnonzero(np.cumsum(hits[near]) >= count)
    if not len(enough):
        return None
    pick = np.sort(near[: enough[0] + 1])
    rows = (32 * pick[:, None] + np.arange(32)).ravel()
    sub = type(res)()
    sub.t, sub.prim, sub.inst = res.t[rows], res.prim[rows], res.inst[rows]
    new, _ = deriver(world, None, center, ext, up_axis)("camera", sub, o[rows], d[rows])
    bo, bd, _, _ = new["diffuse1"]
    return bo[:count], bd[:count]


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
    engine=None,
    ray_set=None,
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
    engine = engine or ENGINE
    cpu0, wall0 = _cpu(), time.monotonic()
    rt = registry.get("rt_unit").resolve(BUILDS[build])
    mesh, scene = _scene(name)
    ray_set = ray_set or "camera"
    origins, directions = _rays(
        mesh, 2 if name == "terrain" else 1, rays, ray_set=ray_set, top=scene.top
    )
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
        "cpu_seconds": _cpu() - cpu0,
        "wall_seconds": time.monotonic() - wall0,
        "build": build,
        "rt_unit": rt,
        "backend": "fast (Verilator)" if engine == "player" else backend,
        "engine": engine,
        "scene": {"name": name, "triangles": int(len(mesh))},
        "ray_set": ray_set,
        **{k: v for k, v in out.items() if k not in _COMMON},
    }


#: The engine's keys that :func:`measure` places itself.
_COMMON = ("instructions", "lane_instructions", "mismatches", "cycles")


def report(data, out_dir):
    """``summary.md`` of :func:`measure`'s data."""
    if "per_cu" in data:
        return frame.report(data, out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    rate = data["rays"] / data["cpu_seconds"] if data["cpu_seconds"] else 0.0
    lines = [
        f"# {data['rays']} rays through the RT unit RTL ({data['build']} build, "
        f"{data['backend']}), {data['scene']['name']} ({data['scene']['triangles']} triangles), "
        f"{data.get('ray_set', 'camera')} rays",
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
