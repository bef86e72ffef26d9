"""The memory hierarchy's temporal hints and scopes (golden/memory), on hand-worked sequences:
each rule of :class:`~gpurtl.golden.memory.HintPolicy`, its alternatives, the split hints'
near and far halves, scoped loads, stores and invalidations; and the default hint reproduces
an independent plain-LRU model access for access."""

from collections import OrderedDict

import numpy as np
import pytest

from gpurtl.facts.memory_hints import TH, Scope
from gpurtl.golden.cu import CuParams, WaveTrace, simulate
from gpurtl.golden.memory import Hierarchy, HintPolicy, Level


def levels(l0_ways=2, l0_sets=1):
    return [
        Level("L0", 128 * l0_ways * l0_sets, l0_ways, 10, 1.0, 0, scope=Scope.CU),
        Level("L1", 128 * 64, 4, 20, 1.0, 0, scope=Scope.SE),
        Level("L2", 128 * 256, 4, 50, 1.0, 0, scope=Scope.DEV),
        Level("DRAM", 0, 1, 100, 1.0, 0),
    ]


def in_l0(h, line):
    c = h.caches[0]
    return line in c.tags[line % c.sets]


def run(h, seq, t0=0):
    """Access ``(line, th)`` pairs 1000 cycles apart (every fill back before the next)."""
    for k, (line, th) in enumerate(seq):
        h.access(line, t0 + 1000 * k, th=th)


A, B, C = 0, 1, 2  # one set (a one-set L0 of two ways)


@pytest.mark.parametrize("nt_hit, evicted", [("keep", A), ("touch", B)])
def test_a_non_temporal_hit_leaves_the_lru_order(nt_hit, evicted):
    h = Hierarchy(levels(), HintPolicy(nt_hit=nt_hit))
    run(h, [(A, TH.RT), (B, TH.RT), (A, TH.NT), (C, TH.RT)])
    assert h.stats()["L0"]["hits"] == 1
    assert not in_l0(h, evicted) and in_l0(h, A + B - evicted) and in_l0(h, C)


@pytest.mark.parametrize("nt_fill, present", [("lru", [A, C]), ("mru", [B, C]), ("bypass", [A, C])])
def test_a_non_temporal_fill(nt_fill, present):
    """A, then B non-temporal, then C: B went in at the LRU end (C evicts it), as the most
    recent (C evicts A), or not at all (C takes the free way)."""
    h = Hierarchy(levels(), HintPolicy(nt_fill=nt_fill))
    run(h, [(A, TH.RT), (B, TH.NT)])
    assert in_l0(h, B) == (nt_fill != "bypass")
    run(h, [(C, TH.RT)], t0=5000)
    assert sorted(line for line in (A, B, C) if in_l0(h, line)) == present


def test_high_temporal_lines_are_protected_a_number_of_times():
    """A high-temporal, then B and C and D: each miss would evict A (the LRU line) but takes the
    other line instead, twice (``ht_protect=2``); the third miss evicts A."""
    h = Hierarchy(levels(), HintPolicy(ht_protect=2))
    run(h, [(A, TH.HT), (B, TH.RT), (C, TH.RT)])
    assert in_l0(h, A) and not in_l0(h, B)
    run(h, [(3, TH.RT)], t0=5000)
    assert in_l0(h, A) and not in_l0(h, C)
    run(h, [(4, TH.RT)], t0=9000)
    assert not in_l0(h, A)
    off = Hierarchy(levels(), HintPolicy(ht_protect=0))
    run(off, [(A, TH.HT), (B, TH.RT), (C, TH.RT)])
    assert not in_l0(off, A)


@pytest.mark.parametrize("lu_hit", ["evict", "demote"])
def test_last_use_lets_the_line_go(lu_hit):
    h = Hierarchy(levels(), HintPolicy(lu_hit=lu_hit))
    run(h, [(A, TH.RT), (B, TH.RT), (A, TH.LU)])
    assert h.stats()["L0"]["hits"] == 1
    assert in_l0(h, A) == (lu_hit == "demote")
    run(h, [(C, TH.RT)], t0=5000)  # demoted: A is the LRU line and goes now
    assert not in_l0(h, A) and in_l0(h, B)


def test_split_hints_apply_their_near_half_to_l0_and_l1_and_far_half_beyond():
    """``NT_RT`` on a miss everywhere: non-temporal in the L0 (at the LRU end: the next miss
    takes it), regular in the L2 (as the most recent); ``RT_NT`` the other way round."""
    h = Hierarchy(levels(), HintPolicy())
    assert [c.hint_class(TH.NT_RT) for c in h.caches[:3]] == ["NT", "NT", "RT"]
    assert [c.hint_class(TH.RT_NT) for c in h.caches[:3]] == ["RT", "RT", "NT"]
    run(h, [(A, TH.RT), (B, TH.NT_RT), (C, TH.RT)])
    assert not in_l0(h, B) and in_l0(h, A)
    l2 = h.caches[2]
    assert list(l2.tags[B % l2.sets]) == [B]  # in the L2, its own set: kept


def test_a_wider_scope_is_not_served_by_a_narrower_level():
    h = Hierarchy(levels(), HintPolicy())
    assert h.access(A, 0) == 180  # cold: 10 + 20 + 50 + 100
    assert h.access(A, 1000) == 1010  # an L0 hit at CU scope
    assert h.access(A, 2000, scope=Scope.SE) == 2030  # past the L0, an L1 hit
    assert h.access(A, 3000, scope=Scope.DEV) == 3080  # an L2 hit
    assert h.access(A, 4000, scope=Scope.SYS) == 4180  # to memory
    assert h.stats()["L0"]["misses"] == 4 and in_l0(h, A)  # refilled each time


def test_a_store_is_visible_at_its_scope_and_invalidations_clear_narrower_levels():
    h = Hierarchy(levels(), HintPolicy())
    assert h.store(A, 0, scope=Scope.CU) == 10
    assert h.store(B, 100, scope=Scope.SE) == 130
    assert h.store(C, 200, scope=Scope.SYS) == 380
    l1 = h.caches[1]
    assert in_l0(h, A) and not in_l0(h, B) and B in l1.tags[B % l1.sets]
    assert A in l1.tags[A % l1.sets]  # written through below the L0
    h.access(B, 1000)
    assert in_l0(h, B)
    h.invalidate(Scope.SE)  # the L0 only
    assert not in_l0(h, A) and not in_l0(h, B) and B in l1.tags[B % l1.sets]
    h.invalidate(Scope.DEV)  # L0 and L1
    assert not l1.tags[B % l1.sets]
    assert h.access(B, 2000) == 2080  # the L2 kept it


def test_per_tag_statistics_and_the_serving_level():
    h = Hierarchy(levels(), HintPolicy())
    h.access(A, 0, tag="node")
    h.access(A, 1000, tag="node")
    assert h.served == 0
    h.access(B, 2000, tag="shade")
    assert h.served == 3
    by = h.stats()["L0"]["by_tag"]
    assert by["node"]["hits"] == 1 and by["node"]["accesses"] == 2
    assert by["shade"]["misses"] == 1 and "by_tag" in h.stats()["DRAM"]
    assert "by_tag" not in Hierarchy(levels()).stats()["L0"]


def test_the_default_hint_is_plain_lru():
    """Random traffic with the default hint and scope, given explicitly: the L0's hits and
    misses are those of an independent LRU model (an OrderedDict per set), access for access."""
    rng = np.random.default_rng(3)
    h = Hierarchy(levels(l0_ways=4, l0_sets=4))
    ref = [OrderedDict() for _ in range(4)]
    for k in range(3000):
        line = int(rng.integers(0, 40))
        before = h.caches[0].hits
        h.access(line, 1000 * k, th=TH.RT, scope=Scope.CU)
        s = ref[line % 4]
        hit = line in s
        if hit:
            s.move_to_end(line)
        else:
            if len(s) == 4:
                s.popitem(last=False)
            s[line] = True
        assert (h.caches[0].hits > before) == hit, k


def test_bad_policy_is_refused():
    with pytest.raises(ValueError, match="`nt_fill` must be one of"):
        HintPolicy(nt_fill="drop")
    with pytest.raises(ValueError, match="`ht_protect`"):
        HintPolicy(ht_protect=-1)
    with pytest.raises(ValueError, match="reserved"):
        Hierarchy(levels()).access(A, 0, th=TH.RESERVED)


def _cu_waves(n=96):
    """Waves that revisit 14 node lines and each stream 64 shading lines nobody reads again."""
    rng = np.random.default_rng(1)
    waves = []
    for w in range(n):
        its = [[(lane, int(rng.integers(0, 14)), 0, 8, 0) for lane in range(8)] for _ in range(6)]
        waves.append(WaveTrace(its, [10_000 + 64 * w + k for k in range(64)]))
    return waves


def test_the_cu_model_takes_the_hints():
    """The CU model passes its hints to the hierarchy: streaming shading loads marked NT change
    the node fetches' L0 hits (which way depends on the timing: the experiment's test checks the
    direction on a real trace); the default is the explicit RT run, request for request."""
    lv = [Level("L0", 2048, 4, 10, 1.0, 16, scope=Scope.CU)] + levels()[1:]
    base = CuParams(levels=lv, vgpr_mode="static", memory_tags=True)
    waves = _cu_waves()
    runs = {
        name: simulate(waves, base.replace(**changes), warm_lines=range(14))
        for name, changes in {
            "default": {},
            "rt": {"node_th": 0, "shade_th": 0},
            "nt": {"shade_th": int(TH.NT)},
        }.items()
    }
    node = {k: r.memory["L0"]["by_tag"]["node"]["hit_rate"] for k, r in runs.items()}
    assert runs["default"].cycles == runs["rt"].cycles and node["default"] == node["rt"]
    assert node["nt"] != node["rt"], node
    assert runs["nt"].memory["L0"]["by_tag"]["shade"]["accesses"] == 96 * 64
    plain = simulate(waves, CuParams(levels=lv, vgpr_mode="static"), warm_lines=range(14))
    assert "by_tag" not in plain.memory["L0"] and plain.cycles == runs["rt"].cycles
    with pytest.raises(ValueError, match="`shade_th` must be a load temporal hint"):
        CuParams(levels=lv, shade_th=7)


def test_the_facts_are_llvms_cpol_values():
    """The values as LLVM's ``SIDefines.h`` ``CPol`` writes them (typed in here from there)."""
    from gpurtl.facts import memory_hints as F

    llvm = {"TH_RT": 0, "TH_NT": 1, "TH_HT": 2, "TH_LU": 3, "TH_NT_RT": 4, "TH_RT_NT": 5}
    llvm.update(TH_NT_HT=6, TH_RESERVED=7)
    assert {f"TH_{t.name}": t.value for t in TH} == llvm
    assert [s.value << 3 for s in Scope] == [0, 8, 16, 24]  # SCOPE_CU .. SCOPE_SYS
    assert (F.ATOMIC_RETURN, F.ATOMIC_NT, F.ATOMIC_CASCADE) == (1, 2, 4)  # GLC, SLC, 4
    assert F.cpol(TH.NT_HT, Scope.SYS) == 6 | 3 << 3
    assert F.th_name(3, "load") == "LU" and F.th_name(3, "store") == "WB"
    assert F.th_name(7, "store") == "NT_WB" and F.th_name(3, "atomic") == "RETURN|NT"
    assert F.near_far(TH.NT_RT) == ("NT", "RT") and F.near_far(TH.HT) == ("HT", "HT")
    with pytest.raises(ValueError, match="`th` must be an integer 0 to 7"):
        F.th_name(8)
    with pytest.raises(ValueError, match="`kind` must be one of"):
        F.th_name(0, "prefetch")
