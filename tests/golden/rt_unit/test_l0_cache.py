"""The L0 cache's golden model: end to end (every request answered once with its line's data),
its lookup results against the memory hierarchy timing model, and its back-pressure rules."""

import numpy as np
import pytest

from gpurtl.golden.memory import Hierarchy, Level
from gpurtl.golden.rt_unit import HIT, MISS, PENDING, L0CacheModel
from gpurtl.sim.blocks.rt_unit import MemorySide

IDLE_FILL = {"valid": 0, "payload": {"line": 0, "data": 0}}


def inputs(req=None, resp_ready=1, mem_ready=1, fill=None):
    return {
        "req": {"valid": int(req is not None), "payload": req or {"id": 0, "line": 0}},
        "resp": {"ready": resp_ready},
        "mem_req": {"ready": mem_ready},
        "fill": fill or IDLE_FILL,
    }


def run(params, seed, cycles, lines, p_valid=0.7, p_ready=0.8, latencies=(2, 40)):
    """Random traffic over ``lines`` distinct lines, then a quiet tail until all is answered.
    Returns the accepted requests ``(cycle, id, line, kind)``, the responses ``(cycle, id,
    data)``, the fills taken ``(cycle, line)`` and the memory."""
    rng = np.random.default_rng(seed)
    model = L0CacheModel(**params)
    memory = MemorySide(rng, latencies=latencies, beats=params.get("beats", 1))
    pool = [int(x) for x in rng.choice(1 << params["line_bits"], size=lines, replace=False)]
    accepted, responses, fills = [], [], []
    request, next_id = None, 0
    for cycle in range(cycles + 400):
        if request is None and cycle < cycles and rng.random() < p_valid:
            request = {"id": next_id, "line": pool[int(rng.integers(len(pool)))]}
            next_id = (next_id + 1) % (1 << params["id_bits"])
        mem_req, fill = memory.inputs(cycle, params["line_bits"])
        step_in = inputs(request, int(rng.random() < p_ready), mem_req["ready"], fill)
        out = model.step(step_in)
        memory.outputs(cycle, step_in, out)
        assert out["err"]["unexpected_fill"] == 0
        if out["event"]["valid"]:
            accepted.append((cycle, request["id"], request["line"], out["event"]["kind"]))
            request = None
        if out["resp"]["valid"] and step_in["resp"]["ready"]:
            responses.append((cycle, out["resp"]["payload"]["id"], out["resp"]["payload"]["data"]))
        if fill["valid"] and out["fill"]["ready"] and memory.beat == 0:  # a line's last beat
            fills.append((cycle, fill["payload"]["line"]))
    return accepted, responses, fills, memory


PARAMS = dict(size=1024, ways=2, mshrs=3, targets=3, id_bits=8, line_bits=12)


@pytest.mark.parametrize("seed", [1, 2])
def test_every_request_is_answered_once_with_its_lines_data(seed):
    accepted, responses, _, memory = run(PARAMS, seed, 3000, lines=12)
    assert len(accepted) > 300
    assert len(responses) == len(accepted)
    line_of = {}
    for _, rid, line, _ in accepted:
        line_of.setdefault(rid, []).append(line)
    for _, rid, data in responses:
        line = line_of[rid].pop(0)
        assert data == memory.line_data(line)
    kinds = [kind for *_, kind in accepted]
    assert {HIT, PENDING, MISS} <= set(kinds)


def test_hits_overtake_pending_misses():
    accepted, responses, _, _ = run(PARAMS, 3, 2000, lines=20, latencies=(30, 60))
    order = {rid: index for index, (_, rid, _, _) in enumerate(accepted[:200])}
    answered = [order[rid] for _, rid, _ in responses[:200] if rid in order]
    assert answered != sorted(answered)


class ReplayedBelow(Hierarchy):
    """The hierarchy's L0 with the level below replaced by the fill times the cache saw."""

    def __init__(self, levels, fill_times):
        super().__init__(levels)
        self.fill_times = fill_times

    def access(self, line, t, level=0):
        if level == 1:
            return self.fill_times[line].pop(0)
        return super().access(line, t, level)


@pytest.mark.parametrize(
    "size, ways, mshrs, targets, lines",
    [(1024, 2, 3, 3, 24), (2048, 4, 4, 4, 40), (512, 1, 2, 8, 10), (1024, 8, 8, 2, 30)],
)
def test_lookups_agree_with_the_hierarchy_model(size, ways, mshrs, targets, lines):
    """Same geometry, same accepted request sequence (at the cycles the cache took them), and the
    level below answering when the cache's fills came: hierarchy.py's Cache (LRU over a dict,
    pending lines in the tags) classifies every request as the cache does. A request to a line
    whose fill is taken at cycle f is pending up to cycle f, a hit from f + 1 (the fill is
    visible the next cycle), so the hierarchy sees the fill at f + 1."""
    params = dict(PARAMS, size=size, ways=ways, mshrs=mshrs, targets=targets)
    accepted, _, fills, _ = run(params, 7, 4000, lines=lines, latencies=(1, 60))
    fill_times = {}
    for cycle, line in fills:
        fill_times.setdefault(line, []).append(cycle + 1)
    hierarchy = ReplayedBelow(
        [Level("L0", size, ways, 0, 1.0, 0), Level("DRAM", 0, 1, 0, 1.0, 0)], fill_times
    )
    names = {HIT: "hit", PENDING: "pending", MISS: "miss"}
    cache = hierarchy.caches[0]
    for cycle, _, line, kind in accepted:
        before = (cache.hits, cache.pending_hits, cache.misses)
        hierarchy.access(line, cycle)
        after = (cache.hits, cache.pending_hits, cache.misses)
        seen = ["hit", "pending", "miss"][[a - b for a, b in zip(after, before)].index(1)]
        assert seen == names[kind], f"cycle {cycle}, line {line}"
    stats = hierarchy.stats()["L0"]
    assert stats["hits"] > 50 and stats["pending_hits"] > 20 and stats["misses"] > 100


def test_outstanding_misses_are_limited():
    model = L0CacheModel(size=1024, ways=2, mshrs=2, targets=2, id_bits=4, line_bits=8)
    readies = [
        model.step(inputs({"id": k, "line": k}, mem_ready=0))["req"]["ready"] for k in (1, 2)
    ]
    assert readies == [1, 1]
    # A third line misses with both miss registers busy: refused, nothing changes.
    assert model.step(inputs({"id": 3, "line": 3}))["req"]["ready"] == 0
    # A pending hit still goes in, up to `targets` requests per miss register.
    assert model.step(inputs({"id": 4, "line": 1}))["event"]["kind"] == PENDING
    assert model.step(inputs({"id": 5, "line": 1}))["req"]["ready"] == 0


def test_a_miss_waits_for_a_pending_victim():
    model = L0CacheModel(size=128, ways=1, mshrs=4, targets=2, id_bits=4, line_bits=8)
    assert model.step(inputs({"id": 0, "line": 5}))["event"]["kind"] == MISS
    # One set, one way: line 6 would evict line 5 while its fill is pending.
    assert model.step(inputs({"id": 1, "line": 6}))["req"]["ready"] == 0


def test_a_fill_nobody_asked_for_is_an_error_and_changes_nothing():
    model = L0CacheModel(size=1024, ways=2, mshrs=2, targets=2, id_bits=4, line_bits=8)
    fill = {"valid": 1, "payload": {"line": 9, "data": 123}}
    out = model.step(inputs(fill=fill))
    assert out["fill"]["ready"] == 1 and out["err"]["unexpected_fill"] == 1
    assert model.step(inputs({"id": 1, "line": 9}))["event"]["kind"] == MISS


def test_replacement_is_least_recently_used():
    model = L0CacheModel(size=256, ways=2, mshrs=2, targets=2, id_bits=4, line_bits=8)
    sets = model.sets
    a, b, c = 0, sets, 2 * sets  # one set
    for line in (a, b):
        model.step(inputs({"id": 0, "line": line}))
    for _ in range(3):  # the memory request register sends both
        model.step(inputs())
    for line in (a, b):
        model.step(inputs(fill={"valid": 1, "payload": {"line": line, "data": line + 1}}))
        model.step(inputs())
    assert model.step(inputs({"id": 1, "line": a}))["event"]["kind"] == HIT  # a most recent
    model.step(inputs({"id": 2, "line": c}))  # evicts b, the least recently used
    assert model.lookup(a)[0] == HIT and model.lookup(b)[0] == MISS


def test_the_timing_table_of_the_docs():
    """docs/rt_unit.md: a hit answers 1 cycle after it is taken, a miss is requested 2 cycles
    after, a fill's first waiting request answers 2 cycles after the fill, each merged one 1
    more."""
    model = L0CacheModel(size=1024, ways=2, mshrs=2, targets=3, id_bits=4, line_bits=8)
    trace = []
    steps = {0: {"id": 1, "line": 4}, 1: {"id": 2, "line": 4}, 2: {"id": 3, "line": 4}}
    fill_at = None
    for cycle in range(20):
        fill = None
        if fill_at is not None and cycle >= fill_at:
            fill = {"valid": 1, "payload": {"line": 4, "data": 99}}
        out = model.step(inputs(steps.get(cycle), fill=fill))
        if out["mem_req"]["valid"] and fill_at is None:
            trace.append(("mem_req", cycle))
            fill_at = cycle + 5
        if fill and out["fill"]["ready"]:
            trace.append(("fill", cycle))
            fill_at = 10**9
        if out["resp"]["valid"]:
            trace.append(("resp", cycle, out["resp"]["payload"]["id"]))
    assert trace == [
        ("mem_req", 2),
        ("fill", 7),
        ("resp", 9, 1),
        ("resp", 10, 2),
        ("resp", 11, 3),
    ]
    out = model.step(inputs({"id": 5, "line": 4}))
    assert out["event"] == {"valid": 1, "kind": HIT}
    assert model.step(inputs())["resp"] == {"valid": 1, "payload": {"id": 5, "data": 99}}


def fill_set(model, lines):
    """Misses to ``lines`` (all of one set), then their fills: the set holds them, in the order
    given, in ways 0, 1, ... (invalid ways go first under both policies)."""
    for k, line in enumerate(lines):
        assert model.step(inputs({"id": k, "line": line}))["event"]["kind"] == MISS
    for _ in range(len(lines) + 2):  # the memory request register sends them all
        model.step(inputs())
    for line in lines:
        model.step(inputs(fill={"valid": 1, "payload": {"line": line, "data": line + 1}}))
        model.step(inputs())
    assert [entry[0] for entry in model.tags[lines[0] % model.sets]] == list(lines)


@pytest.mark.parametrize("replacement, evicted", [("lru", "C"), ("plru", "B")])
def test_the_tree_plru_example_of_wikipedia(replacement, evicted):
    """Wikipedia, "Cache replacement policies", section "Pseudo-LRU (PLRU)": four lines A, C,
    B, D in the tree's leaves (A and C under one half, B and D under the other), then the
    accesses C, B, D, A: tree-PLRU evicts B where LRU evicts C (A's access points the root at
    the half without C)."""
    model = L0CacheModel(
        size=512, ways=4, mshrs=4, targets=2, id_bits=4, line_bits=8, replacement=replacement
    )
    assert model.sets == 1
    names = {"A": 10, "C": 11, "B": 12, "D": 13, "E": 14}
    fill_set(model, [names[n] for n in "ACBD"])
    for k, name in enumerate("CBDA"):
        assert model.step(inputs({"id": k, "line": names[name]}))["event"]["kind"] == HIT
    assert model.step(inputs({"id": 9, "line": names["E"]}))["event"]["kind"] == MISS
    assert model.lookup(names[evicted])[0] == MISS
    assert all(model.lookup(names[n])[0] != MISS for n in "ACBDE" if n != evicted)


class TreePlru:
    """A second tree pseudo-LRU, written from the description (Wikipedia, "Pseudo-LRU"): the
    tree as nested halves of the way range, one flag per half-split keyed by the split's way
    range, flag True meaning "the pseudo-LRU way is in the upper half"."""

    def __init__(self, ways):
        self.ways, self.flags = ways, {}

    def victim(self):
        low, high = 0, self.ways
        while high - low > 1:
            middle = (low + high) // 2
            if self.flags.get((low, high), False):
                low = middle
            else:
                high = middle
        return low

    def use(self, way):
        low, high = 0, self.ways
        while high - low > 1:
            middle = (low + high) // 2
            upper = way >= middle
            self.flags[(low, high)] = not upper  # point at the other half
            low, high = (middle, high) if upper else (low, middle)


@pytest.mark.parametrize(
    "size, ways, seed", [(512, 4, 1), (1024, 8, 2), (2048, 4, 3), (2048, 16, 4), (256, 2, 5)]
)
def test_plru_lookups_agree_with_a_second_tree_plru(size, ways, seed):
    """The accepted request sequence of random traffic replayed on per-set contents kept with
    :class:`TreePlru` (invalid ways first): every request the golden model calls a hit or a
    pending hit is in the replayed set, every miss is not, and the replayed victim is the way
    the golden model filled."""
    params = dict(PARAMS, size=size, ways=ways, mshrs=4, targets=3, replacement="plru")
    accepted, _, _, _ = run(params, seed, 3000, lines=3 * size // 128, latencies=(1, 30))
    sets = size // (128 * ways)
    contents = [[None] * ways for _ in range(sets)]
    trees = [TreePlru(ways) for _ in range(sets)]
    evictions = 0
    for cycle, _, line, kind in accepted:
        s = line % sets
        if kind == MISS:
            assert line not in contents[s], f"cycle {cycle}"
            way = contents[s].index(None) if None in contents[s] else trees[s].victim()
            evictions += contents[s][way] is not None
            contents[s][way] = line
        else:
            assert line in contents[s], f"cycle {cycle}"
            way = contents[s].index(line)
        trees[s].use(way)
    assert evictions > 100


def test_tree_plru_reference_by_hand():
    """The second tree itself, on four ways (0 1 | 2 3): after uses of 1, 2, 3, 0 the root
    points at the upper half and its split at 2, the least recent of the upper pair."""
    tree = TreePlru(4)
    for way in (1, 2, 3, 0):
        tree.use(way)
    assert tree.victim() == 2
    tree.use(2)
    assert tree.victim() == 1  # root now points low, the lower split (last used 0) at 1


@pytest.mark.parametrize("beats", [2, 8, 32])
def test_a_line_in_beats_is_answered_with_its_data(beats):
    """The memory sends each line as ``beats`` transfers (low bits first, pauses between beats):
    every request is still answered once with its whole line."""
    params = dict(PARAMS, beats=beats)
    accepted, responses, fills, memory = run(params, 4, 2000, lines=12)
    assert len(accepted) > 80 and len(fills) > 20
    assert len(responses) == len(accepted)
    line_of = {}
    for _, rid, line, _ in accepted:
        line_of.setdefault(rid, []).append(line)
    for _, rid, data in responses:
        assert data == memory.line_data(line_of[rid].pop(0))


def test_beats_timing_and_a_fill_nobody_asked_for():
    """Four beats of 256 bits: the line is written at its last beat, and its request answered
    two cycles later, as a one-beat fill; a stray line raises the error at its last beat only,
    and is dropped whole."""
    model = L0CacheModel(size=1024, ways=2, mshrs=2, targets=2, id_bits=4, line_bits=8, beats=4)
    value = int.from_bytes(bytes(range(128)), "little")
    beat = [(value >> (256 * k)) & ((1 << 256) - 1) for k in range(4)]
    assert model.step(inputs({"id": 3, "line": 5}))["event"]["kind"] == MISS
    model.step(inputs())
    assert model.step(inputs())["mem_req"] == {"valid": 1, "payload": {"line": 5}}
    errors = []
    for k in range(4):  # a stray line first: its beats' line fields after the first are ignored
        fill = {"valid": 1, "payload": {"line": 9 if k == 3 else 5, "data": k}}
        errors.append(model.step(inputs(fill=fill))["err"]["unexpected_fill"])
    assert errors == [0, 0, 0, 1]
    trace = []
    for k in range(4):
        fill = {"valid": 1, "payload": {"line": 5, "data": beat[k]}}
        out = model.step(inputs(fill=fill))
        trace.append((out["fill"]["ready"], out["err"]["unexpected_fill"], out["resp"]["valid"]))
    assert trace == [(1, 0, 0)] * 4
    assert model.step(inputs())["resp"]["valid"] == 0
    assert model.step(inputs())["resp"] == {"valid": 1, "payload": {"id": 3, "data": value}}
