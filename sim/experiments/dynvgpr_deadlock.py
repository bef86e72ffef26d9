"""Dynamic-VGPR deadlock: every wave grows at once, with and without the deadlock reserve, and
the counter-case of two waves that wait on each other inside their high-register sections
(Chips and Cheese, "Dynamic Register Allocation on AMD's RDNA 4 GPU Architecture", 2025; the
"deadlock avoidance mode" of the AMD "RDNA4 Instruction Set Architecture" guide, section 3.3.3).

Everything runs on the ``vgpr_dyn`` RTL in the Amaranth simulator, every cycle cross-checked
against its golden model; a run is declared deadlocked when nothing has progressed for a while
*and*, judged from the RTL's own outputs (free blocks, reserve holder, per-wave blocks), no
pending ``s_alloc_vgpr`` could succeed.
"""

import random

from ..tools.tables import Column, document, metrics, write_csv
from . import check_params
from .vgpr_sched import Program, Simd, run_rtl

#: The seed of the programs of grow-at-once trial ``k``.
SEEDS = {"grow-at-once trial k": "100 + k"}

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


def _run(case, reserve, trial, simd, cycles, of, *, trace):
    """One run as data; ``trace``: keep its per-cycle series (resident waves, waves waiting in
    ``s_alloc_vgpr``, programs finished) for the plots."""
    run = {
        "case": case,
        "reserve": reserve,
        "trial": trial,
        "cycles": cycles,
        "finished_programs": len(simd.finished),
        "of": of,
        "deadlock": int(simd.stuck is not None),
        "alloc_failures": simd.alloc_fail,
        "lookup_errors": simd.lookup_errors,
        "state": _describe(simd),
        "last_progress": simd.last_progress,
    }
    if trace:
        for name, column in (("resident", 0), ("waiting", 2), ("finished", 3)):
            run[name] = [x[column] for x in simd.trace]
    return run


def _plot(path, runs, title):
    """One panel per run: resident waves, waves waiting in ``s_alloc_vgpr`` and finished programs
    over time; a deadlocked run marks the cycle of its last progress."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(runs), 1, figsize=(9, 2.6 * len(runs) + 0.8), squeeze=False)
    series = (
        ("resident waves", "resident", "tab:blue"),
        ("waves waiting in s_alloc_vgpr", "waiting", "tab:orange"),
        ("programs finished", "finished", "tab:green"),
    )
    for ax, (label, run) in zip(axes[:, 0], runs):
        t = range(len(run["resident"]))
        for name, key, color in series:
            ax.plot(t, run[key], label=name, color=color)
        if run["deadlock"]:
            ax.axvline(
                run["last_progress"],
                color="red",
                ls="--",
                lw=1,
                label="last progress (deadlock after it)",
            )
            state = f"DEADLOCK, no progress after cycle {run['last_progress']}"
        else:
            state = f"finished in {len(run['resident'])} cycles"
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
    return str(path)


def _reserve_label(reserve):
    return "reserve on (FWD_PROGRESS=1, 7 blocks)" if reserve else "reserve off"


def measure(*, quick=False, progress=None, **params):
    """All waves growing at once, ``trials`` seeds with and without the reserve, and the pair
    case both ways, on the ``vgpr_dyn`` RTL; the first trial of each setting and the pair runs
    keep their per-cycle series."""
    check_params(NAME, params)
    trials = 1 if quick else 6
    programs = 16 if quick else 48
    total = 2 * trials + 2
    runs = []
    for fwd in (False, True):
        for trial in range(trials):
            simd, cycles = grow_at_once(fwd, seed=100 + trial, programs=programs)
            runs.append(
                _run("grow-at-once", int(fwd), trial, simd, cycles, programs, trace=trial == 0)
            )
            if progress:
                progress(len(runs), total, f"grow-at-once {_reserve_label(fwd)} trial {trial}")
    for high in (True, False):
        simd, cycles = pair_case(high)
        runs.append(
            _run(f"pair-meet-{'high' if high else 'low'}", 1, 0, simd, cycles, SLOTS, trace=True)
        )
        if progress:
            progress(len(runs), total, f"pair case ({_meet(high)})")
    return {"trials": trials, "programs": programs, "runs": runs}


def _meet(high):
    return "inside their high-register sections" if high else "before growing"


#: ``runs.csv``: every run without its per-cycle series.
COLUMNS = tuple(
    Column(key)
    for key in (
        "case",
        "reserve",
        "trial",
        "cycles",
        "finished_programs",
        "of",
        "deadlock",
        "alloc_failures",
        "lookup_errors",
        "state",
    )
)


def report(data, out_dir):
    """Two plots, ``runs.csv`` and ``summary.md``."""
    trials, programs, runs = data["trials"], data["programs"], data["runs"]
    rows, example = [], []
    for fwd in (0, 1):
        label = _reserve_label(fwd)
        outcomes = [r for r in runs if r["case"] == "grow-at-once" and r["reserve"] == fwd]
        dead = [r for r in outcomes if r["deadlock"]]
        example.append((f"{label} ({len(dead)} of {trials} runs deadlock; run 1)", outcomes[0]))
        done = [r["cycles"] for r in outcomes if not r["deadlock"]]
        rows.append(
            (f"all waves grow at once, {label}: runs deadlocked", f"{len(dead)} of {trials}")
        )
        if dead:
            rows.append((f"  first deadlock state ({label})", dead[0]["state"]))
            rows.append((f"  cycle the last progress was made ({label})", dead[0]["last_progress"]))
        if done:
            rows.append(
                (
                    f"  cycles to finish {programs} programs ({label}), mean",
                    round(sum(done) / len(done)),
                )
            )
        fails = sum(r["alloc_failures"] for r in outcomes) / trials
        rows.append((f"  failed s_alloc_vgpr attempts per run ({label})", round(fails)))
    pair_runs = []
    for high in (True, False):
        run = next(r for r in runs if r["case"] == f"pair-meet-{'high' if high else 'low'}")
        pair_runs.append((f"p0/p1 meet {_meet(high)}", run))
        rows.append((f"two waves meet {_meet(high)}, reserve on", run["state"]))
    files = [
        _plot(
            out_dir / "deadlock_grow_at_once.png",
            example,
            "All 16 waves grow 4 -> 6 -> 8 blocks at once: deadlock without the "
            "reserve, none with it\n(vgpr_dyn RTL, 16-VGPR blocks, 1536 VGPRs)",
        ),
        _plot(
            out_dir / "deadlock_pair.png",
            pair_runs,
            "Two waves waiting on each other (reserve on): the reserve cannot prevent this "
            "deadlock",
        ),
        write_csv(out_dir / "runs.csv", runs, COLUMNS),
    ]
    lookups = sum(r["lookup_errors"] for r in runs)
    rows.append(("translation lookups of held registers that missed (must be 0)", lookups))
    title = "Dynamic VGPR deadlock and the deadlock-avoidance reserve (vgpr_dyn RTL)"
    files.append(document(out_dir / "summary.md", title, metrics(rows)))
    return {"title": title, "rows": rows, "files": files}
