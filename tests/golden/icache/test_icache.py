"""The instruction cache's golden model against hand-worked traces and an independent LRU cache
(an ``OrderedDict`` per set, written here): replacement, the three prefetch sources, the
kernel-entry clamp, prefetch hits leaving the LRU order alone, and the stream rules."""

from collections import OrderedDict

import numpy as np
import pytest

from gpurtl.facts.inst_prefetch import ICacheGeometry
from gpurtl.golden.icache import HIT, MISS, PENDING, ICacheModel, word_of


def line_data(line):
    return int.from_bytes(bytes((line * 7 + k) & 0xFF for k in range(128)), "little")


class Bench:
    """Drives the model: one request source per stream, held until taken; the memory answers
    every request ``latency`` cycles after taking it, in order, always ready."""

    def __init__(self, latency=5, **geometry):
        self.model = ICacheModel(ICacheGeometry(**geometry))
        self.latency, self.cycle = latency, 0
        self.due, self.requested, self.answers = [], [], []
        self.kinds = []

    def step(self, fetch=None, start=None, pf=None, distance=0):
        fill = {"valid": 0, "payload": {"line": 0, "data": 0}}
        if self.due and self.due[0][0] <= self.cycle:
            line = self.due[0][1]
            fill = {"valid": 1, "payload": {"line": line, "data": line_data(line)}}
        inputs = {
            "fetch": {"valid": int(fetch is not None), "payload": {"pc": fetch or 0}},
            "resp": {"ready": 1},
            "start": {
                "valid": int(start is not None),
                "payload": dict(zip(("line", "lines"), start or (0, 0))),
            },
            "pf": {
                "valid": int(pf is not None),
                "payload": dict(zip(("line", "count"), pf or (0, 0))),
            },
            "distance": distance,
            "mem_req": {"ready": 1},
            "fill": fill,
        }
        out = self.model.step(inputs)
        if out["mem_req"]["valid"]:
            line = out["mem_req"]["payload"]["line"]
            self.requested.append(line)
            self.due.append((self.cycle + self.latency, line))
        if fill["valid"] and out["fill"]["ready"]:
            self.due.pop(0)
        if out["resp"]["valid"]:
            self.answers.append(out["resp"]["payload"])
        if out["event"]["valid"]:
            self.kinds.append(out["event"]["kind"])
        self.cycle += 1
        return out

    def offer(self, name, value, distance=0, limit=200):
        """Offer ``value`` on stream ``name`` until it is taken."""
        for _ in range(limit):
            if self.step(distance=distance, **{name: value})[name]["ready"]:
                return
        raise AssertionError(f"{name} {value} never taken")

    def fetch(self, line, distance=0):
        self.offer("fetch", line << 7, distance)

    def settle(self, cycles=60):
        for _ in range(cycles):
            self.step()


def test_hand_worked_lru_trace_one_set_two_ways():
    """A B A C B A in one set of two ways: A hits once; C evicts B (least recent), B evicts A,
    A evicts C."""
    bench = Bench(size=256, ways=2, line_bits=8)
    for line in (1, 2, 1, 3, 2, 1):
        bench.fetch(line)
        bench.settle(12)
    assert bench.kinds == [MISS, MISS, HIT, MISS, MISS, MISS]
    assert bench.requested == [1, 2, 3, 2, 1]
    assert [a["hit"] for a in bench.answers] == [0, 0, 1, 0, 0, 0]


@pytest.mark.parametrize("ways, size", [(1, 512), (2, 512), (4, 1024)])
def test_demand_fetches_agree_with_an_independent_lru_cache(ways, size):
    """Without prefetch, each fetch waits for its line, so the kinds are those of a plain LRU
    cache: hit if the line is among the ``ways`` most recent of its set."""
    rng = np.random.default_rng(ways)
    bench = Bench(latency=3, size=size, ways=ways, line_bits=9)
    sets = size // (128 * ways)
    reference = [OrderedDict() for _ in range(sets)]
    expected = []
    for _ in range(300):
        line = int(rng.integers(0, 3 * sets * ways // 2 + 1))
        order = reference[line % sets]
        expected.append(HIT if line in order else MISS)
        order[line] = True
        order.move_to_end(line)
        if len(order) > ways:
            order.popitem(last=False)
        pc = (line << 7) | (int(rng.integers(0, 32)) << 2)
        bench.offer("fetch", pc)
    bench.settle(10)
    assert bench.kinds == expected
    assert expected.count(HIT) > 50 and expected.count(MISS) > 50
    # Every answer carries the word at its pc, from the line the memory sent.
    for answer in bench.answers:
        assert answer["word"] == word_of(line_data(answer["pc"] >> 7), answer["pc"])


def test_kernel_entry_prefetch_is_clamped_to_entry_lines():
    bench = Bench(size=2048, ways=4, entry_lines=4, line_bits=10)
    bench.offer("start", (10, 6))
    bench.settle(40)
    assert bench.requested == [10, 11, 12, 13]
    for line in (10, 11, 12, 13, 14):
        bench.fetch(line)
        bench.settle(10)
    assert bench.kinds == [HIT, HIT, HIT, HIT, MISS]


def test_s_prefetch_inst_fetches_count_plus_one_lines_and_skips_present_ones():
    bench = Bench(size=2048, ways=4, line_bits=10)
    bench.fetch(41)
    bench.settle(10)
    bench.offer("pf", (40, 2))  # sdata 2: lines 40, 41 (present), 42
    bench.settle(40)
    assert bench.requested == [41, 40, 42]
    assert not bench.model.out


def test_sequential_prefetch_runs_distance_lines_ahead_of_a_new_line():
    bench = Bench(latency=20, size=2048, ways=4, line_bits=10)
    bench.fetch(5, distance=2)
    for _ in range(4):  # the fetch waits for line 5; lines 6 and 7 go out meanwhile
        bench.step(distance=2)
    assert bench.requested == [5, 6, 7]
    bench.settle(40)
    # Further fetches in line 5 do not set the sequence up again; line 6 moves it on to 7, 8.
    bench.offer("fetch", (5 << 7) | 8, distance=2)
    bench.fetch(6, distance=2)
    bench.settle(40)
    assert bench.requested == [5, 6, 7, 8]
    assert bench.kinds == [MISS, HIT, HIT]


def test_a_fetch_of_a_line_being_prefetched_is_a_pending_hit():
    bench = Bench(latency=30, size=2048, ways=4, line_bits=10)
    bench.offer("pf", (9, 0))
    bench.step()
    bench.fetch(9)
    assert bench.kinds == [PENDING]
    bench.settle(40)
    assert bench.answers[-1]["hit"] == 0 and bench.requested == [9]


def test_prefetch_hits_leave_the_lru_order_alone():
    """One set of two ways: A, then B; a prefetch of A finds it and must not make it recent,
    so C replaces A and B still hits. (A prefetch that touched A would make C replace B.)"""
    bench = Bench(size=256, ways=2, line_bits=8)
    for line in (1, 2):
        bench.fetch(line)
        bench.settle(10)
    bench.offer("pf", (1, 0))
    bench.settle(10)
    for line in (3, 2, 1):
        bench.fetch(line)
        bench.settle(10)
    assert bench.kinds == [MISS, MISS, MISS, HIT, MISS]
    assert bench.requested == [1, 2, 3, 1]


def test_start_wins_over_pf_and_both_wait_for_an_empty_range():
    bench = Bench(size=2048, ways=4, line_bits=10)
    out = bench.step(start=(100, 2), pf=(200, 0))
    assert out["start"]["ready"] == 1 and out["pf"]["ready"] == 0
    out = bench.step(pf=(200, 0))
    assert out["pf"]["ready"] == 0  # lines 100 and 101 still to go
    bench.settle(30)
    bench.offer("pf", (200, 0))
    bench.settle(30)
    assert bench.requested == [100, 101, 200]


def test_a_stray_fill_is_reported_and_dropped():
    model = ICacheModel(ICacheGeometry(line_bits=10))
    idle = {
        "fetch": {"valid": 0, "payload": {"pc": 0}},
        "resp": {"ready": 1},
        "start": {"valid": 0, "payload": {"line": 0, "lines": 0}},
        "pf": {"valid": 0, "payload": {"line": 0, "count": 0}},
        "distance": 0,
        "mem_req": {"ready": 1},
        "fill": {"valid": 1, "payload": {"line": 3, "data": 1}},
    }
    assert model.step(idle)["err"]["unexpected_fill"] == 1
    assert all(entry is None for entry in model.core.tags[3 % model.geometry.sets])
