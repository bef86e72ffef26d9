"""The golden model of the LDS BVH stack instructions against a second formulation (a Python list
of the live entries, push selection written as prefix rules) and hand-worked directed cases."""

import random

import pytest

from gpurtl.facts.ds_bvh_stack import (
    INVALID_NODE,
    PRIM_RANGE_UPDATE,
    SKIP_0_3,
    SKIP_0_7,
    SKIP_4_7,
    TERMINAL_NODE,
    StackOp,
)
from gpurtl.golden.ray_accel import ds_bvh_stack as golden
from gpurtl.golden.ray_accel.ds_bvh_stack import (
    BvhStackModel,
    LdsMemory,
    ds_bvh_stack,
    pack_stack_addr,
    unpack_stack_addr,
)

BOX = [0x1005 + 0x100 * k for k in range(16)]  # BVH8 box pointers (type 5)
INST = [0x80006 + 0x100 * k for k in range(4)]  # instance pointers (type 6)


def reg(valid=0, etr=0, addr=0, base=0, tlas=0, ovf=0, b2t=0):
    return pack_stack_addr(
        {
            "valid_entries": valid,
            "entries_to_tlas": etr,
            "addr": addr,
            "base": base,
            "has_tlas": tlas,
            "has_overflowed": ovf,
            "blas2tlas_pop": b2t,
        }
    )


def fields(r):
    f = unpack_stack_addr(r)
    return (
        f["valid_entries"],
        f["entries_to_tlas"],
        f["addr"],
        f["has_tlas"],
        f["has_overflowed"],
        f["blas2tlas_pop"],
    )


class Lane:
    """One lane's stack driven through the golden model, the register chained."""

    def __init__(self, size=16, base=3):
        self.size, self.lds, self.r = size, LdsMemory(32 * size + 32), reg(base=base)

    def __call__(self, op, last, data, prim_range=False):
        data = list(data) + [INVALID_NODE] * (8 - len(data))
        self.r, dst = ds_bvh_stack(
            op, self.r, last, data, self.lds, stack_size=self.size, prim_range=prim_range
        )
        return dst


P81, P82, P41 = StackOp.PUSH8_POP1, StackOp.PUSH8_POP2, StackOp.PUSH4_POP1
NONE = INVALID_NODE


# --- hand-worked directed cases -----------------------------------------------------------------


def test_register_fields_positions():
    # gpurt pack_stack_addr: [31] b2t, [30] overflow, [29] has TLAS, [28:15] base, [14:10] addr,
    # [9:5] entries to TLAS, [4:0] valid entries.
    assert reg(valid=1) == 1 and reg(etr=1) == 1 << 5 and reg(addr=1) == 1 << 10
    assert reg(base=1) == 1 << 15 and reg(tlas=1) == 1 << 29 and reg(ovf=1) == 1 << 30
    assert reg(b2t=1) == 1 << 31 and reg(base=0x3FFF) == 0x3FFF << 15
    assert unpack_stack_addr(0xFFFFFFFF) == {
        "valid_entries": 31,
        "entries_to_tlas": 31,
        "addr": 31,
        "base": 0x3FFF,
        "has_tlas": 1,
        "has_overflowed": 1,
        "blas2tlas_pop": 1,
    }


def test_push8_order_and_lds_interleave():
    lane = Lane(base=5)
    assert lane(P81, NONE, BOX[:8]) == BOX[0]  # slot 0 (closest) comes back first
    assert fields(lane.r) == (7, 7, 7, 0, 0, 0)
    # slot 7 went in first, at entry 0: DWORD base + 0; slot 1 at entry 6: DWORD 5 + 6 * 32
    assert lane.lds.read(5) == BOX[7] and lane.lds.read(5 + 6 * 32) == BOX[1]
    assert [lane(P81, NONE, []) for _ in range(7)] == BOX[1:8]
    assert lane(P81, NONE, []) == TERMINAL_NODE and fields(lane.r) == (0, 0, 0, 0, 0, 0)


def test_overflow_then_walkback():
    lane = Lane(size=4)
    assert lane(P81, NONE, BOX[:8]) == BOX[0]  # 8 pushes on a ring of 4: slots 7..4 are lost
    assert fields(lane.r) == (3, 3, 3, 0, 1, 0)
    assert [lane(P81, NONE, []) for _ in range(3)] == [BOX[1], BOX[2], BOX[3]]
    assert lane(P81, NONE, []) == INVALID_NODE  # empty after an overflow: walk back
    assert fields(lane.r)[0] == 0 and fields(lane.r)[4] == 1
    # walk-back: the parent's children again, last = the child visited last (slot 3); only the
    # siblings farther than it (slots 4..7) are pushed, slot 4 returns first
    lane.r = reg()  # the shader restarts with a clean register
    assert lane(P81, BOX[3], BOX[:8]) == BOX[4]
    assert fields(lane.r) == (3, 3, 3, 0, 0, 0)
    # walk-back through a node whose children do not include last: nothing pushed
    assert lane(P81, 0x7775, BOX[8:16]) == BOX[5]


def test_walkback_match_on_slot_7_pushes_nothing():
    lane = Lane()
    assert lane(P81, BOX[7], BOX[:8]) == TERMINAL_NODE


def test_skip_values():
    lane = Lane()
    # SKIP_4_7 in slot 7 (bit 2 clear): slots 6..4 are not pushed, 3..0 are
    assert lane(P81, NONE, BOX[:4] + [BOX[4], BOX[5], BOX[6], SKIP_4_7]) == BOX[0]
    assert fields(lane.r)[0] == 3
    lane = Lane()
    assert lane(P81, NONE, BOX[:7] + [SKIP_0_7]) == TERMINAL_NODE  # nothing at all
    lane = Lane()
    # SKIP_0_3 in slot 5 (bit 1 clear): 7, 6, 4 pushed, 3..0 not
    assert lane(P81, NONE, BOX[:5] + [SKIP_0_3, BOX[6], BOX[7]]) == BOX[4]
    assert [lane(P81, NONE, []) for _ in range(3)] == [BOX[6], BOX[7], TERMINAL_NODE]
    lane = Lane()
    # SKIP_0_3 in slot 2: slots 1, 0 skipped
    assert lane(P81, NONE, [BOX[0], BOX[1], SKIP_0_3] + BOX[3:8]) == BOX[3]
    # INVALID_NODE slots are simply not pushed and skip nothing
    lane = Lane()
    assert lane(P81, NONE, [NONE, BOX[1], NONE, BOX[3], NONE, NONE, NONE, NONE]) == BOX[1]
    assert fields(lane.r)[0] == 1


def test_instance_pop_sets_tlas_and_blas2tlas_pop():
    lane = Lane()
    # TLAS node: an instance (closest) and two boxes
    assert lane(P81, NONE, [INST[0], BOX[1], BOX[2]]) == INST[0]
    assert fields(lane.r) == (2, 0, 2, 1, 0, 0)  # BLAS begins: 0 entries to the TLAS
    # the instance result: slot 7 = BLAS root, the rest SKIP_0_7 style: push the root only
    assert lane(P81, NONE, [NONE] * 6 + [SKIP_0_7, BOX[9]]) == BOX[9]
    assert fields(lane.r) == (2, 0, 2, 1, 0, 0)
    assert lane(P81, NONE, [BOX[10], BOX[11]]) == BOX[10]
    assert fields(lane.r) == (3, 1, 3, 1, 0, 0)
    assert lane(P81, NONE, []) == BOX[11]
    assert fields(lane.r) == (2, 0, 2, 1, 0, 0)
    # the BLAS part is exhausted: this pop returns to the TLAS
    assert lane(P81, NONE, []) == BOX[1]
    assert fields(lane.r) == (1, 0, 1, 0, 0, 1)
    assert lane(P81, NONE, []) == BOX[2] and fields(lane.r) == (0, 0, 0, 0, 0, 0)


def test_nested_instance_drops_the_tlas_part():
    lane = Lane()
    assert lane(P81, NONE, [INST[0], BOX[1], BOX[2]]) == INST[0]  # 2 TLAS entries below
    assert lane(P81, NONE, [INST[1], BOX[3]]) == INST[1]  # an instance in a BLAS
    # the TLAS part (2 entries) is dropped: valid = entries to TLAS = 1, overflow for walk-back
    assert fields(lane.r) == (1, 0, 3, 1, 1, 0)
    assert lane(P81, NONE, []) == BOX[3]
    assert fields(lane.r) == (0, 0, 2, 0, 1, 1)
    assert lane(P81, NONE, []) == INVALID_NODE


def test_blas_overflowing_the_tlas_clears_has_tlas():
    lane = Lane(size=4)
    assert lane(P81, NONE, [INST[0], BOX[1]]) == INST[0]  # 1 TLAS entry
    assert lane(P81, NONE, BOX[4:8]) == BOX[4]  # 4 pushes: the TLAS entry is overwritten
    assert fields(lane.r) == (3, 3, 0, 1, 1, 0)  # entries to TLAS reached 4, then popped
    assert lane(P81, NONE, [BOX[8], BOX[9]]) == BOX[8]
    # the push with entries to TLAS == 4 cleared has_tlas
    assert fields(lane.r) == (3, 3, 1, 0, 1, 0)


def test_primitive_range_continuation():
    tri = 0x4000
    # END_OF_PAIR: pair 1 -> pair 2, and pair 3 (type 3) -> pair 4 (type 8)
    for ptr, nxt in [(tri | 1, tri | 2), (tri | 3, tri | 8), (tri | 9, tri | 10)]:
        lane = Lane()
        assert (
            lane(P81, PRIM_RANGE_UPDATE | 0, [BOX[0]] * 6 + [SKIP_0_7, ptr], prim_range=True) == nxt
        )
        assert fields(lane.r)[0] == 0
    # END_OF_NODE: pair 0 of the next 128-byte node
    lane = Lane()
    assert (
        lane(P81, PRIM_RANGE_UPDATE | 1, [BOX[0]] * 7 + [tri | 10], prim_range=True) == tri + 0x10
    )
    # END_OF_RANGE: nothing pushed, the stack top comes back
    lane = Lane()
    lane(P81, NONE, [BOX[0], BOX[3]])
    assert lane(P81, PRIM_RANGE_UPDATE | 2, [BOX[1]] * 7 + [tri | 1], prim_range=True) == BOX[3]
    # without OFFSET1[1] the same last_node_ptr is a plain special value: push all (slot 7 too)
    lane = Lane()
    assert (
        lane(P81, PRIM_RANGE_UPDATE | 0, [BOX[0], NONE, NONE, NONE, NONE, NONE, NONE, tri | 1])
        == BOX[0]
    )
    assert lane(P81, NONE, []) == tri | 1


def test_rtip31_triangles_count_as_visited():
    # walk-back from a child that is not in the node: the 3.0 rules push nothing; the 3.1 rules
    # treat the triangles (sorted first) as visited and push the boxes after them
    data = [0x4000, 0x4001, BOX[2], BOX[3], BOX[4], BOX[5], NONE, NONE]
    lane = Lane()
    assert lane(P81, 0x7775, data, prim_range=True) == BOX[2]
    assert [lane(P81, NONE, []) for _ in range(4)] == BOX[3:6] + [TERMINAL_NODE]
    assert Lane()(P81, 0x7775, data) == TERMINAL_NODE
    # a triangle above the last visited child moves the cut up (3.1) or is pushed (3.0)
    data = [BOX[0], BOX[1], BOX[2], 0x4008, BOX[4], NONE, NONE, NONE]
    lane = Lane()
    assert lane(P81, BOX[1], data, prim_range=True) == BOX[4]
    assert lane(P81, NONE, []) == TERMINAL_NODE
    lane = Lane()
    assert lane(P81, BOX[1], data) == BOX[2]
    assert [lane(P81, NONE, []) for _ in range(3)] == [0x4008, BOX[4], TERMINAL_NODE]
    # walk-back from a triangle: the data stays valid (3.1 only)
    assert Lane()(P81, 0x7771, [BOX[0], BOX[1]], prim_range=True) == BOX[0]
    assert Lane()(P81, 0x7771, [BOX[0], BOX[1]]) == TERMINAL_NODE


def test_pop2_triangle_pair():
    lane = Lane()
    tri1 = 0x4000 | 1
    assert lane(P82, NONE, [tri1, BOX[1]]) == (0x4000, tri1)  # both triangles of the pair
    assert fields(lane.r) == (1, 1, 1, 0, 0, 0)  # one entry popped only


def test_pop2_two_entries_and_instance_boundary():
    lane = Lane()
    assert lane(P82, NONE, [BOX[0], BOX[1], BOX[2]]) == (BOX[1], BOX[0])
    assert fields(lane.r) == (1, 1, 1, 0, 0, 0)
    # the next entry is an instance: not popped
    lane = Lane()
    assert lane(P82, NONE, [BOX[0], INST[0], BOX[2]]) == (BOX[0], INVALID_NODE)
    assert fields(lane.r) == (2, 2, 2, 0, 0, 0)
    # popping an instance: the second pop would cross into the TLAS part
    lane = Lane()
    assert lane(P82, NONE, [INST[0], BOX[1]]) == (INST[0], INVALID_NODE)
    assert fields(lane.r) == (1, 0, 1, 1, 0, 0)
    # one entry only
    lane = Lane()
    assert lane(P82, NONE, [BOX[5]]) == (BOX[5], INVALID_NODE)
    assert lane(P82, NONE, []) == (TERMINAL_NODE, INVALID_NODE)


def test_pop2_ignores_the_31_rules():
    # the emulation runs the pop2 push with the RT IP 3.0 rules: triangles do not match and a
    # range-update last_node_ptr is an ordinary special value
    lane = Lane()
    assert lane(P82, 0x7775, [0x4000, BOX[1], BOX[2]], prim_range=True) == (
        TERMINAL_NODE,
        INVALID_NODE,
    )


def test_push4_reads_four_dwords():
    lane = Lane()
    assert lane(P41, NONE, BOX[:8]) == BOX[0]
    assert fields(lane.r)[0] == 3
    assert [lane(P41, NONE, []) for _ in range(4)] == [BOX[1], BOX[2], BOX[3], TERMINAL_NODE]
    lane = Lane()
    assert lane(P41, BOX[1], BOX[:4]) == BOX[2]  # walk-back: slots 2, 3


def test_parameters_are_checked():
    with pytest.raises(ValueError, match="stack_size"):
        ds_bvh_stack(P81, 0, NONE, [NONE] * 8, LdsMemory(64), stack_size=0)
    with pytest.raises(ValueError, match="lanes"):
        BvhStackModel(lanes=3)
    with pytest.raises(IndexError):
        LdsMemory(4).read(4)


def test_block_model_refuses_registers_outside_its_lds():
    model = BvhStackModel(stack_size=8, waves=2, lanes=4)
    req = {
        "op": "PUSH8_POP1",
        "last_node_ptr": NONE,
        "data": BOX[:8],
        "tri_size_opt": 0,
        "prim_range": 0,
    }
    ok = model({**req, "stack_addr": reg(base=model.base_of(1, 3))})
    assert ok["error"] == 0 and ok["dst0"] == BOX[0]
    for bad in (reg(base=4), reg(base=9 * 32 + 1), reg(base=32, addr=8), reg(valid=9), reg(etr=9)):
        out = model({**req, "stack_addr": bad})
        assert out["error"] == 1 and out["dst0"] == out["dst1"] == INVALID_NODE
        assert pack_stack_addr(out["stack_addr"]) == bad
    assert model.lds.read(model.base_of(0, 0)) == 0  # nothing written by the refusals


# --- a second formulation -----------------------------------------------------------------------


def _special(p):
    return p >> 3 == 0x1FFFFFFF


def ref_pushes(last, data, rules31):
    """Push list (in push order) by prefix rules instead of the emulation's running flags."""
    walkback = not _special(last)
    if rules31 and not walkback and not last & 4:  # primitive-range update
        if last & 2 or _special(data[7]):
            return []
        p = data[7]
        p = (p & ~0xF) + 0x10 if last & 1 else (p + 5 if p & 0xF == 3 else p + 1)
        return [p & 0xFFFFFFFF]
    hits = [i for i in range(8) if data[i] == last or (rules31 and data[i] & 7 <= 3)]
    if walkback and not hits and not (rules31 and last & 7 <= 3):
        return []
    cut = max(hits) if walkback and hits else -1  # slots <= cut were visited already
    setters = [i for i in range(7, -1, -1) if i >= cut and _special(data[i])]
    upper = [i for i in setters if i >= 4]
    stop47 = next((i for i in upper if not data[i] & 4), -1)
    skip03 = (
        4
        if any(not data[i] & 2 for i in upper if i >= stop47)
        else next((i for i in setters if i < 4 and not data[i] & 2), -1)
    )
    order = [i for i in range(7, 3, -1) if i > stop47] + [i for i in range(3, -1, -1) if i > skip03]
    return [data[i] for i in order if i > cut and not _special(data[i])]


class ListStack:
    """The stack as a Python list of live entries (bottom first) with explicit bookkeeping."""

    def __init__(self, size):
        self.size, self.live = size, []
        self.etr = self.addr = self.tlas = self.ovf = self.b2t = 0

    def push(self, p):
        if len(self.live) == self.size:
            self.live.pop(0)  # the oldest entry is overwritten
            self.ovf = 1
        self.live.append(p)
        self.addr = (self.addr + 1) % self.size
        if self.etr == self.size:  # the TLAS part is gone
            self.tlas = 0
        self.etr = min(self.etr + 1, self.size)

    def pop(self):
        crossing = self.etr == 0 and self.tlas
        if not self.live:
            self.tlas = self.b2t = 0
            return INVALID_NODE if self.ovf else TERMINAL_NODE
        self.b2t = int(bool(crossing))
        if crossing:
            self.tlas = 0
        p = self.live.pop()
        self.addr = (self.addr - 1) % self.size
        self.etr = max(self.etr - 1, 0)
        if p & 7 == 6:
            if self.tlas:  # keep only the BLAS part
                self.live = self.live[len(self.live) - self.etr :]
                self.ovf = 1
            self.tlas, self.etr = 1, 0
        return p

    def peek_second(self):
        if (self.etr == 0 and self.tlas) or not self.live or self.live[-1] & 7 == 6:
            return INVALID_NODE
        self.addr = (self.addr - 1) % self.size
        self.etr = max(self.etr - 1, 0)
        return self.live.pop()

    def step(self, op, last, data, prim_range):
        if op == P41:
            data = data[:4] + [INVALID_NODE] * 4
        for p in ref_pushes(last, data, op == P81 and prim_range):
            self.push(p)
        first = self.pop()
        if op != P82:
            return first
        if first & 7 == 1:
            return (first & ~7, first)
        second = self.peek_second()
        return (first, second) if second == INVALID_NODE else (second, first)

    def fields(self):
        return (len(self.live), self.etr, self.addr, self.tlas, self.ovf, self.b2t)


def random_step(rng):
    """A random instruction: pointers of every kind, walk-backs, range updates, skips."""
    op = rng.choice([P81, P81, P81, P82, P41])
    pool = (
        BOX
        + INST
        + [0x4000 | t for t in (0, 1, 2, 3, 8, 9, 10, 11)]
        + [INVALID_NODE] * 6
        + [SKIP_0_3, SKIP_4_7, SKIP_0_7, 0xFFFFFFF8, 0xFFFFFFFA, TERMINAL_NODE]
    )
    data = [rng.choice(pool) for _ in range(8)]
    if rng.random() < 0.3:
        data = (
            sorted(data[: rng.randint(0, 8)], key=lambda p: p == INVALID_NODE) + [INVALID_NODE] * 8
        )
        data = data[:8]
    roll = rng.random()
    if roll < 0.55:
        last = INVALID_NODE
    elif roll < 0.75:
        last = rng.choice(data)
    elif roll < 0.9:
        last = PRIM_RANGE_UPDATE | rng.randrange(4)
    else:
        last = rng.choice(pool + [0x7771, 0x12345675])
    return op, last, data, rng.random() < 0.6


@pytest.mark.parametrize("size", [1, 3, 4, 8, 16, 31])
def test_golden_matches_list_stack(size):
    rng = random.Random(size)
    for run in range(40):
        lane, ref = Lane(size=size, base=rng.randrange(32)), ListStack(size)
        for _ in range(60):
            op, last, data, prim = random_step(rng)
            got = lane(op, last, data, prim)
            assert got == ref.step(op, last, data, prim), (run, op, hex(last), data)
            assert fields(lane.r) == ref.fields()


def test_second_formulation_catches_a_broken_model(monkeypatch):
    # a model that pushes slot 0 first (the ISA order read the wrong way round) must be caught
    real = golden.push_slots
    monkeypatch.setattr(golden, "push_slots", lambda *a, **k: real(*a, **k)[::-1])
    rng = random.Random(1)
    lane, ref = Lane(), ListStack(16)
    mismatches = 0
    for _ in range(200):
        op, last, data, prim = random_step(rng)
        mismatches += lane(op, last, data, prim) != ref.step(op, last, data, prim)
    assert mismatches > 20


@pytest.mark.parametrize("params", [{}, {"stack_size": 8, "waves": 3, "lanes": 4}])
def test_rows_equal_the_dictionary_model(params):
    """The word-row path (what sessions and the fast backend use) gives the dictionary path's
    answers, instruction by instruction with the LDS carrying over, misuse rows included."""
    import numpy as np

    from gpurtl.sim.core import registry
    from gpurtl.sim.core.words import dicts_from_words, words_from_dicts

    block = registry.get("ds_bvh_stack")
    params = block.resolve(params)
    requests = block.stimulus(np.random.default_rng(4), 3000, **params)
    in_layout, out_layout = block.layouts(**params)
    model = BvhStackModel(**params)
    expected = [model(r) for r in requests]
    words = words_from_dicts(in_layout, requests)
    rows_model = BvhStackModel(**params)
    got = np.concatenate([rows_model.rows(words[k : k + 700]) for k in range(0, len(words), 700)])
    assert dicts_from_words(out_layout, got) == expected
    assert sum(e["error"] for e in expected) > 10  # misuse rows are in the stimulus
