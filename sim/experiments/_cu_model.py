"""Cycle-level model of one compute unit's ray-tracing slice running traversal-loop traces.

Resources (each a timeline of the cycle at which it is next free):

* two SIMDs: a wave's loop overhead (``alu_cycles`` per iteration: address set-up, the closest-hit
  compare, the loop branch) occupies its SIMD;
* the texture path and the ray accelerator: an intersect instruction sends its active lanes one
  per cycle; each lane's node line(s) come from the L0 cache model (``l0_lines`` lines of 128 B,
  LRU; ``l0_hit`` / ``l0_miss`` cycles); the accelerator takes one lane instruction every
  ``ra_ii`` cycles, each as soon as its node data is there and a slot is free (whichever wave
  it belongs to), and answers ``ra_latency`` cycles later. ``queue="ooo"``
  returns each wave's results as they complete (RDNA 4's per-type counters); ``"in_order"``
  makes an instruction complete no earlier than the one issued before it (RDNA 3's shared queue,
  the ``waitcnt_mem`` return-queue semantics). ``s_wait_bvhcnt 0`` stalls the wave until the
  result is back;
* the stack unit in the LDS: a stack instruction sends its active lanes one every ``stack_ii``
  cycles (each lane to the first free slot once its intersect result is back; the
  ``ds_bvh_stack`` RTL takes one lane's eight pushes and its pops per cycle) and the last lane's
  result is back ``stack_latency`` (the RTL's pipeline) plus ``lds_path_cycles`` (the DS
  instruction's way to the LDS and back, an assumption) cycles later; ``s_wait_dscnt 0`` stalls
  the wave until then.

``slots`` waves are resident at once (from the register allocators' occupancy); a finished wave
frees its slot for the next one after ``launch_cycles``.
"""

import heapq
from collections import OrderedDict

__all__ = ["CuParams", "CuResult", "simulate"]


class CuParams:
    """Parameters of :func:`simulate` (cycles unless named otherwise)."""

    _DEFAULTS = {
        "slots": 16,
        "ra_latency": 122,
        "ra_ii": 1,
        "stack_latency": 2,  # noqa: RUF012
        "stack_ii": 1,
        "lds_path_cycles": 24,
        "l0_hit": 20,
        "l0_miss": 200,
        "l0_lines": 256,
        "alu_cycles": 12,
        "launch_cycles": 64,
        "queue": "ooo",
        "simds": 2,
    }

    def __init__(self, **kwargs):
        for key in kwargs:
            if key not in self._DEFAULTS:
                raise TypeError(f"unknown CU model parameter `{key}`")
        values = dict(self._DEFAULTS, **kwargs)
        for key, value in values.items():
            if key == "queue":
                if value not in ("ooo", "in_order"):
                    raise ValueError(f"`queue` must be 'ooo' or 'in_order', not {value!r}")
            elif not isinstance(value, int) or value < (
                1 if key in ("slots", "ra_ii", "simds", "l0_lines", "stack_ii") else 0
            ):
                raise ValueError(f"`{key}` must be a non-negative integer, not {value!r}")
        self._values = values

    def __getattr__(self, name):
        try:
            return self.__dict__["_values"][name]
        except KeyError:
            raise AttributeError(name) from None

    def replace(self, **changes):
        return CuParams(**dict(self._values, **changes))

    def as_dict(self):
        return dict(self._values)


class CuResult:
    """Totals of one simulated run."""

    def __init__(self):
        self.cycles = self.rays = self.box_tests = self.tri_tests = 0
        self.lane_instrs = self.iterations = 0
        self.bvh_stall = self.ds_stall = 0
        self.l0_hits = self.l0_misses = 0

    @property
    def rays_per_kcycle(self):
        return 1000.0 * self.rays / self.cycles if self.cycles else 0.0

    @property
    def utilization(self):
        """Ray-accelerator work as a fraction of its peak (8 box or 2 triangle tests a cycle)."""
        if not self.cycles:
            return 0.0
        return (self.box_tests / 8 + self.tri_tests / 2) / self.cycles

    @property
    def issue_utilization(self):
        """Fraction of cycles the accelerator accepted a lane instruction."""
        return self.lane_instrs / self.cycles if self.cycles else 0.0


class _L0:
    def __init__(self, lines):
        self.lines, self.lru = lines, OrderedDict()
        self.hits = self.misses = 0

    def access(self, key):
        if key in self.lru:
            self.lru.move_to_end(key)
            self.hits += 1
            return True
        self.misses += 1
        self.lru[key] = None
        if len(self.lru) > self.lines:
            self.lru.popitem(last=False)
        return False


class _Slots:
    """Issue slots of a unit that accepts one item every ``ii`` cycles, claimed in any order:
    an item arriving at cycle ``c`` takes the first free slot at or after ``c`` (the slots are a
    union-find of "next free slot" pointers)."""

    def __init__(self, ii):
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
        k = self._find(-(-cycle // self.ii))
        self._next[k] = k + 1
        return k * self.ii


def simulate(traces, params, *, waves=None):
    """Run the wave traces (:class:`._trav_loop.WaveTrace`, in launch order) on one CU.

    ``waves``: how many waves to launch, cycling through ``traces`` (default: each trace once);
    more waves than ``traces`` measure the steady state of a full CU from a small ray sample."""
    p = params
    res = CuResult()
    l0 = _L0(p.l0_lines)
    simd_free = [0] * p.simds
    ra, stack = _Slots(p.ra_ii), _Slots(p.stack_ii)
    last_done = 0
    waves = len(traces) if waves is None else waves
    queue = [k % len(traces) for k in range(waves)][::-1]
    events = []  # (time, seq, slot, trace index, iteration)
    seq = 0
    for slot in range(min(p.slots, waves)):
        heapq.heappush(events, (p.launch_cycles, seq, slot, queue.pop(), 0))
        seq += 1
    end = 0
    while events:
        t, _, slot, w, it = heapq.heappop(events)
        tr = traces[w]
        if it == len(tr.active):
            res.rays += len(tr.t)
            res.box_tests += int(tr.counts["box_tests"].sum())
            res.tri_tests += int(tr.counts["tri_tests"].sum())
            end = max(end, t)
            if queue:
                heapq.heappush(events, (t + p.launch_cycles, seq, slot, queue.pop(), 0))
                seq += 1
            continue
        res.iterations += 1
        # loop overhead on the wave's SIMD
        s = slot % p.simds
        start = max(t, simd_free[s])
        simd_free[s] = start + p.alu_cycles
        t = start + p.alu_cycles
        # the intersect instruction: one lane per cycle through the texture path and the accelerator
        lanes = tr.active[it]
        lane_lat = []
        for lane_lines in tr.lines[it]:
            lane_lat.append(max(p.l0_hit if l0.access(line) else p.l0_miss for line in lane_lines))
        last_service = t
        for lane, lat in enumerate(lane_lat):
            last_service = max(last_service, ra.claim(t + lane + lat))
        done = last_service + p.ra_latency
        if p.queue == "in_order":
            done = max(done, last_done)
        last_done = max(last_done, done)
        res.lane_instrs += lanes
        res.bvh_stall += done - (t + lanes)
        # the stack instruction
        last_lane = max(stack.claim(done + lane) for lane in range(lanes))
        ready = last_lane + p.stack_latency + p.lds_path_cycles
        res.ds_stall += ready - done
        heapq.heappush(events, (ready, seq, slot, w, it + 1))
        seq += 1
    res.cycles = end
    res.l0_hits, res.l0_misses = l0.hits, l0.misses
    return res
