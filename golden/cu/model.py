"""Cycle model of one RDNA compute unit running ray-tracing waves, built from the project's
golden models.

Per wave (one ray per lane), the instruction stream of gpurt ``TraceRay3_1.hlsl``
(``TraceRayImpl3_1``):

1. set-up VALU (``setup_cycles``);
2. per loop iteration: the iteration's VALU work (``box_valu``/``pair_valu``/``instance_valu``
   cycles, each paid once when any active lane took that branch: the SIMD runs every taken
   branch of a divergent wave), ``image_bvh8_intersect_ray`` (counter ``bvh``),
   ``s_wait_bvhcnt 0``, ``ds_bvh_stack_push8_pop1_rtn`` (counter ``ds``), ``s_wait_dscnt 0``;
3. the switch to shading: ``s_alloc_vgpr shade_vgprs`` (dynamic VGPRs: retried every
   ``alloc_retry`` cycles until the allocator grants it), ``shade_valu`` cycles, one attribute
   load per hit lane (counter ``load``), ``s_wait_loadcnt 0``; then the wave ends and frees
   its slot (and registers) for the next wave.

Golden models used (never re-implemented here):

* wait counters: :class:`gpurtl.golden.waitcnt.WaitCountersModel` (``gfx12``: separate
  ``bvh``/``ds``/``load`` counters; ``gfx11``: BVH and loads share ``vm``, DS uses ``lgkm``),
  with each counter's returns ordered by :class:`gpurtl.golden.waitcnt.ReturnQueueModel`
  (``ooo`` on RDNA 4, ``inorder`` on RDNA 3: the model of the ``ooo-memory`` experiment), one
  return per counter per cycle; the counter model can be replaced (``counter_model``);
* registers: one :class:`gpurtl.golden.vgpr_alloc.dynamic.DynVgprModel` per SIMD (``LAUNCH``,
  ``ALLOC``, ``END``) in dynamic mode; static mode holds
  :func:`gpurtl.golden.vgpr_alloc.occupancy.rdna_static_waves` waves per SIMD;
* memory: :class:`gpurtl.golden.memory.Hierarchy` (node lines and attribute lines), each
  request with a GFX12 load temporal hint: ``node_th`` on the node fetches, ``shade_th`` on the
  shading loads (:class:`gpurtl.facts.memory_hints.TH`; both ``RT`` by default, which is the
  plain LRU hierarchy), the levels following ``hint_policy``
  (:class:`gpurtl.golden.memory.HintPolicy`; default its defaults); ``memory_tags`` counts the
  two kinds apart in the run's memory statistics (``by_tag``: ``node``, ``shade``).

Shared units, each taking one item at a time: the VMEM/LDS issue port (one memory instruction
a cycle for the CU), the texture address path (``tex_lanes_per_cycle`` lane addresses a cycle),
the ray accelerator (one lane's node a cycle: a BVH8 box node or a triangle pair, initiation
interval ``ra_ii``, result ``ra_latency`` cycles after its data arrived), the LDS stack unit
(one lane a cycle, ``lds_latency``), each SIMD's VALU (one wave's VALU work at a time).

Every instruction gets its issue and completion cycle (:attr:`CuRun.instructions`, for an RTL
model to be checked against cycle for cycle). The model is deterministic: a pure function of
the wave traces and :class:`CuParams`.
"""

import heapq

from gpurtl.facts.waitcnt import InstClass, profile
from gpurtl.golden.memory import Hierarchy
from gpurtl.golden.vgpr_alloc.common import OP
from gpurtl.golden.vgpr_alloc.dynamic import DynVgprModel
from gpurtl.golden.vgpr_alloc.occupancy import rdna_static_waves
from gpurtl.golden.waitcnt import ReturnQueueModel, WaitCountersModel

from .icache import CuICache

__all__ = ["CuParams", "CuRun", "WaveTrace", "article_utilization", "simulate"]


def article_utilization(box_per_s, tri_per_s, *, cus, clock_hz, box_per_cycle, tri_per_cycle):
    """Ray-accelerator utilization as Chips and Cheese, "RDNA 4's Raytracing Improvements"
    (2025), computes it from 3DMark's counters: ``box / (CUs x clock x box rate) + tri / (CUs x
    clock x tri rate)``. Its 24% (RX 9070) and 10.23% (RX 6900 XT) come out with a triangle
    rate of 1 per CU-cycle on both: one counted "triangle test" costs the accelerator a whole
    cycle, i.e. the counter counts triangle *nodes* (an RDNA 4 pair, an RDNA 2 triangle) as the
    accelerator takes them, one per cycle."""
    peak = cus * clock_hz
    return box_per_s / (peak * box_per_cycle) + tri_per_s / (peak * tri_per_cycle)


class WaveTrace:
    """One wave: ``iterations`` (a list of per-iteration lists of ``(lane, line, kind,
    box_tests, tri_tests)``, ``kind`` 0 box, 1 pair, 2 instance) and ``hits`` (the lanes'
    attribute lines of the shading loads, one per lane that hit)."""

    def __init__(self, iterations, hits, tag=None):
        self.iterations, self.hits, self.tag = iterations, hits, tag


class CuParams:
    """Every parameter of :func:`simulate` in one object (cycles unless stated; see the
    experiment's docs page for the source of each default). ``levels``: the memory hierarchy
    (:class:`gpurtl.golden.memory.Level` list, DRAM last)."""

    _DEFAULTS = {
        "generation": "gfx12",
        "simds": 2,
        "vgpr_mode": "dynamic",
        "rf_vgprs": 1536,
        "slots_per_simd": 16,
        "trace_vgprs": 64,
        "shade_vgprs": 128,
        "block_size": 16,
        "alloc_retry": 16,
        "setup_cycles": 40,
        "box_valu": 14,
        "pair_valu": 40,
        "instance_valu": 20,
        "shade_valu": 160,
        "tex_lanes_per_cycle": 1,
        "ra_ii": 1,
        "ra_latency": 32,
        "lds_latency": 49,
        "queue_depth": 64,
        "levels": None,
        "node_th": 0,
        "shade_th": 0,
        "hint_policy": None,
        "memory_tags": False,
        "icache": None,
    }

    def __init__(self, **kwargs):
        for key in kwargs:
            if key not in self._DEFAULTS:
                raise TypeError(f"unknown CU model parameter `{key}`")
        v = dict(self._DEFAULTS, **kwargs)
        if v["generation"] not in ("gfx11", "gfx12"):
            raise ValueError(f"`generation` must be 'gfx11' or 'gfx12', not {v['generation']!r}")
        if v["vgpr_mode"] not in ("dynamic", "static"):
            raise ValueError(f"`vgpr_mode` must be 'dynamic' or 'static', not {v['vgpr_mode']!r}")
        for name in ("node_th", "shade_th"):
            if not isinstance(v[name], int) or not 0 <= v[name] <= 6:
                raise ValueError(
                    f"`{name}` must be a load temporal hint 0 to 6 (facts.memory_hints.TH), "
                    f"not {v[name]!r}"
                )
        if v["levels"] is None:
            raise ValueError("`levels` (the memory hierarchy) must be given")
        self.__dict__["_v"] = v

    def __getattr__(self, name):
        try:
            return self.__dict__["_v"][name]
        except KeyError:
            raise AttributeError(name) from None

    def replace(self, **changes):
        return CuParams(**dict(self._v, **changes))

    def as_dict(self):
        out = dict(self._v)
        out["levels"] = [lv.as_dict() for lv in self._v["levels"]]
        if out["hint_policy"] is not None:
            out["hint_policy"] = dict(vars(out["hint_policy"]))
        if out["icache"] is None:
            del out["icache"]  # off: the dictionary is what it was before the option
        return out

    @property
    def resident(self):
        """Resident waves per SIMD the register mode allows (dynamic: every slot, then the
        allocator decides who runs)."""
        if self.vgpr_mode == "static":
            return min(self.slots_per_simd, rdna_static_waves(self.shade_vgprs, self.rf_vgprs))
        return self.slots_per_simd


class CuRun:
    """Totals of a run and per-instruction records ``instructions``: ``(wave, kind, issue,
    complete)`` for every memory/RA/LDS instruction."""

    def __init__(self):
        self.instructions = []
        self.cycles = 0
        self.ra = []  # (cycle, box tests, tri tests) per lane node the accelerator took
        self.valu_cycles = self.valu_lane_cycles = 0
        self.waves_done = 0
        self.alloc_waits = 0
        self.launch_times, self.end_times = [], []
        self.memory = None
        self.icache = None  # the instruction cache's counts, when it is on


class _Slots:
    """A unit that takes one item every ``ii`` cycles, first free slot at or after a cycle."""

    def __init__(self, ii=1):
        self.ii, self._next = ii, {}

    def _find(self, k):
        path = []
        while k in self._next:
            path.append(k)
            k = self._next[k]
        for j in path:
            self._next[j] = k
        return k

    def claim(self, cycle):
        k = self._find(-(-int(cycle) // self.ii))
        self._next[k] = k + 1
        return k * self.ii


_BVH, _DS, _LOAD = InstClass.BVH.value, InstClass.LDS.value, InstClass.VMEM_LOAD.value


def simulate(waves, params, *, counter_model=None, warm_lines=(), every_cycle=False):
    """Run ``waves`` (:class:`WaveTrace`, launched in order) on one CU; a :class:`CuRun`.

    ``counter_model(generation, waves)``: a factory for the wait-counter model (default
    :class:`gpurtl.golden.waitcnt.WaitCountersModel` with external returns). ``warm_lines``:
    lines present in every level below L0 at the start (the BVH a frame keeps in L2/MALL).

    The model visits only the cycles where something happens (a wake-up, a counter output a
    waiting wave reads, a return leaving its queue) and steps the counter model on those.
    ``every_cycle`` steps the counter model and the return queues on every cycle instead: the
    plain clocked reference the event-stepped run must equal
    (``tests/golden/memory/test_memory_cu.py``)."""
    p = params
    prof = profile(p.generation)
    nslots = p.simds * p.resident
    make = counter_model or (lambda gen, n: WaitCountersModel(gen, waves=n, external_returns=True))
    counters = make(p.generation, nslots)
    order = "ooo" if p.generation == "gfx12" else "inorder"
    queues = {name: ReturnQueueModel(p.queue_depth, order) for name in prof.counters}
    target = {c: prof.class_map[InstClass(c)] for c in (_BVH, _DS, _LOAD)}
    w_bvh = (
        prof.wait("s_wait_bvhcnt").encode(bvh=0)
        if p.generation == "gfx12"
        else prof.wait("s_waitcnt").encode(vm=0)
    )
    w_ds = (
        prof.wait("s_wait_dscnt").encode(ds=0)
        if p.generation == "gfx12"
        else prof.wait("s_waitcnt").encode(lgkm=0)
    )
    w_load = prof.wait("s_wait_loadcnt").encode(load=0) if p.generation == "gfx12" else w_bvh
    mem = Hierarchy(p.levels, p.hint_policy)
    node_tag, shade_tag = ("node", "shade") if p.memory_tags else (None, None)
    mem.warm(warm_lines, {lv.name for lv in p.levels[1:]})
    icache = CuICache(p.icache, mem) if p.icache is not None else None

    def code(phase, cycle):
        """When a phase's instructions are there (at once without the instruction cache)."""
        return cycle if icache is None else icache.fetch(phase, cycle)

    alloc = (
        [
            DynVgprModel(p.rf_vgprs, p.block_size, p.slots_per_simd, 8, True, 7, assertions=False)
            for _ in range(p.simds)
        ]
        if p.vgpr_mode == "dynamic"
        else None
    )
    run = CuRun()
    ra, tex, lds = _Slots(p.ra_ii), _Slots(1), _Slots(1)
    simd_free = [0] * p.simds
    pending = list(range(len(waves)))[::-1]
    # per slot: [wave index, state, iteration, ready cycle, waiting word or None]
    slot = [None] * nslots
    events = []  # (cycle, seq, slot) wake-ups
    seq = 0

    def wake(s, cycle):
        nonlocal seq
        heapq.heappush(events, (cycle, seq, s))
        seq += 1

    def valu(s, cycle, cost, lanes):
        simd = s % p.simds
        start = max(cycle, simd_free[simd])
        simd_free[simd] = start + cost
        run.valu_cycles += cost
        run.valu_lane_cycles += cost * lanes
        return start + cost

    def alloc_op(s, op, count):
        if alloc is None:
            return True
        out = alloc[s % p.simds].step(
            {"op": op, "wave": s // p.simds, "count": count, "lk_wave": 0, "lk_reg": 0}
        )
        return bool(out["ack"])

    for s in range(nslots):
        if pending:
            slot[s] = [pending.pop(), "launch", 0, 0, None]
            wake(s, 0)
    cycle = -1
    read_at = set()  # cycles whose counter outputs a waiting wave reads
    qlist = list(queues.values())
    waiting_waves = quiet = 0  # waves in a wait; cycles since the counter model's last input
    while events or read_at or waiting_waves or any(q.entries for q in qlist):
        if not events and not read_at and not any(q.entries for q in qlist) and quiet > 1:
            raise RuntimeError(f"waves wait on counters that never return (cycle {cycle})")
        # the next cycle with something to do: a wake-up, a counter output a waiting wave
        # reads, or a request that can leave its return queue; on the cycles in between no
        # input reaches the counter model (which leaves its state as it is) and the queues
        # only age their requests
        if every_cycle:
            nxt = cycle + 1
        else:
            nxt = events[0][0] if events else None
            if read_at:
                nxt = cycle + 1
            for q in qlist:
                ready = q.ready_in()
                if ready is not None and (nxt is None or cycle + 1 + ready < nxt):
                    nxt = cycle + 1 + ready
            nxt = cycle + 2 if nxt is None else max(nxt, cycle + 1)
            for q in qlist:
                if q.entries and nxt > cycle + 1:
                    q.idle(nxt - cycle - 1)
        cycle = nxt
        issue = {"valid": 0, "wave": 0, "cls": _LOAD, "hit": 0}
        wait = {"valid": 0, "wave": 0, "word": 0}
        push = None  # (counter names, slot, latency)
        acting = []
        while events and events[0][0] <= cycle:
            acting.append(heapq.heappop(events)[2])
        for s in sorted(set(acting)):
            st = slot[s]
            if st is None:
                continue
            w = waves[st[0]]
            state = st[1]
            if state == "launch":
                if not alloc_op(s, OP.LAUNCH, 0) or not alloc_op(s, OP.ALLOC, p.trace_vgprs):
                    run.alloc_waits += 1
                    wake(s, cycle + p.alloc_retry)
                    continue
                run.launch_times.append(cycle)
                st[1], st[2] = "iter", 0
                if icache is not None:
                    icache.launch(cycle)
                wake(s, valu(s, code("setup", cycle), p.setup_cycles, 32))
            elif state == "iter":
                if st[2] == len(w.iterations):
                    st[1] = "shade"
                    wake(s, cycle)
                    continue
                lanes = w.iterations[st[2]]
                kinds = {k for _, _, k, _, _ in lanes}
                cost = (
                    p.box_valu * (0 in kinds)
                    + p.pair_valu * (1 in kinds)
                    + p.instance_valu * (2 in kinds)
                )
                st[1] = "bvh"
                wake(s, valu(s, code("loop", cycle), cost, len(lanes)))
            elif state in ("bvh", "ds", "load"):
                cls = {"bvh": _BVH, "ds": _DS, "load": _LOAD}[state]
                names = target[cls]
                if issue["valid"] or any(queues[n].full for n in names):
                    wake(s, cycle + 1)
                    continue
                if state == "bvh":
                    done = cycle
                    for k, (_lane, line, _kind, box, tri) in enumerate(w.iterations[st[2]]):
                        ready = mem.access(
                            line,
                            tex.claim(cycle + k // p.tex_lanes_per_cycle),
                            th=p.node_th,
                            tag=node_tag,
                        )
                        ra_cycle = ra.claim(ready)
                        run.ra.append((ra_cycle, box, tri))
                        done = max(done, ra_cycle + p.ra_latency)
                elif state == "ds":
                    lanes = len(w.iterations[st[2]])
                    done = max(lds.claim(cycle + 1 + k) for k in range(lanes)) + p.lds_latency
                else:
                    done = cycle
                    for k, line in enumerate(w.hits):
                        ready = mem.access(line, tex.claim(cycle + k), th=p.shade_th, tag=shade_tag)
                        done = max(done, ready)
                issue = {"valid": 1, "wave": s, "cls": cls, "hit": 0}
                push = (names, s, max(1, done - cycle))
                run.instructions.append((st[0], state, cycle, done))
                st[1] = "wait_" + state
                wake(s, cycle + 1)
            elif state.startswith("wait_") and st[4] is None:
                if wait["valid"]:
                    wake(s, cycle + 1)
                    continue
                word = {"wait_bvh": w_bvh, "wait_ds": w_ds, "wait_load": w_load}[state]
                wait = {"valid": 1, "wave": s, "word": word}
                st[4] = cycle  # the wait is in; the stall is read from the next cycle on
                waiting_waves += 1
            elif state == "shade":
                if not alloc_op(s, OP.ALLOC, p.shade_vgprs):
                    run.alloc_waits += 1
                    wake(s, cycle + p.alloc_retry)
                    continue
                st[1] = "load" if w.hits else "end"
                wake(s, valu(s, code("shade", cycle), p.shade_valu, 32))
            elif state == "end":
                alloc_op(s, OP.END, 0)
                run.waves_done += 1
                run.end_times.append(cycle)
                if pending:
                    slot[s] = [pending.pop(), "launch", 0, 0, None]
                    wake(s, cycle + 1)
                else:
                    slot[s] = None
        # the return queues' clock (a pushed request ages from the next cycle)
        rets = {}
        for name, q in queues.items():
            if push is not None and name in push[0]:
                rets[name] = q.step(push[1], 0, latency=push[2])
            elif q.entries:
                rets[name] = q.step()
            else:
                rets[name] = {"valid": 0, "wave": 0}
        # the counter model's clock: on cycles with an input and on the cycle after one, where
        # a waiting wave reads its stall (a cycle with no input leaves the state as it is, so
        # skipping the cycles in between changes nothing)
        any_ret = any(r["valid"] for r in rets.values())
        reading = cycle in read_at
        read_at.discard(cycle)
        quiet = 0 if issue["valid"] or wait["valid"] or any_ret else quiet + 1
        if issue["valid"] or wait["valid"] or any_ret or reading or every_cycle:
            out = counters.step({"issue": issue, "wait": wait, "ret": rets})
            if (issue["valid"] or wait["valid"] or any_ret) and not every_cycle:
                read_at.add(cycle + 1)
            waiting = [s for s in range(nslots) if slot[s] is not None and slot[s][4] is not None]
            if issue["valid"] and not out["issue_accepted"]:
                raise RuntimeError("the counter model refused an issue")
            for s in waiting:
                st = slot[s]
                if st[4] >= cycle or (out["stall"] >> s) & 1:
                    continue
                st[4] = None
                waiting_waves -= 1
                kind = st[1][5:]
                if kind == "bvh":
                    st[1] = "ds"
                elif kind == "ds":
                    st[1], st[2] = "iter", st[2] + 1
                else:
                    st[1] = "end"
                wake(s, cycle + 1)
        run.cycles = cycle
    run.memory = mem.stats()
    run.icache = icache.stats() if icache is not None else None
    return run
