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

**Temporal hints and scope** (GFX12's ``th`` and ``scope``, :mod:`gpurtl.facts.memory_hints`).
Every request carries a load hint (default ``TH.RT``) and a scope (default ``Scope.CU``); with
the defaults the model is the plain LRU hierarchy above, request for request. A level applies
the *near* half of a split hint (``NT_RT``: NT at the CU and SE levels) when its ``scope`` is
``CU`` or ``SE`` (or not given), the *far* half otherwise, as LLVM's ``CPol`` comments split
them. AMD publishes one-line meanings only ("non-temporal", "high-temporal", "last use"); what a
level does with them is the :class:`HintPolicy` below, every rule a stated choice with a
parameter:

* ``RT``: a use makes the line the most recently used; a fill goes in as the most recent.
* ``NT``: a hit leaves the replacement state as it is (``nt_hit="keep"``: what Chips and Cheese
  describe RDNA's L2 doing for a streaming hit; ``"touch"`` updates it as RT does: the wrong
  policy the hints experiment must tell apart); a fill goes in at the LRU end (``nt_fill="lru"``,
  so it is the next victim of its set), as the most recent (``"mru"``) or not at all
  (``"bypass"``: the data passes to the requester, the level keeps nothing).
* ``HT``: used as RT, and the line is protected: a miss in its set that would evict it takes the
  next line in LRU order instead, ``ht_protect`` times at most (each skip uses one; 0 turns
  protection off); a set whose lines are all protected evicts its LRU line.
* ``LU`` (last use): the hit is served, then the line is dropped (``lu_hit="evict"``) or moved
  to the LRU end (``"demote"``); a miss fills as NT does.

A level with a ``scope`` narrower than a request's scope does not serve it from its tags (the
line may be stale for an agent of that scope): the request passes to the next level as a miss
and the returning line replaces the level's copy (a choice: RDNA 3's GLC loads "miss and evict"
in the L0 and L1, and GFX12's wider-scope loads are the coherent ones). :meth:`Hierarchy.store`
returns when a write is visible at the first level whose scope covers the store's (and writes
it through to the L2); :meth:`Hierarchy.invalidate` clears the levels narrower than a scope, as
``global_inv scope:...`` does (AMDGPUUsage, "Memory Model GFX12").
"""

import heapq
from dataclasses import dataclass

from gpurtl.facts.memory_hints import TH, Scope, near_far

__all__ = ["Cache", "HintPolicy", "Hierarchy", "Level"]

LINE = 128


@dataclass(frozen=True)
class HintPolicy:
    """What the levels do with each hint (module doc string). Every field is a choice."""

    nt_hit: str = "keep"
    nt_fill: str = "lru"
    ht_protect: int = 4
    lu_hit: str = "evict"

    def __post_init__(self):
        for name, allowed in (
            ("nt_hit", ("keep", "touch")),
            ("nt_fill", ("lru", "mru", "bypass")),
            ("lu_hit", ("evict", "demote")),
        ):
            if getattr(self, name) not in allowed:
                raise ValueError(
                    f"`{name}` must be one of {', '.join(allowed)}, not {getattr(self, name)!r}"
                )
        if not isinstance(self.ht_protect, int) or self.ht_protect < 0:
            raise ValueError(
                f"`ht_protect` must be a non-negative integer, not {self.ht_protect!r}"
            )


class Level:
    """Parameters of one level: ``name``, ``size`` (bytes; 0 = DRAM, no tags), ``ways``,
    ``delta`` (cycles), ``lines_per_cycle``, ``mshrs`` (misses in flight; 0 = unlimited) and
    ``scope``: the widest :class:`~gpurtl.facts.memory_hints.Scope` the level is coherent for
    (``None``: every scope, as before scopes existed)."""

    def __init__(self, name, size, ways, delta, lines_per_cycle, mshrs, scope=None):
        if size and (size % (LINE * ways) or size < LINE * ways):
            raise ValueError(f"`size` of {name} must be a multiple of {LINE} x ways, not {size}")
        if delta < 0 or lines_per_cycle <= 0 or mshrs < 0:
            raise ValueError(f"{name}: latency, bandwidth and MSHRs must be non-negative")
        self.name, self.size, self.ways = name, size, ways
        self.delta, self.lines_per_cycle, self.mshrs = delta, lines_per_cycle, mshrs
        self.scope = None if scope is None else Scope(scope)

    def as_dict(self):
        out = dict(vars(self))
        if out["scope"] is None:
            del out["scope"]  # the dictionary of a level without a scope stays as it was
        else:
            out["scope"] = out["scope"].name
        return out


class Cache:
    """Tags and timing state of one level."""

    def __init__(self, level, policy=None):
        self.level = level
        self.policy = policy or HintPolicy()
        self.sets = level.size // (LINE * level.ways) if level.size else 0
        # per set: line -> fill time, least recently used first (a use moves a line to the end)
        self.tags = [dict() for _ in range(self.sets)]
        self.protect = {}  # line -> protections left (HT lines)
        self.port_free = 0.0
        self.fills = []  # heap of pending fill times (MSHRs in use)
        self.accesses = self.hits = self.pending_hits = self.misses = 0
        self.mshr_wait = 0.0
        self.by_tag = {}  # tag -> [accesses, hits, pending hits, misses]
        far = level.scope is not None and level.scope >= Scope.DEV
        self._class = 1 if far else 0  # which half of a split hint applies here

    def hint_class(self, th):
        """``"RT"``, ``"NT"``, ``"HT"`` or ``"LU"``: what hint ``th`` means at this level."""
        return near_far(th)[self._class]

    def lookup(self, line, t, hint="RT"):
        """``(status, fill)``: 'hit', 'pending' (fill time) or 'miss'."""
        if not self.sets:
            return "hit", t
        s = self.tags[line % self.sets]
        fill = s.get(line)
        if fill is None:
            return "miss", None
        if hint == "RT" or hint == "HT" or (hint == "NT" and self.policy.nt_hit == "touch"):
            del s[line]
            s[line] = fill
        return ("pending", fill) if fill > t else ("hit", fill)

    def insert(self, line, fill, hint="RT"):
        index = line % self.sets
        s = self.tags[index]
        s.pop(line, None)
        self.protect.pop(line, None)
        if len(s) >= self.level.ways:
            victim = next(iter(s))
            if self.protect:
                for candidate in s:
                    left = self.protect.get(candidate, 0)
                    if not left:
                        victim = candidate
                        break
                    self.protect[candidate] = left - 1
                    if left == 1:
                        del self.protect[candidate]
            del s[victim]
            self.protect.pop(victim, None)
        if hint in ("NT", "LU") and self.policy.nt_fill == "lru":
            self.tags[index] = {line: fill, **s}
        else:
            s[line] = fill
        if hint == "HT" and self.policy.ht_protect:
            self.protect[line] = self.policy.ht_protect

    def after_hit(self, line, hint):
        """An HT hit renews the line's protection; an LU hit lets the line go."""
        s = self.tags[line % self.sets]
        if hint == "HT" and self.policy.ht_protect:
            self.protect[line] = self.policy.ht_protect
        elif hint == "LU":
            fill = s.pop(line)
            self.protect.pop(line, None)
            if self.policy.lu_hit == "demote":
                self.tags[line % self.sets] = {line: fill, **s}

    def drop(self, line):
        if self.sets:
            self.tags[line % self.sets].pop(line, None)
            self.protect.pop(line, None)

    def invalidate(self):
        for s in self.tags:
            s.clear()
        self.protect.clear()

    def count(self, tag, k):
        if tag is not None:
            self.by_tag.setdefault(tag, [0, 0, 0, 0])[k] += 1


class Hierarchy:
    """The levels in order (first: the CU's L0; last: DRAM with ``size`` 0); ``policy``: the
    :class:`HintPolicy` of every level (default: its defaults)."""

    def __init__(self, levels, policy=None):
        if not levels or levels[-1].size:
            raise ValueError("the last level must be DRAM (`size` 0)")
        self.policy = policy or HintPolicy()
        self.caches = [Cache(level, self.policy) for level in levels]
        self.served = None  # the level index that served the last access

    def access(self, line, t, level=0, *, th=TH.RT, scope=Scope.CU, tag=None):
        """Cycle at which line ``line`` requested at cycle ``t`` is back at the requester.
        ``th`` (a load :class:`~gpurtl.facts.memory_hints.TH`) and ``scope``: the request's
        hint and scope; ``tag``: a label the per-tag statistics count the request under."""
        c = self.caches[level]
        lv = c.level
        start = max(float(t), c.port_free)
        c.port_free = start + 1.0 / lv.lines_per_cycle
        c.accesses += 1
        c.count(tag, 0)
        hint = c.hint_class(th) if th else "RT"
        narrow = lv.scope is not None and lv.scope < scope
        status, fill = ("miss", None) if narrow else c.lookup(line, start, hint)
        if status == "hit":
            c.hits += 1
            c.count(tag, 1)
            if c.sets and hint != "RT":
                c.after_hit(line, hint)
            self.served = level
            return start + lv.delta
        if status == "pending":
            c.pending_hits += 1
            c.count(tag, 2)
            self.served = level
            return fill + lv.delta
        c.misses += 1
        c.count(tag, 3)
        while c.fills and c.fills[0] <= start:
            heapq.heappop(c.fills)
        if lv.mshrs and len(c.fills) >= lv.mshrs:
            wait_until = heapq.heappop(c.fills)
            c.mshr_wait += wait_until - start
            start = wait_until
        if th or scope or tag is not None:
            fill = self.access(line, start, level + 1, th=th, scope=scope, tag=tag)
        else:  # the plain call, as a subclass written before hints overrides it
            fill = self.access(line, start, level + 1)
        heapq.heappush(c.fills, fill)
        if hint in ("NT", "LU") and self.policy.nt_fill == "bypass":
            c.drop(line)
        else:
            c.insert(line, fill, hint)
        return fill + lv.delta

    def store(self, line, t, *, th=TH.RT, scope=Scope.CU):
        """Cycle at which a store of line ``line`` issued at cycle ``t`` is visible at its
        ``scope``: it takes each level's port in turn and is visible at the first level whose
        scope covers ``scope`` (DRAM, or any level without a scope, covers all). From there it
        is written through to the first device-wide level (the L2, or a level without a
        scope), each of those levels keeping the line (write-allocate, placed as the hint says
        for a fill); levels before it keep a copy they already hold and allocate none (a
        choice: RDNA's L0 and L1 are write-through)."""
        when, visible = float(t), None
        for c in self.caches:
            lv = c.level
            start = max(when, c.port_free)
            c.port_free = start + 1.0 / lv.lines_per_cycle
            when = start + lv.delta
            if visible is None and (lv.scope is None or lv.scope >= scope or not c.sets):
                visible = when
            if c.sets and visible is not None:
                c.insert(line, when, c.hint_class(th) if th else "RT")
            elif c.sets and line in c.tags[line % c.sets]:
                c.tags[line % c.sets][line] = min(c.tags[line % c.sets][line], when)
            if visible is not None and (lv.scope is None or lv.scope >= Scope.DEV or not c.sets):
                return visible
        return visible

    def invalidate(self, scope):
        """Clear every level narrower than ``scope`` (``global_inv scope:...``): a level with
        scope CU for ``Scope.SE``, CU and SE levels for ``Scope.DEV``, every cached level but
        those marked SYS for ``Scope.SYS``. Levels without a scope are kept."""
        scope = Scope(scope)
        for c in self.caches:
            if c.sets and c.level.scope is not None and c.level.scope < scope:
                c.invalidate()

    def warm(self, lines, levels):
        """Mark ``lines`` present (no timing) in the levels named ``levels``."""
        for c in self.caches:
            if c.level.name in levels and c.sets:
                for line in lines:
                    if c.tags[line % c.sets].get(line) is None:
                        c.insert(line, 0.0)

    def stats(self):
        """Per level: accesses, hits, pending hits, misses, hit rate (hits and pending hits over
        accesses) and the cycles misses waited for a free MSHR; where requests carried a
        ``tag``, ``by_tag`` gives the same four counts and the hit rate per tag."""
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
            if c.by_tag:
                out[c.level.name]["by_tag"] = {
                    tag: {
                        "accesses": a,
                        "hits": h,
                        "pending_hits": p,
                        "misses": m,
                        "hit_rate": (h + p) / a if a else float("nan"),
                    }
                    for tag, (a, h, p, m) in sorted(c.by_tag.items())
                }
        return out
