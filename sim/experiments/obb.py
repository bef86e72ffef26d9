"""Experiment ``obb``: how much do RDNA 4's oriented bounding boxes save on thin rotated geometry?

For each scene (thin rods at many angles, hanging chains, the Elden Ring chandelier of Chips and
Cheese, "RDNA 4's Raytracing Improvements", a real scanned mesh -- the Stanford Bunny, read from the
packaged PLY file --, a smooth torus-knot mesh written to and loaded from an OBJ file, and an
instanced scene) the builder (:mod:`gpurtl.golden.bvh`) makes a BVH8 with and without OBBs (gpurt's
1.12 surface-area rule, and a strict 1.0 variant) and a legacy BVH4. Rays aimed at the geometry are
traced closest-hit; the counts per ray are box nodes visited, child-box tests, leaves and triangle
tests.

Accelerator in the loop: a sample of rays is traced with the bit-exact instruction model
(``model="exact"``: the golden ``image_bvh8_intersect_ray`` on the real node bytes, with the golden
OBB and instance transforms) and must give the same counts as the fast model used at scale. Every
OBB rotation and instance transform that all the rays of the OBB configuration ask for is replayed
through the RTL blocks ``obb_transform`` / ``instance_transform`` on the compiled fast backend
(:mod:`gpurtl.sim.backends.fast`) and compared bit for bit with the golden model; ``quick`` replays a
dozen of each on the Amaranth simulator instead (no C++ build).

Set ``GPURTL_OBB_MESH=/path/to/mesh.obj`` (or .ply) to use your own mesh instead of the bunny.
"""

import os
import time
from pathlib import Path

import numpy as np

from gpurtl.golden.traversal.rays import sphere_rays as make_rays

from ..tools.tables import Column, document, markdown, metrics, write_csv
from . import check_params

#: The seeds of the rod and chain scenes and of each scene's rays.
SEEDS = {"rods": 1, "chains": 2, "rays of a scene": "the length of its name"}

NAME = "obb"
DESCRIPTION = "OBB (rotated box) nodes vs axis-aligned BVH8/BVH4: box tests and nodes per ray"

__all__ = ["NAME", "DESCRIPTION", "measure", "report", "make_rays", "scenes"]


def scenes(quick, out_dir):
    """``[(name, mesh or instance list)]``."""
    from gpurtl.golden.bvh import mesh as M

    path = os.environ.get("GPURTL_OBB_MESH")
    if path:
        real = M.load_mesh(path)
        real_name = f"mesh:{os.path.basename(path)}"
    else:
        real, real_name = M.bunny(), "bunny (PLY)"
    if quick:
        return [
            ("rods", M.rods(12, seed=1)),
            ("chandelier", M.chandelier(arms=4, links=4)),
            (real_name, real),
        ]
    knot = M.knot_mesh(segments=240, sides=10)
    obj = out_dir / "knot.obj"
    M.save_obj(knot, obj)
    rods = M.rods(200, seed=1)
    chandelier = M.chandelier()
    out = [
        ("rods", rods),
        ("chains", M.chains(16, seed=2)),
        ("chandelier", chandelier),
        (real_name, real),
        ("knot (OBJ)", M.load_mesh(obj)),
    ]  # through the OBJ loader
    xf = []
    for k in range(6):
        rot = M.rotation_matrix((np.cos(k), np.sin(k), 0.5), 0.4 * k)
        xf.append(np.hstack([rot, np.array([[12.0 * (k % 3)], [12.0 * (k // 3)], [0.0]])]))
    out.append(
        ("instanced", [(chandelier, xf[k]) if k % 2 == 0 else (rods, xf[k]) for k in range(6)])
    )
    return out


def _configs():
    from gpurtl.golden.bvh.builder import OBB_THRESHOLD

    return [
        ("bvh8", 8, None),
        ("bvh8+obb", 8, OBB_THRESHOLD),
        ("bvh8+obb(1.0)", 8, 1.0),
        ("bvh4", 4, None),
    ]


def _build(scene, width, threshold):
    from gpurtl.golden.bvh import builder as B

    if isinstance(scene, list):
        blas = {}
        inst = []
        for mesh, m in scene:
            key = id(mesh)
            if key not in blas:
                blas[key] = B.build_bvh(mesh, width=8, obb_threshold=threshold)
            inst.append((blas[key], m))
        return B.build_tlas(inst, obb_threshold=threshold)
    return B.build_bvh(scene, width=width, obb_threshold=threshold)


def _world_mesh(scene):
    from gpurtl.golden.bvh import mesh as M

    if isinstance(scene, list):
        return M.merge([mesh.transformed(m) for mesh, m in scene])
    return scene


def _rtl_replay(records, fma_stages=1, limit=None, backend="pysim"):
    """Replay recorded OBB rotations / instance transforms through the RTL blocks on
    ``backend``; at most ``limit`` transactions per block (evenly spaced). Returns
    ``{block: (passed, failed, recorded)}``."""
    from gpurtl.sim.backends import BACKENDS
    from gpurtl.sim.core import registry
    from gpurtl.sim.harness.golden_io import golden_outputs

    result = {}
    for block_name, txs in records.items():
        if not txs:
            continue
        recorded = len(txs)
        if limit is not None and len(txs) > limit:
            txs = [txs[k * len(txs) // limit] for k in range(limit)]
        block = registry.get(block_name)
        params = block.resolve({"fma_stages": fma_stages})
        expected = golden_outputs(block, params, txs)
        report = BACKENDS[backend].run(block, params, txs, expected=expected)
        result[block_name] = (report.passed, report.failed, recorded)
    return result


def _plot(path, scene_names, results, n_rays):
    """Axis-aligned BVH8 against BVH8 with OBBs (the comparison docs/obb.md reports): triangle
    tests, child boxes hit and child-box tests per ray, with the change labelled on each pair."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pairs = (("bvh8", "axis-aligned BVH8"), ("bvh8+obb", "BVH8 with OBBs (1.12 rule)"))
    metrics = (
        ("tri_tests", "triangle tests per ray"),
        ("box_hits", "child boxes hit per ray"),
        ("box_tests", "child-box tests per ray"),
    )
    fig, axes = plt.subplots(1, 3, figsize=(16, 5))
    x = np.arange(len(scene_names))
    width = 0.4
    changes = {}
    for ax, (metric, label) in zip(axes, metrics):
        values = {
            cfg: np.array([results.get((s, cfg), {}).get(metric, np.nan) for s in scene_names])
            for cfg, _ in pairs
        }
        for k, (cfg, cfg_label) in enumerate(pairs):
            ax.bar(x + (k - 0.5) * width, values[cfg], width, label=cfg_label)
        change = 100 * (values["bvh8+obb"] / values["bvh8"] - 1)
        changes[metric] = change
        for xi, top, pct in zip(x, np.fmax(values["bvh8"], values["bvh8+obb"]), change):
            if np.isfinite(pct):
                ax.annotate(
                    f"{pct:+.0f}%",
                    (xi, top),
                    xytext=(0, 3),
                    textcoords="offset points",
                    ha="center",
                    fontsize=8,
                )
        ax.set_xticks(x)
        ax.set_xticklabels(scene_names, rotation=20, ha="right")
        ax.set_ylabel(f"{label} (mean of {n_rays} rays)")
        ax.set_title(label, fontsize=10)
        ax.margins(y=0.12)
    fig.legend(
        *axes[0].get_legend_handles_labels(), loc="lower center", ncol=2, fontsize=9, frameon=False
    )
    tri = changes["tri_tests"][np.isfinite(changes["tri_tests"])]
    fig.suptitle(
        f"OBB nodes vs axis-aligned boxes (closest hit): {-tri.max():.0f} to "
        f"{-tri.min():.0f}% fewer triangle tests per scene, box tests hardly change",
        fontsize=11,
    )
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def measure(*, quick=False, progress=None, **params):
    """Per scene and configuration, the mean counts per ray; the exact-vs-fast sample; the RTL
    replay of the recorded transforms (``quick``: fewer, smaller scenes, 48 rays, a dozen
    transforms of each kind on pysim)."""
    import tempfile

    from gpurtl.golden.bvh import traversal as T

    check_params(NAME, params)
    n_rays = 48 if quick else 800
    n_sample = 3 if quick else 10
    with tempfile.TemporaryDirectory(prefix="gpurtl-obb-") as folder:
        scene_list = scenes(quick, Path(folder))  # the knot goes through the OBJ reader
    configs = _configs()
    if quick:
        configs = [c for c in configs if c[0] in ("bvh8", "bvh8+obb", "bvh4")]
    rows_csv, results = [], []
    records = {"obb_transform": [], "instance_transform": []}
    agree = total_sample = 0
    steps = len(scene_list) * len(configs)
    done = 0
    started = time.monotonic()
    for scene_name, scene in scene_list:
        world = _world_mesh(scene)
        origins, dirs = make_rays(world, n_rays, seed=len(scene_name))
        for cfg_name, width, threshold in configs:
            if isinstance(scene, list) and width == 4:
                done += 1
                continue
            bvh = _build(scene, width, threshold)
            traced = width == 8 and threshold is not None and cfg_name == "bvh8+obb"

            def record(kind, node, ray):
                if kind == "box" and node.obb != 0x7F:
                    records["obb_transform"].append(
                        {"index": node.obb, "origin": ray["origin"], "dir": ray["dir"]}
                    )
                elif kind == "instance":
                    records["instance_transform"].append(
                        {
                            "node": list(node.dwords),
                            "ray": ray,
                            "pointer_flags": 0,
                            "pointer_flags_en": 1,
                        }
                    )

            # every ray of the OBB configuration: its transforms are replayed on the RTL below
            counts = T.traverse(bvh, origins, dirs, on_node=record if traced else None)
            mean = counts.mean()
            stats = bvh.stats()
            mean["tree_obb"], mean["tree_boxes"] = stats["obb_nodes"], stats["box_nodes"]
            results.append({"scene": scene_name, "config": cfg_name, **mean})
            rows_csv.append(
                {
                    "scene": scene_name,
                    "config": cfg_name,
                    "rays": n_rays,
                    "triangles": len(world),
                    **stats,
                    **counts.mean(),
                    "hits": int(np.isfinite(counts.t).sum()),
                }
            )
            if traced:
                # the bit-exact instruction model on a sample
                exact = T.traverse(bvh, origins[:n_sample], dirs[:n_sample], model="exact")
                fast = T.traverse(bvh, origins[:n_sample], dirs[:n_sample])
                same = np.ones(n_sample, dtype=bool)
                for name, values in exact.as_dict().items():
                    same &= values == getattr(fast, name)
                same &= (exact.t == fast.t) | (np.isinf(exact.t) & np.isinf(fast.t))
                agree += int(same.sum())
                total_sample += n_sample
            done += 1
            if progress:
                progress(done, steps, f"{scene_name} {cfg_name}")

    if progress:
        progress(done, steps, "RTL replay")
    replay_started = time.monotonic()
    backend = "pysim" if quick else "fast"
    rtl = _rtl_replay(records, limit=12 if quick else None, backend=backend)
    return {
        "rays": n_rays,
        "scenes": [name for name, _ in scene_list],
        "results": results,
        "counts": rows_csv,
        "agree": [agree, total_sample],
        "backend": backend,
        "rtl": {
            name: {"passed": passed, "failed": failed, "recorded": recorded}
            for name, (passed, failed, recorded) in rtl.items()
        },
        "seconds": time.monotonic() - started,
        "replay_seconds": time.monotonic() - replay_started,
    }


def change_text(before, after):
    """``"12.5% fewer"``, ``"0.5% more"`` or ``"the same"``: a count's change in words, so that a
    rise is not written as a negative saving."""
    if before == after:
        return "the same"
    if not before:
        return "none before"
    change = after / before - 1
    return f"{100 * abs(change):.1f}% {'more' if change > 0 else 'fewer'}"


#: The report's table of mean counts per ray.
COLUMNS = (
    Column("scene"),
    Column("config"),
    Column("box_nodes", "box nodes", digits=2),
    Column("box_tests", "box tests", digits=2),
    Column("box_hits", "box hits", digits=2),
    Column("obb_nodes", "obb nodes", digits=2),
    Column("leaves", digits=2),
    Column("tri_tests", "tri tests", digits=2),
    Column("tree", "OBB nodes in tree", get=lambda m: f"{m['tree_obb']}/{m['tree_boxes']}"),
)


def report(data, out_dir):
    """``obb_counts.csv``, ``obb_box_tests.png`` and ``summary.md``."""
    n_rays, scene_names = data["rays"], data["scenes"]
    results = {(m["scene"], m["config"]): m for m in data["results"]}
    files = [
        write_csv(out_dir / "obb_counts.csv", data["counts"]),
        str(_plot(out_dir / "obb_box_tests.png", scene_names, results, n_rays)),
    ]
    rows = []
    for scene_name in scene_names:
        base, with_obb = results.get((scene_name, "bvh8")), results.get((scene_name, "bvh8+obb"))
        if base and with_obb:
            for metric in ("box_tests", "box_hits", "box_nodes", "leaves", "tri_tests"):
                rows.append(
                    (
                        f"{scene_name}: {metric}/ray bvh8 -> bvh8+obb",
                        f"{base[metric]:.2f} -> {with_obb[metric]:.2f} "
                        f"({change_text(base[metric], with_obb[metric])})",
                    )
                )
    agree, total_sample = data["agree"]
    rows.append(("exact vs fast model agreement (sample rays)", f"{agree}/{total_sample}"))
    backend = data["backend"]
    for name, r in data["rtl"].items():
        passed, failed, recorded = r["passed"], r["failed"], r["recorded"]
        what = (
            f"all {recorded} operations of all rays, fast backend"
            if passed + failed == recorded and backend == "fast"
            else f"{passed + failed} of {recorded} operations, {backend}"
        )
        rows.append((f"RTL {name} replay ({what}) vs golden", f"{passed} passed, {failed} failed"))
    rows.append(
        (
            "run time (s), of which RTL replay",
            f"{data['seconds']:.1f}, {data['replay_seconds']:.1f}",
        )
    )
    files.append(
        document(
            out_dir / "summary.md",
            "OBB experiment",
            f"{n_rays} rays per scene; closest hit; counts are means per "
            "ray. box tests = valid child boxes of the visited box nodes; box hits = those that "
            "passed; obb nodes = visited box nodes with a rotation.",
            markdown(data["results"], COLUMNS),
            metrics(rows),
        )
    )
    return {"title": "OBB nodes: box tests and nodes visited per ray", "rows": rows, "files": files}
