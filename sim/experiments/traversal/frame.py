"""A frame across CUs on Dask: ``gpurtl experiment traversal-rtl --frame WxH --cus N
[--scheduler ADDRESS] [--resume] [--frame-engine NAME]``.

The frame
    One camera ray per pixel of a ``W x H`` image of the scene (the ``traversal-rtl`` scenes:
    the generated terrain by default; the ``traversal`` experiment's camera,
    :func:`gpurtl.sim.experiments.traversal.scenes.camera`), grouped into waves of 32 by pixel
    tiles of 8 x 4 (:data:`TILE`; :func:`gpurtl.golden.traversal.rays.camera_rays`' order: tiles
    row by row from the top left, the pixels of a tile row by row). A tile cut by the frame's
    right or bottom edge is a wave of fewer lanes. The waves are numbered in that order: the
    dispatch order.

The dispatcher rule (:func:`dispatch`)
    Wave ``w`` goes to CU ``w mod N`` and each CU runs its waves in dispatch order. A CHOICE,
    standing for the hardware's rule: the command processor hands the dispatch's workgroups
    to the shader engines, whose workgroup managers (the SPI) place them on WGPs/CUs (AMD ROCm
    documentation, rocprofiler-compute, "Shader engine" and "Workgroup Manager (SPI)" of the
    RDNA conceptual guide); AMD's patent US 11,941,723 B2 ("Dynamic dispatch for workgroup
    distribution", 2024) describes that assignment as dynamic, following each shader engine's
    free resources. A round robin over ``S`` shader engines, then over each engine's ``N / S``
    CUs, sends the same sets of waves to the CUs as ``w mod N`` (only the CUs' numbers differ),
    so the rule needs no shader-engine count. What the static rule leaves out: a CU that
    finishes early takes no waves from a slower one, so the frame's cycles (the slowest CU's)
    are an upper bound of a dynamically balanced dispatch; ``mean_cu_cycles`` is reported beside
    them (a balanced dispatch cannot end before the mean).

The CUs
    Each CU is one Dask task (:func:`cu_task`; a ``LocalCluster`` of one-thread worker
    processes on loopback by default, ``--scheduler ADDRESS`` for a running scheduler whose
    workers have ``gpurtl`` installed) running an engine of :data:`ENGINES`:
    ``time_cu(waves, build, params) -> CuResult`` times one CU's waves (:class:`FrameWave`) on
    the RT unit build ``build`` (``rt_unit`` parameters) with ``params`` (``scene``,
    ``stack_size``) and returns per-wave and per-ray results (:class:`CuResult`). Engines:

    ``golden``
        the CU model's RT unit mode with the **golden RT unit**
        (:func:`gpurtl.golden.cu.rt_unit.simulate_rt_unit`, which equals the RTL cycle for
        cycle where both are run, docs/rt_unit.md), fed by the golden traversal loop
        (:func:`gpurtl.golden.traversal.loop.trace_wave`). Not the RTL: outputs name it
        "golden RT unit". Its ``mismatches`` count the run's own consistency checks (every lane
        instruction's result left the RT unit; per wave, as many intersect and stack
        instructions as loop iterations), not RTL outputs.
    ``player`` (the default where the installation has it)
        the **RT unit RTL** through the compiled player
        (:func:`gpurtl.sim.backends.fast.player.run_player`), fed each CU's wave programs from
        the wave-batched loop (:func:`gpurtl.golden.traversal.streams.build`); ``mismatches``
        counts the RTL outputs that differ from the programs' expected words and the run's
        consistency checks. Whole 8 x 4 tiles only.

The levels below the L0
    Each CU has the RDNA 4 levels behind its L0 to itself (the CU model's hierarchy,
    :func:`gpurtl.sim.experiments.traversal.rtl.cu_params`: every node line present in the L2
    and below from the start, the L2 answering at a CU's share of its bandwidth, a CHOICE of
    :mod:`gpurtl.golden.traversal.calibration`): each CU sees its share, and there is no
    contention between CUs and no line one CU brings in for another. :func:`merge` bounds it:
    the L2 lines every CU asked for a cycle against that share, and the node image's size
    against the L2's.

Resume
    Each CU's result is written atomically to ``STORE/cu-<key>.json`` as it arrives (``key``:
    the frame, the CU count, the CU, the engine, the build, the scene and the sources, as a
    sweep point's); ``STORE`` is ``DIR/traversal-rtl.store`` beside the output folder, kept
    after an interrupted run. ``--resume`` runs only the CUs with no result there.
"""

import functools
import json
import os
import re
import struct
import time
import zlib
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

__all__ = [
    "ENGINES",
    "ENGINE_LABELS",
    "TILE",
    "CuResult",
    "FrameWave",
    "arguments",
    "check_options",
    "cu_key",
    "cu_task",
    "dispatch",
    "frame_waves",
    "golden_engine",
    "measure",
    "merge",
    "parse_frame",
    "player_engine",
    "png",
    "report",
    "run_frame",
    "tiles",
]

#: Pixels of a wave's tile (width, height): 32 lanes.
TILE = (8, 4)
#: The largest frame side accepted.
MAX_SIDE = 16384
#: The build of a frame run without ``--build``: a real GPU's CUs.
BUILD = "rdna4"
SCENES = ("terrain", "bunny")
STACK_SIZE = 16


@dataclass
class FrameWave:
    """One wave of the frame: ``index`` (its place in the dispatch order), ``pixels`` (flat
    row-major pixel index of each lane), ``origins`` and ``dirs`` (float arrays (lanes, 3))."""

    index: int
    pixels: np.ndarray
    origins: np.ndarray
    dirs: np.ndarray


@dataclass
class CuResult:
    """What an engine measured for one CU's waves (lists in the order of the waves given,
    per-ray lists in the order of their pixels).

    ``engine``: its label (what timed it); ``waves``: the waves' indices; ``wave_cycles``:
    per wave, from its first intersect instruction's issue to its last stack instruction's
    completion; ``pixels``, ``ray_cycles`` (from the wave's first intersect issue to the
    completion of the ray's own last stack instruction), ``ray_steps`` (loop iterations),
    ``ray_prim`` (closest hit primitive, -1 none); ``cycles`` (the CU's, from the first wave's
    start to the last one's end); ``instructions`` (intersect and stack wave instructions),
    ``lane_instructions`` (the same per lane); ``mismatches``; ``lookups`` (L0 ``hit``,
    ``pending_hit``, ``miss``); ``work`` (``box`` tests, ``pairs`` (pair nodes), ``tri`` tests,
    ``nodes``: lane intersect instructions); ``utilization`` (percent, the three readings of
    :func:`gpurtl.sim.experiments.traversal.rtl.utilization` over ``cycles``); ``busy``
    (cycles with some ``bvhcnt`` above 0); ``refused`` (lane-cycles refused: ``full``,
    ``other``)."""

    engine: str
    waves: list
    wave_cycles: list
    pixels: list
    ray_cycles: list
    ray_steps: list
    ray_prim: list
    cycles: int
    instructions: int
    lane_instructions: int
    mismatches: int
    lookups: dict
    work: dict
    utilization: dict
    busy: int
    refused: dict
    node_lines: int = 0
    checks: dict = field(default_factory=dict)


# --- the frame and the dispatcher ------------------------------------------------------------


def parse_frame(text):
    """``(width, height)`` of a ``--frame`` value ``WxH`` (``ValueError``, one line)."""
    match = re.fullmatch(r"\s*(\d+)\s*[xX]\s*(\d+)\s*", str(text))
    if not match:
        raise ValueError(f"--frame must be WIDTHxHEIGHT in pixels (e.g. 128x72), not {text!r}")
    w, h = int(match[1]), int(match[2])
    if not (1 <= w <= MAX_SIDE and 1 <= h <= MAX_SIDE):
        raise ValueError(f"--frame: width and height must be 1 to {MAX_SIDE} pixels, not {w}x{h}")
    return w, h


def tiles(width, height):
    """Waves (tiles of :data:`TILE`) of a ``width x height`` frame."""
    return -(-width // TILE[0]) * -(-height // TILE[1])


def _cus(text, waves):
    try:
        cus = int(text)
    except (TypeError, ValueError):
        cus = 0
    if cus < 1:
        raise ValueError(f"--cus must be a positive number of CUs, not {text!r}")
    if cus > waves:
        raise ValueError(f"--cus must be at most the frame's {waves} waves (8x4 tiles), not {cus}")
    return cus


def dispatch(waves, cus):
    """The waves (indices in dispatch order) of each CU: wave ``w`` to CU ``w mod cus``, each
    CU's in dispatch order (module doc string)."""
    return [list(range(cu, waves, cus)) for cu in range(cus)]


def _mesh(name):
    from gpurtl.golden.bvh import mesh as M

    return M.terrain() if name == "terrain" else M.bunny()


def frame_waves(scene, width, height):
    """The :class:`FrameWave` of a ``width x height`` frame of ``scene`` (a name of
    :data:`SCENES`), in dispatch order."""
    from gpurtl.golden.traversal.rays import camera_rays

    from .scenes import camera

    mesh = _mesh(scene)
    cam, _, _ = camera(mesh.triangles.astype(np.float64), 2 if scene == "terrain" else 1, False)
    origins, dirs, pixel = camera_rays(cam, width, height)
    across = -(-width // TILE[0])
    tile = (pixel // width) // TILE[1] * across + (pixel % width) // TILE[0]
    cuts = np.flatnonzero(np.diff(tile)) + 1
    bounds = zip(np.concatenate([[0], cuts]), np.concatenate([cuts, [len(tile)]]))
    return [FrameWave(k, pixel[a:b], origins[a:b], dirs[a:b]) for k, (a, b) in enumerate(bounds)]


# --- the engines -----------------------------------------------------------------------------


@functools.cache
def _scene(name):
    """The BVH8 scene and its node lines (built once per worker process)."""
    from gpurtl.golden.traversal.scene import build_scene

    from .rtl import node_memory

    scene = build_scene(name, _mesh(name), "bvh8")
    return scene, node_memory(scene)


def _traced(scene, wave, stack_size):
    """The golden loop's :class:`~gpurtl.golden.traversal.loop.WaveTrace` of a wave and its
    iterations as the CU model takes them (``(lane, line, kind, box, tri)`` per active lane)."""
    from gpurtl.golden.traversal.loop import node_tests, trace_wave

    seen = []
    trace = trace_wave(
        scene,
        wave.origins,
        wave.dirs,
        stack_size=stack_size,
        record=lambda i, o: seen.append((i["node_ptr"][0] >> 4, *node_tests(i, o))),
    )
    steps = trace.counts["steps"]
    iterations, k = [], 0
    for it, active in enumerate(trace.active):
        # a lane is active from the first iteration to its last: the loop never revives one
        lanes = np.flatnonzero(steps > it).tolist()
        if len(lanes) != active:
            raise RuntimeError(f"wave {wave.index}: iteration {it} has {active} lanes, not {lanes}")
        iterations.append([(lane, *seen[k + j]) for j, lane in enumerate(lanes)])
        k += active
    return trace, iterations


def golden_engine(waves, build, params):
    """:class:`CuResult` of one CU's waves in the CU model's RT unit mode with the golden RT
    unit (module doc string)."""
    from gpurtl.golden.cu import WaveTrace
    from gpurtl.golden.cu.rt_unit import simulate_rt_unit

    from .rtl import accel_timing, cu_params

    scene, lines = _scene(params["scene"])
    ii, latency = accel_timing(build)
    traced = [_traced(scene, w, params["stack_size"]) for w in waves]
    run = simulate_rt_unit(
        [WaveTrace(its, [], tag=k) for k, (_, its) in enumerate(traced)],
        cu_params(build),
        build,
        warm_lines=list(lines),
        accel_groups=ii,
        accel_depth=latency - ii,
    )
    steps = [trace.counts["steps"] for trace, _ in traced]
    prims = [trace.prim for trace, _ in traced]
    lanes = [step for _, its in traced for it in its for step in it]
    work = {
        "box": sum(s[3] for s in lanes),
        "pairs": sum(1 for s in lanes if s[2] == 1),
        "tri": sum(s[4] for s in lanes),
        "nodes": len(lanes),
    }
    iterations = [len(its) for _, its in traced]
    return _result(ENGINE_LABELS["golden"], waves, steps, prims, iterations, work, run, len(lines))


def player_engine(waves, build, params):
    """:class:`CuResult` of one CU's waves on the RT unit RTL through the compiled player
    (:func:`gpurtl.sim.backends.fast.player.run_player`), fed the waves' programs from the
    wave-batched loop (:func:`gpurtl.golden.traversal.streams.build`); every RTL output is
    checked against the programs' expected words (``mismatches``). The waves must be whole
    (32 lanes: the programs' waves are 32 consecutive rays)."""
    from gpurtl.golden.bvh.wavefront import Tables
    from gpurtl.golden.traversal import streams

    from ...backends.fast import player
    from .rtl import cu_params

    if any(len(w.pixels) != 32 for w in waves):
        raise ValueError(
            "the player engine needs whole 8x4 tiles (width a multiple of 8, height of 4)"
        )
    scene, _ = _scene(params["scene"])
    p = cu_params(build)
    origins = np.concatenate([w.origins for w in waves])
    dirs = np.concatenate([w.dirs for w in waves])
    programs = streams.build(Tables(scene.top), origins, dirs, p, stack_size=params["stack_size"])
    run = player.run_player(programs, build, p)
    entry_iter = np.repeat(np.arange(programs.iterations), np.diff(programs.iter_lanes))
    iter_wave = np.repeat(np.arange(programs.waves), np.diff(programs.wave_iters))
    ray = 32 * iter_wave[entry_iter] + programs.lane.astype(np.int64)
    per_ray = np.bincount(ray, minlength=32 * len(waves))
    steps = [per_ray[32 * k : 32 * k + 32] for k in range(len(waves))]
    prim = np.asarray(programs.result.prim)
    prims = [prim[32 * k : 32 * k + 32] for k in range(len(waves))]
    work = {
        "box": int(programs.box_tests.sum()),
        "pairs": int((programs.lane_kind == 1).sum()),
        "tri": int(programs.tri_tests.sum()),
        "nodes": int(programs.entries),
    }
    checks = {
        "rtl_outputs": int(run.mismatches),
        "stack_checked": int(run.stack_checked != programs.entries),
    }
    return _result(
        ENGINE_LABELS["player"],
        waves,
        steps,
        prims,
        np.diff(programs.wave_iters).tolist(),
        work,
        run,
        len(programs.lines),
        checks,
    )


def _result(label, waves, steps, prims, iterations, work, run, node_lines, checks=None):
    """:class:`CuResult` of the waves' per-ray loop iterations ``steps`` and closest hits
    ``prims`` (an array per wave), their ``iterations`` (per wave), the lanes' ``work`` and a
    run with :class:`~gpurtl.golden.cu.rt_unit.RtRun`'s attributes; ``checks``: the engine's
    own mismatch counts."""
    from .rtl import utilization

    per = [{"bvh": [], "ds": []} for _ in waves]
    for wave, kind, issue, done in run.instructions:
        per[wave][kind].append((issue, done))
    wave_cycles, ray_cycles, pixels, ray_steps, ray_prim = [], [], [], [], []
    bad = {"results": int(run.results != work["nodes"]), "instructions": 0, **(checks or {})}
    for k, wave in enumerate(waves):
        bvh, ds = sorted(per[k]["bvh"]), sorted(per[k]["ds"])
        bad["instructions"] += not (len(bvh) == len(ds) == iterations[k])
        start = bvh[0][0]
        wave_cycles.append(int(ds[-1][1] - start))
        n = np.asarray(steps[k]).tolist()
        # a ray's last iteration is iteration steps - 1 of its wave (it takes part in all before)
        ray_cycles += [int(ds[s - 1][1] - start) for s in n]
        pixels += wave.pixels.tolist()
        ray_steps += n
        ray_prim += np.asarray(prims[k]).tolist()
    return CuResult(
        engine=label,
        waves=[w.index for w in waves],
        wave_cycles=wave_cycles,
        pixels=pixels,
        ray_cycles=ray_cycles,
        ray_steps=ray_steps,
        ray_prim=ray_prim,
        cycles=int(run.cycles),
        instructions=len(run.instructions),
        lane_instructions=2 * work["nodes"],
        mismatches=sum(bad.values()),
        lookups=dict(run.lookups),
        work=work,
        utilization=utilization(work["box"], work["pairs"], work["tri"], work["nodes"], run.cycles),
        busy=int(run.busy),
        refused=dict(run.refused),
        node_lines=node_lines,
        checks=bad,
    )


def _player_present():
    """Whether this installation has the compiled player and the batched programs."""
    from importlib.util import find_spec

    return all(
        find_spec(name) is not None
        for name in ("gpurtl.sim.backends.fast.player", "gpurtl.golden.traversal.streams")
    )


#: What each engine's figures come from, as the outputs name it.
ENGINE_LABELS = {
    "golden": "golden RT unit (the CU model's RT unit mode, golden/cu/rt_unit.py; not the RTL)",
    "player": "RT unit RTL (the compiled player, sim/backends/fast/player.py)",
}
#: ``time_cu(waves, build, params) -> CuResult`` by name (module doc string); ``player`` where
#: the installation has it, and then the default.
ENGINES = {"golden": golden_engine}
if _player_present():
    ENGINES = {"player": player_engine, **ENGINES}
ENGINE = next(iter(ENGINES))


# --- the CU tasks and the run ----------------------------------------------------------------


def cu_task(cu, waves, engine, build, params):
    """Run CU ``cu``'s waves through ``ENGINES[engine]`` (on a Dask worker); the
    :class:`CuResult` as a dictionary with ``cu``, the task's ``cpu_seconds`` and
    ``wall_seconds``, the worker's ``pid`` and provenance."""
    from ...core.provenance import provenance

    cpu, wall = _cpu(), time.monotonic()
    result = asdict(ENGINES[engine](waves, build, params))
    return {
        "cu": cu,
        **result,
        "cpu_seconds": _cpu() - cpu,
        "wall_seconds": time.monotonic() - wall,
        "worker_pid": os.getpid(),
        "provenance": provenance(seeds={}),
    }


def _cpu(children=True):
    """CPU seconds of this process and (``children``) its finished children (the player's
    driver, builds; a local cluster's workers once it is closed)."""
    import resource

    who = (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN) if children else (resource.RUSAGE_SELF,)
    return sum(u.ru_utime + u.ru_stime for u in map(resource.getrusage, who))


def cu_key(frame, cus, cu, engine, build, params):
    """Stable key of one CU's result: the frame, CU count, CU, engine, build, scene and the
    sources and tools a result depends on (:func:`gpurtl.sim.sweep.run.point_key`)."""
    from ...sweep.run import point_key

    what = {"frame": list(frame), "cus": cus, "cu": cu, "engine": engine, "build": build}
    return point_key("experiment", "traversal-rtl-frame", {**what, **params}, {})


def _load(path):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):  # none, or damaged: run again
        return None


def run_frame(
    width,
    height,
    cus,
    store,
    *,
    engine=ENGINE,
    build=None,
    build_name=BUILD,
    scene="terrain",
    scheduler=None,
    workers=None,
    resume=False,
    inline=False,
    progress=None,
    on_cu=None,
):
    """Time a ``width x height`` frame on ``cus`` CUs; the merged results (:func:`merge`).

    ``store``: the folder of the per-CU results (written as they arrive; ``resume``: the CUs
    found there are not run again). ``build``: ``rt_unit`` parameters (default the ``rdna4``
    preset). ``scheduler``: a Dask scheduler's address (default: a local cluster of
    ``workers`` processes, default ``min(cus, cores)``); ``inline``: every CU in this process,
    one after the other (the reference the Dask run must equal). ``on_cu(result)`` sees each
    CU's result as it is stored."""
    from ...core import registry
    from ...core.files import write_atomic

    started, cpu0, self0 = time.monotonic(), _cpu(), _cpu(children=False)
    build = build or registry.get("rt_unit").resolve({"preset": BUILD})
    params = {"scene": scene, "stack_size": STACK_SIZE}
    waves = frame_waves(scene, width, height)
    split = dispatch(len(waves), cus)
    store = Path(store)
    paths = [
        store / f"cu-{cu_key((width, height), cus, cu, engine, build, params)}.json"
        for cu in range(cus)
    ]
    todo = [cu for cu in range(cus) if not (resume and _load(paths[cu]))]
    tell = (lambda k, line: progress(k, cus, line)) if progress else (lambda k, line: None)
    tell(cus - len(todo), f"{len(waves)} waves on {cus} CUs; {len(todo)} to run ({engine})")
    done = [cus - len(todo)]
    ran_cpu = [0.0]  # the CU tasks this command ran on Dask workers

    def keep(result):
        store.mkdir(parents=True, exist_ok=True)
        write_atomic(paths[result["cu"]], json.dumps(result, default=_plain) + "\n")
        done[0] += 1
        ran_cpu[0] += result["cpu_seconds"]
        tell(done[0], f"CU {result['cu']}: {result['cycles']} cycles")
        if on_cu is not None:
            on_cu(result)

    def args(cu):
        return cu, [waves[w] for w in split[cu]], engine, build, params

    if inline:
        for cu in todo:
            keep(cu_task(*args(cu)))
    elif todo:
        from .cluster import run_tasks

        run_tasks(
            cu_task,
            todo,
            args,
            keep,
            scheduler=scheduler,
            workers=workers or min(len(todo), os.cpu_count() or 1),
            what="CUs",
        )
    results = [_load(p) for p in paths]
    if inline:  # the tasks ran in this process: its own CPU and its children's hold them
        cpu = _cpu() - cpu0
    else:  # this process (not its local workers: they are the tasks) and the tasks run now
        cpu = _cpu(children=False) - self0 + ran_cpu[0]
    return merge(
        results,
        (width, height),
        build=build,
        build_name=build_name,
        scene=scene,
        engine=engine,
        ran=len(todo),
        wall_seconds=time.monotonic() - started,
        cpu_seconds=cpu,
    )


def _plain(value):
    if hasattr(value, "tolist"):
        return value.tolist()
    raise TypeError(f"{type(value).__name__} is not plain data")


# --- the merge -------------------------------------------------------------------------------


def merge(
    results,
    frame,
    *,
    build,
    build_name,
    scene,
    engine,
    ran=None,
    wall_seconds=0.0,
    cpu_seconds=0.0,
):
    """The frame's figures from its CUs' results (:func:`cu_task`'s dictionaries, CU order):
    per-CU cycles, frame cycles (the slowest CU's), the three utilization readings over the
    frame (all CUs' work over ``CUs x frame cycles``), L0 lookups and hit rates, the bound of
    the levels below L0 and the per-pixel cycles (``image``: ``height`` rows of ``width``)."""
    from gpurtl.golden.traversal.calibration import rdna4_levels

    from .rtl import utilization

    width, height = frame
    cus = len(results)
    cycles = [r["cycles"] for r in results]
    frame_cycles = max(cycles)
    work = {k: sum(r["work"][k] for r in results) for k in ("box", "pairs", "tri", "nodes")}
    lookups = {k: sum(r["lookups"][k] for r in results) for k in ("hit", "pending_hit", "miss")}
    image = np.full(width * height, -1, np.int64)
    for r in results:
        image[np.asarray(r["pixels"], np.int64)] = r["ray_cycles"]
    levels = rdna4_levels()
    l2 = levels[1]
    share = l2.lines_per_cycle
    demand = [r["lookups"]["miss"] / max(1, r["cycles"]) for r in results]
    scene_lines = max(r["node_lines"] for r in results)
    per_cu = []
    for r in results:
        per_cu.append(
            {
                "cu": r["cu"],
                "waves": len(r["waves"]),
                "rays": len(r["pixels"]),
                "cycles": r["cycles"],
                "instructions": r["instructions"],
                "mismatches": r["mismatches"],
                "lookups": r["lookups"],
                "l0_hit_rate": _rate(r["lookups"]),
                "utilization": r["utilization"],
                "busy": r["busy"],
                "refused": r["refused"],
                "l2_lines_per_cycle": r["lookups"]["miss"] / max(1, r["cycles"]),
                "cpu_seconds": r["cpu_seconds"],
                "wall_seconds": r["wall_seconds"],
            }
        )
    task_cpu = sum(r["cpu_seconds"] for r in results)
    return {
        "frame": [width, height],
        "cus": cus,
        "rays": sum(len(r["pixels"]) for r in results),
        "waves": sum(len(r["waves"]) for r in results),
        "instructions": sum(r["instructions"] for r in results),
        "lane_instructions": sum(r["lane_instructions"] for r in results),
        "mismatches": sum(r["mismatches"] for r in results),
        "cycles": frame_cycles,
        "mean_cu_cycles": sum(cycles) / cus,
        "cu_cycles": cycles,
        "engine": engine,
        "engine_label": results[0]["engine"],
        "build": build_name,
        "rt_unit": build,
        "scene": scene,
        "dispatch": "wave w (8x4 tile, row-major tile order) to CU w mod N (CHOICE)",
        "utilization": utilization(
            work["box"], work["pairs"], work["tri"], work["nodes"], cus * frame_cycles
        ),
        "work": work,
        "lookups": lookups,
        "l0_hit_rate": _rate(lookups),
        "below_l0": {
            "model": "each CU has the levels below L0 to itself (its share); no contention "
            "between CUs; every node line present in L2 and below from the start",
            "l2_share_lines_per_cycle": share,
            "l2_share_source": "CHOICE (golden/traversal/calibration.py: GPU totals shared by all CUs)",
            "l2_demand_lines_per_cycle_max_cu": max(demand),
            "l2_demand_lines_per_cycle_frame": lookups["miss"] / max(1, frame_cycles),
            "l2_share_used_max_cu": max(demand) / share,
            "node_image_bytes": 128 * scene_lines,
            "l2_bytes": l2.size,
        },
        "per_cu": per_cu,
        "image": image.reshape(height, width).tolist(),
        "cus_run": ran,
        "cpu_seconds": cpu_seconds,
        "task_cpu_seconds": task_cpu,
        "wall_seconds": wall_seconds,
    }


def _rate(lookups):
    total = sum(lookups.values())
    return lookups["hit"] / total if total else 0.0


# --- the experiment's options, measure and report ---------------------------------------------

#: The frame options besides ``--frame`` (they go with it).
_WITH_FRAME = ("cus", "scheduler", "resume", "frame_engine")


def arguments(parser):
    """The frame options of ``gpurtl experiment traversal-rtl`` (``parser.add_argument``)."""
    import argparse

    parser.add_argument(
        "--frame",
        metavar="WxH",
        help="time a WxH frame of camera rays (8x4-tile waves) split over --cus CUs on Dask",
    )
    parser.add_argument("--cus", metavar="N", help="CUs of the --frame run (default 1)")
    parser.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help="a Dask scheduler (tcp://host:8786) for the --frame run (default: a local cluster)",
    )
    parser.add_argument(
        "--resume",
        action="store_true",
        default=argparse.SUPPRESS,
        help="run only the CUs of the --frame run with no result in DIR/traversal-rtl.store",
    )
    parser.add_argument(
        "--frame-engine",
        choices=tuple(ENGINES),
        dest="frame_engine",
        help=f"what times each CU's waves (default {ENGINE}: {ENGINE_LABELS[ENGINE]})",
    )


def check_options(options):
    """Refuse a bad value or combination of the frame options (``ValueError``, one line)."""
    if "frame" not in options:
        for name in _WITH_FRAME:
            if name in options:
                raise ValueError(f"--{name.replace('_', '-')} goes with --frame WxH")
        return
    w, h = parse_frame(options["frame"])
    _cus(options.get("cus", 1), tiles(w, h))
    if "rays" in options:
        raise ValueError("--rays and --frame are two different runs: give one of them")
    if "simulator" in options:
        raise ValueError("--simulator is for the --rays run; a --frame run takes --frame-engine")
    if options.get("frame_engine", ENGINE) == "player" and (w % TILE[0] or h % TILE[1]):
        raise ValueError(
            f"--frame: the player engine needs whole 8x4 tiles (width a multiple of 8, height "
            f"of 4), not {w}x{h}; --frame-engine golden takes any size"
        )
    if "scheduler" in options and not str(options["scheduler"]).strip():
        raise ValueError("--scheduler must be a Dask scheduler's address (tcp://host:8786)")


def measure(
    *,
    frame,
    builds,
    store=None,
    cus=None,
    scheduler=None,
    resume=False,
    frame_engine=None,
    build=None,
    rtl_scene=None,
    progress=None,
    workers=None,
    inline=False,
):
    """The data of a ``--frame`` run (:func:`run_frame`, then :func:`merge`); ``builds``: the
    ``--build`` names' ``rt_unit`` parameters; ``store``: the per-CU results' folder (default
    a temporary one: no resume)."""
    import tempfile

    from ...core import registry

    width, height = parse_frame(frame)
    count = _cus(cus if cus is not None else 1, tiles(width, height))
    name = build or BUILD
    rt = registry.get("rt_unit").resolve(builds[name])
    kwargs = dict(
        engine=frame_engine or ENGINE,
        build=rt,
        build_name=name,
        scene=rtl_scene or "terrain",
        scheduler=scheduler,
        workers=workers,
        resume=bool(resume),
        inline=inline,
        progress=progress,
    )
    if store is None:
        with tempfile.TemporaryDirectory() as folder:
            return run_frame(width, height, count, folder, **kwargs)
    return run_frame(width, height, count, store, **kwargs)


def png(path, values):
    """Write ``values`` (a 2-D array; negative: no ray) as an RGB PNG, from dark (fewest
    cycles) through red and yellow to white (most); no plotting library needed."""
    values = np.asarray(values, np.float64)
    good = values >= 0
    lo, hi = (values[good].min(), values[good].max()) if good.any() else (0.0, 1.0)
    x = np.clip((values - lo) / max(hi - lo, 1e-12), 0, 1)
    anchors = np.array([[0, 0, 0.05], [0.55, 0.05, 0.25], [0.95, 0.35, 0.05], [1, 0.9, 0.2]])
    at = np.linspace(0, 1, len(anchors))
    rgb = np.stack([np.interp(x, at, anchors[:, c]) for c in range(3)], axis=-1)
    rgb = (np.where(good[..., None], rgb, 0) * 255).round().astype(np.uint8)
    rows = b"".join(b"\x00" + row.tobytes() for row in rgb)

    def chunk(kind, data):
        return (
            struct.pack(">I", len(data))
            + kind
            + data
            + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
        )

    height, width = values.shape
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    body = chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows, 9)) + chunk(b"IEND", b"")
    Path(path).write_bytes(b"\x89PNG\r\n\x1a\n" + body)


def report(data, out_dir):
    """``summary.md``, ``frame_cycles.png`` and ``frame_cycles.npy`` (per-pixel cycles) and
    ``cus.csv`` of a ``--frame`` run's data."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    image = np.asarray(data["image"], np.int64)
    np.save(out_dir / "frame_cycles.npy", image)
    png(out_dir / "frame_cycles.png", image)
    width, height = data["frame"]
    u, b = data["utilization"], data["below_l0"]
    rows = [
        "cu,waves,rays,cycles,instructions,mismatches,l0_hit,l0_pending_hit,l0_miss,"
        "l0_hit_rate,article_pct,engine_pct,issue_pct,l2_lines_per_cycle,cpu_seconds"
    ]
    for c in data["per_cu"]:
        lk, cu_u = c["lookups"], c["utilization"]
        rows.append(
            f"{c['cu']},{c['waves']},{c['rays']},{c['cycles']},{c['instructions']},"
            f"{c['mismatches']},{lk['hit']},{lk['pending_hit']},{lk['miss']},"
            f"{c['l0_hit_rate']:.4f},{cu_u['article']:.2f},{cu_u['engine']:.2f},"
            f"{cu_u['issue']:.2f},{c['l2_lines_per_cycle']:.4f},{c['cpu_seconds']:.2f}"
        )
    (out_dir / "cus.csv").write_text("\n".join(rows) + "\n")
    cyc = data["cu_cycles"]
    lines = [
        f"# A {width}x{height} frame on {data['cus']} CUs: {data['rays']} rays, "
        f"{data['scene']}, {data['build']} build",
        "",
        f"Timed by the **{data['engine_label']}** (engine `{data['engine']}`).",
        "",
        "| figure | value |",
        "|---|---|",
        f"| rays / waves (8x4 tiles) | {data['rays']} / {data['waves']} |",
        f"| frame cycles (the slowest CU) | {data['cycles']} |",
        f"| CU cycles: min / mean / max | {min(cyc)} / {data['mean_cu_cycles']:.0f} / {max(cyc)} |",
        f"| wave instructions (intersect and stack) | {data['instructions']} |",
        f"| mismatches | {data['mismatches']} |",
        f"| utilization over CUs x frame cycles: article / engine / issue % | "
        f"{u['article']:.2f} / {u['engine']:.2f} / {u['issue']:.2f} |",
        f"| L0 hit rate (hit / pending hit / miss) | {100 * data['l0_hit_rate']:.1f}% "
        f"({data['lookups']['hit']} / {data['lookups']['pending_hit']} / "
        f"{data['lookups']['miss']}) |",
        f"| L2 lines a cycle, busiest CU (its share: {b['l2_share_lines_per_cycle']}) | "
        f"{b['l2_demand_lines_per_cycle_max_cu']:.4f} ({100 * b['l2_share_used_max_cu']:.1f}% "
        f"of the share) |",
        f"| L2 lines a cycle, all CUs | {b['l2_demand_lines_per_cycle_frame']:.4f} |",
        f"| node image / L2 | {b['node_image_bytes'] / 2**20:.2f} MiB / "
        f"{b['l2_bytes'] / 2**20:.0f} MiB |",
        f"| CUs run by this command (others from the store) | {data['cus_run']} |",
        f"| CPU seconds of this command (this process and the CU tasks it ran) | "
        f"{data['cpu_seconds']:.1f} |",
        f"| CPU seconds of all CU tasks (those from the store too) | "
        f"{data['task_cpu_seconds']:.1f} |",
        f"| wall seconds | {data['wall_seconds']:.1f} |",
        "",
        f"Dispatch: {data['dispatch']}. Below the L0: {b['model']}.",
        "",
        "Per-pixel cycles (from the wave's first intersect issue to the ray's last stack "
        "instruction's completion): `frame_cycles.png`, `frame_cycles.npy`; per CU: `cus.csv`.",
    ]
    summary = out_dir / "summary.md"
    summary.write_text("\n".join(lines) + "\n")
    return {
        "title": f"traversal-rtl: a {width}x{height} frame on {data['cus']} CUs "
        f"({data['engine_label'].split(' (')[0]})",
        "rows": [
            ("rays", data["rays"]),
            ("frame cycles", data["cycles"]),
            ("mismatches", data["mismatches"]),
            ("L0 hit rate", f"{100 * data['l0_hit_rate']:.1f}%"),
            ("CPU seconds", f"{data['cpu_seconds']:.1f}"),
        ],
        "files": [
            str(summary),
            str(out_dir / "frame_cycles.png"),
            str(out_dir / "frame_cycles.npy"),
            str(out_dir / "cus.csv"),
        ],
    }
