"""The CU model's instruction cache (``CuParams(icache=...)``, default off): the tags and LRU
rules of :class:`gpurtl.golden.icache.ICacheCore` (those of the ``icache`` block), with the
kernel-entry prefetch at each wave launch and the sequential prefetch ahead of each line a wave
asks for; misses go to the CU model's memory hierarchy from the level after L0 (instruction
fetches do not use the vector L0).

Every figure here is a choice (no public layout of gpurt's ``TraceRay3_1`` code was found): the
kernel's code is laid out as set-up (``setup_lines``), the loop body (``loop_lines``) and the
shading code (``shade_lines``) one after the other, from line ``CODE_BASE``; a phase's VALU work
starts when all its lines are there.
"""

from gpurtl.facts.inst_prefetch import ICACHE_SIZE, ICACHE_WAYS, LINE_BYTES
from gpurtl.golden.icache import MISS, ICacheCore

__all__ = ["CODE_BASE", "ICACHE_DEFAULTS", "CuICache"]

#: The first line of the kernel's code: far above any data line the traces use.
CODE_BASE = 1 << 40

#: The ``icache`` parameter's fields and their defaults.
ICACHE_DEFAULTS = {
    "size": ICACHE_SIZE,
    "ways": ICACHE_WAYS,
    "entry_lines": 0,
    "distance": 0,
    "setup_lines": 4,
    "loop_lines": 8,
    "shade_lines": 32,
}


class CuICache:
    """An instruction cache in front of ``memory`` (a :class:`gpurtl.golden.memory.Hierarchy`).

    Parameters
    ----------
    fields : dict
        Any of :data:`ICACHE_DEFAULTS`; the rest take their defaults.
    memory : Hierarchy
    """

    def __init__(self, fields, memory):
        unknown = set(fields) - set(ICACHE_DEFAULTS)
        if unknown:
            raise TypeError(f"unknown icache field `{sorted(unknown)[0]}`")
        v = dict(ICACHE_DEFAULTS, **fields)
        sets = v["size"] // (LINE_BYTES * v["ways"])
        if sets < 1 or v["size"] % (LINE_BYTES * v["ways"]):
            raise ValueError(f"icache `size` must be a multiple of 128 x ways, not {v['size']}")
        self.v, self.memory = v, memory
        self.core = ICacheCore(sets, v["ways"])
        self.fill_at = {}
        setup, loop = v["setup_lines"], v["loop_lines"]
        total = setup + loop + v["shade_lines"]
        self.phases = {
            "setup": range(CODE_BASE, CODE_BASE + setup),
            "loop": range(CODE_BASE + setup, CODE_BASE + setup + loop),
            "shade": range(CODE_BASE + setup + loop, CODE_BASE + total),
        }
        self.end = CODE_BASE + total
        self.fetches = self.misses = self.prefetches = 0
        self.wait_cycles = 0

    def _get(self, line, cycle, demand):
        kind, way = self.core.lookup(line)
        if kind != MISS:
            if demand:
                self.core.touch(line, way)
            return max(cycle, self.fill_at.get(line, 0))
        self.core.allocate(line, way)
        self.core.touch(line, way)
        fill = self.memory.access(line, cycle, level=1)
        self.fill_at[line] = fill
        if demand:
            self.misses += 1
        else:
            self.prefetches += 1
        return fill

    def _prefetch(self, line, cycle):
        if line < self.end and self.core.lookup(line)[0] == MISS:
            self._get(line, cycle, demand=False)

    def launch(self, cycle):
        """A wave starts: the kernel-entry prefetch."""
        for line in range(CODE_BASE, min(CODE_BASE + self.v["entry_lines"], self.end)):
            self._prefetch(line, cycle)

    def fetch(self, phase, cycle):
        """The cycle from which the lines of ``phase`` are all there, asked for at ``cycle``."""
        ready = cycle
        for line in self.phases[phase]:
            self.fetches += 1
            ready = max(ready, self._get(line, cycle, demand=True))
            for ahead in range(1, self.v["distance"] + 1):
                self._prefetch(line + ahead, cycle)
        self.wait_cycles += ready - cycle
        return ready

    def stats(self):
        return {
            "fetches": self.fetches,
            "misses": self.misses,
            "prefetches": self.prefetches,
            "wait_cycles": self.wait_cycles,
        }
