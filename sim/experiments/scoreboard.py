"""AMD's wait counters against Intel's software scoreboard tokens, on the RTL.

Two measurements, both in pysim sessions of registered blocks whose loops take every decision from
the RTL's outputs, with every cycle's outputs compared with the golden model (so the numbers are
the RTL's and the model's at once):

1. **The cross-wave memory test** of the ``ooo-memory`` experiment (Chips and Cheese, "RDNA 4's
   'Out-of-Order' Memory Accesses", 2025): wave X issues ``U`` independent loads that hit and
   waits for all of them, wave Y issues one load that misses and waits for it, both forever.
   Under RDNA 3's counters (block ``waitcnt_mem``, ``gfx11``, one in-order return queue) X's hits
   return behind Y's miss; under RDNA 4's (``gfx12``, out-of-order queues) and under tokens
   (block ``sbid_mem``: every request returns on its own token) they do not. Tokens bound a
   thread's requests in flight: Xe2's 16 (128-GRF mode) refuse X's 17th load until one returns,
   Xe3's 32 do not. Per design and ``U``: wave X accesses per wave Y access, waits per wave,
   cycles stalled on waits and on refused loads, and the most loads in flight.
2. **The outstanding-request limit at each occupancy**: every wave or thread of a SIMD/XVE issues
   loads that never return until none is accepted, on the bare scoreboards (blocks ``waitcnt``
   and ``sbid``: the memory side's queues, which are not published, are left out). The counts
   are checked against the facts (6-bit ``vmcnt``/``loadcnt``; the token counts of
   :mod:`gpurtl.facts.sbid`).
"""

from gpurtl.facts.sbid import CONFIGS
from gpurtl.facts.waitcnt import InstClass, profile

from ..backends import BACKENDS
from ..core import registry
from ..tools.tables import Column, document, markdown, write_csv
from . import ExperimentFailed

NAME = "scoreboard"
DESCRIPTION = (
    "RDNA 3/4 wait counters vs Xe2/Xe3 scoreboard tokens: the cross-wave memory test and the "
    "outstanding-request limit at each occupancy"
)

#: Every workload is fixed: no random numbers (recorded in the run's provenance).
SEEDS = {}
#: How the RTL runs, recorded in ``data.json``.
BACKEND = "pysim session, every cycle compared with the golden model"

_LOAD = int(InstClass.VMEM_LOAD.value)


class Counters:
    """An AMD design: per-wave wait counters of ``generation`` (``waitcnt_mem`` / ``waitcnt``)."""

    kind = "counters"

    def __init__(self, key, label, generation, queue, counter, wait_name):
        self.key, self.label, self.generation, self.queue = key, label, generation, queue
        self.counter = counter
        self.word = profile(generation).wait(wait_name).encode(**{counter: 0})
        self.limit = profile(generation).max(counter)  # per wave: the counter's maximum

    def memory(self, waves, hit_latency, miss_latency, queue_depth):
        params = dict(
            generation=self.generation,
            waves=waves,
            full_policy="stall",
            queue=self.queue,
            queue_depth=queue_depth,
            hit_latency=hit_latency,
            miss_latency=miss_latency,
        )
        return "waitcnt_mem", params

    def bare(self, waves):
        return "waitcnt", dict(generation=self.generation, waves=waves, full_policy="stall")

    def idle(self, with_returns=False):
        c = {"issue": {"valid": 0, "wave": 0, "cls": _LOAD}, "wait": {"valid": 0, "wave": 0}}
        c["wait"]["word"] = 0
        if with_returns:
            prof = profile(self.generation)
            c["ret"] = {n: {"valid": 0, "wave": 0} for n in prof.counters}
        return c

    def load(self, c, wave, hit):
        c["issue"] = {"valid": 1, "wave": wave, "cls": _LOAD, "hit": hit}

    def wait(self, c, wave, tokens):
        c["wait"] = {"valid": 1, "wave": wave, "word": self.word}

    def outstanding(self, out, wave):
        return out["cnt"][wave][self.counter]


class Tokens:
    """An Intel design: ``tokens`` SBIDs per thread (``sbid_mem`` / ``sbid``)."""

    kind = "tokens"

    def __init__(self, key, label, tokens):
        self.key, self.label, self.tokens = key, label, tokens
        self.limit = tokens

    def memory(self, waves, hit_latency, miss_latency, queue_depth):
        params = dict(
            threads=waves, tokens=self.tokens, hit_latency=hit_latency, miss_latency=miss_latency
        )
        return "sbid_mem", params

    def bare(self, waves):
        return "sbid", dict(threads=waves, tokens=self.tokens)

    def idle(self, with_returns=False):
        c = {
            "issue": {"valid": 0, "thread": 0, "sbid": 0, "alloc": 1},
            "wait": {"valid": 0, "thread": 0, "mask": 0},
        }
        if with_returns:
            c["ret"] = {"valid": 0, "thread": 0, "sbid": 0}
        return c

    def load(self, c, wave, hit):
        # the scoreboard picks the lowest free token: a compiler that never reuses one in flight
        c["issue"] = {"valid": 1, "thread": wave, "sbid": 0, "alloc": 1, "hit": hit}

    def wait(self, c, wave, tokens):
        # a wait on every token of the round: one sync.allwr, or the last use's $N.dst
        # (a token the round took twice has returned once already: its bit covers the second use)
        mask = 0
        for k in tokens:
            mask |= 1 << k
        c["wait"] = {"valid": 1, "thread": wave, "mask": mask}

    def outstanding(self, out, wave):
        return bin(out["busy"][wave]).count("1")


#: The four designs, in the report's order.
DESIGNS = (
    Counters("rdna3", "RDNA 3 counters (gfx11, in-order)", "gfx11", "inorder", "vm", "s_waitcnt"),
    Counters(
        "rdna4", "RDNA 4 counters (gfx12, out-of-order)", "gfx12", "ooo", "load", "s_wait_loadcnt"
    ),
    Tokens("xe2", f"Xe2 tokens ({CONFIGS['xe2'].tokens}, 128 GRF)", CONFIGS["xe2"].tokens),
    Tokens("xe3", f"Xe3 tokens ({CONFIGS['xe3'].tokens})", CONFIGS["xe3"].tokens),
)

#: Return-queue depth of the RDNA designs in the cross-wave test: not published (a choice), deep
#: enough that only the counters and the latencies shape the result for every ``U`` measured.
QUEUE_DEPTH = 40


class Wave:
    """A wave program: ``loads`` loads (hit or miss) then one wait for all of them, forever."""

    def __init__(self, index, loads, hit):
        self.index, self.loads, self.hit = index, loads, hit
        self.issued = 0
        self.tokens = []  # tokens the round's loads took (token designs)
        self.waiting = False
        self.completed = 0  # accesses whose wait has completed
        self.stats = {"waits": 0, "wait_stall_cycles": 0, "load_refused_cycles": 0}
        self.peak = 0  # most loads in flight at once

    def wants_load(self):
        return not self.waiting and self.issued < self.loads

    def wants_wait(self):
        return not self.waiting and self.issued == self.loads


def cross_wave(design, unroll, *, y_accesses, hit_latency, miss_latency, x_hit=1):
    """One design at one ``U`` (``x_hit`` clear: wave X's loads miss too); returns the row's
    measurements, counted between wave Y's first and last completed access (start-up and the
    last, unfinished X round left out)."""
    name, params = design.memory(2, hit_latency, miss_latency, QUEUE_DEPTH)
    block = registry.get(name)
    params = block.resolve(params)
    x, y = Wave(0, unroll, hit=x_hit), Wave(1, 1, hit=0)
    first = None
    rr = 0
    with BACKENDS["pysim"].session(block, params, golden=True, strict=True) as session:
        while y.completed < y_accesses:
            order = (x, y) if rr == 0 else (y, x)
            rr ^= 1
            c = design.idle()
            if "hit" not in c["issue"]:
                c["issue"]["hit"] = 0
            loader = next((w for w in order if w.wants_load()), None)
            if loader is not None:
                design.load(c, loader.index, loader.hit)
            waiter = next((w for w in order if w.wants_wait()), None)
            if waiter is not None:
                design.wait(c, waiter.index, waiter.tokens)
            out = session.apply(c)
            for wave in (x, y):
                wave.peak = max(wave.peak, design.outstanding(out, wave.index))
                if wave.waiting:
                    if (out["stall"] >> wave.index) & 1:
                        wave.stats["wait_stall_cycles"] += 1
                    else:
                        wave.waiting = False
                        wave.completed += wave.loads
                        wave.issued = 0
                        wave.tokens = []
            if y.completed == 1 and first is None:
                first = (x.completed, dict(x.stats), dict(y.stats), session.cycle)
            if loader is not None:
                if out["issue_accepted"]:
                    loader.issued += 1
                    if design.kind == "tokens":
                        loader.tokens.append(out["issue_sbid"])
                else:
                    loader.stats["load_refused_cycles"] += 1
            if waiter is not None:
                waiter.waiting = True
                waiter.stats["waits"] += 1
        cycles = session.cycle
    x_first, x_stats, y_stats, cycle_first = first
    row = {
        "x_accesses": x.completed - x_first,
        "y_accesses": y.completed - 1,
        "cycles": cycles - cycle_first,
        "x_peak": x.peak,
    }
    for prefix, wave, before in (("x", x, x_stats), ("y", y, y_stats)):
        for key, value in wave.stats.items():
            row[f"{prefix}_{key}"] = value - before[key]
    row["ratio"] = row["x_accesses"] / row["y_accesses"]
    return row


def flood(design, waves):
    """Loads from every one of ``waves`` waves, round robin, none returning, until a whole round
    is refused; returns the most loads in flight of one wave and of all of them (bare scoreboard
    blocks ``waitcnt`` / ``sbid``)."""
    name, params = design.bare(waves)
    block = registry.get(name)
    params = block.resolve(params)
    refused_in_a_row = 0
    peak_wave = peak_total = 0
    with BACKENDS["pysim"].session(block, params, golden=True, strict=True) as session:
        while refused_in_a_row < waves:
            c = design.idle(with_returns=True)
            design.load(c, session.cycle % waves, 0)
            c["issue"].pop("hit")  # the bare blocks have no memory model
            out = session.apply(c)
            refused_in_a_row = 0 if out["issue_accepted"] else refused_in_a_row + 1
            counts = [design.outstanding(out, w) for w in range(waves)]
            peak_wave, peak_total = max(peak_wave, *counts), max(peak_total, sum(counts))
        # the last cycle's outputs show the state before its refused issue: read it once more
        out = session.apply(design.idle(with_returns=True))
        counts = [design.outstanding(out, w) for w in range(waves)]
        return max(peak_wave, *counts), max(peak_total, sum(counts))


#: Occupancy points of the limit measurement: (design key, GRF mode label, tokens or None,
#: waves or threads per SIMD / XVE). RDNA: up to 16 waves per SIMD (LLVM getMaxWavesPerEU);
#: Xe2: 8 threads in 128-GRF mode, 4 in large-GRF mode with 32 tokens; Xe3: up to 10 threads,
#: 32 tokens in every mode (IGC GRFMode tables, :mod:`gpurtl.facts.sbid`).
def _occupancy_points(quick):
    if quick:
        return [
            ("rdna3", "", (2,)),
            ("xe2", "xe2", (8,)),
            ("xe2", "xe2_large_grf", (4,)),
            ("xe3", "xe3_96", (10,)),
        ]
    return [
        ("rdna3", "", (1, 4, 16)),
        ("rdna4", "", (1, 4, 16)),
        ("xe2", "xe2", (1, 4, 8)),
        ("xe2", "xe2_large_grf", (1, 4)),
        ("xe3", "xe3_96", (1, 4, 8, 10)),
    ]


def _expected_limit(design, config_name, waves):
    if design.kind == "counters":
        return design.limit, design.limit * waves
    tokens = CONFIGS[config_name].tokens
    return tokens, tokens * waves


def measure(*, quick=False, progress=None):
    """Both measurements (``quick``: fewer ``U`` and occupancy points, shorter latencies)."""
    unrolls = (1, 4, 24) if quick else (1, 2, 4, 8, 16, 24, 32)
    settings = {
        "y_accesses": 3 if quick else 9,
        "hit_latency": 20,
        "miss_latency": 60 if quick else 200,
    }
    miss_unrolls = (16, 32) if quick else (8, 16, 24, 32)
    points = _occupancy_points(quick)
    runs = [(1, u) for u in unrolls] + [(0, u) for u in miss_unrolls]
    total = len(runs) * len(DESIGNS) + sum(len(w) for *_, w in points)
    done = 0
    rows, miss_rows = [], []
    for design in DESIGNS:
        for x_hit, unroll in runs:
            if progress:
                progress(done, total, f"{design.key} U={unroll}{'' if x_hit else ' (X misses)'}")
            row = cross_wave(design, unroll, x_hit=x_hit, **settings)
            row = {"design": design.label, "key": design.key, "U": unroll, **row}
            (rows if x_hit else miss_rows).append(row)
            done += 1
    by_key = {d.key: d for d in DESIGNS}
    limits = []
    for key, config_name, occupancies in points:
        design = by_key[key]
        if config_name:
            design = Tokens(key, CONFIGS[config_name].label, CONFIGS[config_name].tokens)
        for waves in occupancies:
            if progress:
                progress(done, total, f"{key} {config_name} limit, {waves} waves")
            per_wave, total_measured = flood(design, waves)
            expected_wave, expected_total = _expected_limit(design, config_name, waves)
            if (per_wave, total_measured) != (expected_wave, expected_total):
                raise ExperimentFailed(
                    f"{design.label}, {waves} waves: {per_wave} per wave and {total_measured} "
                    f"in all in flight, expected {expected_wave} and {expected_total}"
                )
            limits.append(
                {
                    "design": CONFIGS[config_name].label if config_name else design.label,
                    "key": key,
                    "waves": waves,
                    "per_wave": per_wave,
                    "per_simd": total_measured,
                    "expected_per_simd": expected_total,
                }
            )
            done += 1
    if progress:
        progress(total, total, "done")
    return {
        **settings,
        "queue_depth": QUEUE_DEPTH,
        "unrolls": list(unrolls),
        "miss_unrolls": list(miss_unrolls),
        "rows": rows,
        "miss_rows": miss_rows,
        "limits": limits,
        "backend": BACKEND,
    }


COLUMNS = (
    Column("design"),
    Column("U"),
    Column("ratio", "X per Y", digits=2),
    Column("x_waits", "X waits"),
    Column("y_waits", "Y waits"),
    Column("x_wait_stall_cycles", "X wait stall"),
    Column("y_wait_stall_cycles", "Y wait stall"),
    Column("x_load_refused_cycles", "X refused"),
    Column("x_peak", "X in flight"),
    Column("cycles"),
)

LIMIT_COLUMNS = (
    Column("design"),
    Column("waves", "waves/threads"),
    Column("per_wave", "per wave"),
    Column("per_simd", "per SIMD/XVE"),
    Column("expected_per_simd", "from the sources"),
)


def _plot(path, data):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows, limits, unrolls = data["rows"], data["limits"], data["unrolls"]
    figure, (left, middle, right) = plt.subplots(1, 3, figsize=(15, 4.6))
    left.plot(
        unrolls,
        unrolls,
        color="grey",
        lw=7,
        alpha=0.3,
        zorder=1,
        label="ratio = U (X held back by Y)",
    )
    # designs that measure the same draw on top of each other: shrinking markers and dashes
    # keep every one visible
    styles = [
        {"marker": m, "markersize": z, "linestyle": ls}
        for m, z, ls in (
            ("o", 11, "-"),
            ("s", 9, "--"),
            ("^", 7, "-."),
            ("D", 5, ":"),
            ("v", 3, "-"),
        )
    ]
    for design, style in zip(DESIGNS, styles):
        series = [r for r in rows if r["key"] == design.key]
        left.plot(
            [r["U"] for r in series],
            [r["ratio"] for r in series],
            label=design.label,
            zorder=2,
            **style,
        )
        series = [r for r in data["miss_rows"] if r["key"] == design.key]
        middle.plot(
            [r["U"] for r in series], [r["ratio"] for r in series], label=design.label, **style
        )
    left.set_xlabel("U: independent hit loads per wave X iteration (count)")
    left.set_ylabel("wave X accesses per wave Y access (ratio)")
    left.set_title("Cross-wave test: false dependency only on RDNA 3", fontsize=10)
    left.legend(fontsize=7, loc="upper left")
    middle.set_xlabel("U: independent loads per wave X iteration, all missing (count)")
    middle.set_ylabel("wave X accesses per wave Y access (ratio)")
    middle.set_title("Wave X's loads miss too: Xe2's 16 tokens cap it above U = 16", fontsize=10)
    middle.legend(fontsize=7, loc="upper left")
    for index, key in enumerate(dict.fromkeys(r["design"] for r in limits)):
        series = [r for r in limits if r["design"] == key]
        right.plot(
            [r["waves"] for r in series],
            [r["per_simd"] for r in series],
            label=key,
            **styles[index % len(styles)],
        )
    right.set_xlabel("occupancy: waves per SIMD / threads per XVE (count)")
    right.set_ylabel("loads in flight at most, per SIMD / XVE (count)")
    right.set_title("Outstanding-request limit of the scoreboard", fontsize=10)
    right.legend(fontsize=7, loc="upper left")
    figure.suptitle(
        f"waitcnt_mem / sbid_mem and waitcnt / sbid RTL in pysim (hit {data['hit_latency']}, "
        f"miss {data['miss_latency']} cycles)",
        fontsize=10,
    )
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return str(path)


def report(data, out_dir):
    """``scoreboard.csv``, ``scoreboard_x_misses.csv``, ``scoreboard_limits.csv``,
    ``scoreboard.png`` and ``summary.md``."""
    rows, limits = data["rows"], data["limits"]
    title = (
        f"wait counters vs scoreboard tokens (hit {data['hit_latency']}, miss "
        f"{data['miss_latency']} cycles, {data['y_accesses']} Y accesses)"
    )
    made_by = f"RTL: {data['backend']}; deterministic (no random seeds)."
    files = [
        write_csv(out_dir / "scoreboard.csv", rows),
        write_csv(out_dir / "scoreboard_x_misses.csv", data["miss_rows"]),
        write_csv(out_dir / "scoreboard_limits.csv", limits),
        _plot(out_dir / "scoreboard.png", data),
        document(
            out_dir / "summary.md",
            title,
            "Cross-wave memory test (per design and U, between wave Y's first and last access):",
            markdown(rows, COLUMNS),
            "The same test with wave X's loads missing as well (the token limit shows):",
            markdown(data["miss_rows"], COLUMNS),
            "Outstanding-request limit (loads that never return, every wave issuing):",
            markdown(limits, LIMIT_COLUMNS),
            made_by,
        ),
    ]
    summary = []
    for design in DESIGNS:
        ratios = ", ".join(f"U={r['U']}: {r['ratio']:.2f}" for r in rows if r["key"] == design.key)
        summary.append((f"{design.label} X/Y", ratios))
    for design in DESIGNS:
        ratios = ", ".join(
            f"U={r['U']}: {r['ratio']:.2f}" for r in data["miss_rows"] if r["key"] == design.key
        )
        summary.append((f"{design.label} X/Y, X missing", ratios))
    for row in limits:
        summary.append(
            (f"{row['design']} limit, {row['waves']} waves", f"{row['per_simd']} in flight")
        )
    return {"title": title, "rows": summary, "files": files}
