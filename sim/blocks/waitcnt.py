"""Registry entries of the split wait counters: ``waitcnt`` and ``waitcnt_mem``."""

from gpurtl.facts.waitcnt import FULL_POLICIES, PROFILES, QUEUE_ORDERS, InstClass, profile
from gpurtl.facts.waitcnt import MEMORY_DEFAULTS as _D
from gpurtl.golden.waitcnt import WaitcntMemoryModel, WaitCountersModel
from gpurtl.hdl.waitcnt import WaitcntMemory, WaitCounters, counter_layouts, memory_layouts

from ..core.registry import Block, Param, register

_COMMON = (
    Param("generation", _D.generation, "counter set and wait encodings", choices=tuple(PROFILES)),
    Param("waves", _D.waves, "wave slots", range=(1, 64)),
    Param(
        "full_policy",
        _D.full_policy,
        "issue into a full counter: refuse it, or saturate and flag",
        choices=FULL_POLICIES,
    ),
)

#: The wait word's meaning (``Block.notes``).
_WAIT_NOTES = {
    "in": {
        "word": "the 32-bit wait instruction (SOPP/SOPK word): `gpurtl encode waitcnt "
        "'s_wait_loadcnt 0'` writes it, `gpurtl decode waitcnt WORD` reads it"
    }
}

_MEMORY = (
    Param(
        "queue",
        _D.queue,
        "return order: inorder (RDNA 3, shared) or ooo (RDNA 4)",
        choices=QUEUE_ORDERS,
    ),
    Param("queue_depth", _D.queue_depth, "requests per counter type's return queue", range=(2, 64)),
    Param("hit_latency", _D.hit_latency, "memory latency of a hit, cycles", range=(1, 4096)),
    Param("miss_latency", _D.miss_latency, "memory latency of a miss, cycles", range=(1, 4096)),
)


def _wait_words(prof, rng, waves):
    """A random wait instruction word: mostly valid forms, sometimes all-ones or garbage."""
    roll = rng.random()
    if roll < 0.08:
        return int(rng.integers(0, 2**32))
    form = prof.waits[int(rng.integers(len(prof.waits)))]
    counts = {}
    for field in form.fields:
        width = field.lo_bits + field.hi_bits
        if rng.random() < 0.2:
            counts[field.counters[0]] = (1 << width) - 1
        else:
            counts[field.counters[0]] = int(rng.integers(0, min(1 << width, 6)))
    return form.encode(**counts)


def _issue(rng, waves, focus):
    wave = focus if rng.random() < 0.6 else int(rng.integers(waves))
    return {
        "valid": int(rng.random() < 0.55),
        "wave": wave,
        "cls": int(rng.integers(len(InstClass))),
    }


def _counter_stimulus(rng, count, generation, waves, full_policy):
    """Per-cycle inputs for ``waitcnt``: bursts that fill counters to their maxima, returns that
    mostly match outstanding work (and sometimes do not: underflow), every wait form."""
    prof = profile(generation)
    shadow = [{n: 0 for n in prof.counters} for _ in range(waves)]
    cycles = []
    focus = focus_cls = 0
    classes = [int(c.value) for c in InstClass]
    for cycle in range(count):
        phase, offset = divmod(cycle, 120)
        burst = phase % 2 == 1  # phases with few returns: counters fill up
        if offset == 0:
            focus = int(rng.integers(waves))
            if burst:
                focus_cls = classes[(phase // 2 + int(rng.integers(2))) % len(classes)]
        issue = _issue(rng, waves, focus)
        if burst and rng.random() < 0.8:
            issue["cls"] = focus_cls
        if issue["valid"]:
            for n in prof.class_map[InstClass(issue["cls"])]:
                shadow[issue["wave"]][n] += 1
        ret = {}
        for n in prof.counters:
            valid = rng.random() < (0.03 if burst else 0.45)
            outstanding = [w for w in range(waves) if shadow[w][n] > 0]
            if outstanding and rng.random() < 0.95:
                wave = outstanding[int(rng.integers(len(outstanding)))]
            else:
                wave = int(rng.integers(waves))
            if valid and shadow[wave][n] > 0:
                shadow[wave][n] -= 1
            ret[n] = {"valid": int(valid), "wave": wave}
        wait = {
            "valid": int(rng.random() < 0.15),
            "wave": int(rng.integers(waves)),
            "word": _wait_words(prof, rng, waves),
        }
        cycles.append({"issue": issue, "wait": wait, "ret": ret})
    return cycles


def _counter_defaults(generation, waves, full_policy):
    prof = profile(generation)
    idle = {"valid": 0, "wave": 0}
    return {
        "issue": {"valid": 0, "wave": 0, "cls": 0},
        "wait": {"valid": 0, "wave": 0, "word": 0},
        "ret": {n: dict(idle) for n in prof.counters},
    }


register(
    Block(
        name="waitcnt",
        notes=lambda **_: _WAIT_NOTES,
        doc="RDNA 4 split wait counters (GFX9-GFX12 profiles): per-wave counters, waits, stalls",
        kind="cycle",
        params=_COMMON,
        build=lambda generation, waves, full_policy: WaitCounters(generation, waves, full_policy),
        golden=lambda generation, waves, full_policy: WaitCountersModel(
            generation, waves, full_policy
        ),
        layouts=lambda generation, waves, full_policy: counter_layouts(generation, waves),
        stimulus=_counter_stimulus,
        defaults=_counter_defaults,
        check_count=20000,
        small={"waves": 2},
    )
)


def _memory_stimulus(
    rng, count, generation, waves, full_policy, queue, queue_depth, hit_latency, miss_latency
):
    prof = profile(generation)
    cycles = []
    focus = 0
    for cycle in range(count):
        if cycle % 131 == 0:
            focus = int(rng.integers(waves))
        issue = _issue(rng, waves, focus)
        issue["valid"] = int(rng.random() < (0.7 if (cycle // 300) % 2 else 0.25))
        issue["hit"] = int(rng.random() < 0.6)
        wait = {
            "valid": int(rng.random() < 0.1),
            "wave": int(rng.integers(waves)),
            "word": _wait_words(prof, rng, waves),
        }
        cycles.append({"issue": issue, "wait": wait})
    return cycles


def _memory_defaults(generation, waves, full_policy, queue, queue_depth, hit_latency, miss_latency):
    return {
        "issue": {"valid": 0, "wave": 0, "cls": 0, "hit": 0},
        "wait": {"valid": 0, "wave": 0, "word": 0},
    }


def _memory_validate(generation, waves, full_policy, queue, queue_depth, hit_latency, miss_latency):
    if hit_latency > miss_latency:
        raise ValueError(
            f"`hit_latency` ({hit_latency}) must not exceed `miss_latency` ({miss_latency})"
        )


register(
    Block(
        name="waitcnt_mem",
        notes=lambda **_: _WAIT_NOTES,
        doc="wait counters behind a hit/miss latency model and RDNA 3 (inorder) or RDNA 4 (ooo) "
        "return queues",
        kind="cycle",
        params=_COMMON + _MEMORY,
        build=lambda **p: WaitcntMemory(**p),
        golden=lambda **p: WaitcntMemoryModel(**p),
        layouts=lambda generation, waves, **_: memory_layouts(generation, waves),
        stimulus=_memory_stimulus,
        defaults=_memory_defaults,
        validate=_memory_validate,
        check_count=20000,
        small={"waves": 2, "queue_depth": 4, "hit_latency": 2, "miss_latency": 6},
    )
)
