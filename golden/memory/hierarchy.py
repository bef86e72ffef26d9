"""A deterministic, event-exact timing model of a GPU memory hierarchy, one 128-byte line per
request.

Each level (:class:`Level`) is a set-associative LRU cache of 128-byte lines with

* a *delta* latency: the cycles the level adds to a request it serves, so that a hit at level
  ``k`` returns ``sum(delta[0..k])`` cycles after the request reaches the first level (the
  load-to-use latency a pointer-chasing microbenchmark measures at that level);
* a bandwidth in lines per cycle: requests take the level's port one after the other, each
  ``1 / lines_per_cycle`` cycles after the previous one;
* miss-status holding registers: a miss allocates one until its fill arrives; a request to a
  line whose fill is pending waits for that fill (it is counted as a *pending hit*); with all
  ``mshrs`` busy a miss waits for the earliest fill.

DRAM is the last level with no tags (every request hits after its latency, behind its port).

Requests must reach the hierarchy in non-decreasing time (the CU model issues them in cycle
order); the model is then a pure function of the request sequence. :meth:`Hierarchy.access`
returns the cycle the line's data is back at the requester.
"""

import heapq

__all__ = ["Cache", "Hierarchy", "Level"]

LINE = 128


class Level:
    """Parameters of one level: ``name``, ``size`` (bytes; 0 = DRAM, no tags), ``ways``,
    ``delta`` (cycles), ``lines_per_cycle``, ``mshrs`` (misses in flight; 0 = unlimited)."""

    def __init__(self, name, size, ways, delta, lines_per_cycle, mshrs):
        if size and (size % (LINE * ways) or size < LINE * ways):
            raise ValueError(f"`size` of {name} must be a multiple of {LINE} x ways, not {size}")
        if delta < 0 or lines_per_cycle <= 0 or mshrs < 0:
            raise ValueError(f"{name}: latency, bandwidth and MSHRs must be non-negative")
        self.name, self.size, self.ways = name, size, ways
        self.delta, self.lines_per_cycle, self.mshrs = delta, lines_per_cycle, mshrs

    def as_dict(self):
        return dict(vars(self))


class Cache:
    """Tags and timing state of one level."""

    def __init__(self, level):
        self.level = level
        self.sets = level.size // (LINE * level.ways) if level.size else 0
        # per set: line -> fill time, least recently used first (a use moves a line to the end)
        self.tags = [dict() for _ in range(self.sets)]
        self.port_free = 0.0
        self.fills = []  # heap of pending fill times (MSHRs in use)
        self.accesses = self.hits = self.pending_hits = self.misses = 0
        self.mshr_wait = 0.0

    def lookup(self, line, t):
        """``(status, fill)``: 'hit', 'pending' (fill time) or 'miss'."""
        if not self.sets:
            return "hit", t
        s = self.tags[line % self.sets]
        fill = s.pop(line, None)
        if fill is None:
            return "miss", None
        s[line] = fill
        return ("pending", fill) if fill > t else ("hit", fill)

    def insert(self, line, fill):
        s = self.tags[line % self.sets]
        if len(s) >= self.level.ways:
            del s[next(iter(s))]
        s[line] = fill


class Hierarchy:
    """The levels in order (first: the CU's L0; last: DRAM with ``size`` 0)."""

    def __init__(self, levels):
        if not levels or levels[-1].size:
            raise ValueError("the last level must be DRAM (`size` 0)")
        self.caches = [Cache(level) for level in levels]

    def access(self, line, t, level=0):
        """Cycle at which line ``line`` requested at cycle ``t`` is back at the requester."""
        c = self.caches[level]
        lv = c.level
        start = max(float(t), c.port_free)
        c.port_free = start + 1.0 / lv.lines_per_cycle
        c.accesses += 1
        status, fill = c.lookup(line, start)
        if status == "hit":
            c.hits += 1
            return start + lv.delta
        if status == "pending":
            c.pending_hits += 1
            return fill + lv.delta
        c.misses += 1
        while c.fills and c.fills[0] <= start:
            heapq.heappop(c.fills)
        if lv.mshrs and len(c.fills) >= lv.mshrs:
            wait_until = heapq.heappop(c.fills)
            c.mshr_wait += wait_until - start
            start = wait_until
        fill = self.access(line, start, level + 1)
        heapq.heappush(c.fills, fill)
        c.insert(line, fill)
        return fill + lv.delta

    def warm(self, lines, levels):
        """Mark ``lines`` present (no timing) in the levels named ``levels``."""
        for c in self.caches:
            if c.level.name in levels and c.sets:
                for line in lines:
                    if c.tags[line % c.sets].get(line) is None:
                        c.insert(line, 0.0)

    def stats(self):
        """Per level: accesses, hits, pending hits, misses, hit rate (hits and pending hits over
        accesses) and the cycles misses waited for a free MSHR."""
        out = {}
        for c in self.caches:
            rate = (c.hits + c.pending_hits) / c.accesses if c.accesses else float("nan")
            out[c.level.name] = {
                "accesses": c.accesses,
                "hits": c.hits,
                "pending_hits": c.pending_hits,
                "misses": c.misses,
                "hit_rate": rate,
                "mshr_wait": c.mshr_wait,
            }
        return out
