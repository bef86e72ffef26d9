"""The RTL runs of ``traversal-rtl`` and its sensitivity study: the scenes, the rays, the engines
that run them through the RT unit RTL (:data:`ENGINES`), the formulas against the RTL
(:func:`formula_comparison`) and the steady-state throughput with its interval
(:func:`steady_state`)."""

import resource

import numpy as np

__all__ = [
    "ENGINE",
    "ENGINES",
    "IMAGE",
    "RAY_SETS",
    "SCENES",
    "cpu_seconds",
    "formula_comparison",
    "MODES",
    "load_scene",
    "mode_build",
    "mode_scene",
    "pick_rays",
    "player_engine",
    "session_engine",
    "steady_state",
    "t95",
]

SCENES = ("terrain", "bunny")
#: The ray sets: the camera rays, or the first diffuse bounce from their hits.
RAY_SETS = ("camera", "diffuse")
#: The camera image the rays come from (scaled by a whole factor for more rays).
IMAGE = (256, 192)


#: The traversal modes of the RTL runs: BVH8 nodes, or legacy BVH4 nodes two at a time
#: (``image_bvh_dual_intersect_ray``, the RT unit build's ``dual`` node fetch).
MODES = ("bvh8", "bvh4x2")


def load_scene(name, mode="bvh8"):
    """``(mesh, scene)`` of a scene of :data:`SCENES` built for ``mode`` (:data:`MODES`)."""
    from gpurtl.golden.bvh import mesh as M
    from gpurtl.golden.traversal.scene import build_scene

    mesh = M.terrain() if name == "terrain" else M.bunny()
    return mesh, build_scene(name, mesh, mode)


def mode_scene(name, mode, mesh=None):
    """The scene of ``name`` in ``mode``: ``None`` for ``bvh8`` (the caller's), else the legacy
    BVH4 build of the same mesh (about two CPU minutes for the terrain)."""
    from gpurtl.golden.traversal.scene import build_scene

    if mode == "bvh8":
        return None
    return build_scene(name, mesh, mode)


def mode_build(rt, mode):
    """The ``rt_unit`` parameters ``rt`` for ``mode``: ``dual`` set for ``bvh4x2``."""
    return dict(rt, dual=True) if mode == "bvh4x2" else dict(rt)


def pick_rays(mesh, up_axis, count, ray_set="camera", top=None):
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


def cpu_seconds():
    """CPU seconds of this process and its finished children (builds, the player's driver)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def session_engine(scene, origins, directions, rt, backend, progress):
    """The session loop (:func:`.rtl.run_loop`): a simulator session of each block on
    ``backend`` stepped a cycle at a time from Python, checked against the golden traversal."""
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


def player_engine(scene, origins, directions, rt, backend, progress, *, formulas=True):
    """The wave programs of the rays (the golden loop, :func:`gpurtl.golden.traversal.streams.
    build`) played on the RT unit RTL ``rt`` through the compiled player; ``formulas``: the
    CU model's formulas on the same waves beside it (:func:`formula_comparison`, about as
    costly as the player at 10^5 rays). ``backend`` is not used (the player is Verilated)."""
    from gpurtl.golden.bvh.wavefront import Tables, trace
    from gpurtl.golden.traversal import streams

    from ...backends.fast import player
    from .rtl import cu_params

    params = cu_params(rt)
    tables = Tables(scene.top)
    cpu0 = cpu_seconds()
    trace(tables, origins, directions)  # the golden loop alone, for the figures beside it
    loop_cpu = cpu_seconds() - cpu0
    programs = streams.build(tables, origins, directions, params)
    program_cpu = cpu_seconds() - cpu0 - loop_cpu
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
    compared = None
    # the formulas' waves hold one node line a lane: BVH8 programs only
    if formulas and programs.mode == "bvh8" and not (out.mismatches or counts_differ):
        if progress:
            progress(f"the RTL: {out.cycles} cycles, 0 mismatches; the formulas")
        compared = formula_comparison(programs, out.instructions, params, out.cycles)
    return {
        "formulas": compared,
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
        "steady": steady_state(
            _wave_ends(out.instructions, programs.waves), _lanes(len(origins), programs.waves)
        ),  # fmt: skip
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
ENGINES = {"player": player_engine, "session": session_engine}
ENGINE = "player"


def _wave_ends(records, waves):
    """Each wave's last completion among the instruction records ``(wave, kind, issue,
    complete)``."""
    end = np.zeros(waves, np.int64)
    if records:
        a = np.array([(w, c) for w, _, _, c in records], np.int64)
        np.maximum.at(end, a[:, 0], a[:, 1])
    return end


def _lanes(rays, waves):
    """Lanes of each of ``waves`` waves of 32 consecutive rays of ``rays``."""
    return np.minimum(32, rays - 32 * np.arange(waves))


#: Two-sided 95% Student t quantiles by degrees of freedom (1 to 30; 1.96 beyond).
_T95 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)  # fmt: skip


def t95(n):
    """The two-sided 95% Student t quantile of the mean of ``n`` values (``n - 1`` degrees of
    freedom; ``n`` must be at least 2)."""
    if n < 2:
        raise ValueError(f"`n` must be at least 2, not {n!r}")
    return _T95[n - 2] if n - 1 <= len(_T95) else 1.96


def interval(values):
    """``(mean, half width of its 95% t-interval)`` of at least two ``values``."""
    v = np.asarray(values, np.float64)
    return float(v.mean()), float(t95(len(v)) * v.std(ddof=1) / np.sqrt(len(v)))


#: The steady state: the waves between these fractions of the run's wave ends (a CHOICE: the
#: first tenth holds the fill of the wave slots, the last the drain).
STEADY = (0.1, 0.9)
#: Batches of the batch-means interval (a CHOICE: each holds hundreds of waves at 10^5 rays, far
#: more than the 32 resident at once, so neighbouring batches are nearly independent).
BATCHES = 10


def steady_state(ends, lanes, batches=BATCHES, window=STEADY):
    """Steady-state throughput of a run from each wave's end cycle ``ends`` and its ``lanes``:
    the waves ordered by end, those between the ``window`` fractions cut into ``batches``
    batches of equal wave counts, each batch's rays per 1000 cycles (its waves' lanes over the
    cycles from the previous batch's last end to its own), and their mean with its 95%
    t-interval (batch means). ``None`` where the window holds fewer waves than ``4 *
    batches`` (no steady state to speak of: the whole run's figures stand alone)."""
    order = np.argsort(np.asarray(ends), kind="stable")
    end = np.asarray(ends, np.int64)[order]
    lane = np.asarray(lanes, np.int64)[order]
    first, last = int(np.ceil(window[0] * len(end))), int(window[1] * len(end))
    if last - first < 4 * batches:
        return None
    cuts = np.linspace(first, last, batches + 1).round().astype(np.int64)
    rates = []
    for a, b in zip(cuts[:-1], cuts[1:]):
        span = int(end[b - 1] - end[a - 1]) if a else int(end[b - 1])
        rates.append(1000.0 * lane[a:b].sum() / max(1, span))
    mean, half = interval(rates)
    return {
        "rays_per_kcycle": [mean, half],
        "batches": [float(r) for r in rates],
        "waves": int(last - first),
        "window": [int(end[first - 1]) if first else 0, int(end[last - 1])],
    }
