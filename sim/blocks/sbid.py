"""Registry entries of the software scoreboard tokens: ``sbid`` and ``sbid_mem``."""

from gpurtl.golden.sbid import SbidMemoryModel, SbidTokensModel
from gpurtl.hdl.sbid import TOKEN_COUNTS, SbidMemory, SbidTokens, token_layouts

from ..core.registry import Block, Param, register

_COMMON = (
    Param(
        "threads",
        8,
        "hardware threads (Xe2: 8, or 4 in large-GRF mode; Xe3: up to 10)",
        range=(1, 16),
    ),
    Param(
        "tokens",
        16,
        "tokens (SBIDs) per thread (Gen12/Xe2: 16; Xe2 large GRF, Xe3: 32)",
        choices=TOKEN_COUNTS,
    ),
)

_MEMORY = (
    Param("hit_latency", 20, "memory latency of a hit, cycles", range=(1, 4096)),
    Param("miss_latency", 200, "memory latency of a miss, cycles", range=(1, 4096)),
)


def _pick(rng, busy, tokens, prefer_busy):
    """A token, mostly one that is busy (``prefer_busy``) or free, per the shadow model."""
    wanted = [k for k in range(tokens) if bool((busy >> k) & 1) == prefer_busy]
    if wanted and rng.random() < 0.85:
        return wanted[int(rng.integers(len(wanted)))]
    return int(rng.integers(tokens))


def _wait(rng, model, threads, tokens, rate):
    thread = int(rng.integers(threads))
    busy = model.busy[thread]
    roll = rng.random()
    if roll < 0.55:
        mask = 1 << _pick(rng, busy, tokens, True)
    elif roll < 0.7:
        mask = (1 << tokens) - 1  # sync.allwr
    else:
        mask = int(rng.integers(0, 1 << tokens))
    return {"valid": int(rng.random() < rate), "thread": thread, "mask": mask}


def _issue(rng, model, threads, tokens, focus, rate):
    thread = focus if rng.random() < 0.6 else int(rng.integers(threads))
    sbid = _pick(rng, model.busy[thread], tokens, rng.random() < 0.15)
    return {
        "valid": int(rng.random() < rate),
        "thread": thread,
        "sbid": sbid,
        "alloc": int(rng.random() < 0.5),
    }


def _token_stimulus(rng, count, threads, tokens):
    """Per-cycle inputs for ``sbid``: bursts that use up a thread's tokens (refused sends), drains
    with many out-of-order returns, returns of free tokens, waits on one token, on all of them
    and on random masks (tokens never set among them). A golden model shadows the state so that
    sends and returns mostly name tokens in the state they need."""
    model = SbidTokensModel(threads, tokens)
    cycles = []
    focus = 0
    for cycle in range(count):
        phase, offset = divmod(cycle, 100)
        burst = phase % 2 == 1
        if offset == 0:
            focus = int(rng.integers(threads))
        issue = _issue(rng, model, threads, tokens, focus, 0.7 if burst else 0.35)
        rt = int(rng.integers(threads))
        busy_threads = [t for t in range(threads) if model.busy[t]]
        if busy_threads and rng.random() < 0.9:
            rt = busy_threads[int(rng.integers(len(busy_threads)))]
        ret = {
            "valid": int(rng.random() < (0.08 if burst else 0.6)),
            "thread": rt,
            "sbid": _pick(rng, model.busy[rt], tokens, rng.random() < 0.92),
        }
        c = {"issue": issue, "wait": _wait(rng, model, threads, tokens, 0.15), "ret": ret}
        model.step(c)
        cycles.append(c)
    return cycles


def _token_defaults(threads, tokens):
    idle = {"valid": 0, "thread": 0}
    return {
        "issue": {**idle, "sbid": 0, "alloc": 0},
        "wait": {**idle, "mask": 0},
        "ret": {**idle, "sbid": 0},
    }


register(
    Block(
        name="sbid",
        doc="Intel Gen12+/Xe2/Xe3 software scoreboard tokens (SBID): sends set, returns clear, "
        "waits stall",
        kind="cycle",
        params=_COMMON,
        build=lambda threads, tokens: SbidTokens(threads, tokens),
        golden=lambda threads, tokens: SbidTokensModel(threads, tokens),
        layouts=lambda threads, tokens: token_layouts(threads, tokens),
        stimulus=_token_stimulus,
        defaults=_token_defaults,
        check_count=5000,
        small={"threads": 2, "tokens": 4},
    )
)


def _memory_stimulus(rng, count, threads, tokens, hit_latency, miss_latency):
    """Per-cycle inputs for ``sbid_mem``: phases of many and of few sends, hits and misses,
    named and allocated tokens, waits as for ``sbid``."""
    model = SbidMemoryModel(threads, tokens, hit_latency, miss_latency)
    cycles = []
    focus = 0
    for cycle in range(count):
        if cycle % 131 == 0:
            focus = int(rng.integers(threads))
        rate = 0.75 if (cycle // 300) % 2 else 0.25
        issue = _issue(rng, model.tokens_model, threads, tokens, focus, rate)
        issue["hit"] = int(rng.random() < 0.6)
        c = {"issue": issue, "wait": _wait(rng, model.tokens_model, threads, tokens, 0.1)}
        model.step(c)
        cycles.append(c)
    return cycles


def _memory_defaults(threads, tokens, hit_latency, miss_latency):
    idle = {"valid": 0, "thread": 0}
    return {"issue": {**idle, "sbid": 0, "alloc": 0, "hit": 0}, "wait": {**idle, "mask": 0}}


def _memory_validate(threads, tokens, hit_latency, miss_latency):
    if hit_latency > miss_latency:
        raise ValueError(
            f"`hit_latency` ({hit_latency}) must not exceed `miss_latency` ({miss_latency})"
        )


register(
    Block(
        name="sbid_mem",
        doc="SBID tokens behind a hit/miss latency model whose requests return out of order",
        kind="cycle",
        params=_COMMON + _MEMORY,
        build=lambda **p: SbidMemory(**p),
        golden=lambda **p: SbidMemoryModel(**p),
        layouts=lambda threads, tokens, **_: token_layouts(
            threads, tokens, external_returns=False, memory=True
        ),
        stimulus=_memory_stimulus,
        defaults=_memory_defaults,
        validate=_memory_validate,
        check_count=5000,
        small={"threads": 2, "tokens": 4, "hit_latency": 2, "miss_latency": 6},
    )
)
