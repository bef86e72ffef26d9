"""Experiment ``traversal``: the driver's BVH traversal loop on real scenes at full resolution,
timed on a compute-unit model built from the project's golden models.

Functional part: every ray of every set runs the RT IP 3.1 loop of gpurt ``TraceRay3_1.hlsl``
in the wave-batched golden model (:mod:`gpurtl.golden.bvh.wavefront`, bit exact with the
instruction model step by step): camera rays at full resolution in 8x4 tiles, shadow rays to a
point light and ambient-occlusion rays (both ending at their first hit, ``ACCEPT_FIRST_HIT_AND_
END_SEARCH``), and two diffuse bounces. Scenes: the 56,172-triangle Stanford Bunny and the
San Francisco city of ``sionna-rt`` (4,735 meshes, one instance each, two levels) from the
optional extra ``gpurtl[scenes]``; without it, the packaged small bunny and an instanced scene
of it.

Timing part: whole waves sampled across the image (never replayed) run on
:func:`gpurtl.golden.cu.simulate`: the golden wait counters and return queues, the dynamic VGPR
allocator with ``s_alloc_vgpr`` at the switch to shading, the memory hierarchy of
:mod:`gpurtl.golden.memory`, calibrated in :mod:`gpurtl.golden.traversal.calibration`. Utilization is reported three
ways: the article's formula, engine-cycle utilization and issue-slot occupancy.

BVH comparison: BVH8 / BVH4 / BVH4x2 built over the same triangle pairs with the SAH-optimal
collapse, at equal leaf content (one pair per leaf), with BVH8 leaves up to four pairs and with
OBBs, every build on the same rays (up to :data:`BVH_RAYS` per set) in the wave-batched loop.

RTL in the loop: one wave's stack instructions per mode replay through the ``ds_bvh_stack``
RTL; (not with ``--quick``) a sample of intersect instructions through the ``ray_accel`` RTL.

``--rtl-scale RAYS`` runs instead the loop at scale on the RTL (:mod:`.scale`): at least
``RAYS`` camera rays on the 56k bunny, every intersect and stack instruction through the
``ray_accel`` and ``ds_bvh_stack`` RTL on the ``fast-behavioural`` backend, for each accelerator
build of :data:`.scale.BUILDS` side by side; ``--rtl-scale-rays SETS`` adds ray sets of
the default run that start at the camera rays' hits (shadow, AO, diffuse bounces).

``--rtl`` runs instead the whole loop on the RTL (:mod:`.rtl`): every intersect through the
``rt_unit`` RTL, every stack instruction through ``ds_bvh_stack``, timed against the CU model.
"""

import csv
import json
import time

import numpy as np

from gpurtl.golden.traversal.scene import build_scene

from . import scenes as SC
from .replay import rtl_replay, stack_replay

#: The seeds of the ray sets, of the rays of the ``--rtl`` run and of the waves sampled per set.
SEEDS = {"ray sets": 7, "--rtl rays": 3, "wave sample of a ray set": "the length of its name"}

NAME = "traversal"
DESCRIPTION = (
    "BVH8 traversal on real scenes at 10^6 rays (golden wave-batched loop) timed on a CU model "
    "of golden counters, VGPR allocator and cache hierarchy; BVH8/BVH4/BVH4x2 at equal leaves"
)

__all__ = [
    "ARTICLE",
    "DESCRIPTION",
    "NAME",
    "arguments",
    "build_scene",
    "check_options",
    "measure",
    "report",
    "stack_replay",
    "utilization_table",
]

#: The article's counters (Chips and Cheese, "RDNA 4's Raytracing Improvements", 2025).
ARTICLE = {
    "RDNA 4 (RX 9070)": {"box": 111.76e9, "tri": 19.61e9, "cus": 56, "box_rate": 8, "quoted": 24.0},
    "RDNA 2 (RX 6900 XT)": {
        "box": 38.8e9,
        "tri": 10.76e9,
        "cus": 80,
        "box_rate": 4,
        "quoted": 10.23,
    },
}
CLOCK = 2.5e9
#: The package's further experiments (``traversal-rtl``, ``traversal-rtl-sensitivity``).
EXPERIMENTS = ("traversal_rtl", "sensitivity")
#: Timing samples per ray set: groups of waves, each group one CU run of this many waves (a
#: steady state needs several times the CU's 32 wave slots).
TIMING_GROUPS, TIMING_WAVES = 4, 64
RAY_SETS = ("camera", "shadow", "ao", "diffuse1", "diffuse2")
TIMED_SETS = ("camera", "shadow", "ao", "diffuse1")
IMAGE_W, IMAGE_H = 1024, 768


def arguments(parser):
    """The experiment's own options of ``gpurtl experiment traversal``."""
    parser.add_argument(
        "--rtl-scale",
        type=int,
        metavar="RAYS",
        help="instead of the default run: at least RAYS camera rays on the 56k bunny with every "
        "intersect and stack instruction through the RTL (fast-behavioural backend; builds the "
        "accelerator models on first use, minutes)",
    )
    parser.add_argument(
        "--rtl-scale-rays",
        type=lambda text: tuple(RAY_SETS[1:] if text == "all" else text.split(",")),
        metavar="SETS",
        help="ray sets of the --rtl-scale run after its camera rays, from their hits: a comma "
        f"list of {', '.join(RAY_SETS[1:])} or `all` (the default run's sets)",
    )
    parser.add_argument(
        "--scene",
        metavar="PATH",
        help="your own mesh instead of the default scenes: an .obj or .ply file (one BLAS; "
        "docs/traversal.md, Your own scene and rays)",
    )
    parser.add_argument(
        "--camera",
        metavar="EX,EY,EZ,TX,TY,TZ[,UX,UY,UZ[,FOV]]",
        help="the --scene run's camera: eye, target, optional up (default 0,1,0) and horizontal "
        "field of view in degrees (default 45)",
    )
    parser.add_argument(
        "--rays",
        metavar="PATH",
        help="the --scene run's primary rays instead of the camera's: a text file of rows "
        "`ox oy oz dx dy dz tmax` (at least 32 rays); of traversal-rtl: a number of rays",
    )
    from . import rtl

    rtl.arguments(parser)


def check_options(options):
    """Refuse a bad value of the experiment's own options (``ValueError``)."""
    rays = options.get("rtl_scale")
    if rays is not None and rays < 1:
        raise ValueError(f"--rtl-scale must be a positive number of rays, not {rays}")
    sets = options.get("rtl_scale_rays")
    if sets is not None and rays is None:
        raise ValueError("--rtl-scale-rays is an option of --rtl-scale: give --rtl-scale too")
    for name in sets or ():
        if name not in RAY_SETS[1:]:
            raise ValueError(
                f"--rtl-scale-rays must be a comma list of {', '.join(RAY_SETS[1:])} or `all`, "
                f"not {','.join(sets)!r}"
            )
    if rays is not None and "rtl" in options:
        raise ValueError("--rtl-scale and --rtl are two different runs: give one of them")
    loose = [
        name for name in ("rtl_rays", "rtl_backend", "rtl_param", "rtl_modes") if name in options
    ]
    if loose and "rtl" not in options:
        raise ValueError(f"--{loose[0].replace('_', '-')} is an option of --rtl: give --rtl too")
    if options.get("rtl_modes") and options.get("rtl_backend") == "player":
        raise ValueError(
            "--rtl-modes runs BVH4x2, which the player does not play: give --rtl-backend "
            "pysim, verilator, fast or fast-behavioural"
        )
    own = [name for name in ("scene", "camera", "rays") if name in options]
    if own and (rays is not None or "rtl" in options):
        raise ValueError(f"--{own[0]} is an option of the default run, not of --rtl or --rtl-scale")
    if ("camera" in options or "rays" in options) and "scene" not in options:
        raise ValueError(
            f"--{'camera' if 'camera' in options else 'rays'} is an option of --scene: give "
            "--scene too"
        )
    if "camera" in options and "rays" in options:
        raise ValueError("--camera and --rays are two sources of primary rays: give one of them")
    from . import inputs

    if "scene" in options:
        inputs.read_scene(options["scene"])
    if "camera" in options:
        inputs.parse_camera(options["camera"])
    if "rays" in options:
        inputs.read_rays(options["rays"])
    from . import rtl

    rtl.check_options(options)


def utilization_table():
    """The article's arithmetic: each GPU's utilization with a triangle rate of 1 per CU-cycle
    (what reproduces the quoted figures) and with the documented 2 (RDNA 4)."""
    from gpurtl.golden.cu import article_utilization

    rows = []
    for name, a in ARTICLE.items():
        kw = dict(cus=a["cus"], clock_hz=CLOCK, box_per_cycle=a["box_rate"])
        one = article_utilization(a["box"], a["tri"], tri_per_cycle=1, **kw)
        two = article_utilization(a["box"], a["tri"], tri_per_cycle=2, **kw)
        rows.append({"gpu": name, "quoted": a["quoted"], "tri_1": 100 * one, "tri_2": 100 * two})
    return rows


# --- measure ------------------------------------------------------------------------------------


def _func_stats(res, seconds):
    c = res.counts
    n = len(res.prim)
    return {
        "rays": int(n),
        "hit_fraction": float((res.prim >= 0).mean()) if n else 0.0,
        "steps": float(c["steps"].mean()),
        "box_tests": float(c["box_tests"].mean()),
        "tri_tests": float(c["tri_tests"].mean()),
        "instances": float(c["instances"].mean()),
        "lds_bytes": float(4 * (c["pushes"] + c["pops"]).mean()),
        "overflow_rays": float((c["overflows"] > 0).mean()),
        "walkback_steps": float(c["walkback_steps"].mean()),
        "cpu_s": seconds,
        "rays_per_cpu_s": n / seconds if seconds else 0.0,
    }


def _steady(run):
    """RA work and cycles in the steady-state window: from the first wave's end (every slot
    has been busy) to the last wave's launch (no slot idles for want of work); and whether
    there is such a window. With no more waves than slots every wave launches at the start, so
    there is none and the whole run is taken (start-up and drain included)."""
    t0 = min(run.end_times) if run.end_times else 0
    t1 = max(run.launch_times) if run.launch_times else run.cycles
    steady = t1 > t0
    if not steady:
        t0, t1 = 0, run.cycles
    ra = np.array(run.ra, np.int64).reshape(-1, 3)
    sel = (ra[:, 0] >= t0) & (ra[:, 0] < t1)
    return ra[sel], t1 - t0, steady


def _timing(waves, params, warm, reps):
    """Mean and 95% t-interval over ``reps`` disjoint groups of waves (each group one CU run) of
    the three utilization figures, hit rates per level and SIMD lane efficiency; ``groups``
    keeps each group's figures for paired comparisons (:func:`_effect`)."""
    from gpurtl.golden.cu import simulate

    groups = [waves[k::reps] for k in range(reps)]
    rows, steady = [], []
    for group in groups:
        run = simulate(group, params, warm_lines=warm)
        ra, cyc, window = _steady(run)
        steady.append(window)
        box, tri = ra[:, 1].sum(), ra[:, 2].sum()
        nodes = len(ra)
        pairs = int((ra[:, 2] > 0).sum())
        rows.append(
            {
                "article": 100 * (box / 8 + pairs) / cyc,
                "engine": 100 * (box / 8 + tri / 2) / cyc,
                "issue": 100 * nodes / cyc,
                "lane_eff": 100 * run.valu_lane_cycles / 32 / max(1, run.valu_cycles),
                "alloc_waits": run.alloc_waits,
                "cycles": run.cycles,
                **{f"hit_{k}": 100 * v["hit_rate"] for k, v in run.memory.items() if k != "DRAM"},
            }
        )
    out = {key: _interval([r[key] for r in rows]) for key in rows[0]}
    out["waves"] = int(sum(len(g) for g in groups))
    out["waves_per_run"] = int(min(len(g) for g in groups))
    out["steady"] = bool(all(steady))
    out["groups"] = rows
    return out


def _no_steady(r):
    """The mark of a timing row without a steady state (``""`` for one with it)."""
    if r.get("steady", True):
        return ""
    return f" (no steady state: {r['waves_per_run']} waves a CU run, whole run taken)"


def _interval(values):
    """``[mean, half width of the 95% t-interval]`` (half width 0 for one value)."""
    vals = np.array(values, np.float64)
    if len(vals) < 2:
        return [float(vals.mean()), 0.0]
    return [float(vals.mean()), float(_t95(len(vals)) * vals.std(ddof=1) / np.sqrt(len(vals)))]


def _effect(variant, base, key):
    """Paired effect of a variant on ``key``: mean and 95% interval of the per-group differences
    (both timed on the same groups of waves, so the waves' own spread cancels)."""
    return _interval([v[key] - b[key] for v, b in zip(variant["groups"], base["groups"])])


def _t95(n):
    """Two-sided 95% Student t quantile for ``n`` values (``n - 1`` degrees of freedom)."""
    return {2: 12.71, 3: 4.30, 4: 3.18, 5: 2.78, 6: 2.57, 7: 2.45, 8: 2.36}.get(n, 2.0)


def measure(
    quick=False,
    progress=None,
    rtl_scale=None,
    rtl_scale_rays=None,
    scene=None,
    camera=None,
    rays=None,
    **rtl_options,
):
    """Everything the report shows, as plain data (lists, dicts, numbers, strings);
    ``rtl_scale``: the run at scale on the RTL instead (``rtl_scale_rays``: its ray sets after
    the camera rays); ``rtl=True`` (with ``rtl_rays``, ``rtl_backend``): the loop on the RT unit
    RTL instead (module doc string). ``scene``, ``camera``, ``rays``: your own mesh file, camera
    and primary-ray file instead of the default scenes (:mod:`.inputs`)."""
    if rtl_scale is not None:
        from . import scale

        return scale.measure(
            rtl_scale,
            lambda tris: SC.camera(tris, 1, False)[0],
            progress=progress,
            warn=lambda note: SC.warn(f"{NAME}: {note}"),
            sets=("camera", *(rtl_scale_rays or ())),
            derive=SC.scale_sets,
        )
    if rtl_options.pop("rtl_modes", False):
        from . import modes, rtl

        rays = rtl_options.get("rtl_rays") or rtl.RAYS[1 if quick else 0]
        changes = rtl.build_changes(rtl_options.get("rtl_param"))
        return modes.measure(rays, rtl_options.get("rtl_backend", "pysim"), changes, progress)
    if rtl_options.get("rtl"):
        from . import rtl

        return rtl.measure(quick=quick, progress=progress, **rtl_options)
    from gpurtl.golden.bvh import wavefront as WF
    from gpurtl.golden.bvh import wide as W
    from gpurtl.golden.traversal import calibration as K
    from gpurtl.golden.traversal import waves as TW
    from gpurtl.golden.traversal.rays import camera_rays

    started = time.monotonic()
    cpu0 = time.process_time()
    notes = []
    data = {"quick": quick, "article": utilization_table(), "calibration": K.CALIBRATION}
    width, height = (128, 96) if quick else (IMAGE_W, IMAGE_H)
    reps, per_group = (2, 12) if quick else (TIMING_GROUPS, TIMING_WAVES)
    n_waves = reps * per_group
    from pathlib import Path

    from gpurtl.golden.traversal.rays import Camera

    from . import inputs

    if scene is not None:
        mesh = inputs.read_scene(scene)
        scenes = [(f"{Path(scene).name} ({len(mesh)} tris)", "blas", mesh, 1)]
    else:
        scenes = SC.scenes(quick, notes, warn=lambda note: SC.warn(f"{NAME}: {note}"))
    data["scene_names"] = [name for name, *_ in scenes]
    steps_total = len(scenes) * 4 + 3
    done = 0

    def tick(label):
        nonlocal done
        done += 1
        if progress:
            progress(done, steps_total, label)

    data["scenes"] = []
    bvh_rays = {}
    for name, kind, geometry, up_axis in scenes:
        t0 = time.process_time()
        top = SC.build(kind, geometry)
        tables = WF.Tables(top)
        build_s = time.process_time() - t0
        tick(f"{name}: built")
        world_tris, base = SC.world_tris(kind, geometry, top)
        cam, center, ext = SC.camera(world_tris, up_axis, quick)
        if camera is not None:
            cam = Camera(*inputs.parse_camera(camera))
        derive = SC.deriver(world_tris, base, center, ext, up_axis)
        sets, func, waves_of = {}, {}, {}
        if rays is not None:
            o, d, tmax = inputs.read_rays(rays)
            pixel, src = None, {"camera": (o, d, tmax, False)}
        else:
            o, d, pixel = camera_rays(cam, width, height)
            src = {"camera": (o, d, None, False)}
        data_img = None
        for set_name in RAY_SETS:
            if set_name not in src or not len(src[set_name][0]):
                break
            o, d, tmax, first = src[set_name]
            pick = TW.sample_waves(len(o), n_waves, seed=len(set_name))
            mask = np.zeros(len(o), bool)
            for w in pick:
                mask[32 * w : 32 * w + 32] = True
            c0 = time.process_time()
            res = WF.trace(tables, o, d, tmax=tmax, first_hit=first, record=mask)
            func[set_name] = _func_stats(res, time.process_time() - c0)
            waves_of[set_name] = TW.wave_traces(res, pick, inst_prim_base=base)
            sets[set_name] = res
            if not data["scenes"] and set_name in ("camera", "diffuse1"):
                hit = res.prim >= 0 if set_name == "camera" else slice(None)
                if len(o[hit]):
                    bvh_rays[_BVH_SETS[set_name]] = (o[hit], d[hit])
            new, (ok, pts, nrm) = derive(set_name, res, o, d)
            src.update(new)
            if set_name == "camera" and pixel is not None:
                data_img = _images(res, ok, pts, nrm, pixel, cam, width, height, quick)
        tick(f"{name}: {sum(f['rays'] for f in func.values())} rays traced")
        warm = (tables.va >> 7).tolist()
        params = K.rdna4_params()
        timing = {}
        for set_name in TIMED_SETS:
            if len(waves_of.get(set_name, ())) >= reps:
                timing[set_name] = _timing(waves_of[set_name], params, warm, reps)
            else:
                notes.append(
                    f"{name}: the {set_name} rays fill fewer than {reps} waves, so they are not "
                    "timed"
                )
        tick(f"{name}: timed")
        sweep_set = "diffuse1"
        w_sweep = (1, 2, 4, 8, 16) if not quick else (2, 8)
        by_waves = {}
        for slots in w_sweep if sweep_set in timing else ():
            if slots == params.slots_per_simd:
                r = timing[sweep_set]
            else:
                r = _timing(waves_of[sweep_set], params.replace(slots_per_simd=slots), warm, reps)
            by_waves[str(2 * slots)] = r
        sens = {}
        if not quick and sweep_set in timing:
            base_levels = params.levels
            variants = {
                "L0 16 KB": params.replace(levels=K.rdna4_levels(16)),
                "L0 64 KB": params.replace(levels=K.rdna4_levels(64)),
                "MALL and DRAM latency x2": params.replace(
                    levels=[
                        _scaled(lv, 2.0) if lv.name in ("MALL", "DRAM") else lv
                        for lv in base_levels
                    ]
                ),
                "VALU work x2": params.replace(
                    box_valu=2 * params.box_valu,
                    pair_valu=2 * params.pair_valu,
                    instance_valu=2 * params.instance_valu,
                    shade_valu=2 * params.shade_valu,
                ),
                "static VGPRs (10 waves/SIMD at 128)": params.replace(vgpr_mode="static"),
                "RDNA 2-like (16 KB L0, in-order returns, static VGPRs)": K.rdna2_params(),
            }
            for label, p in variants.items():
                r = _timing(waves_of[sweep_set], p, warm, reps)
                for key in ("article", "engine", "issue", "hit_L0"):
                    r["effect_" + key] = _effect(r, timing[sweep_set], key)
                sens[label] = r
        tick(f"{name}: sweeps")
        stats = W.tree_stats(top) if kind == "blas" else SC.tlas_stats(top)
        data["scenes"].append(
            {
                "name": name,
                "kind": kind,
                "triangles": int(len(world_tris)),
                "instances": 0 if kind == "blas" else len(geometry),
                "blases": 0 if kind == "blas" else len(tables.bvhs) - 1,
                "build_cpu_s": build_s,
                "tree": stats,
                "image": [width, height],
                "func": func,
                "timing": timing,
                "by_waves": by_waves,
                "sensitivity": sens,
                "images": data_img,
            }
        )
    data["bvh"] = _bvh_comparison(scenes[0], bvh_rays)
    tick("BVH comparison")
    data["rtl"] = _rtl(quick)
    tick("RTL replay")
    data["notes"] = notes
    data["wall_s"] = time.monotonic() - started
    data["cpu_s"] = time.process_time() - cpu0
    data["params"] = K.rdna4_params().as_dict()
    return data


def _scaled(level, factor):
    from gpurtl.golden.memory import Level

    return Level(
        level.name, level.size, level.ways, level.delta * factor, level.lines_per_cycle, level.mshrs
    )


def _images(res, ok, pts, nrm, pixel, cam, width, height, quick):
    """Depth, normal and traversal-step images (row-major lists, at most 256 wide)."""
    depth = np.full(width * height, np.nan)
    depth[pixel[ok]] = np.einsum("ij,j->i", pts - cam.eye, cam.forward)
    normal = np.zeros((width * height, 3))
    normal[pixel[ok]] = nrm
    steps = np.zeros(width * height)
    steps[pixel] = res.counts["steps"]
    step = max(1, width // 256)

    def small(a):
        return a.reshape(height, width, *a.shape[1:])[::step, ::step]

    def rounded(a, k):
        return np.round(a, k).tolist()

    return {
        "depth": rounded(np.nan_to_num(small(depth), nan=-1.0), 4),
        "normal": rounded(small(normal), 3),
        "steps": small(steps).astype(int).tolist(),
        "steps_mean": float(res.counts["steps"].mean()),
        "steps_max": int(res.counts["steps"].max()),
    }


#: The BVH comparison's ray sets: the first scene's camera rays that hit, its first bounce.
_BVH_SETS = {"camera": "camera (hits)", "diffuse1": "diffuse bounce 1"}

#: Rays per ray set of the BVH comparison (an even sample of the set when it is larger).
BVH_RAYS = 1 << 17

#: The builds of the BVH comparison, all over the same triangle pairs: (label, mode, arguments).
BVH_BUILDS = (
    ("BVH8, leaves up to 4 pairs", "bvh8", {"width": 8, "leaf_pairs": 4}),
    ("BVH8, leaves up to 4 pairs, OBBs", "bvh8", {"width": 8, "leaf_pairs": 4, "obb": True}),
    ("BVH8, leaves of 1 pair", "bvh8", {"width": 8, "leaf_pairs": 1}),
    ("BVH4, leaves of 1 pair (paired legacy node)", "bvh4x2", {"width": 4}),
    ("BVH4, leaves of 1 pair (paired legacy node)", "bvh4", {"width": 4}),
)


def _even_sample(n, count):
    return np.unique(np.linspace(0, n - 1, min(n, count)).astype(np.int64))


def _bvh_comparison(scene, ray_sets):
    """BVH8 (4 pairs, with and without OBBs), BVH8 (1 pair), BVH4 (1 paired node, one node a
    step and two) over the same triangle pairs of the first scene: tree statistics and
    traversal work on the same rays (``ray_sets``: ``{name: (origins, dirs)}``) in the
    wave-batched loop, with the closest hits compared against the first build's."""
    from gpurtl.golden.bvh import builder as B
    from gpurtl.golden.bvh import wavefront as WF
    from gpurtl.golden.bvh import wide as W

    name, _kind, mesh, _up = scene
    pairs = W.pair_triangles(mesh)
    builds, tables = {}, {}
    for label, _mode, kw in BVH_BUILDS:
        if label in builds:
            continue
        kw = dict(kw)
        obb = B.OBB_THRESHOLD if kw.pop("obb", False) else None
        t0 = time.process_time()
        builds[label] = W.build_wide(mesh, pairs=pairs, obb_threshold=obb, **kw)
        tables[label] = WF.Tables(builds[label])
        builds[label].cpu_s = time.process_time() - t0
    out = {"scene": name, "builds": {}, "work": [], "rays": {}}
    for label, bvh in builds.items():
        out["builds"][label] = {**W.tree_stats(bvh), "cpu_s": bvh.cpu_s}
    for set_name, (o_all, d_all) in ray_sets.items():
        pick = _even_sample(len(o_all), BVH_RAYS)
        ro, rd = o_all[pick], d_all[pick]
        out["rays"][set_name] = int(len(pick))
        ref = None
        for label, mode, _kw in BVH_BUILDS:
            t0 = time.process_time()
            res = WF.trace(tables[label], ro, rd, mode=mode)
            cpu = time.process_time() - t0
            if ref is None:
                ref = res
            c = res.counts
            out["work"].append(
                {
                    "rays": set_name,
                    "mode": mode,
                    "build": label,
                    "count": int(len(ro)),
                    **{k: float(c[k].mean()) for k in ("steps", "box_tests", "tri_tests")},
                    "fetches": float(c["fetches"].mean()),
                    "lds_bytes": float(4 * (c["pushes"] + c["pops"]).mean()),
                    "same_hit": float((res.prim == ref.prim).mean()),
                    "rays_per_cpu_s": len(ro) / cpu if cpu else 0.0,
                }
            )
    return out


def _rtl(quick):
    """Stack replay (always) and intersect replay (not with --quick) on the small bunny."""
    from gpurtl.golden.bvh import mesh as M
    from gpurtl.golden.traversal import loop as L
    from gpurtl.golden.traversal.rays import sphere_rays

    bunny = M.bunny()
    o, d = sphere_rays(bunny, 32, seed=3)
    scenes = [build_scene("bunny", bunny, mode) for mode in ("bvh8", "bvh4x2")]
    t0 = time.monotonic()
    passed, failed, ops = stack_replay(scenes, o, d, limit=48 if quick else 128)
    out = {"stack": [passed, failed, ops], "stack_s": time.monotonic() - t0}
    if not quick:
        records = []
        L.trace_wave(scenes[0], o[:8], d[:8], record=lambda i, r: records.append((i, r)))
        t0 = time.monotonic()
        p, f, kinds = rtl_replay({"bunny": records}, 24)
        out["intersect"] = [p, f, kinds]
        out["intersect_s"] = time.monotonic() - t0
    return out


# --- report -------------------------------------------------------------------------------------


def _level(r, name):
    """A level's hit rate, or ``none`` for a level the configuration does not have (RDNA 4 has
    no graphics L1)."""
    key = f"hit_{name}"
    return _pm(r[key]) if key in r else "none"


def _pm(v, k=1):
    return f"{v[0]:.{k}f} ± {v[1]:.{k}f}"


def _signed(v, k=1):
    return f"{v[0]:+.{k}f} ± {v[1]:.{k}f}"


def _outside(v):
    return abs(v[0]) > v[1]


def _reading(r):
    """Which of a sensitivity row's two effects stand out of their noise."""
    util, l0 = _outside(r["effect_article"]), _outside(r["effect_hit_L0"])
    if util and l0:
        return "both effects beyond their interval"
    if util:
        return "utilization effect beyond its interval; L0 effect inside the noise"
    if l0:
        return "L0 effect beyond its interval; utilization effect inside the noise"
    return "inside the noise"


def report(data, out_dir):
    """Summary page, CSV, JSON and pictures of :func:`measure`'s data."""
    if "scale" in data:
        from . import scale

        return scale.report(data, out_dir)
    if data.get("modes"):
        from . import modes

        return modes.report(data, out_dir)
    if data.get("rtl_loop"):
        from . import rtl

        return rtl.report(data, out_dir)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir.mkdir(parents=True, exist_ok=True)
    files = []
    (out_dir / "traversal.json").write_text(json.dumps(data))
    files.append(str(out_dir / "traversal.json"))
    names = data.get("scene_names") or [sc["name"] for sc in data["scenes"]]
    kind = "quick run" if data.get("quick") else "run"
    lines = [
        f"# Traversal ({kind} on {', '.join(names)}), timed on a CU model of golden blocks",
        "",
    ]
    if data.get("quick"):
        first = data["scenes"][0]
        lines += [
            f"A quick run: {first['image'][0]}x{first['image'][1]} camera rays per scene on "
            f"{', '.join(names)}, few timed waves per ray set; the figures show that the run "
            "works, they are not the default run's (`gpurtl experiment traversal` without "
            "`--quick`).",
            "",
        ]
    for note in data["notes"]:
        lines.append(f"Note: {note}.")
    lines += [
        "## The article's arithmetic",
        "",
        "Utilization = box tests / (CUs x 2.5 GHz x box rate) + triangle tests / (CUs x 2.5 GHz x "
        'triangle rate) (Chips and Cheese, "RDNA 4\'s Raytracing Improvements", 2025).',
        "",
        "| GPU | quoted | triangle rate 1 | triangle rate 2 |",
        "|---|---|---|---|",
    ]
    for r in data["article"]:
        lines.append(f"| {r['gpu']} | {r['quoted']}% | {r['tri_1']:.2f}% | {r['tri_2']:.2f}% |")
    lines += [
        "",
        "The article's formula on the article's counters gives the quoted figures only with a "
        "triangle rate of 1 per CU-cycle. The arithmetic does not say why: a counter of triangle "
        "nodes (an RDNA 4 pair, an RDNA 2 triangle) each taking the accelerator a cycle, and the "
        "article's taking one triangle per clock as the peak, explain it equally well. The "
        "model reports three figures: the article's formula on the model's counts (box tests / 8 + "
        "pair nodes), engine-cycle utilization (box tests / 8 + triangles / 2: the fraction of the "
        "peak test rate used) and issue-slot occupancy (nodes taken per cycle).",
        "",
    ]
    rows = []
    csv_rows = []
    for sc in data["scenes"]:
        t = sc["tree"]
        lines += [
            f"## {sc['name']}",
            "",
            f"{sc['triangles']} triangles"
            + (
                f", {sc['instances']} instances of {sc['blases']} BLASes"
                if sc["kind"] == "tlas"
                else ""
            )
            + f"; BVH8 built in {sc['build_cpu_s']:.1f} s CPU: {t['box_nodes']} box nodes, "
            f"{t['mean_children']:.2f} children per node, SAH cost {t['sah_cost']:.2f}"
            + (
                f", {t['leaves']} leaves of {t['mean_leaf_tris']:.2f} triangles on average"
                if "mean_leaf_tris" in t
                else ""
            )
            + f". Camera {sc['image'][0]}x{sc['image'][1]}.",
            "",
            "| rays | count | hit | steps | box tests | tri tests | instances | LDS bytes | "
            "overflow rays | rays / CPU s |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        for set_name, f in sc["func"].items():
            lines.append(
                f"| {set_name} | {f['rays']} | {100 * f['hit_fraction']:.1f}% | {f['steps']:.1f} | "
                f"{f['box_tests']:.1f} | {f['tri_tests']:.2f} | {f['instances']:.2f} | "
                f"{f['lds_bytes']:.0f} | {100 * f['overflow_rays']:.2f}% | {f['rays_per_cpu_s']:.0f} |"
            )
            csv_rows.append({"scene": sc["name"], "rays": set_name, **f})
        total = sum(f["rays"] for f in sc["func"].values())
        lines += [
            "",
            f"{total} rays in all.",
            "",
            "Default configuration (RDNA 4, dynamic VGPRs), mean ± 95% interval over disjoint groups of "
            "sampled waves:",
            "",
            "| rays | waves | article formula % | engine-cycle % | issue-slot % | L0 hit % | L1 | L2 | "
            "MALL | SIMD lane eff. % | s_alloc_vgpr retries |",
            "|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for set_name, r in sc["timing"].items():
            lines.append(
                f"| {set_name} | {r['waves']}{_no_steady(r)} | {_pm(r['article'])} | {_pm(r['engine'])} | "
                f"{_pm(r['issue'])} | {_pm(r['hit_L0'])} | {_level(r, 'L1')} | {_pm(r['hit_L2'])} | "
                f"{_pm(r['hit_MALL'])} | {_pm(r['lane_eff'])} | {r['alloc_waits'][0]:.0f} |"
            )
            rows.append(
                (
                    f"{sc['name']} {set_name}: article / engine / issue %, L0 hit %"
                    + _no_steady(r),
                    (
                        f"{r['article'][0]:.1f} / {r['engine'][0]:.1f} / {r['issue'][0]:.1f}, {r['hit_L0'][0]:.1f}"
                    ),
                )
            )
        if not sc["by_waves"]:
            lines += [
                "",
                "No table against resident waves: the diffuse bounce rays were not timed.",
            ]
        else:
            lines += [
                "",
                "Utilization against resident waves (diffuse bounce 1; sensitivity; mean ± 95% "
                "interval over the same groups of waves):",
                "",
                "| waves per CU | article formula % | engine % | issue % | L0 hit % |",
                "|---|---|---|---|---|",
            ]
        for k, r in sc["by_waves"].items():
            lines.append(
                f"| {k}{_no_steady(r)} | {_pm(r['article'])} | {_pm(r['engine'])} | "
                f"{_pm(r['issue'])} | {_pm(r['hit_L0'])} |"
            )
        if sc["sensitivity"]:
            d = sc["timing"]["diffuse1"]
            lines += [
                "",
                "Sensitivity (diffuse bounce 1; each row changes one assumption of the default; "
                "sensitivity, not agreement). Every row runs the default's groups of waves, so its "
                "effect is the mean of the per-group differences from the default, with that "
                "mean's 95% interval (paired); an effect smaller than its interval is inside the "
                "noise.",
                "",
                "| change | article formula % | effect (points) | engine % | issue % | L0 hit % | "
                "L0 effect (points) | reading |",
                "|---|---|---|---|---|---|---|---|",
                f"| default | {_pm(d['article'])} | | {_pm(d['engine'])} | {_pm(d['issue'])} | "
                f"{_pm(d['hit_L0'])} | | |",
            ]
            for label, r in sc["sensitivity"].items():
                lines.append(
                    f"| {label} | {_pm(r['article'])} | {_signed(r['effect_article'])} | "
                    f"{_pm(r['engine'])} | {_pm(r['issue'])} | {_pm(r['hit_L0'])} | "
                    f"{_signed(r['effect_hit_L0'])} | {_reading(r)} |"
                )
        lines.append("")
        files += _scene_plots(plt, out_dir, sc)
    b = data["bvh"]
    lines += [
        f"## BVH8 / BVH4 / BVH4x2 at equal leaf content ({b['scene']})",
        "",
        "All built over the same triangle pairs with the SAH-optimal collapse; costs in "
        "accelerator steps (box node 1, BVH8 pair 1, legacy triangle 1; SAH over the axis-aligned "
        "boxes). Every ray set runs through the wave-batched loop in each mode "
        f"({', '.join(f'{k}: {v} rays' for k, v in b['rays'].items())}).",
        "",
        "| build | box nodes | children per node | full nodes | OBB nodes | leaves | "
        "triangles per leaf (max) | primitive nodes | SAH cost | bytes | build CPU s |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for label, t in b["builds"].items():
        lines.append(
            f"| {label} | {t['box_nodes']} | {t['mean_children']:.2f} | {100 * t['full_nodes']:.0f}% | "
            f"{t['obb_nodes']} | {t['leaves']} | {t['mean_leaf_tris']:.2f} ({t['max_leaf_tris']}) | "
            f"{t['primitive_nodes']} | {t['sah_cost']:.2f} | {t['bytes']} | {t['cpu_s']:.1f} |"
        )
    lines += [
        "",
        "| rays | mode | build | steps | box tests | tri tests | node fetches | LDS bytes | "
        "closest hit as row 1 | rays / CPU s |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for w in b["work"]:
        lines.append(
            f"| {w['rays']} | {w['mode']} | {w['build']} | {w['steps']:.2f} | {w['box_tests']:.1f} | "
            f"{w['tri_tests']:.2f} | {w['fetches']:.2f} | {w['lds_bytes']:.0f} | "
            f"{100 * w['same_hit']:.2f}% | {w['rays_per_cpu_s']:.0f} |"
        )
    lines += ["", _bvh_reading(b), ""]
    rtl = data["rtl"]
    p, f, ops = rtl["stack"]
    lines.append(f"RTL ds_bvh_stack replay (pysim): {p} passed, {f} failed ({ops}).")
    if "intersect" in rtl:
        p2, f2, kinds = rtl["intersect"]
        lines.append(
            f"RTL ray_accel replay (pysim) of loop instructions: {p2} passed, {f2} failed ({kinds})."
        )
    lines += [
        "",
        f"Run: {data['wall_s']:.0f} s wall, {data['cpu_s']:.0f} s CPU of this process.",
        "",
        "## Calibration",
        "",
        "| figure | value | source |",
        "|---|---|---|",
    ] + [f"| {a} | {v} | {s} |" for a, v, s in data["calibration"]]
    summary = out_dir / "summary.md"
    summary.write_text("\n".join(lines) + "\n")
    files.append(str(summary))
    csv_path = out_dir / "traversal_rays.csv"
    with open(csv_path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(csv_rows[0]))
        writer.writeheader()
        writer.writerows(csv_rows)
    files.append(str(csv_path))
    rows += [
        (
            "the article's formula on the article's counters, triangle rate 1 (quoted 24.0%, "
            "10.23%)",
            ", ".join(f"{r['tri_1']:.2f}%" for r in data["article"]),
        ),
        ("rays traced", sum(f["rays"] for sc in data["scenes"] for f in sc["func"].values())),
        ("run time (s wall / CPU)", f"{data['wall_s']:.0f} / {data['cpu_s']:.0f}"),
    ]
    return {
        "title": f"Traversal ({kind} on {', '.join(names)}): utilization, hit rates, BVH widths",
        "rows": rows,
        "files": files,
    }


def _bvh_reading(b):
    work = {(w["rays"], w["mode"], w["build"]): w for w in b["work"]}
    legacy = "BVH4, leaves of 1 pair (paired legacy node)"
    parts = []
    for rays in b["rays"]:
        b8 = work[(rays, "bvh8", "BVH8, leaves of 1 pair")]
        b8w = work[(rays, "bvh8", "BVH8, leaves up to 4 pairs")]
        b8o = work[(rays, "bvh8", "BVH8, leaves up to 4 pairs, OBBs")]
        b4 = work[(rays, "bvh4", legacy)]
        b42 = work[(rays, "bvh4x2", legacy)]
        parts.append(
            f"{rays}: width (BVH4 -> BVH8 at one pair per leaf) changes steps {b4['steps']:.1f} -> "
            f"{b8['steps']:.1f} and box tests {b4['box_tests']:.1f} -> {b8['box_tests']:.1f}; "
            f"leaves (1 -> up to 4 pairs, BVH8) change steps {b8['steps']:.2f} -> "
            f"{b8w['steps']:.2f}; OBBs change steps {b8w['steps']:.2f} -> {b8o['steps']:.2f} and "
            f"box tests {b8w['box_tests']:.1f} -> {b8o['box_tests']:.1f}; BVH4x2 takes "
            f"{b42['steps']:.1f} steps and {b42['fetches']:.1f} node fetches (BVH8: "
            f"{b8['fetches']:.1f}) and {b42['lds_bytes']:.0f} LDS bytes (BVH8: {b8['lds_bytes']:.0f})"
        )
    return "Reading: " + "; ".join(parts) + "."


def _scene_plots(plt, out_dir, sc):
    files = []
    slug = "".join(ch if ch.isalnum() else "_" for ch in sc["name"].lower()).strip("_")
    img = sc["images"]
    if img is not None:
        files.append(str(_image_plot(plt, out_dir, slug, sc, img)))
    if sc["by_waves"]:
        files.append(str(_waves_plot(plt, out_dir, slug, sc)))
    return files


def _image_plot(plt, out_dir, slug, sc, img):
    """Depth, normal and per-pixel steps of the camera rays (not drawn for a ray file)."""
    depth = np.array(img["depth"], np.float64)
    depth = np.where(depth < 0, np.nan, depth)
    normal = np.array(img["normal"], np.float64)
    steps = np.array(img["steps"], np.float64)
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.6))
    axes[0].imshow(depth, cmap="viridis_r")
    axes[0].set_title("depth (camera rays)")
    axes[1].imshow(np.clip(0.5 + 0.5 * normal, 0, 1))
    axes[1].set_title("geometric normal")
    im = axes[2].imshow(steps, cmap="inferno")
    axes[2].set_title(
        f"traversal steps per pixel (mean {img['steps_mean']:.1f}, max {img['steps_max']})"
    )
    fig.colorbar(im, ax=axes[2], fraction=0.035)
    for ax in axes:
        ax.set_xticks([])
        ax.set_yticks([])
    fig.suptitle(f"{sc['name']}: {sc['image'][0]}x{sc['image'][1]} camera rays")
    fig.tight_layout()
    path = out_dir / f"traversal_{slug}_images.png"
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def _waves_plot(plt, out_dir, slug, sc):
    """Utilization against resident waves, with the article's points."""
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    xs = [int(k) for k in sc["by_waves"]]
    for key, label, style in (
        ("article", "article's formula", "-o"),
        ("engine", "engine-cycle utilization", "--s"),
        ("issue", "issue-slot occupancy", ":^"),
    ):
        rows = list(sc["by_waves"].values())
        ax.errorbar(
            xs,
            [r[key][0] for r in rows],
            yerr=[r[key][1] for r in rows],
            fmt=style,
            capsize=3,
            label=f"{label} (95% interval)",
        )
    unsteady = [k for k, r in sc["by_waves"].items() if not r.get("steady", True)]
    if unsteady:
        ax.text(
            0.02,
            0.02,
            f"no steady state at {', '.join(unsteady)} waves per CU (no more waves a run than "
            "slots: the whole run, start-up and drain included)",
            transform=ax.transAxes,
            fontsize=7,
        )
    ax.axhline(24.0, color="red", ls="--", lw=1)
    ax.text(xs[0], 24.6, "article: RX 9070, 24% (3DMark DXR test)", color="red", fontsize=8)
    ax.axhline(10.23, color="grey", ls="--", lw=1)
    ax.text(xs[0], 10.8, "article: RX 6900 XT, 10.23%", color="grey", fontsize=8)
    ax.set_xscale("log", base=2)
    ax.set_xticks(xs)
    ax.set_xticklabels([str(x) for x in xs])
    ax.set_xlabel("resident waves per CU (slots, dynamic VGPRs)")
    ax.set_ylabel("ray accelerator, % of peak")
    ax.set_title(f"{sc['name']}, diffuse bounce rays: utilization against resident waves")
    ax.legend(fontsize=8)
    fig.tight_layout()
    path = out_dir / f"traversal_{slug}_waves.png"
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
