"""The EU issue cycle model against schedules worked out by hand from the rules (the PRM's
dependency check, the seed article's read-port explanation, the math rates), not from the
model's code: each expected schedule is derived in the test's comment."""

import pytest

from gpurtl.facts.eu import ExecSize as S
from gpurtl.facts.eu import MathFn, Op
from gpurtl.facts.eu import Type as T
from gpurtl.golden.eu import EuIssueModel, encode


def idle():
    return {
        "load": {"valid": 0, "thread": 0, "addr": 0, "inst": 0},
        "start": {"valid": 0, "mask": 0, "passes": 0},
        "hold": 0,
        "dp_ready": 1,
    }


def schedule(programs, clocks, inputs=None, **params):
    """Load ``programs`` (one per thread), start them once, return per clock the set of
    ``(thread, pc)`` issued, from the first clock after the start."""
    threads = params.setdefault("threads", len(programs))
    model = EuIssueModel(**params)
    for t, program in enumerate(programs):
        for a, word in enumerate(program):
            step = idle()
            step["load"] = {"valid": 1, "thread": t, "addr": a, "inst": word}
            model.step(step)
    step = idle()
    step["start"] = {"valid": 1, "mask": (1 << threads) - 1, "passes": 1}
    model.step(step)
    out = []
    for c in range(clocks):
        step = dict(idle(), **((inputs or {}).get(c, {})))
        o = model.step(step)
        out.append({(s["thread"], s["pc"]) for s in o["issue"] if s["valid"]})
    return out


def add(type_, dst, src, size=S.SIMD8, **kw):
    return encode(op=Op.ADD, size=size, type=type_, dst=dst, src0=src, src1=src, **kw)


def stream(type_, regs=8, count=8, **kw):
    return [add(type_, r % regs, r % regs, **kw) for r in range(count)] + [encode(op=Op.NOP, eot=1)]


def counts(sched):
    return [len(s) for s in sched]


def test_dependent_add_waits_its_latency():
    # r1 = r0 + r0, then r2 = r1 + r1: the second reads what the first writes, so it issues
    # fp_latency (9) clocks after it.
    prog = [add(T.F, 1, 0), add(T.F, 2, 1, eot=1)]
    sched = schedule([prog], 12, fp_latency=9)
    assert [c for c, s in enumerate(sched) if s] == [0, 9]


def test_read_port_limits_dual_issue_to_three_per_two_clocks():
    # Two threads of independent SIMD8 float adds (2 sources x 32 bytes = 64 each). While the
    # programs load, the port fills its 192-byte buffer. Clock 0 then has 192 + 96 = 288
    # bytes: two adds go (160 left); 256, 224, 192, 160, 128: two a clock while the buffer
    # drains to 0; then 96 (one add, 32 left), 128 (two), 96 (one), ...
    sched = schedule([stream(T.F, 16, 16), stream(T.F, 16, 16)], 11, read_bytes=96, depth=32)
    assert counts(sched) == [2, 2, 2, 2, 2, 2, 1, 2, 1, 2, 1]
    # Clock 0 pairs thread 0 with thread 1 (after it in round-robin order); clock 6's single
    # add is thread 0's (round robin restarts after thread 1).
    assert sched[0] == {(0, 0), (1, 0)} and sched[6] == {(0, 6)}


def test_wide_read_port_dual_issues_every_clock():
    sched = schedule([stream(T.F), stream(T.F)], 6, read_bytes=128)
    assert counts(sched) == [2, 2, 2, 2, 2, 2]


def test_integer_and_noddchk_adds_issue_alone():
    for prog in (stream(T.D), stream(T.F, noddchk=1)):
        sched = schedule([prog, prog], 6, read_bytes=512)
        assert counts(sched) == [1] * 6


def test_same_register_under_dual_issue_seven_threads():
    # Seven threads each run r0 = r0 + r0 (fp_latency 9). The full buffer (192) and 96 a
    # clock give 288, 256, 224 bytes: pairs 0 1 | 2 3 | 4 5, then thread 6 alone; every thread
    # then waits for its own write until 9 clocks after its issue: 7 adds per 9 clocks, where
    # the threads would otherwise issue 1.5 a clock.
    prog = [add(T.F, 0, 0) for _ in range(4)] + [encode(op=Op.NOP, eot=1)]
    sched = schedule([prog] * 7, 13, fp_latency=9)
    expect = [{(0, 0), (1, 0)}, {(2, 0), (3, 0)}, {(4, 0), (5, 0)}, {(6, 0)}]
    expect += [set()] * 5 + [{(0, 1), (1, 1)}, {(2, 1), (3, 1)}, {(4, 1), (5, 1)}, {(6, 1)}]
    assert sched == expect


def test_simd16_takes_a_pipe_for_two_clocks():
    # One thread of independent SIMD16 integer adds: pipe 0 is busy two clocks per add.
    prog = [add(T.D, 2 * r, 2 * r, size=S.SIMD16) for r in range(4)] + [encode(op=Op.NOP, eot=1)]
    sched = schedule([prog], 8, read_bytes=512)
    assert [c for c, s in enumerate(sched) if s][:4] == [0, 2, 4, 6]


@pytest.mark.parametrize(
    "fn, size, gap",
    [
        (MathFn.SQRT, S.SIMD8, 1),  # full rate
        (MathFn.POW, S.SIMD8, 2),  # half rate
        (MathFn.COS, S.SIMD8, 2),
        (MathFn.IDIV_Q, S.SIMD8, 16),  # 1/16
        (MathFn.IDIV_Q, S.SIMD4, 8),  # SIMD4 differs from SIMD8 only for idiv
        (MathFn.SQRT, S.SIMD16, 2),  # two passes
    ],
)
def test_math_rates(fn, size, gap):
    prog = [
        encode(op=Op.MATH, size=size, type=T.F, fn=fn, dst=2 * r, src0=14, src1=14)
        for r in range(3)
    ] + [encode(op=Op.NOP, eot=1)]
    sched = schedule([prog, prog], 2 * gap + 1, read_bytes=512)
    assert [c for c, s in enumerate(sched) if s] == [0, gap, 2 * gap]


def test_simd16_integer_divide_is_flagged():
    model = EuIssueModel(threads=1, read_bytes=512)
    model.mem[0][0] = encode(op=Op.MATH, size=S.SIMD16, type=T.D, fn=MathFn.IDIV_Q, dst=2)
    model.active[0], model.passes[0] = 1, 1
    out = model.step(idle())
    assert out["issue"][0]["valid"] and out["issue"][0]["illegal"]


def test_send_latency_lines_and_data_port():
    # Thread 0: a scattered read of 4 lines (latency 5 + 3 = 8, data port busy 4 clocks), then
    # a use of it. Thread 1: a block read, which waits for the data port until clock 4.
    t0 = [
        encode(op=Op.SEND, size=S.SIMD8, type=T.D, dst=0, src0=15, lines=3),
        add(T.D, 1, 0, eot=1),
    ]
    t1 = [encode(op=Op.SEND, size=S.SIMD8, type=T.D, dst=0, src0=15, eot=1)]
    sched = schedule([t0, t1], 10, hit_latency=5, miss_latency=30)
    assert sched[0] == {(0, 0)} and sched[4] == {(1, 0)} and sched[8] == {(0, 1)}
    assert all(not sched[c] for c in (1, 2, 3, 5, 6, 7))


def test_miss_latency_and_dp_ready():
    t0 = [
        encode(op=Op.SEND, size=S.SIMD8, type=T.D, dst=0, src0=15, miss=1),
        add(T.D, 1, 0, eot=1),
    ]
    # the data port refuses clocks 0 and 1: the send goes at 2, its use at 2 + 30
    stalls = {0: {"dp_ready": 0}, 1: {"dp_ready": 0}}
    sched = schedule([t0], 34, stalls, hit_latency=5, miss_latency=30)
    assert [c for c, s in enumerate(sched) if s] == [2, 32]


def test_noddclr_then_noddchk_chain():
    # The compiler's pattern: write r0 with NoDDClr, write r0 again with NoDDChk (no wait for
    # the first), then read r0: the read waits for the second write (int_latency 7).
    prog = [
        add(T.D, 0, 4, noddclr=1),
        add(T.D, 0, 5, noddchk=1),
        add(T.D, 1, 0, eot=1),
    ]
    sched = schedule([prog], 10, int_latency=7)
    assert [c for c, s in enumerate(sched) if s] == [0, 1, 8]
    # Without NoDDChk the second write waits for the held register forever.
    prog[1] = add(T.D, 0, 5)
    sched = schedule([prog], 40, int_latency=7)
    assert [c for c, s in enumerate(sched) if s] == [0]


def test_hold_stops_issue():
    sched = schedule([stream(T.D)], 5, {1: {"hold": 1}, 2: {"hold": 1}}, read_bytes=512)
    assert counts(sched) == [1, 0, 0, 1, 1]


def test_instruction_word_layout_by_hand():
    # Fields low bits first: op 3, size 2, type 2, fn 4, dst 4, src0..2 4 each, noddchk,
    # noddclr, lines 4, miss, rlen 2, eot.
    word = encode(op=Op.ADD, size=S.SIMD8, type=T.F, dst=3, src0=1, src1=2, eot=1)
    assert word == 1 | 2 << 3 | 0 << 5 | 3 << 11 | 1 << 15 | 2 << 19 | 1 << 36
    word = encode(op=Op.SEND, lines=15, miss=1, rlen=3, noddchk=1, noddclr=1)
    assert word == 5 | 1 << 27 | 1 << 28 | 15 << 29 | 1 << 33 | 3 << 34
    with pytest.raises(ValueError, match="`dst` must fit in 4 bits"):
        encode(dst=16)


def test_defaults_are_the_seed_article_and_prm_values():
    from gpurtl.facts.eu import GRF_BYTES, GRF_PER_THREAD, SEED, THREADS
    from gpurtl.golden.eu import PARAM_DEFAULTS

    assert PARAM_DEFAULTS["read_bytes"] == SEED["read_bytes_per_clock"].value == 96
    assert PARAM_DEFAULTS["threads"] == SEED["threads_per_eu"].value == THREADS["gen7.5"] == 7
    assert GRF_BYTES * GRF_PER_THREAD == 4096
    # hit and miss latencies: 7 threads x (N + 1) clocks for the article's N = 6 and 11
    assert PARAM_DEFAULTS["hit_latency"] == 7 * (SEED["hide_hit_instructions"].value + 1)
    assert PARAM_DEFAULTS["miss_latency"] == 7 * (SEED["hide_miss_instructions"].value + 1)
    assert all(seed.where and seed.text for seed in SEED.values())
