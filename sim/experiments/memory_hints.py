"""GFX12 temporal hints in a traversal: shading loads that stream through the L0 and L1 the BVH
nodes use, with and without a non-temporal hint on them (and a high-temporal one on the node
fetches).

A BVH8 of a torus knot (``golden/bvh``: built, encoded and traversed by the golden loop, camera
rays in 8x4 tiles, one wave a tile) runs on the CU model (:func:`gpurtl.golden.cu.simulate`),
whose node fetches and shading loads share one :class:`gpurtl.golden.memory.Hierarchy`. Each lane
that hits loads its primitive's attribute line and then ``stream_lines`` lines of streaming
shading data (texture or material reads that no other wave uses again; neighbouring lane pairs
share a line): the traffic that pushes nodes out of a plain LRU L0 and L1.

Configurations, all on the same waves:

* ``baseline``: every request ``TH_RT`` (today's behaviour: plain LRU);
* ``nt-stream``: the shading loads ``TH_NT``;
* ``ht-node``: the node fetches ``TH_HT`` (protected against a few evictions), the shading
  loads regular;
* ``nt-stream+ht-node``: the shading loads ``TH_NT``, the node fetches ``TH_HT``;
* ``wrong-nt`` (a control): the ``nt-stream`` hints under a policy where NT acts as RT (hits and
  fills update the LRU order), which must give the baseline's numbers and so shows that the
  experiment tells policies apart.

Per configuration: the node fetches' hit rate at each level (hits and pending hits over the node
requests that reached the level), the ray accelerator's utilization (box tests / 8 + triangle
tests / 2 per cycle: :func:`gpurtl.golden.cu.article_utilization` at one CU and one cycle a
second) and the run's cycles; per seed (a different set of sampled waves and launch order), the
difference from the baseline; the report gives the median over seeds and the range (lowest to
highest) as the interval.

The CU runs with static VGPRs (12 waves a SIMD at 128 shading VGPRs): the study is of the
memory side, and static allocation keeps the dynamic allocator's waits out of it.

The hierarchy's sizes follow the traversal experiment's RDNA 4 figures (L0 32 KB per CU, L1
128 KB, L2 8 MB, Infinity Cache 64 MB: AMD RX 9070 specifications and Chips and Cheese's RDNA 2
article); latencies, bandwidths and the hint policy (:class:`gpurtl.golden.memory.HintPolicy`)
are choices, listed in ``docs/memory_hints.md``.
"""

import math
from pathlib import Path

import numpy as np

from gpurtl.facts.memory_hints import TH, Scope
from gpurtl.golden.bvh import mesh as meshes
from gpurtl.golden.bvh import wavefront as WF
from gpurtl.golden.bvh.builder import build_bvh
from gpurtl.golden.cu import CuParams, WaveTrace, article_utilization, simulate
from gpurtl.golden.memory import HintPolicy, Level

from ..tools.tables import Column, document, markdown, write_csv

NAME = "memory-hints"
DESCRIPTION = (
    "GFX12 temporal hints: node hit rates and RA utilization with streaming shading loads "
    "marked non-temporal (and node fetches high-temporal)"
)

#: Line index base of the attribute data (64 bytes a primitive) and of the streaming data.
ATTR_BASE = (1 << 40) >> 7
STREAM_BASE = (1 << 41) >> 7
#: The levels of the cache hierarchy that a node can hit in (DRAM always "hits").
CACHED = ("L0", "L1", "L2", "MALL")

#: (name, node TH, shading TH, policy) of each configuration.
CONFIGS = (
    ("baseline", TH.RT, TH.RT, HintPolicy()),
    ("nt-stream", TH.RT, TH.NT, HintPolicy()),
    ("ht-node", TH.HT, TH.RT, HintPolicy()),
    ("nt-stream+ht-node", TH.HT, TH.NT, HintPolicy()),
    ("wrong-nt", TH.RT, TH.NT, HintPolicy(nt_hit="touch", nt_fill="mru")),
)


def levels():
    """The RDNA 4-like hierarchy of one CU, each level with the scope it serves (the L0 per
    CU, the L1 per shader engine, the L2 per device, the Infinity Cache memory-side)."""
    return [
        Level("L0", 32 * 1024, 4, 40, 1.0, 64, scope=Scope.CU),
        Level("L1", 128 * 1024, 16, 40, 0.5, 64, scope=Scope.SE),
        Level("L2", 8 * 1024 * 1024, 16, 100, 0.25, 128, scope=Scope.DEV),
        Level("MALL", 64 * 1024 * 1024, 16, 196, 0.125, 128, scope=Scope.SYS),
        Level("DRAM", 0, 1, 200, 0.0625, 0),
    ]


def camera_rays(lo, hi, width, height):
    """Rays through the pixel centres of a pinhole camera looking at the box ``lo``..``hi``
    from the front, in 8x4 tiles (one wave a tile): ``(origins, dirs)``."""
    center, extent = (lo + hi) / 2, float(np.max(hi - lo))
    eye = center + np.array([0.3, 0.4, 1.6]) * extent
    forward = (center - eye) / np.linalg.norm(center - eye)
    right = np.cross(forward, [0.0, 1.0, 0.0])
    right /= np.linalg.norm(right)
    up = np.cross(right, forward)
    ty, tx, y, x = np.meshgrid(
        np.arange(0, height, 4), np.arange(0, width, 8), np.arange(4), np.arange(8), indexing="ij"
    )
    px, py = (tx + x).ravel(), (ty + y).ravel()
    half = 0.45
    u = ((px + 0.5) / width * 2 - 1) * half
    v = (1 - (py + 0.5) / height * 2) * half * height / width
    dirs = forward + u[:, None] * right + v[:, None] * up
    dirs /= np.linalg.norm(dirs, axis=1, keepdims=True)
    return np.repeat(eye[None, :], len(px), axis=0), dirs


def scene(quick):
    """``(tables, origins, dirs)`` of the scene (the bunny in quick runs)."""
    mesh = meshes.bunny() if quick else meshes.knot_mesh()
    tables = WF.Tables(build_bvh(mesh))
    tris = mesh.triangles.reshape(-1, 3)
    width, height = (64, 48) if quick else (128, 96)
    origins, dirs = camera_rays(tris.min(axis=0), tris.max(axis=0), width, height)
    return tables, origins, dirs


def wave_traces(result, waves, stream_lines, stream_start):
    """:class:`~gpurtl.golden.cu.WaveTrace` of each wave in ``waves`` from the loop's step
    records; each hit lane's shading loads: its attribute line, then ``stream_lines`` lines of
    streaming data (lanes ``2k`` and ``2k + 1`` share theirs), numbered from ``stream_start``.
    Returns the traces and the next free streaming line."""
    ray = result.rec_ray
    order = np.lexsort((ray % 32, result.rec_step, ray // 32))
    by_wave = {}
    for r, step, line, kind, box, tri in zip(
        ray[order].tolist(),
        result.rec_step[order].tolist(),
        (result.rec_va[order] >> 7).tolist(),
        result.rec_kind[order].tolist(),
        result.rec_box_tests[order].tolist(),
        result.rec_tri_tests[order].tolist(),
    ):
        its = by_wave.setdefault(r // 32, [])
        while len(its) <= step:
            its.append([])
        its[step].append((r % 32, line, kind, box, tri))
    out, nxt = [], stream_start
    for w in waves:
        prims = result.prim[32 * w : 32 * w + 32]
        hits = []
        for lane, prim in enumerate(prims.tolist()):
            if prim < 0:
                continue
            hits.append(ATTR_BASE + prim // 2)
            hits.extend(nxt + (lane // 2) * stream_lines + k for k in range(stream_lines))
        nxt += 16 * stream_lines
        out.append(WaveTrace(by_wave.get(w, []), hits, tag=w))
    return out, nxt


def run_config(waves, warm, node_th, shade_th, policy):
    """The CU model on ``waves`` with one configuration: its metrics."""
    params = CuParams(
        levels=levels(),
        vgpr_mode="static",
        node_th=int(node_th),
        shade_th=int(shade_th),
        hint_policy=policy,
        memory_tags=True,
    )
    run = simulate(waves, params, warm_lines=warm)
    box = sum(b for _, b, _ in run.ra)
    tri = sum(t for _, _, t in run.ra)
    util = article_utilization(
        box / run.cycles, tri / run.cycles, cus=1, clock_hz=1, box_per_cycle=8, tri_per_cycle=2
    )
    out = {"cycles": run.cycles, "utilization": util}
    for name in CACHED:
        node = run.memory[name].get("by_tag", {}).get("node")
        out[f"node_{name}"] = node["hit_rate"] if node and node["accesses"] else float("nan")
        shade = run.memory[name].get("by_tag", {}).get("shade")
        out[f"shade_{name}"] = shade["hit_rate"] if shade and shade["accesses"] else float("nan")
    return out


#: The seeds of the run's random numbers (recorded in its provenance; ``data.json``'s ``seeds``
#: lists those a run used and each of its ``runs`` names its own).
SEEDS = {"sampled waves and launch order": "0 to N - 1, N = --seeds (default 5; --quick 3)"}

#: The metrics each configuration reports, with their labels.
METRICS = {
    **{f"node_{name}": f"node hit rate at {name}" for name in CACHED},
    "utilization": "RA utilization",
    "cycles": "cycles",
}


def arguments(parser):
    parser.add_argument("--seeds", type=int, default=None, help="seeds (default 5; quick 3)")
    parser.add_argument("--waves", type=int, default=None, help="waves per seed (default 160)")
    parser.add_argument(
        "--stream-lines",
        type=int,
        default=None,
        help="streaming lines a lane pair's shading reads (default 4)",
    )


def check_options(options):
    for name in ("seeds", "stream_lines", "waves"):
        value = options.get(name)
        if value is not None and value < 1:
            raise ValueError(
                f"`--{name.replace('_', '-')}` must be a positive integer, not {value}"
            )


def measure(
    *, quick=False, progress=None, seeds=None, stream_lines=None, waves=None, configs=CONFIGS
):
    """Every configuration on every seed's waves (``waves`` of them, default 160; quick 64);
    ``configs``: (name, node TH, shading TH, policy) rows (default :data:`CONFIGS`)."""
    seeds = tuple(range(seeds or (3 if quick else 5)))
    stream_lines = stream_lines or 4
    tables, origins, dirs = scene(quick)
    n_waves = waves or (64 if quick else 160)
    result = WF.trace(tables, origins, dirs, record=np.ones(len(origins), bool))
    warm = sorted(set((tables.va >> 7).tolist()))
    total_waves = len(origins) // 32
    runs, nxt, total = [], STREAM_BASE, len(seeds) * len(configs)
    for seed in seeds:
        rng = np.random.default_rng(seed)
        pick = rng.permutation(total_waves)[:n_waves].tolist()
        traces, nxt = wave_traces(result, pick, stream_lines, nxt)
        for name, node_th, shade_th, policy in configs:
            if progress:
                progress(len(runs), total, f"seed {seed}: {name}")
            row = run_config(traces, warm, node_th, shade_th, policy)
            runs.append({"seed": seed, "config": name, **row})
    if progress:
        progress(total, total, "done")
    return {
        "seeds": list(seeds),
        "stream_lines": stream_lines,
        "waves_per_seed": n_waves,
        "models": "golden/bvh (wavefront loop), golden/cu (simulate), golden/memory (Hierarchy)",
        "scene": "bunny" if quick else "torus knot (golden.bvh.mesh.knot_mesh)",
        "node_lines": len(warm),
        "levels": [lv.as_dict() for lv in levels()],
        "configs": [
            {"name": n, "node_th": t1.name, "shade_th": t2.name, "policy": dict(vars(p))}
            for n, t1, t2, p in configs
        ],
        "runs": runs,
    }


def summarize(data):
    """Per configuration and metric: the median over seeds and the range, of the value and of
    its difference from the baseline on the same seed."""
    runs = data["runs"]
    base = {r["seed"]: r for r in runs if r["config"] == "baseline"}
    rows = []
    for config in data["configs"]:
        mine = [r for r in runs if r["config"] == config["name"]]
        row = {
            "config": config["name"],
            "node_th": config["node_th"],
            "shade_th": config["shade_th"],
        }
        for key in METRICS:
            values = [r[key] for r in mine]
            diffs = [r[key] - base[r["seed"]][key] for r in mine if r["seed"] in base]
            row[key] = float(np.median(values))
            row[f"{key}_diff"] = float(np.median(diffs)) if diffs else math.nan
            row[f"{key}_diff_lo"] = float(min(diffs)) if diffs else math.nan
            row[f"{key}_diff_hi"] = float(max(diffs)) if diffs else math.nan
        rows.append(row)
    return rows


COLUMNS = (
    Column("config"),
    Column("node_th", "node TH"),
    Column("shade_th", "shading TH"),
    *(Column(f"node_{name}", f"node {name} hits", "%", 1) for name in CACHED),
    Column("utilization", "RA utilization", "%", 2),
    Column("cycles", "cycles", digits=0),
)


def _columns(rows):
    """:data:`COLUMNS` less the levels that no node request reached (no hit rate)."""
    return [
        c for c in COLUMNS if c.key[5:] not in CACHED or any(not math.isnan(r[c.key]) for r in rows)
    ]


def _interval(row, key, scale=100, digits=1):
    lo, mid, hi = (row[f"{key}_diff{s}"] * scale for s in ("_lo", "", "_hi"))
    return f"{mid:+.{digits}f} [{lo:+.{digits}f}, {hi:+.{digits}f}]"


def _plot(path, rows, data):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (left, right) = plt.subplots(1, 2, figsize=(10, 4.2))
    width = 0.8 / len(rows)
    # the levels where node requests both hit and missed (the others add nothing to read)
    shown = [
        name
        for name in CACHED
        if any(0 <= r[f"node_{name}"] < 1 for r in rows if not math.isnan(r[f"node_{name}"]))
    ] or list(CACHED[:1])
    for k, row in enumerate(rows):
        x = np.arange(len(shown)) + (k - (len(rows) - 1) / 2) * width
        values = [100 * row[f"node_{name}"] for name in shown]
        left.bar(x, values, width, label=row["config"])
    left.set_xticks(np.arange(len(shown)), shown)
    left.set_ylabel("node fetch hit rate at the level (%)")
    left.set_title("BVH node hits per level (median over seeds)", fontsize=10)
    left.legend(fontsize=8)
    names = [r["config"] for r in rows]
    mids = [100 * r["utilization_diff"] for r in rows]
    err = [
        [m - 100 * r["utilization_diff_lo"] for m, r in zip(mids, rows)],
        [100 * r["utilization_diff_hi"] - m for m, r in zip(mids, rows)],
    ]
    right.bar(names, mids, yerr=err, capsize=4, color="tab:gray")
    right.axhline(0, color="black", lw=0.8)
    right.set_ylabel("RA utilization - baseline (percentage points)")
    right.set_title("Utilization change (median, range over seeds)", fontsize=10)
    right.tick_params(axis="x", labelsize=8, rotation=15)
    figure.suptitle(
        f"{data['scene']}: {data['node_lines']} node lines, "
        f"{data['stream_lines']} streaming lines per lane pair",
        fontsize=10,
    )
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return str(path)


def report(data, out_dir):
    """``memory_hints.csv`` (every run), ``memory_hints_summary.csv``, ``memory_hints.png`` and
    ``summary.md``."""
    out_dir = Path(out_dir)
    rows = summarize(data)
    seeds = data["seeds"]
    title = (
        f"Temporal hints in a traversal: {data['scene']}, {len(seeds)} seeds, "
        f"{data['waves_per_seed']} waves each"
    )
    diff_rows = [
        {
            "config": r["config"],
            "node L0 hits (pp)": _interval(r, "node_L0"),
            "node L1 hits (pp)": _interval(r, "node_L1"),
            "RA utilization (pp)": _interval(r, "utilization", digits=2),
            "cycles (%)": _interval(
                {k: v / max(1, rows[0]["cycles"]) for k, v in r.items() if k.startswith("cycles")},
                "cycles",
            ),
        }
        for r in rows
    ]
    diff_cols = [Column(k) for k in diff_rows[0]]
    files = [
        write_csv(out_dir / "memory_hints.csv", data["runs"]),
        write_csv(out_dir / "memory_hints_summary.csv", rows),
        _plot(out_dir / "memory_hints.png", rows, data),
        document(
            out_dir / "summary.md",
            title,
            "Medians over seeds (a level no node request reached is left out):",
            markdown(rows, _columns(rows)),
            "Difference from the baseline on the same waves: median [lowest, highest] over seeds "
            "(pp: percentage points).",
            markdown(diff_rows, diff_cols),
        ),
    ]
    summary = [(f"{r['config']}: node L0 hits", f"{100 * r['node_L0']:.1f}%") for r in rows] + [
        (f"{r['config']}: RA utilization diff (pp)", _interval(r, "utilization", digits=2))
        for r in rows[1:]
    ]
    return {"title": title, "rows": summary, "files": files}


__all__ = ["CONFIGS", "NAME", "levels", "measure", "report", "summarize"]
