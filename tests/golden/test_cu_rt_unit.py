"""The CU model's RT unit timing mode (golden/cu/rt_unit.py): its scheduling rules on a stub RT
unit of fixed latency, against cycles worked out by hand from the rules in the module doc
string; the memory port against the hierarchy's answer times."""

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
