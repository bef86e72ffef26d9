"""Dynamic-VGPR deadlock: every wave grows at once, with and without the deadlock reserve, and
the counter-case of two waves that wait on each other inside their high-register sections
(Chips and Cheese, "Dynamic Register Allocation on AMD's RDNA 4 GPU Architecture", 2025; the
"deadlock avoidance mode" of the AMD "RDNA4 Instruction Set Architecture" guide, section 3.3.3).

Everything runs on the ``vgpr_dyn`` RTL in the Amaranth simulator, every cycle cross-checked
against its golden model; a run is declared deadlocked when nothing has progressed for a while
*and*, judged from the RTL's own outputs (free blocks, reserve holder, per-wave blocks), no
pending ``s_alloc_vgpr`` could succeed.
"""

import csv
import random

from ._vgpr_sched import Program, Simd, run_rtl

NAME = "dynvgpr-deadlock"
DESCRIPTION = (
    "RDNA 4 dynamic VGPRs: all waves grow at once with and without the deadlock "
    "reserve; two waves waiting on each other deadlock even with it"
)

B = 16  # block size (SQ_DYN_VGPR.BLOCK_SIZE = 0, the shipped setting)
SLOTS = 16


def _growing_program(name, rng):
    """Grow in three steps (64, 96, 128 VGPRs = 4, 6, 8 blocks) with work in between."""
    lat = 30
    return Program(
        name,
        [
            ("alloc", 64),
            ("work", rng.randint(2, 3), lat),
            ("alloc", 96),
            ("work", rng.randint(2, 3), lat),
            ("alloc", 128),
            ("work", rng.randint(3, 5), lat),
        ],
    )


def grow_at_once(fwd_progress, seed, programs):
    rng = random.Random(seed)
    progs = [_growing_program(f"p{n}", rng) for n in range(programs)]
    params = {"block_size": B, "fwd_progress": fwd_progress, "reserve": 7}
    simd = Simd(
        progs, SLOTS, retry=8, stall_limit=400, block_size=B, reserve=7 if fwd_progress else 0
    )
    cycles = run_rtl("vgpr_dyn", params, simd, 40_000)
    return simd, cycles


def pair_case(rendezvous_high):
    """Waves p0 and p1 must meet; the 14 others hold 6 blocks each (70 of the 80 pool blocks)
    and wait until p0 and p1 have ended, so only the reserve is left when p0 and p1 (2 blocks
    each) grow to 8 blocks. ``rendezvous_high``: p0/p1 grow to 8 blocks first and meet inside their
    high-register sections (the article's counter-case); otherwise they meet before growing."""
    others = [f"q{n}" for n in range(SLOTS - 2)]
    pair = ["p0", "p1"]
    progs = []
    for name in pair:
        low = [("alloc", 32), ("work", 8, 30)]
        high = [("alloc", 128), ("work", 4, 20)]
        meet = [("barrier", "meet", pair)]
        body = (
            low + high + meet + [("work", 4, 20)]
            if rendezvous_high
            else low + meet + high + [("work", 4, 20)]
        )
        progs.append(Program(name, body + [("alloc", 0)]))
    for name in others:
        progs.append(
            Program(name, [("alloc", 96), ("work", 2, 10), ("wait_done", pair), ("work", 2, 10)])
        )
    # the others are dispatched first so that they hold their blocks when the pair grows
    progs = progs[2:] + progs[:2]
    simd = Simd(progs, SLOTS, retry=8, stall_limit=400, block_size=B, reserve=7)
    cycles = run_rtl(
        "vgpr_dyn", {"block_size": B, "fwd_progress": True, "reserve": 7}, simd, 20_000
    )
    return simd, cycles


def _describe(simd):
    if simd.stuck is None:
        return "finished"
    d = simd.stuck
    held = sorted(set(v[0] for v in d["waiting_alloc"].values()))
    holder = (
        "none" if d["holder"] is None else f"wave {d['holder']} with {d['holder_blocks']} blocks"
    )
    return (
        f"deadlock: {len(d['waiting_alloc'])} waves wait in s_alloc_vgpr holding "
        f"{'/'.join(map(str, held))} blocks, {len(d['waiting_other'])} wait on other waves, "
        f"free {d['free_blocks']} blocks, reserve holder {holder}, "
        f"grantable requests: {len(d['grantable'])}"
    )


def _plot(path, runs, title):
    """One panel per run: resident waves, waves waiting in ``s_alloc_vgpr`` and finished programs
    over time; a deadlocked run marks the cycle of its last progress."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(runs), 1, figsize=(9, 2.6 * len(runs) + 0.8), squeeze=False)
    series = (
        ("resident waves", 0, "tab:blue"),
        ("waves waiting in s_alloc_vgpr", 2, "tab:orange"),
        ("programs finished", 3, "tab:green"),
    )
    for ax, (label, simd) in zip(axes[:, 0], runs):
        t = range(len(simd.trace))
        for name, column, color in series:
            ax.plot(t, [x[column] for x in simd.trace], label=name, color=color)
        if simd.stuck is not None:
            ax.axvline(
                simd.last_progress,
                color="red",
                ls="--",
                lw=1,
                label="last progress (deadlock after it)",
            )
            state = f"DEADLOCK, no progress after cycle {simd.last_progress}"
        else:
            state = f"finished in {len(simd.trace)} cycles"
        ax.set_title(f"{label}: {state}", fontsize=9)
        ax.set_xlabel("time (cycles)")
        ax.set_ylabel("waves / programs")
    handles = {}
    for ax in axes[:, 0]:
        for handle, name in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(name, handle)
    # one legend for all panels, below them, so that it covers no curve
    fig.legend(
        list(handles.values()),
        list(handles),
        loc="lower center",
        ncol=len(handles),
        fontsize=8,
        frameon=False,
    )
    fig.suptitle(title, fontsize=10)
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    fig.savefig(path, dpi=90)
    plt.close(fig)


def run(out_dir, *, quick=False, progress=None):
    out_dir.mkdir(parents=True, exist_ok=True)
    trials = 1 if quick else 6
    programs = 16 if quick else 48
    total = 2 * trials + 2
    step = 0
    rows, csv_rows = [], []
    results = {}
    example = []
    for fwd in (False, True):
        label = "reserve on (FWD_PROGRESS=1, 7 blocks)" if fwd else "reserve off"
        outcomes = []
        for trial in range(trials):
            simd, cycles = grow_at_once(fwd, seed=100 + trial, programs=programs)
            outcomes.append((simd, cycles))
            csv_rows.append(
                {
                    "case": "grow-at-once",
                    "reserve": int(fwd),
                    "trial": trial,
                    "cycles": cycles,
                    "finished_programs": len(simd.finished),
                    "of": programs,
                    "deadlock": int(simd.stuck is not None),
                    "alloc_failures": simd.alloc_fail,
                    "lookup_errors": simd.lookup_errors,
                    "state": _describe(simd),
                }
            )
            step += 1
            if progress:
                progress(step, total, f"grow-at-once {label} trial {trial}")
        results[fwd] = outcomes
        dead = [s for s, _ in outcomes if s.stuck is not None]
        example.append((f"{label} ({len(dead)} of {trials} runs deadlock; run 1)", outcomes[0][0]))
        done = [c for s, c in outcomes if s.stuck is None]
        rows.append(
            (f"all waves grow at once, {label}: runs deadlocked", f"{len(dead)} of {trials}")
        )
        if dead:
            rows.append((f"  first deadlock state ({label})", _describe(dead[0])))
            rows.append((f"  cycle the last progress was made ({label})", dead[0].last_progress))
        if done:
            rows.append(
                (
                    f"  cycles to finish {programs} programs ({label}), mean",
                    round(sum(done) / len(done)),
                )
            )
        fails = sum(s.alloc_fail for s, _ in outcomes) / trials
        rows.append((f"  failed s_alloc_vgpr attempts per run ({label})", round(fails)))
    pair_runs = []
    for high in (True, False):
        simd, cycles = pair_case(high)
        where = "inside their high-register sections" if high else "before growing"
        pair_runs.append((f"p0/p1 meet {where}", simd))
        rows.append((f"two waves meet {where}, reserve on", _describe(simd)))
        csv_rows.append(
            {
                "case": f"pair-meet-{'high' if high else 'low'}",
                "reserve": 1,
                "trial": 0,
                "cycles": cycles,
                "finished_programs": len(simd.finished),
                "of": SLOTS,
                "deadlock": int(simd.stuck is not None),
                "alloc_failures": simd.alloc_fail,
                "lookup_errors": simd.lookup_errors,
                "state": _describe(simd),
            }
        )
        step += 1
        if progress:
            progress(step, total, f"pair case ({where})")
    files = []
    path = out_dir / "deadlock_grow_at_once.png"
    _plot(
        path,
        example,
        "All 16 waves grow 4 -> 6 -> 8 blocks at once: deadlock without the "
        "reserve, none with it\n(vgpr_dyn RTL, 16-VGPR blocks, 1536 VGPRs)",
    )
    files.append(path)
    path = out_dir / "deadlock_pair.png"
    _plot(
        path,
        pair_runs,
        "Two waves waiting on each other (reserve on): the reserve cannot prevent this deadlock",
    )
    files.append(path)
    path = out_dir / "runs.csv"
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(csv_rows[0]))
        writer.writeheader()
        writer.writerows(csv_rows)
    files.append(path)
    lookups = sum(r["lookup_errors"] for r in csv_rows)
    rows.append(("translation lookups of held registers that missed (must be 0)", lookups))
    title = "Dynamic VGPR deadlock and the deadlock-avoidance reserve (vgpr_dyn RTL)"
    md = [f"# {title}", "", "| metric | value |", "|---|---|"]
    md += [f"| {m} | {v} |" for m, v in rows]
    (out_dir / "summary.md").write_text("\n".join(md) + "\n")
    files.append(out_dir / "summary.md")
    return {"title": title, "rows": rows, "files": [str(f) for f in files]}
