"""Experiment ``traversal``: the driver's BVH traversal loop on a cycle-level compute-unit model.

Functional part (:mod:`._trav_loop`): every ray runs the loop of gpurt ``TraceRay3_1.hlsl`` --
intersect, ``s_wait_bvhcnt``, ``ds_bvh_stack_*``, ``s_wait_dscnt``, leaf handling, instance
transitions, the stackless walk-back after a stack overflow -- in three modes: ``bvh8`` (RDNA 4:
BVH8 + ``push8_pop1``), ``bvh4x2`` (dual intersect on a BVH4 + ``push8_pop2``) and ``bvh4``
(RDNA 2/3 style: one BVH4 node per instruction + ``push4_pop1``). Every intersect goes through the
golden ray-accelerator model (batched per wave) and every stack instruction through the golden
``ds_bvh_stack`` model; the closest hits are checked against the project's float64 reference
traversal.

Timing part (:mod:`._cu_model`): the traces run on one CU (two SIMDs, one ray accelerator, the
LDS, an L0 cache) with the accelerator's latency and initiation interval taken from the
``RayAccel`` RTL component, resident waves from the register allocators' occupancy formulas
(static vs RDNA 4 dynamic VGPRs) and the node-fetch latency swept.

RTL in the loop: a sample of the intersect instructions the loop issued is replayed through the
``ray_accel`` RTL (Amaranth simulator) and compared with the results the loop used (not with
``--quick``: the full build takes minutes); one wave's stack instructions per mode are replayed in
program order through the ``ds_bvh_stack`` RTL (the LDS contents carry over between them).

The article compared: Chips and Cheese on RDNA 4's ray tracing (April 2025): BVH8 takes
fewer steps than BVH4 but does more intersection tests; BVH4x2 needs more memory accesses and
LDS traffic and two live paths; 3DMark's DXR feature test used about 24% of the ray
accelerators' peak.
"""

import csv
import time

import numpy as np

NAME = "traversal"
DESCRIPTION = (
    "BVH traversal loop (BVH8 / BVH4x2 / BVH4) on a cycle-level CU model: steps, "
    "tests, LDS traffic, overflows, ray-accelerator utilization"
)

__all__ = [
    "DESCRIPTION",
    "NAME",
    "STACK_SIZES",
    "VGPR_STATIC",
    "VGPR_TRAVERSAL",
    "build_scene",
    "camera_rays",
    "diffuse_rays",
    "run",
]

#: 8/16/31 (31 is the largest OFFSET0[4:0] stack size) and two smaller ones, where the small
#: scenes of this experiment start to overflow
STACK_SIZES = (2, 4, 8, 16, 31)
#: VGPRs of a ray-tracing shader that keeps traversal and hit shading in one kernel (static
#: allocation reserves the peak for the whole wave) and of its traversal loop alone (what a
#: dynamic-VGPR wave holds while it traverses). Assumptions of this experiment, not measurements.
VGPR_STATIC, VGPR_TRAVERSAL = 192, 64
SIMDS = 2


def camera_rays(mesh, width, height, *, seed=0):
    """Pinhole-camera rays at the mesh, in 8x4 pixel tiles (one tile per wave, as a GPU
    dispatches a 2-D ray-generation grid); ``(origins, dirs)`` float arrays (n, 3)."""
    lo, hi = mesh.vertices.min(axis=0), mesh.vertices.max(axis=0)
    center = (lo + hi) / 2
    extent = float(np.linalg.norm(hi - lo))
    rng = np.random.default_rng(seed)
    view = np.array([0.3, 0.2, 1.0]) + rng.normal(0, 0.05, 3)
    view /= np.linalg.norm(view)
    eye = center + view * 1.6 * extent
    forward = -view
    right = np.cross(forward, [0.0, 1.0, 0.0])
    right /= np.linalg.norm(right)
    up = np.cross(right, forward)
    half = 0.35
    pixels = []
    for ty in range(0, height, 4):
        for tx in range(0, width, 8):
            for y in range(ty, min(ty + 4, height)):
                for x in range(tx, min(tx + 8, width)):
                    pixels.append(((x + 0.5) / width * 2 - 1, (y + 0.5) / height * 2 - 1))
    p = np.array(pixels)
    dirs = forward + half * (p[:, :1] * right + p[:, 1:] * up)
    return np.repeat(eye[None, :], len(p), axis=0), dirs


def diffuse_rays(mesh, origins, dirs, t, prim, *, seed=0):
    """Cosine-weighted bounce rays from the primary hits (an incoherent set): origin at the hit
    moved off the surface, direction around the normal facing the incoming ray."""
    rng = np.random.default_rng(seed)
    ok = np.isfinite(t) & (prim >= 0)
    o, d, t, prim = origins[ok], dirs[ok], t[ok], prim[ok]
    tri = mesh.triangles.astype(np.float64)[prim]
    n = np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0])
    n /= np.linalg.norm(n, axis=1, keepdims=True)
    n *= -np.sign(np.einsum("ij,ij->i", n, d))[:, None]
    hit = o + d * t[:, None]
    scale = float(np.linalg.norm(mesh.vertices.max(axis=0) - mesh.vertices.min(axis=0)))
    u = rng.normal(size=(len(n), 3))
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    bounce = n + u  # cosine-weighted about n
    return hit + n * 1e-4 * scale, bounce


def build_scene(name, geometry, mode):
    """:class:`._trav_loop.Scene` of a mesh or an instance list ``[(mesh, 3x4)]`` for a mode."""
    from gpurtl.golden.bvh import builder as B

    from ._trav_loop import Scene

    width = 8 if mode == "bvh8" else 4
    if isinstance(geometry, list):
        blas = {}
        inst = []
        for mesh, m in geometry:
            if id(mesh) not in blas:
                blas[id(mesh)] = B.build_bvh(mesh, width=8, obb_threshold=None)
            inst.append((blas[id(mesh)], m))
        return Scene(name, B.build_tlas(inst, obb_threshold=None), mode)
    return Scene(name, B.build_bvh(geometry, width=width, obb_threshold=None), mode)


def _world(geometry):
    from gpurtl.golden.bvh import mesh as M

    if isinstance(geometry, list):
        return M.merge([mesh.transformed(m) for mesh, m in geometry])
    return geometry


def _scenes(quick):
    from gpurtl.golden.bvh import mesh as M

    bunny = M.bunny()
    if quick:
        return [("bunny", bunny)]
    knot = M.knot_mesh(segments=160, sides=8)
    inst = []
    for k in range(6):
        rot = M.rotation_matrix((np.cos(k), np.sin(k), 0.5), 0.5 * k)
        inst.append(
            (
                bunny if k % 2 == 0 else knot,
                np.hstack([rot, np.array([[0.25 * (k % 3)], [0.25 * (k // 3)], [0.0]])]),
            )
        )
    return [("bunny", bunny), ("torus knot", knot), ("instanced", inst)]


def _trace_all(scene, origins, dirs, stack_size, record=None):
    from ._trav_loop import trace_wave

    return [
        trace_wave(
            scene, origins[w : w + 32], dirs[w : w + 32], stack_size=stack_size, record=record
        )
        for w in range(0, len(origins), 32)
    ]


def _per_ray(traces, ref=None):
    """Per-ray means of the counters; ``same_hits``: fraction of rays whose closest hit equals
    the reference traversal ``ref`` (when given)."""
    from ._trav_loop import COUNTERS

    rays = sum(len(tr.t) for tr in traces)
    out = {name: sum(int(tr.counts[name].sum()) for tr in traces) / rays for name in COUNTERS}
    out["lds_bytes"] = 4 * (out["pushes"] + out["pops"])
    out["overflow_rays"] = sum(int((tr.counts["overflows"] > 0).sum()) for tr in traces) / rays
    out["rays"] = rays
    slots = sum(tr.dual_slots for tr in traces)
    out["two_live"] = sum(tr.dual_live for tr in traces) / slots if slots else float("nan")
    if ref is not None:
        prim = np.concatenate([tr.prim for tr in traces])
        inst = np.concatenate([tr.inst for tr in traces])
        out["same_hits"] = float(((prim == ref.prim) & (inst == ref.inst)).mean())
    return out


def _rtl_timing():
    """Latency and initiation interval of the full ``RayAccel`` build and latency of the
    ``BvhStack`` (one lane per cycle), read from the RTL components."""
    from gpurtl.hdl.ray_accel.ds_bvh_stack import BvhStack
    from gpurtl.hdl.ray_accel.ray_accel import RayAccel
    from gpurtl.sim.core.registry import component_facts

    latency, interval = component_facts(RayAccel, lambda ra: (ra.latency, ra.initiation_interval))
    return latency, interval, component_facts(BvhStack, lambda stack: stack.latency)


def _occupancy():
    from gpurtl.golden.vgpr_alloc.occupancy import rdna_dynamic_waves, rdna_static_waves

    return (
        SIMDS * rdna_static_waves(VGPR_STATIC),
        SIMDS * rdna_dynamic_waves(VGPR_TRAVERSAL, block_size=16),
    )


def _rtl_replay(buckets, limit):
    """Replay about ``limit`` intersect instructions, evenly spaced within each bucket (one per
    scene and mode), through the ``ray_accel`` RTL; ``(passed, failed, {kind: count})``."""
    per = max(1, limit // max(1, len(buckets)))
    records = [
        recs[k * len(recs) // per] for recs in buckets.values() for k in range(min(per, len(recs)))
    ]
    return _replay_instructions(records)


def _replay_instructions(records):
    from gpurtl.sim.backends import BACKENDS
    from gpurtl.sim.core import registry

    if not records:
        return None
    picks = records
    block = registry.get("ray_accel")
    params = block.resolve({})
    report = BACKENDS["pysim"].run(
        block, params, [i for i, _ in picks], expected=[o for _, o in picks]
    )
    kinds = {}
    for instr, _ in picks:
        if instr["dual"]:
            key = "dual " + "+".join(
                "empty" if p == 0x5 else "box" if p & 7 == 5 else "tri" for p in instr["node_ptr"]
            )
        else:
            key = (
                "bvh8 box"
                if instr["node_ptr"][0] & 0xF == 5
                else ("instance" if instr["node_ptr"][0] & 7 == 6 else "triangle pair")
            )
        kinds[key] = kinds.get(key, 0) + 1
    return report.passed, report.failed, kinds


def stack_replay(scenes, origins, dirs, *, stack_size=16, limit=None):
    """Replay the stack instructions of one wave per scene (in program order, the LDS carrying
    over) through the ``ds_bvh_stack`` RTL (Amaranth simulator, one build for all), expecting
    the results the loop used. ``limit``: at most that many instructions per scene (a prefix,
    which keeps the LDS contents consistent). Returns ``(passed, failed, {opcode: count})``."""
    from gpurtl.facts.ray_accel import INVALID_NODE
    from gpurtl.golden.ray_accel.ds_bvh_stack import unpack_stack_addr
    from gpurtl.sim.backends import BACKENDS
    from gpurtl.sim.core import registry

    from ._trav_loop import trace_wave

    requests, expected = [], []

    def record(request, response):
        new, dst = response
        dst0, dst1 = dst if isinstance(dst, tuple) else (dst, INVALID_NODE)
        requests.append(
            dict(request, stack_addr=unpack_stack_addr(request["stack_addr"]), tri_size_opt=0)
        )
        expected.append(
            {"stack_addr": unpack_stack_addr(new), "dst0": dst0, "dst1": dst1, "error": 0}
        )

    for scene in scenes:
        start = len(requests)
        trace_wave(scene, origins[:32], dirs[:32], stack_size=stack_size, stack_record=record)
        if limit is not None:
            del requests[start + limit :], expected[start + limit :]
    ops = {}
    for request in requests:
        name = {224: "push4_pop1", 225: "push8_pop1", 226: "push8_pop2"}[request["op"]]
        ops[name] = ops.get(name, 0) + 1
    block = registry.get("ds_bvh_stack")
    params = block.resolve({"stack_size": stack_size, "waves": 1, "lanes": 32})
    report = BACKENDS["pysim"].run(block, params, requests, expected=expected)
    return report.passed, report.failed, ops


def run(out_dir, *, quick=False, progress=None):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from gpurtl.golden.bvh import traversal as T

    from . import _trav_stack
    from ._cu_model import CuParams, simulate
    from ._trav_loop import MODES

    out_dir.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    res_w, res_h = (16, 4) if quick else (24, 16)
    ra_latency, ra_ii, stack_latency = _rtl_timing()
    static_slots, dynamic_slots = _occupancy()
    base = CuParams(
        ra_latency=ra_latency, ra_ii=ra_ii, stack_latency=stack_latency, slots=dynamic_slots
    )
    scene_list = _scenes(quick)
    records = {}
    results, traces_of, ray_sets, scenes_built = {}, {}, {}, {}
    func_time = func_rays = 0.0
    agree = total = 0
    steps = len(scene_list) * len(MODES) * 2
    done = 0
    for scene_name, geometry in scene_list:
        world = _world(geometry)
        cam_o, cam_d = camera_rays(world, res_w, res_h, seed=len(scene_name))
        sets = None
        for mode in MODES:
            if isinstance(geometry, list) and mode != "bvh8":
                done += 2
                continue
            scene = build_scene(scene_name, geometry, mode)
            if sets is None:
                ref_bvh = scene.top if mode == "bvh8" else None
                ref = T.traverse(ref_bvh, cam_o, cam_d)
                dif_o, dif_d = diffuse_rays(
                    world, cam_o, cam_d, ref.t, _world_prim(geometry, ref), seed=1
                )
                sets = {
                    "camera": (cam_o, cam_d, ref),
                    "diffuse": (dif_o, dif_d, T.traverse(ref_bvh, dif_o, dif_d)),
                }
                ray_sets[scene_name] = sets
            scenes_built[(scene_name, mode)] = scene
            for set_name, (o, d, ref) in sets.items():
                t0 = time.monotonic()
                bucket = records.setdefault((scene_name, mode), [])

                def rec(i, out, bucket=bucket):
                    return bucket.append((i, out))

                traces = _trace_all(scene, o, d, 16, record=rec)
                func_time += time.monotonic() - t0
                func_rays += len(o)
                prim = np.concatenate([tr.prim for tr in traces])
                inst = np.concatenate([tr.inst for tr in traces])
                agree += int(((prim == ref.prim) & (inst == ref.inst)).sum())
                total += len(prim)
                per = _per_ray(traces, ref)
                timing = simulate(traces, base, waves=_waves(traces, base.slots))
                per.update(
                    rays_per_kcycle=timing.rays_per_kcycle,
                    util=100 * timing.utilization,
                    issue=100 * timing.issue_utilization,
                )
                results[(scene_name, mode, set_name)] = per
                traces_of[(scene_name, mode, set_name)] = traces
                done += 1
                if progress:
                    progress(done, steps, f"{scene_name} {mode} {set_name}")

    # --- stack sizes (first scene, both ray sets) --------------------------------------------
    stack_rows = {}
    first_name = scene_list[0][0]
    for mode in MODES:
        scene = scenes_built[(first_name, mode)]
        for set_name, (o, d, ref) in ray_sets[first_name].items():
            for size in STACK_SIZES:
                if size == 16:
                    stack_rows[(mode, set_name, size)] = results[(first_name, mode, set_name)]
                    continue
                t0 = time.monotonic()
                stack_rows[(mode, set_name, size)] = _per_ray(_trace_all(scene, o, d, size), ref)
                func_time += time.monotonic() - t0
                func_rays += len(o)
        if progress:
            progress(done, steps, f"stack sizes {mode}")

    # --- utilization against resident waves and node-fetch latency -----------------------------
    t0 = time.monotonic()
    sim_cycles = 0
    key = (first_name, "bvh8", "diffuse")
    slot_sweep = sorted({1, 2, 4, 8, 12, static_slots, 20, 24, dynamic_slots})
    util_waves = {}
    for mode in MODES:
        for slots in slot_sweep:
            tr = traces_of[(first_name, mode, "diffuse")]
            r = simulate(tr, base.replace(slots=slots), waves=_waves(tr, slots))
            sim_cycles += r.cycles
            util_waves[(mode, slots)] = r
    miss_sweep = (100, 200, 400, 800)
    util_lat = {}
    for name, slots in (("static", static_slots), ("dynamic", dynamic_slots)):
        for miss in miss_sweep:
            for l0_lines in (16, 256):
                r = simulate(
                    traces_of[key],
                    base.replace(slots=slots, l0_miss=miss, l0_lines=l0_lines),
                    waves=_waves(traces_of[key], slots),
                )
                sim_cycles += r.cycles
                util_lat[(name, miss, l0_lines)] = r
    alu_sweep = (12, 48, 96)
    util_alu = {}
    for name, slots in (("static", static_slots), ("dynamic", dynamic_slots)):
        for alu in alu_sweep:
            r = simulate(
                traces_of[key],
                base.replace(slots=slots, alu_cycles=alu),
                waves=_waves(traces_of[key], slots),
            )
            sim_cycles += r.cycles
            util_alu[(name, alu)] = r
    # the return queue matters when hits and misses mix: the 16-line L0 with 400-cycle misses
    in_order = simulate(
        traces_of[key],
        base.replace(slots=static_slots, queue="in_order", l0_lines=16, l0_miss=400),
        waves=_waves(traces_of[key], static_slots),
    )
    timing_time = time.monotonic() - t0

    # --- RTL replay -----------------------------------------------------------------------------
    if progress:
        progress(done, steps, "RTL replay")
    t0 = time.monotonic()
    rtl, rtl_note = (
        None,
        ("not run with --quick (the full ray_accel build takes minutes to elaborate and simulate)"),
    )
    if not quick:
        rtl = _rtl_replay(records, 300)
    o, d, _ = ray_sets[first_name]["diffuse"]
    stack_rtl = stack_replay(
        [scenes_built[(first_name, m)] for m in MODES], o, d, limit=64 if quick else None
    )
    rtl_time = time.monotonic() - t0

    # --- outputs --------------------------------------------------------------------------------
    files = []
    csv_path = out_dir / "traversal_counts.csv"
    fields = ["scene", "mode", "rays_set"] + list(next(iter(results.values())))
    with open(csv_path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        for (s, m, r), per in results.items():
            writer.writerow({"scene": s, "mode": m, "rays_set": r, **per})
    files.append(str(csv_path))

    lines = [
        "# Traversal loop on a cycle-level CU model",
        "",
        (
            f"Rays: camera {res_w}x{res_h} pixels per scene (8x4 tiles per wave) and one diffuse "
            "bounce from each primary hit. Stack size 16 unless stated. Per-ray means. "
            f"Ray accelerator from the RTL: latency {ra_latency} cycles, II {ra_ii}. "
            f"CU: {SIMDS} SIMDs, {base.slots} resident waves (dynamic VGPRs) unless stated, "
            f"L0 {base.l0_lines} x 128 B lines, hit {base.l0_hit} / miss {base.l0_miss} "
            f"cycles, stack unit from the RTL: one lane per cycle, latency {base.stack_latency}, "
            f"plus {base.lds_path_cycles} cycles of LDS path, {base.alu_cycles} ALU cycles per "
            "iteration. Utilization = (box tests / 8 + triangle tests / 2) per cycle."
        ),
        (
            "Timing runs cycle through the traced waves until at least 4 waves per slot have "
            "run (steady state of a full CU from a small ray sample)."
        ),
        f"Stack model: {_trav_stack.SOURCE}.",
        "",
        (
            "| scene | mode | rays | steps | box tests | tri tests | stack ops | LDS bytes | "
            "node fetches | two live paths | rays/1000 cyc | RA util % |"
        ),
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for (s, m, r), p in results.items():
        live = f"{100 * p['two_live']:.0f}%" if m == "bvh4x2" else "-"
        lines.append(
            f"| {s} | {m} | {r} | {p['steps']:.1f} | {p['box_tests']:.1f} | "
            f"{p['tri_tests']:.1f} | {p['stack_ops']:.1f} | {p['lds_bytes']:.0f} | "
            f"{p['fetches']:.1f} | {live} | {p['rays_per_kcycle']:.1f} | "
            f"{p['util']:.1f} |"
        )
    lines += [
        "",
        f"## Stack size ({first_name})",
        "",
        (
            "| mode | rays | stack size | rays that overflow | walk-back steps | steps | "
            "closest hit = reference |"
        ),
        "|---|---|---|---|---|---|---|",
    ]
    for (m, r, size), p in stack_rows.items():
        lines.append(
            f"| {m} | {r} | {size} | {100 * p['overflow_rays']:.1f}% | "
            f"{p['walkback_steps']:.2f} | {p['steps']:.1f} | "
            f"{100 * p['same_hits']:.1f}% |"
        )
    lines += [
        "",
        f"## Utilization against resident waves ({first_name}, diffuse rays)",
        "",
        (
            f"Static VGPRs ({VGPR_STATIC} per wave for the whole shader): {static_slots} waves "
            f"per CU; dynamic VGPRs ({VGPR_TRAVERSAL} while traversing, 16-VGPR blocks): "
            f"{dynamic_slots} waves per CU (register allocators' occupancy formulas)."
        ),
        "",
        "| waves per CU | " + " | ".join(f"{m} util % | {m} rays/1000 cyc" for m in MODES) + " |",
        "|---|" + "---|---|" * len(MODES),
    ]
    for slots in slot_sweep:
        tag = (
            " (static)"
            if slots == static_slots
            else (" (dynamic)" if slots == dynamic_slots else "")
        )
        lines.append(
            f"| {slots}{tag} | "
            + " | ".join(
                f"{100 * util_waves[(m, slots)].utilization:.1f} | "
                f"{util_waves[(m, slots)].rays_per_kcycle:.1f}"
                for m in MODES
            )
            + " |"
        )
    lines += [
        "",
        f"## Utilization against node-fetch latency (bvh8, {first_name}, diffuse)",
        "",
        "| waves | L0 miss (cycles) | L0 16 lines: util % | L0 256 lines: util % |",
        "|---|---|---|---|",
    ]
    for name, slots in (("static", static_slots), ("dynamic", dynamic_slots)):
        for miss in miss_sweep:
            lines.append(
                f"| {name} ({slots}) | {miss} | "
                f"{100 * util_lat[(name, miss, 16)].utilization:.1f} | "
                f"{100 * util_lat[(name, miss, 256)].utilization:.1f} |"
            )
    lines += [
        "",
        (
            "Shader work per iteration (ALU cycles on the wave's SIMD; a stand-in for the "
            "shading and bookkeeping a full ray-tracing shader adds):"
        ),
        "",
        "| waves | " + " | ".join(f"{a} ALU cycles: util %" for a in alu_sweep) + " |",
        "|---|" + "---|" * len(alu_sweep),
    ]
    for name, slots in (("static", static_slots), ("dynamic", dynamic_slots)):
        lines.append(
            f"| {name} ({slots}) | "
            + " | ".join(f"{100 * util_alu[(name, a)].utilization:.1f}" for a in alu_sweep)
            + " |"
        )
    lines.append(
        f"\nRDNA 3-style shared in-order return queue, static waves, 16-line L0, "
        f"400-cycle misses: {100 * in_order.utilization:.1f}% (RDNA 4 out-of-order: "
        f"{100 * util_lat[('static', 400, 16)].utilization:.1f}%)."
    )

    claims = _claims(results, util_waves, util_lat, util_alu, static_slots, dynamic_slots)
    lines += [
        "",
        "## The article's statements",
        "",
        "| statement | measured | verdict |",
        "|---|---|---|",
    ] + [f"| {a} | {b} | {c} |" for a, b, c in claims]
    rtl_line = rtl_note or "no instructions"
    if rtl:
        kinds = ", ".join(f"{k}: {v}" for k, v in rtl[2].items())
        rtl_line = f"{rtl[0]} passed, {rtl[1]} failed ({kinds})"
    total_time = time.monotonic() - started
    rows = [
        ("closest hits equal to the float64 reference traversal", f"{agree}/{total}"),
        ("RTL ray_accel replay (pysim) of loop instructions vs the loop's results", rtl_line),
        (
            (
                "RTL ds_bvh_stack replay (pysim) of one wave's stack instructions per mode, in "
                "order, vs the loop's results"
            ),
            "; ".join(
                [f"{stack_rtl[0]} passed, {stack_rtl[1]} failed"]
                + [f"{k}: {v}" for k, v in stack_rtl[2].items()]
            ),
        ),
        (
            "ran on RTL",
            (
                "ray_accel and ds_bvh_stack (replays above); timing: RayAccel "
                "latency/II from the RTL component; CU timing: the model"
            ),
        ),
        (
            "functional model speed (rays/s, golden intersect + stack)",
            f"{func_rays / func_time:.0f}" if func_time else "-",
        ),
        (
            "cycle model speed (simulated cycles/s)",
            f"{sim_cycles / timing_time:.0f}" if timing_time else "-",
        ),
        ("run time (s), of which RTL replay", f"{total_time:.1f}, {rtl_time:.1f}"),
    ]
    lines += ["", "| check | value |", "|---|---|"] + [f"| {a} | {b} |" for a, b in rows]
    summary = out_dir / "summary.md"
    summary.write_text("\n".join(lines) + "\n")
    files.append(str(summary))

    files += _plots(
        plt,
        out_dir,
        results,
        stack_rows,
        util_waves,
        util_lat,
        slot_sweep,
        miss_sweep,
        static_slots,
        dynamic_slots,
        first_name,
    )
    return {
        "title": "Traversal loop: steps, tests, LDS traffic and RA utilization",
        "rows": [(a, b) for a, b, _ in claims] + rows,
        "files": files,
        "results": {"|".join(k): v for k, v in results.items()},
        "agree": (agree, total),
        "rtl": rtl,
        "claims": claims,
    }


def _waves(traces, slots):
    """Waves to launch for a steady-state figure: every trace, and at least 4 per slot."""
    return max(len(traces), 4 * slots)


def _world_prim(geometry, counts):
    """Triangle index in the merged world mesh of a reference traversal's hits."""
    if not isinstance(geometry, list):
        return counts.prim
    offsets = np.cumsum([0] + [len(mesh) for mesh, _ in geometry])
    return np.where(counts.inst >= 0, counts.prim + offsets[np.maximum(counts.inst, 0)], -1)


def _claims(results, util_waves, util_lat, util_alu, static_slots, dynamic_slots):
    out = []
    keys = sorted({(s, r) for s, m, r in results if (s, "bvh4", r) in results})
    fewer = [results[(s, "bvh8", r)]["steps"] < results[(s, "bvh4", r)]["steps"] for s, r in keys]
    more = [
        results[(s, "bvh8", r)]["box_tests"] + results[(s, "bvh8", r)]["tri_tests"]
        > results[(s, "bvh4", r)]["box_tests"] + results[(s, "bvh4", r)]["tri_tests"]
        for s, r in keys
    ]
    detail = "; ".join(
        f"{s}/{r}: steps {results[(s, 'bvh8', r)]['steps']:.1f} vs "
        f"{results[(s, 'bvh4', r)]['steps']:.1f}, tests "
        f"{results[(s, 'bvh8', r)]['box_tests'] + results[(s, 'bvh8', r)]['tri_tests']:.0f} vs "
        f"{results[(s, 'bvh4', r)]['box_tests'] + results[(s, 'bvh4', r)]['tri_tests']:.0f}"
        for s, r in keys
    )
    out.append(
        (
            "BVH8 takes fewer traversal steps than BVH4",
            detail,
            "reproduced" if all(fewer) else f"not reproduced ({sum(fewer)}/{len(fewer)})",
        )
    )
    out.append(
        (
            "... while doing more intersection tests",
            "(box + triangle tests, same rows)",
            "reproduced" if all(more) else f"not reproduced ({sum(more)}/{len(more)})",
        )
    )
    fetch = [
        results[(s, "bvh4x2", r)]["fetches"] > results[(s, "bvh8", r)]["fetches"] for s, r in keys
    ]
    lds = [
        results[(s, "bvh4x2", r)]["lds_bytes"] > results[(s, "bvh8", r)]["lds_bytes"]
        for s, r in keys
    ]
    out.append(
        (
            "BVH4x2 costs more node fetches than BVH8 (same rays)",
            "; ".join(
                f"{s}/{r}: {results[(s, 'bvh4x2', r)]['fetches']:.1f} vs "
                f"{results[(s, 'bvh8', r)]['fetches']:.1f}"
                for s, r in keys
            ),
            "reproduced" if all(fetch) else f"not reproduced ({sum(fetch)}/{len(fetch)})",
        )
    )
    out.append(
        (
            "BVH4x2 costs more LDS stack traffic than BVH8",
            "; ".join(
                f"{s}/{r}: {results[(s, 'bvh4x2', r)]['lds_bytes']:.0f} B vs "
                f"{results[(s, 'bvh8', r)]['lds_bytes']:.0f} B"
                for s, r in keys
            ),
            "reproduced" if all(lds) else f"not reproduced ({sum(lds)}/{len(lds)})",
        )
    )
    out.append(
        (
            "BVH4x2 needs two live paths",
            "; ".join(
                f"{s}/{r}: {100 * results[(s, 'bvh4x2', r)]['two_live']:.0f}% of dual instructions"
                for s, r in keys
            ),
            "measured (the article gives no figure)",
        )
    )
    near = [(m, s) for (m, s), r in util_waves.items() if abs(100 * r.utilization - 24) <= 6]
    st = util_waves[("bvh8", static_slots)].utilization
    dy = util_waves[("bvh8", dynamic_slots)].utilization
    slow = util_lat[("static", 800, 16)].utilization
    busy = util_alu[("static", 96)].utilization
    out.append(
        (
            "3DMark DXR test: ~24% of the ray accelerators' peak",
            f"bvh8 static {100 * st:.1f}%, dynamic {100 * dy:.1f}%; static with 800-cycle "
            f"misses and a 16-line L0 {100 * slow:.1f}%; static with 96 ALU cycles per "
            f"iteration {100 * busy:.1f}%; within 24 +- 6% (waves sweep): "
            + (", ".join(f"{m} at {s} waves" for m, s in near) or "none"),
            "conditions shown (the article's workload includes shading, not modelled)",
        )
    )
    return out


def _plots(
    plt,
    out_dir,
    results,
    stack_rows,
    util_waves,
    util_lat,
    slot_sweep,
    miss_sweep,
    static_slots,
    dynamic_slots,
    first_name,
):
    from ._trav_loop import MODES

    files = []
    labels = [f"{s}\n{r}" for s, m, r in results if m == "bvh8"]
    keys = [(s, r) for s, m, r in results if m == "bvh8"]
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.5))
    for ax, metric, ylabel in (
        (axes[0], "steps", "traversal steps per ray"),
        (axes[1], "fetches", "node fetches per ray"),
        (axes[2], "lds_bytes", "LDS stack bytes per ray"),
    ):
        width = 0.8 / len(MODES)
        for k, mode in enumerate(MODES):
            vals = [results.get((s, mode, r), {}).get(metric, np.nan) for s, r in keys]
            ax.bar(np.arange(len(keys)) + k * width, vals, width, label=mode)
        ax.set_xticks(np.arange(len(keys)) + 0.4 - width / 2)
        ax.set_xticklabels(labels, fontsize=8)
        ax.set_ylabel(ylabel)
        ax.set_xlabel("scene / ray set")
        ax.legend(fontsize=8)
    fig.suptitle("Traversal work per ray by mode (stack size 16)")
    fig.tight_layout()
    path = out_dir / "traversal_work.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    files.append(str(path))

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for mode in MODES:
        for set_name, style in (("camera", "-o"), ("diffuse", "--s")):
            ys = [stack_rows[(mode, set_name, size)]["walkback_steps"] for size in STACK_SIZES]
            ax.plot(STACK_SIZES, ys, style, label=f"{mode} {set_name}")
    ax.set_xlabel("stack size (entries per lane)")
    ax.set_ylabel("walk-back steps per ray")
    ax.set_title(f"Stack overflow cost ({first_name})")
    ax.legend(fontsize=8)
    fig.tight_layout()
    path = out_dir / "traversal_stack.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    files.append(str(path))

    fig, axes = plt.subplots(1, 2, figsize=(13, 4.5))
    for mode in MODES:
        axes[0].plot(
            slot_sweep,
            [100 * util_waves[(mode, s)].utilization for s in slot_sweep],
            "-o",
            label=mode,
        )
    for slots, name in ((static_slots, "static VGPRs"), (dynamic_slots, "dynamic VGPRs")):
        axes[0].axvline(slots, color="grey", ls=":")
        axes[0].text(slots, 2, name, rotation=90, fontsize=8)
    axes[0].axhline(24, color="red", ls="--", label="article: 24%")
    axes[0].set_xlabel("resident waves per CU")
    axes[0].set_ylabel("ray-accelerator utilization (% of peak)")
    axes[0].set_title(f"Utilization vs resident waves ({first_name}, diffuse)")
    axes[0].legend(fontsize=8)
    for name, slots in (("static", static_slots), ("dynamic", dynamic_slots)):
        for lines_, style in ((16, "--s"), (256, "-o")):
            axes[1].plot(
                miss_sweep,
                [100 * util_lat[(name, m, lines_)].utilization for m in miss_sweep],
                style,
                label=f"{name} ({slots} waves), L0 {lines_} lines",
            )
    axes[1].axhline(24, color="red", ls="--", label="article: 24%")
    axes[1].set_xlabel("L0 miss latency (cycles)")
    axes[1].set_ylabel("ray-accelerator utilization (% of peak)")
    axes[1].set_title("Utilization vs node-fetch latency (bvh8)")
    axes[1].legend(fontsize=8)
    fig.tight_layout()
    path = out_dir / "traversal_utilization.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    files.append(str(path))
    return files
