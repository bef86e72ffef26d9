"""Register allocation and occupancy: a ray-tracing-like wave program (a long low-register traversal
phase, a short high-register shading phase, the shape Chips and Cheese, "Dynamic Register Allocation
on AMD's RDNA 4 GPU Architecture" (2025), describes for RDNA 4's inline ray tracing) under RDNA
static allocation, RDNA 4 dynamic allocation with 16- and 32-VGPR blocks, and Intel Xe3 per-thread
GRF blocks; plus the occupancy-versus-registers table.

All runs drive the allocator RTL (Amaranth simulator) from a wave scheduler
(:mod:`.vgpr_sched`), cross-checked every cycle against the golden models.

Workload model (a choice, stated in the summary): one instruction issues per cycle on the SIMD;
each traversal step is one instruction followed by a ``TRAV_LAT``-cycle wait (a BVH node fetch),
each shading step one instruction and a ``SHADE_LAT``-cycle wait. Per-lane register counts are
used on both vendors (``n`` VGPRs of a wave32 wave ~ ``n`` GRFs of a SIMD16 thread).
"""

from gpurtl.golden.vgpr_alloc import occupancy as occ

from ..tools.tables import Column, document, markdown, metrics, write_csv
from . import check_params
from .vgpr_sched import Program, Simd, run_rtl

#: No random numbers: the occupancy tables are computed from fixed programs.
SEEDS = {}

NAME = "occupancy"
DESCRIPTION = (
    "ray-tracing-like waves under RDNA static, RDNA 4 dynamic (16/32 blocks) and Xe3 "
    "register allocation: residency and throughput; occupancy vs registers table"
)

LOW, HIGH = 64, 128  # registers of the traversal and shading phases
TRAV_STEPS, TRAV_LAT = 24, 50
SHADE_STEPS, SHADE_LAT = 6, 20


def _programs(kind, count):
    progs = []
    for n in range(count):
        trav = ("work", TRAV_STEPS, TRAV_LAT)
        shade = ("work", SHADE_STEPS, SHADE_LAT)
        if kind == "dynamic":
            progs.append(Program(f"r{n}", [("alloc", LOW), trav, ("alloc", HIGH), shade]))
        elif kind == "split":
            shader = Program(f"s{n}", [shade], launch_regs=HIGH)
            progs.append(Program(f"r{n}", [trav, ("spawn", shader)], launch_regs=LOW, counts=False))
        else:  # static for the wave's lifetime: the larger of the two
            progs.append(Program(f"r{n}", [trav, shade], launch_regs=max(LOW, HIGH)))
    return progs


CONFIGS = [
    # label, block, params, program kind, slots, block size, reserve
    ("RDNA static (1536 VGPRs, granule 24)", "vgpr_static", {}, "static", 16, 16, 0),
    ("RDNA 4 dynamic, 16-VGPR blocks", "vgpr_dyn", {"block_size": 16}, "dynamic", 16, 16, 7),
    ("RDNA 4 dynamic, 32-VGPR blocks", "vgpr_dyn", {"block_size": 32}, "dynamic", 16, 32, 7),
    ("Xe3 GRF blocks, one thread per ray", "xe3_grf", {"mode": "xe3"}, "static", 10, 32, 0),
    ("Xe3 GRF blocks, shading as its own thread", "xe3_grf", {"mode": "xe3"}, "split", 10, 32, 0),
]


def simulate(config, count):
    label, block, params, kind, slots, bsize, reserve = config
    simd = Simd(
        _programs(kind, count), slots, retry=8, stall_limit=2000, block_size=bsize, reserve=reserve
    )
    cycles = run_rtl(block, params, simd, 400_000)
    return simd, cycles


def occupancy_rows(counts):
    rows = []
    for n in counts:
        rows.append(
            {
                "registers": n,
                "rdna4_static_1536": occ.rdna_static_waves(n),
                "rdna4_static_1024": occ.rdna_static_waves(n, 1024),
                "rdna4_dynamic_b16": occ.rdna_dynamic_waves(n, 16) if n <= 128 else 0,
                "rdna4_dynamic_b32": occ.rdna_dynamic_waves(n, 32),
                "xe3": occ.xe3_threads(n),
                "xe2_fixed": occ.xe_fixed_threads(n, "grf128") or occ.xe_fixed_threads(n, "grf256"),
            }
        )
    return rows


def _plots(out_dir, runs, table):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    files = []
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(9, 7.5), sharex=True)
    window = 200
    base = None
    for run in runs:
        rate = run["work_per_kcycle"]
        base = base or rate
        res = run["resident"]
        t = range(len(res))
        smooth = [
            sum(res[max(0, i - window) : i + 1]) / (i + 1 - max(0, i - window))
            for i in range(len(res))
        ]
        # the legend carries each configuration's throughput, the figure the docs compare
        ax1.plot(
            t, smooth, label=f"{run['config']}: {rate:.2f} rays / 1000 cycles ({rate / base:.2f}x)"
        )
        ax2.plot(t, run["finished"])
    ax1.set_ylabel(f"resident waves / threads\n({window}-cycle mean)")
    ax2.set_ylabel("wave programs finished")
    ax2.set_xlabel("time (cycles)")
    ax1.set_title(
        f"Residency and work: traversal {LOW} registers x {TRAV_STEPS} steps, shading "
        f"{HIGH} registers x {SHADE_STEPS} steps",
        fontsize=10,
    )
    fig.legend(
        *ax1.get_legend_handles_labels(), loc="lower center", ncol=2, fontsize=8, frameon=False
    )
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    path = out_dir / "residency_and_work.png"
    fig.savefig(path, dpi=90)
    plt.close(fig)
    files.append(path)
    fig, ax = plt.subplots(figsize=(9, 4.8))
    xs = [r["registers"] for r in table]
    for key, label in [
        ("rdna4_static_1536", "RDNA 4 static (1536 VGPRs per SIMD)"),
        ("rdna4_dynamic_b16", "RDNA 4 dynamic, 16-VGPR blocks (every wave at n)"),
        ("rdna4_dynamic_b32", "RDNA 4 dynamic, 32-VGPR blocks (every wave at n)"),
        ("xe3", "Xe3 threads per XVE"),
        ("xe2_fixed", "Xe2 fixed GRF modes (128 GRFs x 8 or 256 x 4 threads)"),
    ]:
        ys = [r[key] if r[key] else float("nan") for r in table]  # 0 = not possible
        ax.step(xs, ys, where="post", label=label)
    ax.set_xlabel("registers per wave / thread (VGPRs or GRFs)")
    ax.set_ylabel("resident waves per SIMD /\nthreads per XVE")
    ax.set_title("Occupancy versus register count (16-VGPR blocks stop at 128 VGPRs)", fontsize=10)
    fig.legend(
        *ax.get_legend_handles_labels(), loc="lower center", ncol=2, fontsize=8, frameon=False
    )
    fig.tight_layout(rect=(0, 0.14, 1, 1))
    path = out_dir / "occupancy_vs_registers.png"
    fig.savefig(path, dpi=90)
    plt.close(fig)
    files.append(path)
    return files


def measure(*, quick=False, progress=None, **params):
    """Every configuration of :data:`CONFIGS` on the allocator RTL (``quick``: 32 wave programs
    instead of 160), with its per-cycle residency, and the occupancy table for 1-256 registers."""
    check_params(NAME, params)
    count = 32 if quick else 160
    runs = []
    for index, config in enumerate(CONFIGS):
        simd, cycles = simulate(config, count)
        if progress:
            progress(index + 1, len(CONFIGS), config[0])
        n = max(len(simd.trace), 1)
        runs.append(
            {
                "config": config[0],
                "cycles": cycles,
                "rays": simd.work_done,
                "work_per_kcycle": 1000 * simd.work_done / cycles,
                "mean_resident": sum(x[0] for x in simd.trace) / n,
                "issue_utilization": simd.issued / n,
                "alloc_failures": simd.alloc_fail,
                "state": "finished" if simd.finished_all else f"STUCK {simd.stuck}",
                "lookup_errors": simd.lookup_errors,
                "resident": [x[0] for x in simd.trace],
                "finished": [x[3] for x in simd.trace],
            }
        )
    workload = {
        "programs": count,
        "low": LOW,
        "high": HIGH,
        "trav_steps": TRAV_STEPS,
        "trav_lat": TRAV_LAT,
        "shade_steps": SHADE_STEPS,
        "shade_lat": SHADE_LAT,
    }
    return {"workload": workload, "runs": runs, "occupancy": occupancy_rows(range(1, 257))}


#: ``runs.csv``: the fields of a run, rounded as the report shows them.
RUN_COLUMNS = (
    Column("config"),
    Column("cycles"),
    Column("rays"),
    Column("work_per_kcycle", get=lambda r: round(r["work_per_kcycle"], 2)),
    Column("mean_resident", get=lambda r: round(r["mean_resident"], 2)),
    Column("issue_utilization", get=lambda r: round(r["issue_utilization"], 3)),
    Column("alloc_failures"),
    Column("state"),
    Column("lookup_errors"),
)

#: The occupancy table of the summary (a dash where the allocator cannot hold the wave).
OCCUPANCY_COLUMNS = (
    Column("registers"),
    Column("rdna4_static_1536", "RDNA 4 static 1536"),
    Column("rdna4_dynamic_b16", "RDNA 4 dyn B16", get=lambda r: r["rdna4_dynamic_b16"] or "-"),
    Column("rdna4_dynamic_b32", "RDNA 4 dyn B32"),
    Column("xe3", "Xe3"),
    Column("xe2_fixed", "Xe2 fixed"),
)

#: The register counts the summary's occupancy table shows.
SHOWN = (32, 64, 96, 97, 112, 128, 129, 160, 192, 193, 256)


def report(data, out_dir):
    """``runs.csv``, ``occupancy_table.csv``, two plots and ``summary.md``."""
    runs, table, w = data["runs"], data["occupancy"], data["workload"]
    rows = []
    for run in runs:
        label = run["config"]
        rows.append(
            (f"{label}: rays (wave programs) per 1000 cycles", round(run["work_per_kcycle"], 2))
        )
        rows.append(
            (
                f"{label}: mean resident waves, issue utilization",
                f"{run['mean_resident']:.2f}, {run['issue_utilization']:.1%}",
            )
        )
        if run["alloc_failures"]:
            rows.append((f"{label}: failed s_alloc_vgpr attempts", run["alloc_failures"]))
        if run["state"] != "finished":
            rows.append((f"{label}: state", run["state"]))
    base = round(runs[0]["work_per_kcycle"], 2)
    for run in runs[1:]:
        speedup = round(run["work_per_kcycle"], 2) / base
        rows.append((f"speed-up over RDNA static: {run['config']}", f"{speedup:.2f}x"))
    for n in (64, 96, 128, 192, 256):
        r = table[n - 1]
        rows.append(
            (
                f"occupancy at {n} registers: RDNA4 static / dyn16 / dyn32 / Xe3",
                f"{r['rdna4_static_1536']} / {r['rdna4_dynamic_b16'] or '-'} / "
                f"{r['rdna4_dynamic_b32']} / {r['xe3']}",
            )
        )
    files = _plots(out_dir, runs, table)
    files.append(write_csv(out_dir / "runs.csv", runs, RUN_COLUMNS))
    files.append(write_csv(out_dir / "occupancy_table.csv", table))
    title = "Occupancy under static, dynamic (RDNA 4) and Xe3 block register allocation"
    files.append(
        document(
            out_dir / "summary.md",
            title,
            f"Workload: {w['programs']} wave programs; traversal {w['low']} registers, "
            f"{w['trav_steps']} steps of 1 issue + {w['trav_lat']} cycles; shading {w['high']} "
            f"registers, {w['shade_steps']} steps of 1 issue + {w['shade_lat']} cycles; one "
            "instruction per cycle, s_alloc_vgpr retried every 8 cycles.",
            metrics(rows),
            "Occupancy (resident waves/threads when every wave holds n registers; dynamic "
            "counts include the deadlock reserve of 7 blocks):",
            markdown([r for r in table if r["registers"] in SHOWN], OCCUPANCY_COLUMNS),
        )
    )
    return {"title": title, "rows": rows, "files": [str(f) for f in files]}
