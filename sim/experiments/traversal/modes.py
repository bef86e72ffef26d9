"""BVH8 against BVH4x2 on the RT unit RTL: ``gpurtl experiment traversal --rtl --rtl-modes``.

The same rays of the packaged small bunny go through the loop on the RTL (:func:`.rtl.run_loop`:
every intersect instruction through the ``rt_unit`` RTL, every stack instruction through
``ds_bvh_stack``, each output checked against the golden models) twice, on the same RT unit
build with the node fetch's dual path (``dual=True``):

* ``bvh8``: RT IP 3.1 BVH8 nodes, ``image_bvh8_intersect_ray`` (one 128-byte node line a lane);
* ``bvh4x2``: legacy FP32 BVH4 nodes of the same mesh, ``image_bvh_dual_intersect_ray`` on the
  two nodes ``ds_bvh_stack_push8_pop2`` returned (two node lines a lane through the L0, the
  second not fetched when it is the empty node or in the first one's line).

Each run's closest hits and instruction counts are checked against the golden traversal of its
mode. The figures: cycles, RT unit wave instructions and lane instructions, L0 lookups (the RT
unit's ``event`` output: hits, pending hits, misses) and utilization in the experiment's three
readings. A dual instruction on two box nodes is 8 box tests, as a BVH8 node is; a legacy
triangle node is one triangle, so the article formula counts two legacy triangle tests as one
pair (``tri_tests / 2``) in ``bvh4x2``.
"""

import time

from gpurtl.golden.traversal.loop import trace_wave

from . import rtl

__all__ = ["MODES", "measure", "report"]

#: The two modes compared.
MODES = ("bvh8", "bvh4x2")


def _side(result, check, mode):
    """One mode's figures of a :func:`.rtl.run_loop` result."""
    traces = result["traces"]
    box = sum(int(t.counts["box_tests"].sum()) for t in traces)
    tri = sum(int(t.counts["tri_tests"].sum()) for t in traces)
    lanes = sum(int(t.counts["steps"].sum()) for t in traces)
    if mode == "bvh8":
        pairs = sum(1 for w in result["cu_waves"] for it in w.iterations for s in it if s[2] == 1)
    else:
        pairs = tri / 2
    cycles = result["cycles"]
    lookups = result["lookups"]
    total = sum(lookups.values())
    waves_instr = sum(1 for _, kind, _, _ in result["records"] if kind == "bvh")
    return {
        "cycles": cycles,
        "wave_instructions": waves_instr,
        "lane_instructions": lanes,
        "stack_instructions": check["stack_ops"][0],
        "box_tests": box,
        "tri_tests": tri,
        "lookups": lookups,
        "lookups_per_lane_instruction": total / lanes if lanes else 0.0,
        "hit_rate": 100 * lookups["hit"] / total if total else 0.0,
        "refused": result["run"].refused,
        "busy": result["busy"],
        "hits": check["hits"],
        "utilization": rtl.utilization(box, pairs, tri, lanes, cycles),
        "sessions": result["sessions"],
        "wall_s": result["wall_s"],
    }


def measure(rays, backend, changes, progress=None):
    """Both modes on ``rays`` rays of the small bunny on the ``backend`` RTL of the loop's
    RT unit build with ``changes`` and ``dual=True``."""
    from gpurtl.golden.bvh import mesh as M
    from gpurtl.golden.traversal.rays import sphere_rays
    from gpurtl.golden.traversal.scene import build_scene

    changes = dict(changes, dual=True)
    rt = rtl.rt_unit_params(changes)
    bunny = M.bunny()
    origins, directions = sphere_rays(bunny, rays, seed=3)
    out = {"rtl_loop": True, "modes": {}, "backend": backend, "rays": rays, "rt_unit": rt}
    out["changes"] = changes
    started, cpu = time.monotonic(), time.process_time()
    for k, mode in enumerate(MODES):
        scene = build_scene("bunny", bunny, mode)
        if progress:
            progress(k, len(MODES), f"{mode}: {rays} rays on the {backend} RTL")
        tell = (lambda line: progress(k, len(MODES), line)) if progress else None
        result = rtl.run_loop(scene, origins, directions, backend=backend, rt=rt, progress=tell)
        golden = [
            trace_wave(scene, origins[i : i + 32], directions[i : i + 32])
            for i in range(0, rays, 32)
        ]
        check = rtl.check_against(result["traces"], golden)
        if check["differ"]:
            raise rtl.RtlLoopError(f"{mode} on the RTL differs from the golden traversal: {check}")
        out["modes"][mode] = _side(result, check, mode)
    out["wall_s"] = time.monotonic() - started
    out["cpu_s"] = time.process_time() - cpu
    if progress:
        progress(len(MODES), len(MODES), "compared")
    return out


def report(data, out_dir):
    """``summary.md`` of the comparison and the report rows."""
    import json

    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "traversal_modes.json").write_text(json.dumps(data))
    m = data["modes"]
    a, b = m["bvh8"], m["bvh4x2"]

    def ratio(key):
        return f"{b[key] / a[key]:.2f}" if a[key] else "-"

    rows_md = [
        ("cycles", "cycles"),
        ("RT unit wave instructions", "wave_instructions"),
        ("lane instructions (intersect)", "lane_instructions"),
        ("stack instructions (lanes)", "stack_instructions"),
        ("box tests", "box_tests"),
        ("triangle tests", "tri_tests"),
    ]
    lines = [
        "# BVH8 against BVH4x2 on the RT unit RTL",
        "",
        f"{data['rays']} rays of the packaged small bunny, the same RT unit build "
        f"({data['backend']}, `dual=true`), every output checked against the golden models, "
        "closest hits equal to the golden traversal of each mode.",
        "",
        "| | BVH8 | BVH4x2 | BVH4x2 / BVH8 |",
        "|---|---|---|---|",
    ]
    lines += [f"| {label} | {a[key]} | {b[key]} | {ratio(key)} |" for label, key in rows_md]
    for key in ("hit", "pending_hit", "miss"):
        lines.append(
            f"| L0 {key.replace('_', ' ')} | {a['lookups'][key]} | {b['lookups'][key]} | |"
        )
    lines += [
        f"| L0 lookups a lane instruction | {a['lookups_per_lane_instruction']:.2f} | "
        f"{b['lookups_per_lane_instruction']:.2f} | |",
        f"| L0 hit rate % | {a['hit_rate']:.1f} | {b['hit_rate']:.1f} | |",
    ]
    for key, label in (
        ("article", "article formula %"),
        ("engine", "engine-cycle %"),
        ("issue", "issue-slot %"),
    ):
        lines.append(
            f"| utilization, {label} | {a['utilization'][key]:.2f} | "
            f"{b['utilization'][key]:.2f} | |"
        )
    lines += [
        f"| cycles a lane was refused: bvhcnt / other | {a['refused']['full']} / "
        f"{a['refused']['other']} | {b['refused']['full']} / {b['refused']['other']} | |",
        f"| rays that hit | {a['hits']} | {b['hits']} | |",
        "",
        f"Run: {data['wall_s']:.0f} s wall (builds included), {data['cpu_s']:.0f} CPU-s of the "
        "Python process (a compiled simulator runs in a process of its own: measure the whole "
        "with `/usr/bin/time`).",
    ]
    summary = out_dir / "summary.md"
    summary.write_text("\n".join(lines) + "\n")
    rows = [
        ("RT unit build", f"{data['backend']}, dual=true"),
        ("cycles BVH8 / BVH4x2", f"{a['cycles']} / {b['cycles']}"),
        (
            "lane instructions BVH8 / BVH4x2",
            f"{a['lane_instructions']} / {b['lane_instructions']}",
        ),
        ("L0 hit rate % BVH8 / BVH4x2", f"{a['hit_rate']:.1f} / {b['hit_rate']:.1f}"),
        (
            "engine utilization % BVH8 / BVH4x2",
            f"{a['utilization']['engine']:.2f} / {b['utilization']['engine']:.2f}",
        ),
        ("golden-model mismatches", 0),
    ]
    return {
        "title": "BVH8 against BVH4x2 on the RT unit RTL",
        "rows": rows,
        "files": [str(summary), str(out_dir / "traversal_modes.json")],
    }
