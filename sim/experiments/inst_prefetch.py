"""Instruction prefetch: front-end stall cycles per instruction against kernel code size, for no
prefetch, RDNA 3's and RDNA 4's kernel-entry prefetch (with the sequential prefetch ahead) and
software prefetch of branch targets (``s_prefetch_inst_pc_rel``); and the same front end with an
Intel Gen-like instruction size and caches, beside the instruction cache cliff Joshua Barczak
measured on a Haswell GPU ("You Compiled This, Driver. Trust Me...", 2015: inflections near
3,000 and 8,000 instructions, for a 48 KB and a 128 KB cache).

The model (every part of it a choice, stated in ``docs/inst_prefetch.md`` and the summary):

* **The cache** is the instruction cache's own tags and LRU rules,
  :class:`gpurtl.golden.icache.ICacheCore` (the block ``icache`` checks them in lockstep against
  the RTL): 32 KB, 4 ways, 128-byte lines, one per work group processor. Prefetch hits do not
  touch the LRU order; prefetched lines go in as most recently used. A miss or prefetch goes to
  the memory hierarchy model (:class:`gpurtl.golden.memory.Hierarchy`): an L1 of 128 KB (80
  cycles to a hit, half a line a cycle), an L2 of 8 MB (+100 cycles) warmed with the kernel's
  code, DRAM behind it. The L1 holds only code here.
* **The front end**: 4 SIMDs with 4 wave slots each (16 waves) share the cache. A SIMD runs one
  wave at a time for the instructions of one 128-byte line (one instruction a cycle), then
  switches to the next of its waves whose line has arrived (round robin); a wave asks for its
  next line when it reaches the end of the current one. 96 waves of the kernel run; a slot takes
  the next wave when its wave ends, and the first 16 start evenly spread over one wave's
  lifetime, so the slots hold waves at every point of the kernel as a long dispatch does.
* **The shader**: RDNA instructions of 4 and 8 bytes (60% / 40%: 5.6 bytes on average).
  *Straight-line* code runs from the entry to the end. *Branchy* code is a chain of if/else
  regions whose two sides are 1-4 lines each; each wave takes one side (a fair coin per wave
  and region), so every region has one taken branch, and the union of the waves' paths is the
  whole kernel.
* **Configurations**: *none* (no entry prefetch, sequential distance 0), *RDNA 3* (entry
  prefetch 64 lines, distance 3), *RDNA 4* (256 lines, distance 3: GFX12 ignores
  ``s_set_inst_prefetch_distance``; the distance is kept so that only the entry prefetch
  differs), *RDNA 4 + software*: an ``s_prefetch_inst_pc_rel`` of one line at each of a region's
  two branch targets, placed at the region's start (two extra instructions a region).

The ``icache`` RTL itself runs too (Amaranth's simulator, every cycle compared with the golden
model): one wave fetching every instruction of a small kernel, cold and then warm, with no
prefetch, the sequential prefetch and the kernel-entry prefetch.

Measured: *stall per instruction*, the cycles waves wait for instruction lines divided by the
instructions they execute (the steady-state waves: the first and last 16 left out), and
*issue loss*, the SIMD cycles with no wave ready per instruction; the *cold* stall per
instruction of the dispatch's first wave.
"""

import heapq
from pathlib import Path

import numpy as np

from gpurtl.facts.inst_prefetch import ENTRY_PREFETCH_LINES, ICACHE_SIZE, ICACHE_WAYS, LINE_BYTES
from gpurtl.golden.icache import MISS, ICacheCore
from gpurtl.golden.memory import Hierarchy, Level

from ..tools.tables import Column, document, markdown, write_csv
from . import ExperimentFailed

NAME = "inst-prefetch"
DESCRIPTION = (
    "front-end stall cycles per instruction against code size (2-256 KB, straight-line and "
    "branchy): no prefetch, RDNA 3 / RDNA 4 entry prefetch, software prefetch of branch targets"
)

SIZES_KB = (2, 4, 8, 12, 16, 24, 32, 40, 48, 64, 96, 128, 160, 192, 256)
QUICK_SIZES_KB = (4, 16, 32, 64)
#: label -> (entry prefetch lines, sequential distance, software prefetch of branch targets)
CONFIGS = {
    "none": (0, 0, False),
    "rdna3": (ENTRY_PREFETCH_LINES["rdna3"], 3, False),
    "rdna4": (ENTRY_PREFETCH_LINES["rdna4"], 3, False),
    "rdna4+sw": (ENTRY_PREFETCH_LINES["rdna4"], 3, True),
}
SIMDS, SLOTS = 4, 4
WAVES = 96
SEED = 33  # the branchy kernels' paths
START_SEEDS = (1, 2, 3)  # the first waves' start times: each figure is the median over these
#: The seeds of the run's random numbers (recorded in its provenance; ``data.json``'s ``seeds``
#: lists the start-time seeds a run used).
SEEDS = {
    "first waves' start times": f"{', '.join(map(str, START_SEEDS))} (--quick: {START_SEEDS[0]})",
    "branchy kernels' paths": SEED,
}
RDNA_SIZES = ((4, 0.6), (8, 0.4))  # instruction bytes, share
#: The Intel Gen-like front end: 16-byte (uncompacted) instructions, 48 KB instruction cache and
#: a 128 KB next level, as the article describes; the same model otherwise.
GEN_BYTES, GEN_L1, GEN_L2 = 16, 48 * 1024, 128 * 1024
GEN_INSTRUCTIONS = (1000, 2000, 2500, 2800, 3000, 3200, 3500, 4000, 5000, 6000, 7000,
                    7500, 8000, 8500, 9000, 10000, 12000)  # fmt: skip
QUICK_GEN_INSTRUCTIONS = (2500, 3500, 6000, 7000, 9000)
MEASURED_GEN = (3000, 8000)  # the article's inflections, instructions


def _levels(l1=128 * 1024):
    return [
        Level("L1", l1, 16, 80, 0.5, 64),
        Level("L2", 8 * 1024 * 1024, 16, 100, 0.25, 128),
        Level("DRAM", 0, 1, 200, 0.0625, 0),
    ]


class Kernel:
    """A synthetic shader: ``paths[w]`` is the list of (line, instructions) wave ``w`` runs;
    ``targets[w]`` maps a path index to the lines a software prefetch there asks for."""

    def __init__(self, code_bytes, branchy, rng, waves, inst_bytes=None):
        self.lines = max(1, code_bytes // LINE_BYTES)
        self.inst_bytes = inst_bytes or sum(b * p for b, p in RDNA_SIZES)
        per_line = LINE_BYTES / self.inst_bytes
        if not branchy:
            path = [(line, per_line) for line in range(self.lines)]
            self.regions = []
            self.paths = [path] * waves
            self.targets = [{}] * waves
            return
        regions, line = [], 0  # (if side start, its lines, else side start, its lines)
        while line < self.lines:
            a, b = int(rng.integers(1, 5)), int(rng.integers(1, 5))
            a, b = min(a, self.lines - line), max(0, min(b, self.lines - line - a))
            regions.append((line, a, line + a, b))
            line += a + b
        self.regions = regions
        self.paths, self.targets = [], []
        for _ in range(waves):
            path, targets = [], {}
            for start, a, other, b in regions:
                join = other + b
                targets[len(path)] = [t for t in (other, join) if t < self.lines and b]
                side = range(start, start + a) if (b == 0 or rng.random() < 0.5) else None
                lines = side if side is not None else range(other, other + b)
                path += [(line, per_line) for line in lines]
            self.paths.append(path)
            self.targets.append(targets)

    def instructions(self, w, software):
        extra = 2 * len(self.regions) if software else 0
        return sum(n for _, n in self.paths[w]) + extra


class FrontEnd:
    """The instruction cache core, its fill times and the hierarchy behind it."""

    def __init__(self, size, ways, entry, distance, software, l1, wrap):
        self.core = ICacheCore(size // (LINE_BYTES * ways), ways)
        self.fill_at = {}
        self.memory = Hierarchy(_levels(l1))
        self.memory.warm(range(wrap), {"L2"})
        self.entry, self.distance, self.software = entry, distance, software
        self.wrap = wrap
        self.requests = self.prefetches = 0

    def _ready(self, line, t):
        """When ``line`` is there, if it is in the cache (else None); no LRU change."""
        kind, way = self.core.lookup(line)
        if kind == MISS:
            return None
        fill = self.fill_at.get(line, 0.0)
        if fill <= t and self.core.tags[line % self.core.sets][way][1]:
            self.core.filled(line, way)
        return fill

    def _request(self, line, t, touch):
        kind, way = self.core.lookup(line)
        if kind != MISS:
            if touch:
                self.core.touch(line, way)
            return max(t, self._ready(line, t))
        self.core.allocate(line, way)
        self.core.touch(line, way)
        self.requests += 1
        fill = self.memory.access(line, t)
        self.fill_at[line] = fill
        return fill

    def fetch(self, line, t):
        """A wave needs ``line`` at ``t``: when it has it."""
        ready = self._request(line, t, touch=True)
        return ready

    def prefetch(self, line, t):
        if 0 <= line < self.wrap and self.core.lookup(line)[0] == MISS:
            self.prefetches += 1
            self._request(line, t, touch=False)


def simulate(kernel, config, size=ICACHE_SIZE, ways=ICACHE_WAYS, l1=128 * 1024, jitter=None):
    """Run every wave of ``kernel`` (one per path) through the front end of configuration
    ``config`` (a key of ``CONFIGS``); returns the measured figures. ``jitter`` (a numpy
    generator) moves each first wave's start by up to one start interval at random."""
    waves = len(kernel.paths)
    entry, distance, software = CONFIGS[config]
    fe = FrontEnd(size, ways, entry, distance, software, l1, kernel.lines)
    slots = SIMDS * SLOTS
    lifetime = SLOTS * kernel.instructions(0, software)
    # per slot: [wave, path index, ready time, wait cycles, launch time]; None when empty
    state = [None] * slots
    launched = [0]
    stats = []  # per finished wave: (wave, instructions, wait cycles)
    simd_time = [0.0] * SIMDS
    idle = []  # [start, end] of each SIMD's cycles with no wave ready
    resting = [None] * SIMDS  # each SIMD's current idle interval
    issued = []  # (cycle, instructions) of each line a SIMD ran
    launch_time = []  # per wave
    rr = [0] * SIMDS

    def launch(slot, t):
        w = launched[0]
        if w >= waves:
            state[slot] = None
            return
        launched[0] += 1
        launch_time.append(t)
        for line in range(min(entry, kernel.lines)):
            fe.prefetch(line, t)
        first = kernel.paths[w][0][0]
        ready = fe.fetch(first, t)
        state[slot] = [w, 0, ready, ready - t]
        _sequential(slot, t)

    def _sequential(slot, t):
        w, k = state[slot][0], state[slot][1]
        line = kernel.paths[w][k][0]
        for ahead in range(1, distance + 1):
            fe.prefetch(line + ahead, t)
        if software and k in kernel.targets[w]:
            for target in kernel.targets[w][k]:
                fe.prefetch(target, t)

    events = []  # (time, priority, order, kind, slot or SIMD): a wave's step before a SIMD's pick
    order = [0]
    sleeping = [False] * SIMDS

    def push(t, priority, kind, who):
        order[0] += 1
        heapq.heappush(events, (t, priority, order[0], kind, who))

    def wake(simd, t):
        """Make ``simd`` look for a ready wave at ``t`` (earlier than planned if it slept)."""
        if sleeping[simd] and simd_time[simd] > t:
            resting[simd][1] = t  # woken early: the idle interval ends now
        if sleeping[simd] or simd_time[simd] <= t:
            sleeping[simd] = False
            simd_time[simd] = t
            push(t, 1, "run", simd)

    for slot in range(slots):  # the first waves start spread over one lifetime
        shift = float(jitter.random()) if jitter is not None else 0.0
        push((slot + shift) * lifetime / slots, 0, "launch", slot)
    while events:
        t, _, _, what, who = heapq.heappop(events)
        if what == "launch":
            launch(who, t)
            wake(who // SLOTS, t)
            continue
        if what == "next":  # the wave reached the end of its line: it asks for the next one
            w, k = state[who][0], state[who][1]
            ready_at = fe.fetch(kernel.paths[w][k + 1][0], t)
            state[who][1] = k + 1
            state[who][2] = ready_at
            state[who][3] += ready_at - t
            _sequential(who, t)
            continue
        simd = who
        if t < simd_time[simd]:
            continue  # a stale wake-up
        sleeping[simd] = False
        mine = [s for s in range(simd * SLOTS, (simd + 1) * SLOTS) if state[s] is not None]
        if not mine:
            continue
        ready = [s for s in mine if state[s][2] <= t]
        if not ready:
            later = min(state[s][2] for s in mine)
            resting[simd] = [t, later]
            idle.append(resting[simd])
            simd_time[simd] = later
            sleeping[simd] = True
            push(later, 1, "run", simd)
            continue
        start = rr[simd]
        slot = min(ready, key=lambda s: (s - start) % SLOTS)
        rr[simd] = (slot + 1) % SLOTS
        w, k = state[slot][0], state[slot][1]
        count = kernel.paths[w][k][1] + (2 if software and k in kernel.targets[w] else 0)
        issued.append((t, count))
        done = t + count
        state[slot][2] = float("inf")  # running: not ready for another pick
        if k + 1 == len(kernel.paths[w]):
            stats.append((w, kernel.instructions(w, software), state[slot][3]))
            push(done, 0, "launch", slot)
        else:
            push(done, 0, "next", slot)
        simd_time[simd] = done
        push(done, 1, "run", simd)
    stats.sort()
    # The steady state: from the third round of waves (the first meets a cold cache, and its
    # misses bunch the waves up) to the last round (the tail drains with fewer waves).
    steady = [s for s in stats if 2 * slots <= s[0] < waves - slots] or stats
    instructions = sum(s[1] for s in steady)
    low = launch_time[min(2 * slots, len(launch_time) - 1)]
    high = launch_time[max(waves - slots, 0)] if waves > 3 * slots else launch_time[-1]
    window_idle = sum(max(0.0, min(b, high) - max(a, low)) for a, b in idle)
    window_issued = sum(n for t, n in issued if low <= t < high)
    return {
        "stall_per_inst": sum(s[2] for s in steady) / instructions,
        "issue_loss_per_inst": window_idle / max(window_issued, 1),
        "cold_stall_per_inst": stats[0][2] / stats[0][1],
        "line_requests": fe.requests,
        "prefetches": fe.prefetches,
        "instructions_per_wave": kernel.instructions(0, software),
    }


#: The RTL runs: the ``icache`` block (4 KB, 4 ways, 8 miss registers) fetching every
#: instruction of a straight 2 KB kernel twice over (cold, then warm) for one wave, memory
#: answering 80 cycles after each request; label -> (entry lines, distance).
RTL_PARAMS = {"size": 4096, "ways": 4, "mshrs": 8, "line_bits": 8, "entry_lines": 64}
RTL_CONFIGS = {"none": (0, 0), "distance 3": (0, 3), "entry 16 lines": (16, 0)}
RTL_LINES, RTL_LATENCY = 16, 80


def _rtl_inputs(entry, distance):
    """Per-cycle inputs of one wave running the kernel twice, made by running the golden model
    (:class:`gpurtl.golden.icache.ICacheModel`); with its outputs and the cycles each pass
    took."""
    from gpurtl.facts.inst_prefetch import ICacheGeometry
    from gpurtl.golden.icache import ICacheModel

    model = ICacheModel(ICacheGeometry(**RTL_PARAMS))
    pcs = []
    for pc_line in range(RTL_LINES):  # 4- and 8-byte instructions, 5.6 bytes on average
        pc = pc_line * LINE_BYTES
        k = 0
        while pc < (pc_line + 1) * LINE_BYTES:
            pcs.append(pc)
            pc += 8 if k % 5 in (1, 3) else 4
            k += 1
    idle_fill = {"valid": 0, "payload": {"line": 0, "data": 0}}
    due, inputs, outputs, passes = [], [], [], []
    start = {"line": 0, "lines": entry} if entry else None
    for _ in range(2):
        began = len(inputs)
        queue = list(pcs)
        waiting = False
        while queue or waiting:
            cycle = len(inputs)
            fill = idle_fill
            if due and due[0][0] <= cycle:
                line = due[0][1]
                fill = {"valid": 1, "payload": {"line": line, "data": line * 0x9E3779B1}}
            step = {
                "fetch": {
                    "valid": int(bool(queue) and not waiting),
                    "payload": {"pc": queue[0] if queue else 0},
                },
                "resp": {"ready": 1},
                "start": {
                    "valid": int(start is not None),
                    "payload": start or {"line": 0, "lines": 0},
                },
                "pf": {"valid": 0, "payload": {"line": 0, "count": 0}},
                "distance": distance,
                "mem_req": {"ready": 1},
                "fill": fill,
            }
            out = model.step(step)
            inputs.append(step)
            outputs.append(out)
            if start is not None and out["start"]["ready"]:
                start = None
            if fill["valid"] and out["fill"]["ready"]:
                due.pop(0)
            if out["mem_req"]["valid"]:
                due.append((cycle + RTL_LATENCY, out["mem_req"]["payload"]["line"]))
            if out["resp"]["valid"]:
                waiting = False
            if step["fetch"]["valid"] and out["fetch"]["ready"]:
                queue.pop(0)
                waiting = True
        passes.append(len(inputs) - began)
    return inputs, outputs, passes, len(pcs)


def measure_rtl():
    """Every RTL configuration on the Amaranth simulator, each cycle compared with the golden
    model; raises :class:`ExperimentFailed` on a mismatch."""
    from ..backends import BACKENDS
    from ..core import registry

    block = registry.get("icache")
    params = block.resolve(RTL_PARAMS)
    rows = []
    for label, (entry, distance) in RTL_CONFIGS.items():
        inputs, outputs, passes, count = _rtl_inputs(entry, distance)
        report = BACKENDS["pysim"].run(block, params, inputs, expected=outputs)
        if report.failed:
            raise ExperimentFailed(f"icache RTL differs from its golden model: {report.first}")
        rows.append(
            {
                "config": label,
                "instructions": count,
                "cycles_cold": passes[0],
                "cycles_warm": passes[1],
                "cold_stall_per_inst": passes[0] / count - 2,
                "warm_stall_per_inst": passes[1] / count - 2,
                "cycles_compared": report.passed,
            }
        )
    return rows


def _seeds(kernel, config, seeds, **cache):
    """:func:`simulate` once per seed of the first waves' start times: the median of each
    figure, and the smallest and largest stall per instruction."""
    runs = [simulate(kernel, config, jitter=np.random.default_rng(s), **cache) for s in seeds]
    point = {key: float(np.median([r[key] for r in runs])) for key in runs[0]}
    stalls = [r["stall_per_inst"] for r in runs]
    point.update(stall_min=min(stalls), stall_max=max(stalls))
    return point


def measure(*, quick=False, progress=None):
    sizes = QUICK_SIZES_KB if quick else SIZES_KB
    gen = QUICK_GEN_INSTRUCTIONS if quick else GEN_INSTRUCTIONS
    waves = 64 if quick else WAVES
    seeds = START_SEEDS[:1] if quick else START_SEEDS
    rows, gen_rows = [], []
    total = len(sizes) * 2 * len(CONFIGS) + len(gen)
    done = 0
    for kind in ("straight", "branchy"):
        for kb in sizes:
            kernel = Kernel(kb * 1024, kind == "branchy", np.random.default_rng(SEED), waves)
            for config in CONFIGS:
                if kind == "straight" and config == "rdna4+sw":
                    done += 1
                    continue  # no branches to prefetch
                point = _seeds(kernel, config, seeds)
                rows.append({"code": kind, "size_kb": kb, "config": config, **point})
                done += 1
                if progress:
                    progress(done, total, f"{kind} {kb} KB {config}")
    if progress:
        progress(done, total, "the icache RTL on the Amaranth simulator")
    rtl_rows = measure_rtl()
    for count in gen:
        kernel = Kernel(count * GEN_BYTES, False, None, waves, inst_bytes=GEN_BYTES)
        point = _seeds(kernel, "none", seeds, size=GEN_L1, ways=4, l1=GEN_L2)
        gen_rows.append({"instructions": count, "code_kb": count * GEN_BYTES / 1024, **point})
        done += 1
        if progress:
            progress(done, total, f"gen-like {count} instructions")
    return {
        "seeds": list(seeds),
        "kernel_seed": SEED,
        "quick": quick,
        "cache": {"size": ICACHE_SIZE, "ways": ICACHE_WAYS, "line": LINE_BYTES},
        "front_end": {"simds": SIMDS, "slots": SLOTS, "waves": waves},
        "instruction_bytes": sum(b * p for b, p in RDNA_SIZES),
        "levels": [level.as_dict() for level in _levels()],
        "configs": {
            k: dict(zip(("entry_lines", "distance", "software"), v)) for k, v in CONFIGS.items()
        },
        "rows": rows,
        "rtl": {"params": RTL_PARAMS, "latency": RTL_LATENCY, "rows": rtl_rows},
        "gen": {
            "inst_bytes": GEN_BYTES,
            "icache": GEN_L1,
            "next_level": GEN_L2,
            "measured_inflections": list(MEASURED_GEN),
            "rows": gen_rows,
        },
    }


def cliffs(points, key="stall_per_inst", rise=0.5):
    """The cliffs of ``points`` ((x, row) in order of x): ``(before, after)`` for each run of
    steps in which ``key`` rises by ``rise`` cycles per instruction or more, ``before`` the last
    x ahead of the run, ``after`` its first x."""
    found, inside = [], False
    for (x0, r0), (x1, r1) in zip(points, points[1:]):
        steep = r1[key] - r0[key] >= rise
        if steep and not inside:
            found.append((x0, x1))
        inside = steep
    return found


def _cliff_text(found, unit):
    if not found:
        return "none"
    return "; ".join(f"between {a:,} and {b:,} {unit}" for a, b in found)


COLUMNS = [
    Column("code"),
    Column("size_kb", "code", "KB"),
    Column("config"),
    Column("stall_per_inst", "stall / instruction", "cycles", 3),
    Column("stall_min", "min", "cycles", 3),
    Column("stall_max", "max", "cycles", 3),
    Column("issue_loss_per_inst", "issue loss / instruction", "cycles", 3),
    Column("cold_stall_per_inst", "first wave stall / instruction", "cycles", 3),
    Column("line_requests", "lines from L1", digits=0),
    Column("prefetches", digits=0),
]
RTL_COLUMNS = [
    Column("config"),
    Column("instructions"),
    Column("cycles_cold", "cycles, cold"),
    Column("cycles_warm", "cycles, warm"),
    Column("cold_stall_per_inst", "cold stall / instruction", "cycles", 3),
    Column("warm_stall_per_inst", "warm stall / instruction", "cycles", 3),
    Column("cycles_compared", "cycles compared"),
]
GEN_COLUMNS = [
    Column("instructions"),
    Column("code_kb", "code", "KB", 1),
    Column("stall_per_inst", "stall / instruction", "cycles", 3),
    Column("issue_loss_per_inst", "issue loss / instruction", "cycles", 3),
]


def _plot(path, data):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(15, 4.6))
    for ax, kind in zip(axes[:2], ("straight", "branchy")):
        for config in CONFIGS:
            pts = [r for r in data["rows"] if r["code"] == kind and r["config"] == config]
            if pts:
                ax.plot(
                    [r["size_kb"] for r in pts],
                    [r["stall_per_inst"] for r in pts],
                    marker="o",
                    label=config,
                )
        ax.axvline(data["cache"]["size"] / 1024, color="grey", ls="--", lw=0.8)
        ax.axvline(128, color="grey", ls=":", lw=0.8)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("kernel code size (KB)")
        ax.set_ylabel("front-end stall cycles per instruction")
        ax.set_title(f"{kind} code: 32 KB I-cache (--), 128 KB L1 (:)", fontsize=10)
        ax.legend(fontsize=8)
    gen = data["gen"]
    ax = axes[2]
    ax.plot(
        [r["instructions"] for r in gen["rows"]],
        [r["stall_per_inst"] for r in gen["rows"]],
        marker="o",
        label="model, 16-byte instructions",
    )
    for x in gen["measured_inflections"]:
        ax.axvline(x, color="red", ls="--", lw=0.8)
    ax.set_xlabel("kernel instructions")
    ax.set_ylabel("front-end stall cycles per instruction")
    ax.set_title("Gen-like: 48 KB I-cache, 128 KB next; red: measured inflections", fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return str(path)


def report(data, out_dir):
    """``inst_prefetch.csv``, ``inst_prefetch_gen.csv``, ``inst_prefetch.png`` and
    ``summary.md``."""
    out_dir = Path(out_dir)
    rows, gen = data["rows"], data["gen"]
    summary = []
    for kind in ("straight", "branchy"):
        for config in CONFIGS:
            pts = [(r["size_kb"], r) for r in rows if r["code"] == kind and r["config"] == config]
            if pts:
                summary.append((f"{kind}, {config}: stall cliffs", _cliff_text(cliffs(pts), "KB")))
    gen_pts = [(r["instructions"], r) for r in gen["rows"]]
    measured = ", ".join(f"{x:,}" for x in gen["measured_inflections"])
    summary.append(
        (
            "Gen-like model: stall cliffs",
            _cliff_text(cliffs(gen_pts), "instructions") + f" (measured: near {measured})",
        )
    )
    summary.append(
        (
            "icache RTL, cold stall / instruction",
            ", ".join(
                f"{r['config']}: {r['cold_stall_per_inst']:.2f}" for r in data["rtl"]["rows"]
            ),
        )
    )
    title = "Instruction prefetch: front-end stall against code size"
    files = [
        write_csv(out_dir / "inst_prefetch.csv", rows, COLUMNS),
        write_csv(out_dir / "inst_prefetch_gen.csv", gen["rows"], GEN_COLUMNS),
        write_csv(out_dir / "inst_prefetch_rtl.csv", data["rtl"]["rows"], RTL_COLUMNS),
        _plot(out_dir / "inst_prefetch.png", data),
        document(
            out_dir / "summary.md",
            title,
            "Model: one 32 KB 4-way instruction cache of 128-byte lines shared by 4 SIMDs x 4 "
            f"waves, {data['front_end']['waves']} waves of the kernel, RDNA instructions of "
            f"{data['instruction_bytes']:.1f} bytes on average, misses to a 128 KB L1 (80 "
            "cycles) and an 8 MB L2 (+100) holding the code. Every figure is a CHOICE of the "
            "model (docs/inst_prefetch.md), not a measurement of AMD hardware.",
            markdown([{"metric": m, "value": v} for m, v in summary], ["metric", "value"]),
            markdown(rows, COLUMNS),
            "The icache RTL (Amaranth simulator, every cycle compared with the golden model): "
            f"one wave fetching each instruction of a {RTL_LINES}-line kernel twice over, "
            f"memory answering {data['rtl']['latency']} cycles after a request; a fetch that "
            "hits takes 2 cycles (accepted, answered), so the stall is cycles / instruction - 2:",
            markdown(data["rtl"]["rows"], RTL_COLUMNS),
            "Gen-like front end (16-byte instructions, 48 KB cache, 128 KB next level):",
            markdown(gen["rows"], GEN_COLUMNS),
            f"Start-time seeds {data['seeds']} (medians; branchy paths: seed "
            f"{data['kernel_seed']}).",
        ),
    ]
    return {"title": title, "rows": summary, "files": files}
