"""Registry entry of the Gen EU issue block: ``eu``."""

from gpurtl.facts.eu import REGS, ExecSize, MathFn, Op, Type
from gpurtl.golden.eu import PARAM_DEFAULTS, EuIssueModel, encode, fields_of
from gpurtl.hdl.eu import EuIssue, eu_layouts
from gpurtl.hdl.eu.issue import DEPTHS, check_params

from ..core.registry import Block, Param, register

_DOCS = {
    "threads": "hardware threads (7: Gen7.5 to Xe-LP; 8: Xe-HPG, Xe2; 10: Xe3)",
    "depth": "program-memory words per thread",
    "read_bytes": "register-file read bytes per clock (96: Gen7.5, per the seed article)",
    "fp_latency": "clocks from a float ALU instruction to a dependent one (fitted, a choice)",
    "int_latency": "clocks from an integer ALU instruction to a dependent one (a choice)",
    "math_latency": "clocks from a math instruction to a dependent one (a choice)",
    "hit_latency": "data-port latency of a send that hits, clocks",
    "miss_latency": "data-port latency of a send that misses, clocks",
}

_PARAMS = tuple(
    Param(
        name,
        default,
        _DOCS[name],
        choices=DEPTHS if name == "depth" else None,
        range=None if name == "depth" else _range,
    )
    for name, default, _range in (
        ("threads", PARAM_DEFAULTS["threads"], (1, 10)),
        ("depth", PARAM_DEFAULTS["depth"], None),
        ("read_bytes", PARAM_DEFAULTS["read_bytes"], (8, 512)),
        ("fp_latency", PARAM_DEFAULTS["fp_latency"], (1, 32)),
        ("int_latency", PARAM_DEFAULTS["int_latency"], (1, 32)),
        ("math_latency", PARAM_DEFAULTS["math_latency"], (1, 64)),
        ("hit_latency", PARAM_DEFAULTS["hit_latency"], (1, 200)),
        ("miss_latency", PARAM_DEFAULTS["miss_latency"], (1, 200)),
    )
)

_OPS = (Op.MOV, Op.ADD, Op.MUL, Op.MAD, Op.MATH, Op.SEND, Op.NOP, Op.NOP7)
_OP_WEIGHTS = (0.16, 0.22, 0.12, 0.12, 0.14, 0.14, 0.05, 0.05)
_FNS = tuple(f.value for f in MathFn) + (0, 8, 14, 15)


_STREAM_WEIGHTS = (0.3, 0.3, 0.15, 0.15, 0.05, 0.03, 0.01, 0.01)


def random_word(rng, *, regs=6, eot=0, stream=False):
    """A random instruction word of the subset: registers from ``0..regs-1`` (many
    dependencies), every op, width, type and function, sometimes the dependency-control bits.
    ``stream``: mostly float ALU instructions on all registers (dual issue, the read port)."""
    op = _OPS[int(rng.choice(len(_OPS), p=_STREAM_WEIGHTS if stream else _OP_WEIGHTS))]
    noddclr = int(rng.random() < 0.005)  # mostly in the pairs of _pair_noddclr
    type_p = (0.9, 0.05, 0.0, 0.05) if stream else (0.55, 0.2, 0.1, 0.15)
    return encode(
        op=op,
        size=ExecSize(int(rng.integers(4))),
        type=Type(int(rng.choice(4, p=type_p))),
        fn=int(_FNS[int(rng.integers(len(_FNS)))]),
        dst=int(rng.integers(regs)) % REGS,
        src0=int(rng.integers(regs)),
        src1=int(rng.integers(regs)),
        src2=int(rng.integers(regs)),
        noddchk=int(rng.random() < 0.12),
        noddclr=noddclr,
        lines=int(rng.integers(16)) if rng.random() < 0.3 else 0,
        miss=int(rng.random() < 0.3),
        rlen=int(rng.integers(4)),
        eot=eot,
    )


def _pair_noddclr(rng, words):
    """Make some neighbours the compiler's pattern: a write with NoDDClr, then a write of the
    same register with NoDDChk (which clears it)."""
    for a in range(len(words) - 1):
        if rng.random() < 0.08:
            first, second = fields_of(words[a]), fields_of(words[a + 1])
            first["noddclr"] = 1
            for name in ("op", "size", "type", "dst", "rlen"):
                second[name] = first[name]  # the same destination registers
            # its sources away from them (it would wait on its own held registers)
            second.update(noddchk=1, noddclr=0, eot=0)
            for k in range(3):
                second[f"src{k}"] = (first["dst"] + 4 + 2 * k) % REGS
            first["eot"] = 0
            words[a], words[a + 1] = encode(**first), encode(**second)
    return words


def _idle(threads):
    return {
        "load": {"valid": 0, "thread": 0, "addr": 0, "inst": 0},
        "start": {"valid": 0, "mask": 0, "passes": 0},
        "hold": 0,
        "dp_ready": 1,
    }


def _stimulus(rng, count, **params):
    """Per-cycle inputs: random programs loaded into every thread, starts of random thread sets
    and pass counts, reloads of single words while threads run, random ``hold`` and
    ``dp_ready`` stalls (in phases of few and many stalls)."""
    threads, depth = params["threads"], params["depth"]
    full = (1 << threads) - 1
    cycles = []
    plan = []  # pending loads: (thread, addr, word)
    round_ = 0
    while len(cycles) < count:
        if not plan:
            round_ += 1
            for t in range(threads):
                end = int(rng.integers(depth)) if rng.random() < 0.85 else None
                stream = rng.random() < 0.5
                regs = REGS if stream else int(rng.integers(3, 9))
                words = [
                    random_word(rng, regs=regs, eot=int(a == end), stream=stream)
                    for a in range(depth)
                ]
                plan.extend((t, a, w) for a, w in enumerate(_pair_noddclr(rng, words)))
                if rng.random() < 0.5:  # run this thread while the next ones load
                    plan.append(("start", 1 << t))
            plan.append(("start", None))
        stall_phase = (len(cycles) // 97) % 3
        hold_p = (0.02, 0.3, 0.0)[stall_phase]
        dp_p = (0.9, 0.5, 1.0)[stall_phase]
        inp = _idle(threads)
        inp["hold"] = int(rng.random() < hold_p)
        inp["dp_ready"] = int(rng.random() < dp_p)
        item = plan[0]
        if isinstance(item, tuple) and item[0] == "start":
            plan.pop(0)
            mask = item[1]
            if mask is None:
                mask = full if rng.random() < 0.6 else int(rng.integers(1, full + 1))
            passes = int(rng.integers(0, 5)) if rng.random() < 0.9 else 255
            inp["start"] = {"valid": 1, "mask": mask, "passes": passes}
            if item[1] is None:
                plan.extend([None] * int(rng.integers(40, 260)))  # run without loads
        elif item is None:
            plan.pop(0)
            if rng.random() < 0.01:  # a word rewritten while the threads run
                t, a = int(rng.integers(threads)), int(rng.integers(depth))
                inp["load"] = {"valid": 1, "thread": t, "addr": a, "inst": random_word(rng)}
            if rng.random() < 0.004:
                mask = int(rng.integers(1, full + 1))
                inp["start"] = {"valid": 1, "mask": mask, "passes": int(rng.integers(1, 4))}
        else:
            if rng.random() < 0.8:
                t, a, word = plan.pop(0)
                inp["load"] = {"valid": 1, "thread": t, "addr": a, "inst": word}
        cycles.append(inp)
    return cycles[:count]


def _validate(**params):
    check_params(**params)


register(
    Block(
        name="eu",
        doc="Intel Gen EU issue: threads, round-robin dual issue, read port, scoreboard "
        "(NoDDChk/NoDDClr), math rates, data-port latencies",
        kind="cycle",
        params=_PARAMS,
        build=lambda **p: EuIssue(**p),
        golden=lambda **p: EuIssueModel(**p),
        layouts=lambda **p: eu_layouts(**p),
        stimulus=_stimulus,
        defaults=lambda **p: _idle(p["threads"]),
        validate=_validate,
        check_count=6000,
        small={"threads": 3, "depth": 8, "hit_latency": 6, "miss_latency": 14},
    )
)
