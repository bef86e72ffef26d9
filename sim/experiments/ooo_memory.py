"""The cross-wave memory test of Chips and Cheese, run on the ``waitcnt_mem`` RTL.

Wave Y pointer-chases: one load that misses, wait for it (``loadcnt``/``vmcnt`` 0), repeat. Wave X
issues ``U`` independent loads that hit, waits for all of them, repeats. The score is the number
of wave X accesses per wave Y access when Y has finished. Chips and Cheese measured a ratio equal to
``U`` on RDNA 3 (X's hits return behind Y's miss in one shared in-order queue) and independence on
RDNA 4 ("RDNA 4's 'Out-of-Order' Memory Accesses", 2025; "Examining AMD's RDNA 4 Changes in LLVM",
2024).

Both designs run on the RTL (block ``waitcnt_mem``) in a pysim session whose loop takes every
decision from the RTL's outputs; every cycle's outputs are also compared with the golden model,
so the numbers are those of the RTL and of the model at once.
"""

from gpurtl.facts.waitcnt import InstClass, profile

from ..backends import BACKENDS
from ..core import registry
from ..tools.tables import Column, document, markdown, write_csv
from . import check_params

#: No random numbers: both waves run fixed programs.
SEEDS = {}

NAME = "ooo-memory"
DESCRIPTION = (
    "RDNA 3 in-order vs RDNA 4 out-of-order memory returns: wave X accesses per wave Y access"
)

#: The two designs compared: (label, generation, queue order, wait instruction word).
DESIGNS = (
    (
        "RDNA 3 (gfx11, shared in-order queue)",
        "gfx11",
        "inorder",
        profile("gfx11").wait("s_waitcnt").encode(vm=0),
    ),
    (
        "RDNA 4 (gfx12, out-of-order queues)",
        "gfx12",
        "ooo",
        profile("gfx12").wait("s_wait_loadcnt").encode(load=0),
    ),
)


class Wave:
    """A wave program: ``loads`` loads (hit or miss) then a wait for all of them, forever."""

    def __init__(self, index, loads, hit):
        self.index, self.loads, self.hit = index, loads, hit
        self.issued = 0  # loads issued in the current round
        self.waiting = False  # wait issued, not yet satisfied
        self.completed = 0  # accesses whose wait has completed

    def wants_load(self):
        return not self.waiting and self.issued < self.loads

    def wants_wait(self):
        return not self.waiting and self.issued == self.loads


def run_design(
    generation,
    queue,
    wait_word,
    unroll,
    *,
    y_accesses,
    hit_latency,
    miss_latency,
    check_golden=True,
):
    """Run one design; returns ``(x_accesses, y_accesses, cycles)`` counted between wave Y's first
    and last completed access. The loop is driven by the RTL's outputs in a pysim session of
    block ``waitcnt_mem``; with ``check_golden`` every cycle is compared with the golden model."""
    block = registry.get("waitcnt_mem")
    params = block.resolve(
        dict(
            generation=generation,
            waves=2,
            full_policy="stall",
            queue=queue,
            queue_depth=16,
            hit_latency=hit_latency,
            miss_latency=miss_latency,
        )
    )
    x, y = Wave(0, unroll, hit=1), Wave(1, 1, hit=0)
    x_at_first = None
    rr = 0
    with BACKENDS["pysim"].session(block, params, golden=check_golden, strict=True) as session:
        while y.completed < y_accesses:
            order = (x, y) if rr == 0 else (y, x)
            rr ^= 1
            issue = {"valid": 0, "wave": 0, "cls": int(InstClass.VMEM_LOAD.value), "hit": 0}
            loader = next((w for w in order if w.wants_load()), None)
            if loader is not None:
                issue = {
                    "valid": 1,
                    "wave": loader.index,
                    "cls": int(InstClass.VMEM_LOAD.value),
                    "hit": loader.hit,
                }
            wait = {"valid": 0, "wave": 0, "word": 0}
            waiter = next((w for w in order if w.wants_wait()), None)
            if waiter is not None:
                wait = {"valid": 1, "wave": waiter.index, "word": wait_word}
            out = session.apply({"issue": issue, "wait": wait})
            stall = out["stall"]
            # A wave whose wait was issued in an earlier cycle and no longer stalls is done.
            for wave in (x, y):
                if wave.waiting and not (stall >> wave.index) & 1:
                    wave.waiting = False
                    wave.completed += wave.loads
                    wave.issued = 0
            if y.completed == 1 and x_at_first is None:
                x_at_first = x.completed
            if loader is not None and out["issue_accepted"]:
                loader.issued += 1
            if waiter is not None:
                waiter.waiting = True
        cycles = session.cycle
    # Measured between Y's first and last completion, so start-up and the last, unfinished X
    # round do not bias the ratio.
    return x.completed - x_at_first, y.completed - 1, cycles


def _plot(path, rows, unrolls, hit_latency, miss_latency):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(6.5, 4.5))
    # drawn first, wide and pale, so that the RDNA 3 points on it stay visible
    axes.plot(
        unrolls,
        unrolls,
        color="grey",
        lw=7,
        alpha=0.3,
        zorder=1,
        label="ratio = U (wave X held back by wave Y)",
    )
    for label, _, queue, _ in DESIGNS:
        series = [r for r in rows if r["queue"] == queue]
        axes.plot(
            [r["U"] for r in series],
            [r["ratio"] for r in series],
            marker="o",
            label=label,
            zorder=2,
        )
    axes.set_xlabel("U: independent loads per wave X iteration (count)")
    axes.set_ylabel("wave X accesses per wave Y access (ratio)")
    axes.set_title(
        f"In-order returns tie wave X to wave Y, out-of-order returns do not\n"
        f"(waitcnt_mem RTL, hit {hit_latency} / miss {miss_latency} cycles)",
        fontsize=10,
    )
    axes.legend(fontsize=8, loc="upper left")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return str(path)


#: Parameters of one sweep point (:func:`measure`): name -> (default, meaning).
PARAMS = {
    "queue": ("ooo", "return queues: `inorder` (RDNA 3, shared) or `ooo` (RDNA 4)"),
    "unroll": (4, "U: independent hit loads per wave X iteration"),
    "hit_latency": (20, "cycles of a load that hits"),
    "miss_latency": (200, "cycles of a load that misses"),
    "y_accesses": (9, "wave Y accesses measured"),
}


#: What :func:`measure` returns for one sweep point: name -> meaning (the sweep report's labels).
METRICS = {
    "x_accesses": "wave X accesses while wave Y made its accesses",
    "y_accesses": "wave Y accesses measured",
    "ratio": "wave X accesses per wave Y access",
    "cycles": "cycles from wave Y's first to its last completed access",
}

#: The columns of the report's table (``ooo_memory.csv`` has every field of a row).
COLUMNS = (
    Column("design"),
    Column("U"),
    Column("x_accesses", "X accesses"),
    Column("y_accesses", "Y accesses"),
    Column("ratio", "X per Y", digits=2),
    Column("cycles"),
)


def _point(queue, unroll, *, hit_latency, miss_latency, y_accesses):
    """Wave X and Y accesses and cycles of one design at one ``U``, on the RTL."""
    generation, word = {queue: (gen, word) for _, gen, queue, word in DESIGNS}[queue]
    x_acc, y_acc, cycles = run_design(
        generation,
        queue,
        word,
        unroll,
        y_accesses=y_accesses,
        hit_latency=hit_latency,
        miss_latency=miss_latency,
    )
    return {"x_accesses": x_acc, "y_accesses": y_acc, "ratio": x_acc / y_acc, "cycles": cycles}


def measure(*, quick=False, progress=None, **params):
    """Both designs at U = 1..8 (``quick``: 1, 2, 4, 8 with shorter latencies): the rows of the
    report. With a sweep point's parameters (:data:`PARAMS`): that point's :data:`METRICS`, each
    compared with the golden model every cycle."""
    if params:
        return _sweep_point(params)
    unrolls = (1, 2, 4, 8) if quick else tuple(range(1, 9))
    settings = {
        "y_accesses": 3 if quick else 9,
        "hit_latency": 10 if quick else 20,
        "miss_latency": 60 if quick else 200,
    }
    rows = []
    total = len(unrolls) * len(DESIGNS)
    for label, _, queue, _ in DESIGNS:
        for unroll in unrolls:
            if progress:
                progress(len(rows), total, f"{queue} U={unroll}")
            rows.append(
                {"design": label, "queue": queue, "U": unroll, **_point(queue, unroll, **settings)}
            )
    if progress:
        progress(total, total, "done")
    return {**settings, "unrolls": list(unrolls), "rows": rows}


def report(data, out_dir):
    """``ooo_memory.csv``, ``ooo_memory.png`` and ``summary.md``."""
    rows, hit, miss = data["rows"], data["hit_latency"], data["miss_latency"]
    title = (
        f"wave X accesses per wave Y access (hit {hit}, miss {miss} cycles, "
        f"{data['y_accesses']} Y accesses)"
    )
    files = [
        write_csv(out_dir / "ooo_memory.csv", rows),
        _plot(out_dir / "ooo_memory.png", rows, data["unrolls"], hit, miss),
        document(out_dir / "summary.md", title, markdown(rows, COLUMNS)),
    ]
    summary_rows = []
    for label, _, queue, _ in DESIGNS:
        ratios = ", ".join(f"U={r['U']}: {r['ratio']:.2f}" for r in rows if r["queue"] == queue)
        summary_rows.append((f"{label} X/Y", ratios))
    return {"title": title, "rows": summary_rows, "files": files}


def _sweep_point(params):
    check_params(NAME, params, PARAMS)
    values = {name: params.get(name, default) for name, (default, _) in PARAMS.items()}
    queues = [queue for _, _, queue, _ in DESIGNS]
    if values["queue"] not in queues:
        raise ValueError(f"`queue` must be one of {', '.join(queues)}, not {values['queue']!r}")
    for name in ("unroll", "hit_latency", "miss_latency", "y_accesses"):
        if not isinstance(values[name], int) or isinstance(values[name], bool) or values[name] < 1:
            raise ValueError(f"`{name}` must be a positive integer, not {values[name]!r}")
    point = _point(
        values["queue"],
        values["unroll"],
        y_accesses=values["y_accesses"],
        hit_latency=values["hit_latency"],
        miss_latency=values["miss_latency"],
    )
    return {**point, "ratio": round(point["ratio"], 4)}
