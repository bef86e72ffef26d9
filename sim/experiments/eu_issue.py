"""Seed article's Gen7.5 EU issue measurements, reproduced on the ``eu`` block.

Joshua Barczak, "You Compiled This, Driver. Trust Me....", joshbarczak.com/blog (2016), section
"Instruction Issue" (figures issue_rate_adds, issue_rate_movs, issue_rate_noddchk,
extended_math) and "Block Reads" (figure block_loads), measured on an HD Graphics 4400. Every
curve is a set of fixed programs run on all threads of one EU from start to end:

* **issue rates**: each thread runs ``add rK = rK + rK`` (or ``mov``), K cycling over N
  registers (SIMD16: N register pairs), float (dual-issuable) and integer (single issue), at
  SIMD4, 8 and 16; again with the read port made wide (the mechanism of the 1.5x) and with
  NoDDChk;
* **math rates**: independent math instructions of each function and width;
* **latency hiding**: a block read, N independent integer adds, an add that uses the read,
  repeated; hit and miss latencies, and the same programs with a one-clock read as the line
  that the latency cannot push above.

The sweep runs on the golden cycle model (:mod:`gpurtl.golden.eu`); a subset runs on the RTL in
a pysim session, every clock compared with the golden model, and the two rates are reported
side by side.
"""

from pathlib import Path

from gpurtl.facts.eu import ARTICLE, SEED, ExecSize, MathFn, Op, Type
from gpurtl.golden.eu import PARAM_DEFAULTS, EuIssueModel, encode

from ..tools.tables import Column, document, markdown, write_csv

NAME = "eu-issue"
DESCRIPTION = (
    "Gen7.5 EU issue rates (dual issue, read port, same-register penalty, NoDDChk), math rates "
    "and latency hiding, beside the seed article's figures"
)

SIZES = (ExecSize.SIMD4, ExecSize.SIMD8, ExecSize.SIMD16)
LANES = {ExecSize.SIMD4: 4, ExecSize.SIMD8: 8, ExecSize.SIMD16: 16}
NREGS = (1, 2, 3, 4, 8)
MOV_TYPES = (Type.F, Type.D, Type.UD, Type.W)
MATH = (
    ("sqrt", MathFn.SQRT),
    ("exp", MathFn.EXP),
    ("log", MathFn.LOG),
    ("rsqrt", MathFn.RSQ),
    ("inv", MathFn.INV),
    ("pow", MathFn.POW),
    ("sin", MathFn.SIN),
    ("cos", MathFn.COS),
    ("fdiv", MathFn.FDIV),
    ("idiv", MathFn.IDIV_Q),
)
#: Every program is fixed: no random numbers (recorded in the run's provenance).
SEEDS = {}
WIDE_PORT = 512  # bytes per clock: more than any pair of instructions reads


def _idle():
    return {
        "load": {"valid": 0, "thread": 0, "addr": 0, "inst": 0},
        "start": {"valid": 0, "mask": 0, "passes": 0},
        "hold": 0,
        "dp_ready": 1,
    }


def run_programs(program, passes, params, step=None):
    """Load ``program`` (instruction words) into every thread, start them for ``passes`` runs
    and clock until every thread has finished. ``step(inputs) -> outputs`` is one clock of the
    golden model (default) or of an RTL session. Returns ``(instructions, clocks, duals)``
    counted from the first clock after the start."""
    threads = params["threads"]
    if step is None:
        step = EuIssueModel(**params).step
    for t in range(threads):
        for a, word in enumerate(program):
            inputs = _idle()
            inputs["load"] = {"valid": 1, "thread": t, "addr": a, "inst": word}
            step(inputs)
    inputs = _idle()
    inputs["start"] = {"valid": 1, "mask": (1 << threads) - 1, "passes": passes}
    step(inputs)
    issued = clocks = duals = 0
    limit = 64 * len(program) * passes * threads + 10_000
    while True:
        out = step(_idle())
        if not out["active"]:
            break
        clocks += 1
        n = sum(slot["valid"] for slot in out["issue"])
        issued += n
        duals += n == 2
        if clocks > limit:
            raise RuntimeError("eu-issue: the threads did not finish (a program that deadlocks)")
    return issued, clocks, duals


def _rate_program(op, size, type_, nregs, *, noddchk=0, length=16):
    """``op rK = rK (+ rK)`` over ``nregs`` registers (register pairs for two-register
    operands), as many as fit in ``length`` words; the last word ends the pass."""
    step = 2 if size is ExecSize.SIMD16 and type_ is not Type.W else 1
    count = nregs * max(1, length // nregs)
    words = []
    for i in range(count):
        r = (i % nregs) * step
        words.append(
            encode(
                op=op,
                size=size,
                type=type_,
                dst=r,
                src0=r,
                src1=r,
                src2=r,
                noddchk=noddchk,
                eot=int(i == count - 1),
            )
        )
    return words


def _math_program(fn, size):
    """Independent math instructions: destinations rotate over 8 registers (pairs at SIMD16),
    sources are other registers."""
    step = 2 if size is ExecSize.SIMD16 else 1
    type_ = Type.D if fn in (MathFn.IDIV_Q,) else Type.F
    count = 8 if step == 1 else 7
    return [
        encode(
            op=Op.MATH,
            size=size,
            type=type_,
            fn=fn,
            dst=i * step,
            src0=14,
            src1=14,
            eot=int(i == count - 1),
        )
        for i in range(count)
    ]


def _latency_program(n, miss):
    """A SIMD8 block read into r0, ``n`` independent SIMD8 integer adds, an add that uses r0."""
    words = [encode(op=Op.SEND, size=ExecSize.SIMD8, type=Type.D, dst=0, src0=15, miss=miss)]
    for i in range(n):
        words.append(
            encode(op=Op.ADD, size=ExecSize.SIMD8, type=Type.D, dst=2 + i % 8, src0=12, src1=13)
        )
    words.append(encode(op=Op.ADD, size=ExecSize.SIMD8, type=Type.D, dst=1, src0=0, src1=0))
    words[-1] |= encode(eot=1)
    return words


def _rate(program, per_thread, params, step=None):
    passes = max(1, min(255, per_thread // len(program)))
    issued, clocks, duals = run_programs(program, passes, params, step)
    return {"instructions": issued, "clocks": clocks, "rate": issued / clocks, "duals": duals}


def measure(*, quick=False, progress=None, rtl=None):
    """The sweep on the golden model and a subset on the RTL (``rtl``: ``False`` skips it)."""
    per_thread = 64 if quick else 1024
    nregs = (1, 4) if quick else NREGS
    base = dict(PARAM_DEFAULTS)
    base["depth"] = 32
    jobs = []
    for type_ in (Type.F, Type.D):
        for size in SIZES:
            for n in nregs:
                jobs.append(("adds", dict(op=Op.ADD, size=size, type_=type_, nregs=n), {}))
    for size in SIZES:
        for n in nregs:
            jobs.append(
                ("adds_wide", dict(op=Op.ADD, size=size, type_=Type.F, nregs=n), {"wide": 1})
            )
            jobs.append(
                ("noddchk", dict(op=Op.ADD, size=size, type_=Type.F, nregs=n, noddchk=1), {})
            )
    for type_ in MOV_TYPES:
        for n in nregs:
            jobs.append(("movs", dict(op=Op.MOV, size=ExecSize.SIMD8, type_=type_, nregs=n), {}))
    latency_ns = (0, 3, 6, 9, 11, 14) if quick else tuple(range(17)) + (18, 20)
    total = len(jobs) + len(MATH) * len(SIZES) + 3 * len(latency_ns)
    done = 0

    def tick(what):
        nonlocal done
        if progress:
            progress(done, total, what)
        done += 1

    rows = []
    for curve, prog, extra in jobs:
        tick(
            f"{curve} {prog['op'].name} {prog['type_'].name} {prog['size'].name} N={prog['nregs']}"
        )
        params = dict(base, read_bytes=WIDE_PORT) if extra.get("wide") else base
        program = _rate_program(**prog)
        result = _rate(program, per_thread, params)
        rows.append(
            {
                "curve": curve,
                "op": prog["op"].name.lower(),
                "type": prog["type_"].name,
                "simd": LANES[prog["size"]],
                "nregs": prog["nregs"],
                "read_bytes": params["read_bytes"],
                **result,
            }
        )
    math_rows = []
    for name, fn in MATH:
        for size in SIZES:
            tick(f"math {name} {size.name}")
            result = _rate(_math_program(fn, size), per_thread // 2, base)
            math_rows.append({"function": name, "simd": LANES[size], **result})
    lat_rows = []
    for label, miss, params in (
        ("hit", 0, base),
        ("miss", 1, base),
        ("no latency", 0, dict(base, hit_latency=1)),
    ):
        for n in latency_ns:
            tick(f"latency {label} N={n}")
            program = _latency_program(n, miss)
            passes = 8 if quick else 32
            issued, clocks, _ = run_programs(program, passes, params)
            lat_rows.append(
                {
                    "curve": label,
                    "n": n,
                    "latency": params["miss_latency"] if miss else params["hit_latency"],
                    "clocks": clocks,
                    "clocks_per_iteration": clocks / passes,
                }
            )
    if progress:
        progress(total, total, "rtl subset")
    rtl_rows = [] if rtl is False else _rtl_subset(base, quick)
    return {
        "source": ARTICLE,
        "params": base,
        "instructions_per_thread": per_thread,
        "rows": rows,
        "math": math_rows,
        "latency": lat_rows,
        "rtl": rtl_rows,
        "rtl_backend": "pysim (Amaranth's simulator), every clock compared with the golden model",
    }


def _rtl_subset(base, quick):
    """A few programs on the RTL (pysim, every clock compared with the golden model) beside the
    golden model's rate."""
    from ..backends import BACKENDS
    from ..core import registry

    block = registry.get("eu")
    params = block.resolve({k: v for k, v in base.items()})
    cases = [
        ("add F SIMD8 N=4", _rate_program(Op.ADD, ExecSize.SIMD8, Type.F, 4)),
        ("add F SIMD8 N=1", _rate_program(Op.ADD, ExecSize.SIMD8, Type.F, 1)),
        ("add D SIMD8 N=4", _rate_program(Op.ADD, ExecSize.SIMD8, Type.D, 4)),
    ]
    if not quick:
        cases += [
            (
                "add F SIMD8 N=4 NoDDChk",
                _rate_program(Op.ADD, ExecSize.SIMD8, Type.F, 4, noddchk=1),
            ),
            ("math pow SIMD8", _math_program(MathFn.POW, ExecSize.SIMD8)),
            ("read, 6 adds, use (hit)", _latency_program(6, 0)),
        ]
    per_thread = 32 if quick else 64
    out = []
    for label, program in cases:
        golden = _rate(program, per_thread, params)
        with BACKENDS["pysim"].session(block, params, golden=True, strict=True) as session:
            rtl = _rate(program, per_thread, params, session.apply)
        out.append(
            {
                "case": label,
                "golden_rate": golden["rate"],
                "rtl_rate": rtl["rate"],
                "golden_clocks": golden["clocks"],
                "rtl_clocks": rtl["clocks"],
                "agree": golden["clocks"] == rtl["clocks"]
                and golden["instructions"] == rtl["instructions"],
            }
        )
    return out


def _find(rows, **keys):
    for row in rows:
        if all(row[k] == v for k, v in keys.items()):
            return row
    raise KeyError(keys)


def comparisons(data):
    """``[(what, model, seed)]``: each reproduced figure beside the article's."""
    rows, math_rows, lat = data["rows"], data["math"], data["latency"]

    def rate(curve, **keys):
        return _find(rows, curve=curve, **keys)["rate"]

    f8 = rate("adds", type="F", simd=8, nregs=4)
    d8 = rate("adds", type="D", simd=8, nregs=4)
    out = [
        ("dual-issue gain, add F / add D, SIMD8, 4 regs", f8 / d8, SEED["dual_issue_gain"].value),
        (
            "dual-issue gain with a 512-byte read port",
            rate("adds_wide", type="F", simd=8, nregs=4) / d8,
            "2 (the article's expectation without the read limit)",
        ),
        (
            "same-register penalty under dual issue, add F SIMD8, 4 regs / 1 reg",
            f8 / rate("adds", type="F", simd=8, nregs=1),
            SEED["same_register_penalty_dual"].value,
        ),
        (
            "same-register penalty under single issue, add D SIMD8, 4 regs / 1 reg",
            d8 / rate("adds", type="D", simd=8, nregs=1),
            SEED["same_register_penalty_single"].value,
        ),
        (
            "SIMD16 / SIMD8 issue rate, add F, 4 regs",
            rate("adds", type="F", simd=16, nregs=4) / f8,
            SEED["simd16_rate"].value,
        ),
        (
            "SIMD4 / SIMD8 issue rate, add F, 4 regs",
            rate("adds", type="F", simd=4, nregs=4) / f8,
            1.0,
        ),
        (
            "NoDDChk add F / add D (forced single issue), SIMD8, 4 regs",
            rate("noddchk", type="F", simd=8, nregs=4) / d8,
            "1 (single issue)",
        ),
        (
            "mov F / mov D, SIMD8, 4 regs",
            rate("movs", type="F", simd=8, nregs=4) / rate("movs", type="D", simd=8, nregs=4),
            "> 1 (float MOVs are the fast ones; no number in the text)",
        ),
    ]
    sqrt8 = _find(math_rows, function="sqrt", simd=8)["rate"]
    for name, seed in (
        ("exp", 1),
        ("log", 1),
        ("rsqrt", 1),
        ("pow", 0.5),
        ("sin", 0.5),
        ("cos", 0.5),
        ("fdiv", 0.5),
        ("idiv", SEED["idiv_rate"].value),
    ):
        out.append(
            (
                f"math {name} / sqrt rate, SIMD8",
                _find(math_rows, function=name, simd=8)["rate"] / sqrt8,
                seed,
            )
        )
    idiv4 = _find(math_rows, function="idiv", simd=4)["rate"]
    idiv8 = _find(math_rows, function="idiv", simd=8)["rate"]
    out.append(("idiv SIMD4 / SIMD8 rate", idiv4 / idiv8, "differs from 1 (no number)"))
    for label, seed in (
        ("hit", SEED["hide_hit_instructions"].value),
        ("miss", SEED["hide_miss_instructions"].value),
    ):
        out.append(
            (
                f"instructions that hide a {label} (within 5% of no latency)",
                hide_count(lat, label),
                seed,
            )
        )
    return out


def hide_count(lat_rows, label):
    """The smallest N whose clocks per iteration are within 5% of the no-latency program's."""
    ref = {r["n"]: r["clocks_per_iteration"] for r in lat_rows if r["curve"] == "no latency"}
    for row in sorted((r for r in lat_rows if r["curve"] == label), key=lambda r: r["n"]):
        if row["clocks_per_iteration"] <= 1.05 * ref[row["n"]]:
            return row["n"]
    return None


COLUMNS = (
    Column("curve"),
    Column("op"),
    Column("type"),
    Column("simd", "SIMD"),
    Column("nregs", "regs"),
    Column("read_bytes", "read B/clk"),
    Column("rate", "instructions/clock", digits=3),
    Column("duals", "dual clocks"),
)
MATH_COLUMNS = (
    Column("function"),
    Column("simd", "SIMD"),
    Column("rate", "instructions/clock", digits=4),
)
LAT_COLUMNS = (
    Column("curve"),
    Column("n", "N"),
    Column("latency", "latency (clocks)"),
    Column("clocks_per_iteration", "clocks/iteration", digits=1),
)
RTL_COLUMNS = (
    Column("case"),
    Column("golden_rate", "golden rate", digits=4),
    Column("rtl_rate", "RTL rate", digits=4),
    Column("golden_clocks", "golden clocks"),
    Column("rtl_clocks", "RTL clocks"),
    Column("agree"),
)


def _plot(path, data):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = data["rows"]
    fig, axes = plt.subplots(2, 3, figsize=(15, 8.5))
    panels = (
        (axes[0][0], "adds", "add: float (dual issue) vs integer (single issue)"),
        (axes[0][1], "adds_wide", "add F with a 512-byte read port (no read limit)"),
        (axes[0][2], "noddchk", "add F with NoDDChk (forced single issue)"),
    )
    for ax, curve, title in panels:
        for row_type in ("F", "D"):
            for simd in (4, 8, 16):
                series = [
                    r
                    for r in rows
                    if r["curve"] == curve and r["type"] == row_type and r["simd"] == simd
                ]
                if not series:
                    continue
                ax.plot(
                    [r["nregs"] for r in series],
                    [r["rate"] for r in series],
                    marker="o",
                    ls="-" if row_type == "F" else "--",
                    label=f"{row_type} SIMD{simd}",
                )
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("registers cycled through (N; SIMD16: pairs)")
        ax.set_ylabel("instructions per clock (EU)")
        ax.set_ylim(0, 2.1)
        ax.legend(fontsize=7)
    ax = axes[1][0]
    for type_ in MOV_TYPES:
        series = [r for r in rows if r["curve"] == "movs" and r["type"] == type_.name]
        ax.plot(
            [r["nregs"] for r in series],
            [r["rate"] for r in series],
            marker="o",
            label=f"mov {type_.name}",
        )
    ax.set_title("mov SIMD8 by type", fontsize=9)
    ax.set_xlabel("registers cycled through (N)")
    ax.set_ylabel("instructions per clock (EU)")
    ax.set_ylim(0, 2.1)
    ax.legend(fontsize=7)
    ax = axes[1][1]
    names = [name for name, _ in MATH]
    width = 0.27
    for k, simd in enumerate((4, 8, 16)):
        values = [_find(data["math"], function=n, simd=simd)["rate"] for n in names]
        ax.bar([x + (k - 1) * width for x in range(len(names))], values, width, label=f"SIMD{simd}")
    ax.set_xticks(range(len(names)), names, fontsize=8)
    ax.set_ylabel("instructions per clock (EU)")
    ax.set_title("extended math (SIMD16 idiv: illegal, flagged)", fontsize=9)
    ax.legend(fontsize=7)
    ax = axes[1][2]
    for label in ("hit", "miss", "no latency"):
        series = [r for r in data["latency"] if r["curve"] == label]
        ax.plot(
            [r["n"] for r in series],
            [r["clocks_per_iteration"] for r in series],
            marker="o",
            label=label,
        )
    ax.set_xlabel("independent instructions between the read and its use (N)")
    ax.set_ylabel("clocks per iteration (7 threads)")
    ax.set_title("latency hiding (block read)", fontsize=9)
    ax.legend(fontsize=7)
    fig.suptitle(
        "eu block (golden cycle model, Gen7.5 parameters) - seed: Barczak 2016", fontsize=10
    )
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return str(path)


def report(data, out_dir):
    """``eu_issue.csv``, ``eu_math.csv``, ``eu_latency.csv``, ``eu_issue.png``, ``summary.md``."""
    out_dir = Path(out_dir)
    comp = comparisons(data)
    comp_rows = [{"figure": what, "model": model, "seed": seed} for what, model, seed in comp]
    comp_cols = (Column("figure"), Column("model", digits=3), Column("seed"))
    parts = [
        f"Source: {data['source']}. Model clock: one issue slot of a SIMD8 instruction.",
        "## Model beside the article",
        markdown(comp_rows, comp_cols),
        "## Issue rates",
        markdown(data["rows"], COLUMNS),
        "## Math rates",
        markdown(data["math"], MATH_COLUMNS),
        "## Latency hiding",
        markdown(data["latency"], LAT_COLUMNS),
    ]
    if data["rtl"]:
        parts += ["## RTL (pysim) beside the golden model", markdown(data["rtl"], RTL_COLUMNS)]
    title = "Gen7.5 EU issue (eu block) beside the seed article"
    files = [
        write_csv(out_dir / "eu_issue.csv", data["rows"]),
        write_csv(out_dir / "eu_math.csv", data["math"]),
        write_csv(out_dir / "eu_latency.csv", data["latency"]),
        _plot(out_dir / "eu_issue.png", data),
        document(out_dir / "summary.md", title, *parts),
    ]
    summary = [
        (
            what,
            f"{model:.3g} (seed {seed})" if isinstance(model, float) else f"{model} (seed {seed})",
        )
        for what, model, seed in comp
    ]
    if data["rtl"]:
        summary.append(
            (
                "RTL agrees with golden",
                f"{sum(r['agree'] for r in data['rtl'])}/{len(data['rtl'])} cases",
            )
        )
    return {"title": title, "rows": summary, "files": files}
