"""The CU model's RT unit timing mode (golden/cu/rt_unit.py): its scheduling rules on a stub RT
unit of fixed latency, against cycles worked out by hand from the rules in the module doc
string; the memory port against the hierarchy's answer times."""

import pytest

from gpurtl.golden.cu import CuParams, WaveTrace
from gpurtl.golden.cu.rt_unit import HierarchyPort, TraceSource, run
from gpurtl.golden.memory import Level

_LEVELS = [Level("L0", 2048, 4, 1, 1.0, 4), Level("DRAM", 0, 1, 40, 1.0, 0)]


class _Delay:
    """An RT unit that takes a lane every cycle and returns it ``delay`` cycles later;
    ``bvhcnt`` counts wave instructions (up at a first lane, down when the result of a lane with
    ``last`` leaves) as a register (updates seen the next cycle)."""

    def __init__(self, delay, waves=4):
        self.delay, self.cycle = delay, 0
        self.flight = []  # (cycle out, wave, last)
        self.count = [0] * waves
        self.open = [False] * waves
        self.lasts = []  # the `last` bit of every lane taken

    def step(self, inputs):
        counts = list(self.count)
        leaving = self.flight[0] if self.flight and self.flight[0][0] == self.cycle else None
        out = {
            "inst": {"ready": 1},
            "out": {
                "valid": int(leaving is not None),
                "payload": {
                    "wave": leaving[1] if leaving else 0,
                    "last": leaving[2] if leaving else 0,
                    "result": {},
                },
            },
            "mem_req": {"valid": 0, "payload": {"line": 0}},
            "fill": {"ready": 1},
            "bvh": {"stall": 0, "bvhcnt": counts},
            "event": {"valid": 0, "kind": 0},
        }
        if leaving:
            self.flight.pop(0)
            self.count[leaving[1]] -= leaving[2]
        if inputs["inst"]["valid"]:
            wave, last = inputs["inst"]["payload"]["tag"], inputs["inst"]["payload"]["last"]
            self.flight.append((self.cycle + self.delay, wave, last))
            self.count[wave] += not self.open[wave]
            self.open[wave] = not last
            self.lasts.append(last)
        self.cycle += 1
        return out


def _params(**kw):
    base = dict(
        simds=2,
        slots_per_simd=2,
        vgpr_mode="static",
        setup_cycles=10,
        box_valu=3,
        pair_valu=5,
        instance_valu=1,
        shade_valu=4,
        lds_latency=7,
        levels=_LEVELS,
    )
    return CuParams(**dict(base, **kw))


def test_rules_by_hand():
    # one wave: a box node on one lane, then triangle pairs on two lanes
    wave = WaveTrace([[(0, 3, 0, 8, 0)], [(0, 4, 1, 0, 2), (1, 5, 1, 0, 1)]], [])
    idle = {"tag": 0, "node_ptr": [0, 0]}
    unit = _Delay(5)
    got = run([TraceSource(wave, idle)], _params(), unit, _port(), slots=4, idle=idle)
    assert unit.lasts == [1, 0, 1]  # `last` on each instruction's final lane
    # set-up 0..10, box VALU 10..13, issue 13, result out 18, bvhcnt 0 read at 19, stack
    # issued 20: the LDS takes the lane at 21, answers 7 later (28), the wave goes on at 29;
    # pair VALU 29..34, issue 34 (lanes taken 34, 35; out 39, 40), stack issued 42 (lanes
    # 43, 44; done 51); at 52 the loop ends, shading 52..56, the slot frees at 56
    assert got.instructions == [
        (0, "bvh", 13, 18),
        (0, "ds", 20, 28),
        (0, "bvh", 34, 40),
        (0, "ds", 42, 51),
    ]
    assert got.cycles == 57
    assert got.results == 3
    assert got.refused == {"full": 0, "other": 0}


def test_one_memory_instruction_a_cycle_and_the_simd_shared():
    # two waves on slots 0 and 2 share SIMD 0: the second's set-up waits for the first's
    waves = [WaveTrace([[(0, 3, 0, 8, 0)]], []) for _ in range(2)]
    idle = {"tag": 0, "node_ptr": [0, 0]}
    sources = [TraceSource(w, idle) for w in waves]
    got = run(sources, _params(slots_per_simd=1), _Delay(5), _port(), slots=2, idle=idle)
    issues = sorted((i, kind, issue) for i, kind, issue, _ in got.instructions)
    # slot 0 on SIMD 0, slot 1 on SIMD 1: both set up 0..10, box VALU 10..13; both want to
    # issue at 13: slot 0 does, slot 1 the cycle after
    assert [x for x in issues if x[1] == "bvh"] == [(0, "bvh", 13), (1, "bvh", 14)]


def _port():
    return HierarchyPort(_LEVELS[1:])


def test_memory_port_answers_when_the_hierarchy_says():
    port = HierarchyPort([Level("L1", 65536, 4, 40, 1.0, 8), Level("DRAM", 0, 1, 60, 1.0, 0)])
    idle_fill = {"valid": 0, "payload": {"line": 0, "data": 0}}
    request = {"mem_req": {"valid": 1, "payload": {"line": 9}}, "fill": {"ready": 0}}
    port.outputs(5, {"fill": idle_fill}, request)
    for cycle in range(6, 106):
        _, fill = port.inputs(cycle)
        if fill["valid"]:
            break
    # an L1 miss: 40 + 60 cycles after the request
    assert cycle == 105 and fill["payload"]["line"] == 9


def test_memory_port_sends_a_line_in_beats():
    """``beats=4``: the line goes out as four 256-bit transfers, low bits first, each held
    until the L0 takes it, the next offered the cycle after; the port then has nothing to
    offer."""
    value = int.from_bytes(bytes(range(128)), "little")
    port = HierarchyPort([Level("DRAM", 0, 1, 3, 1.0, 0)], make_line=lambda line: value, beats=4)
    idle_fill = {"valid": 0, "payload": {"line": 0, "data": 0}}
    port.outputs(0, {"fill": idle_fill}, {"mem_req": {"valid": 1, "payload": {"line": 7}}})
    got, cycle = [], 1
    while cycle < 20:
        _, fill = port.inputs(cycle)
        taken = fill["valid"] and cycle % 2 == 0  # the L0 takes a beat every other cycle
        if fill["valid"]:
            assert fill["payload"]["line"] == 7
        if taken:
            got.append(fill["payload"]["data"])
        no_req = {"valid": 0, "payload": {"line": 0}}
        port.outputs(cycle, {"fill": fill}, {"mem_req": no_req, "fill": {"ready": int(taken)}})
        cycle += 1
    assert len(got) == 4
    assert sum(data << (256 * k) for k, data in enumerate(got)) == value
    assert all(data < 1 << 256 for data in got)


def _one_set_rt(replacement):
    """An ``rt_unit`` build whose L0 is one set of 4 ways."""
    return {
        "size": 512,
        "ways": 4,
        "mshrs": 4,
        "targets": 4,
        "id_bits": 4,
        "line_bits": 8,
        "replacement": replacement,
        "beats": 1,
        "tag_bits": 2,
        "ftz": False,
    }


@pytest.mark.parametrize("replacement, hits", [("lru", 4), ("plru", 5)])
def test_rt_unit_mode_takes_the_builds_replacement(replacement, hits):
    """The RT unit mode's L0 follows the build's ``replacement``: the worked example of
    Wikipedia's "Cache replacement policies" (section "Pseudo-LRU (PLRU)") as one lane an
    intersect instruction. Lines A, C, B, D fill the set's ways in that order, C, B, D, A hit,
    E misses and evicts C under LRU but B under tree-PLRU, so the final C misses under LRU
    only."""
    from gpurtl.golden.cu.rt_unit import simulate_rt_unit

    a, c, b, d, e = 10, 11, 12, 13, 14
    order = [a, c, b, d, c, b, d, a, e, c]
    wave = WaveTrace([[(0, line, 0, 8, 0)] for line in order], [])
    got = simulate_rt_unit(
        [wave], _params(), _one_set_rt(replacement), accel_groups=8, accel_depth=15
    )
    assert got.lookups == {"hit": hits, "pending_hit": 0, "miss": len(order) - hits}
