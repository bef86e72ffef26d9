"""Cycle-stepped golden model of the RT unit's L0 vector cache (:mod:`gpurtl.hdl.rt_unit.l0_cache`).

The rules, shared bit for bit with the RTL (written here as plain Python over lists):

* ``size`` bytes of 128-byte lines in ``size / (128 * ways)`` sets of ``ways`` ways; the set of
  line ``L`` (a line index: byte address / 128) is ``L % sets``. One line moves as one transfer
  on the response port (``data`` is 1024 bits) and as ``beats`` transfers on the fill port.
* **Replacement** (``replacement``), per set. Every accepted request (hit, pending hit or miss)
  *uses* its way; a fill does not. The line is entered in the tags at the miss, marked *pending*
  until its fill (as :class:`gpurtl.golden.memory.hierarchy.Cache` does), so a later request to
  it is a *pending hit*.

  - ``"lru"``, true LRU: a use makes the way the most recently used; the victim of a miss is the
    least recently used way, so invalid ways, never used, go first.
  - ``"plru"``, tree pseudo-LRU: ``ways - 1`` bits per set, the nodes of a binary tree over the
    ways (node 0 the root, node ``n``'s children ``2n + 1`` over the lower half of its ways and
    ``2n + 2`` over the upper half). A bit 0 says "the victim is in the lower half", 1 "the
    upper half". A use sets each bit on the way's path to point away from the way; the victim
    is found by following the bits from the root. That is the tree-PLRU of Wikipedia's "Cache
    replacement policies" (section "Pseudo-LRU (PLRU)") and "Pseudo-LRU" articles. A choice
    where they are silent: an invalid way (the lowest) is taken before the tree's victim, so a
    cold set fills up as under LRU.
* **Request acceptance** (``req.ready``) is worked out from this cycle's payload and the state at
  the start of the cycle: a hit needs the response register free (empty or taken this cycle) and
  no fill being returned; a pending hit needs room in its miss register's ``targets`` list; a
  miss needs a free miss register (``mshrs`` of them) and a victim way that is not pending.
  Otherwise the request waits (back-pressure; requests are accepted in order).
* A hit's response is in the response register the next cycle. **Hits may overtake pending
  misses**: responses carry the request's ``id`` and leave in the order they are ready, not in
  request order.
* A miss register is loaded into the memory request register (``mem_req``, held until taken)
  one cycle after the miss is accepted at the earliest, lowest index first.
* A **fill** (``fill.ready`` is low while an earlier fill's targets are being returned) for the
  line of a requested miss register writes the line and clears its pending mark; from the next
  cycle its targets are loaded into the response register one per cycle (so the first is
  answered two cycles after the fill), in the order they were merged, before any new hit. The
  miss register is free again after its last target left. A fill whose line has no requested
  miss register is taken and dropped with ``err.unexpected_fill`` high for that cycle.
* **Beats** (``beats > 1``): a fill is ``beats`` transfers of ``1024 / beats`` bits, the line's
  low bits first, back to back on the fill stream (the next fill's first beat after the last
  beat of this one; the memory side may pause between beats). The L0 counts the transfers it
  takes; beats before the last are kept in a fill buffer and change nothing else. The last beat
  is *the* fill of the rules above: its ``line`` names the line (earlier beats' ``line`` fields
  are not looked at), the line written is the buffer with the last beat on top, and a last beat
  with no requested miss register raises ``err.unexpected_fill`` and drops the whole line.
  ``fill.ready`` follows the same rule for every beat.
* The payload outputs of the response and memory request registers keep their last value while
  ``valid`` is low.
* ``event`` reports every accepted request's lookup result (``HIT``, ``PENDING``, ``MISS``:
  :class:`gpurtl.facts.memory_hints.L0Lookup`).
* **Hints** (geometry ``hints``): each request also carries a GFX12 load temporal hint ``th``
  and a ``scope`` (:mod:`gpurtl.facts.memory_hints`). The L0 is a CU-level cache, so a split
  hint's near half applies (``NT_RT`` and ``NT_HT`` are NT here, ``RT_NT`` is RT). AMD does not
  say what its L0 does with a hint; these rules are choices (the same as the defaults of
  :class:`gpurtl.golden.memory.HintPolicy` where the two overlap):

  - ``RT``: as above (every use makes the way the most recent).
  - ``NT``: the request does not use its way: a hit or pending hit leaves the replacement state
    as it is, and a miss's line goes in where the victim was, so under LRU it stays the least
    recently used (the next victim of its set once the set has no invalid way; invalid ways
    are taken first, as without hints) and under PLRU the tree still points at it.
  - ``HT`` (true LRU only; under PLRU HT is RT): used as RT, and the way's *protect* bit is set.
    A miss takes the least recently used way whose protect bit is clear and clears the bits of
    the protected ways it passed over (each HT line survives one eviction); with every way
    protected it takes the least recently used way and clears them all. A fill of another hint
    clears its way's bit.
  - ``LU`` (last use): a hit is answered and its line invalidated (its way becomes the least
    recently used); a pending hit or a miss is NT.
  - ``scope`` wider than ``CU``: a hit is not served from the L0 (the line may be stale for the
    wider scope): it is taken as a miss into the line's own way (kind ``MISS``), which refetches
    the line. A pending hit merges as usual (its data is on its way from below).
  - ``TH`` 7 (reserved for loads) is treated as RT.

  Without ``hints`` every request is RT at CU scope: the rules above reduce to the plain ones.
"""

from gpurtl.facts.memory_hints import L0Lookup, Scope, near_far
from gpurtl.facts.rt_unit import LINE_BYTES, L0Geometry

__all__ = ["HIT", "PENDING", "MISS", "LINE_BYTES", "L0CacheModel", "l0_hint_class"]

HIT, PENDING, MISS = L0Lookup.HIT.value, L0Lookup.PENDING.value, L0Lookup.MISS.value


def l0_hint_class(th):
    """What load hint ``th`` means at the L0: ``"RT"``, ``"NT"``, ``"HT"`` or ``"LU"`` (the near
    half of a split hint; the reserved value 7 is RT)."""
    return "RT" if th == 7 else near_far(th)[0]


class L0CacheModel:
    """Golden model of :class:`gpurtl.hdl.rt_unit.L0Cache`.

    Parameters
    ----------
    geometry : L0Geometry, optional
        The build (:class:`gpurtl.facts.rt_unit.L0Geometry`; default: its defaults).
    **fields
        Geometry fields that replace ``geometry``'s (``size=1024``, ...).

    ``step(inputs) -> outputs`` takes one cycle's inputs (fields as in the block's layouts),
    returns that cycle's outputs, then advances one clock.
    """

    def __init__(self, geometry=None, **fields):
        self.geometry = g = L0Geometry.of(geometry, **fields)
        self.sets, self.ways, self.mshrs, self.targets = g.sets, g.ways, g.mshrs, g.targets
        self.id_bits, self.line_bits = g.id_bits, g.line_bits
        ways, mshrs = g.ways, g.mshrs
        # per set and way: None (invalid) or [line, pending, mshr index]
        self.tags = [[None] * ways for _ in range(self.sets)]
        self.lru = [list(range(ways)) for _ in range(self.sets)]  # least recently used first
        self.plru = [[0] * (ways - 1) for _ in range(self.sets)]  # tree bits, node 0 the root
        self.protect = [[0] * ways for _ in range(self.sets)]  # HT protect bits (hints only)
        self.data = [[0] * ways for _ in range(self.sets)]
        # per miss register: None (free) or {"line", "way", "ids", "sent"}
        self.mshr = [None] * mshrs
        self.mem_req = None  # line in the memory request register
        self.out = None  # (id, data) in the response register
        # what the two registers last held: their payload outputs keep it while not valid
        self._last_line, self._last_out = 0, (0, 0)
        self.drain = None  # [mshr index, next target] while a fill's targets leave
        self.beat, self.assembled = 0, 0  # fill beats taken of the current line, their data

    def lookup(self, line, scope=0):
        """``(kind, way)`` of ``line`` in the state at the start of this cycle (``way`` is the
        victim for a miss; a present line's own way for a hit at a scope wider than CU)."""
        s = line % self.sets
        for way, entry in enumerate(self.tags[s]):
            if entry is not None and entry[0] == line:
                if entry[1]:
                    return PENDING, way
                return (MISS if scope > Scope.CU else HIT), way
        return MISS, self.victim(s)

    def victim(self, s):
        """The way a miss in set ``s`` replaces."""
        if self.geometry.replacement == "lru":
            # Without hints the invalid ways are always first in LRU order and no way is
            # protected, so this is the least recently used way; with hints an NT line can sit
            # before an invalid way, and protected ways are passed over.
            order = self.lru[s]
            for way in order:
                if self.tags[s][way] is None:
                    return way
            for way in order:
                if not self.protect[s][way]:
                    return way
            return order[0]
        invalid = [way for way, entry in enumerate(self.tags[s]) if entry is None]
        if invalid:
            return invalid[0]
        node = 0
        while node < self.ways - 1:  # down the tree to a leaf: leaves are ways - 1 + way
            node = 2 * node + 1 + self.plru[s][node]
        return node - (self.ways - 1)

    def _touch(self, s, way):
        if self.geometry.replacement == "lru":
            self.lru[s].remove(way)
            self.lru[s].append(way)
            return
        node = self.ways - 1 + way
        while node:  # up to the root, each parent pointing to the other child
            parent = (node - 1) // 2
            self.plru[s][parent] = int(node == 2 * parent + 1)
            node = parent

    def _passed(self, s, way):
        """The protected ways an LRU miss into ``way`` passes over: those before it in LRU
        order, or all of them when every way is protected."""
        order = self.lru[s]
        if all(self.protect[s]):
            return list(order)
        return order[: order.index(way)]

    def step(self, inputs):
        req, fill = inputs["req"], inputs["fill"]
        line = req["payload"]["line"]
        th = req["payload"].get("th", 0) if self.geometry.hints else 0
        scope = req["payload"].get("scope", 0) if self.geometry.hints else 0
        hint = l0_hint_class(th)
        s = line % self.sets
        kind, way = self.lookup(line, scope)
        out_free = self.out is None or bool(inputs["resp"]["ready"])
        free = [k for k, m in enumerate(self.mshr) if m is None]
        if kind == HIT:
            ready = out_free and self.drain is None
        elif kind == PENDING:
            ready = len(self.mshr[self.tags[s][way][2]]["ids"]) < self.targets
        else:
            victim = self.tags[s][way]
            ready = bool(free) and (victim is None or not victim[1])
        accept = bool(req["valid"]) and ready
        fill_ready = self.drain is None
        fill_take = bool(fill["valid"]) and fill_ready
        fill_line = fill["payload"]["line"]
        last_beat = self.beat == self.geometry.beats - 1
        match = None
        if fill_take and last_beat:
            for k, m in enumerate(self.mshr):
                if m is not None and m["sent"] and m["line"] == fill_line:
                    match = k
        out_id, out_data = self.out if self.out is not None else self._last_out
        outputs = {
            "req": {"ready": int(ready)},
            "resp": {
                "valid": int(self.out is not None),
                "payload": {"id": out_id, "data": out_data},
            },
            "mem_req": {
                "valid": int(self.mem_req is not None),
                "payload": {"line": self._last_line},
            },
            "fill": {"ready": int(fill_ready)},
            "err": {"unexpected_fill": int(fill_take and last_beat and match is None)},
            "event": {"valid": int(accept), "kind": kind if accept else 0},
        }

        # The memory request register takes the lowest miss register not yet requested (as it
        # was at the start of the cycle: a miss accepted now is requested next cycle at best).
        if self.mem_req is None or inputs["mem_req"]["ready"]:
            self.mem_req = None
            for m in self.mshr:
                if m is not None and not m["sent"]:
                    m["sent"] = True
                    self.mem_req = self._last_line = m["line"]
                    break

        # The response register: a fill's targets first, then a hit.
        if out_free:
            self.out = None
            if self.drain is not None:
                k, position = self.drain
                m = self.mshr[k]
                ms = m["line"] % self.sets
                self.out = (m["ids"][position], self.data[ms][m["way"]])
                if position + 1 == len(m["ids"]):
                    self.mshr[k] = None
                    self.drain = None
                else:
                    self.drain = [k, position + 1]
            elif accept and kind == HIT:
                self.out = (req["payload"]["id"], self.data[s][way])
            if self.out is not None:
                self._last_out = self.out

        if accept:
            lru = self.geometry.replacement == "lru"
            if kind == PENDING:
                self.mshr[self.tags[s][way][2]]["ids"].append(req["payload"]["id"])
            elif kind == MISS:
                if lru and self.tags[s][way] is not None and self.tags[s][way][0] != line:
                    for passed in self._passed(s, way):
                        self.protect[s][passed] = 0
                k = free[0]
                self.tags[s][way] = [line, True, k]
                self.mshr[k] = {"line": line, "way": way, "ids": [req["payload"]["id"]]}
                self.mshr[k]["sent"] = False
                self.protect[s][way] = 0
            if hint == "RT" or hint == "HT":
                self._touch(s, way)
            if hint == "HT" and lru:
                self.protect[s][way] = 1
            if hint == "LU" and kind == HIT:
                self.tags[s][way] = None
                self.protect[s][way] = 0
                if lru:
                    self.lru[s].remove(way)
                    self.lru[s].insert(0, way)

        line_data = 0
        if fill_take:
            shift = self.beat * self.geometry.beat_bits
            line_data = self.assembled | fill["payload"]["data"] << shift
            self.beat, self.assembled = (0, 0) if last_beat else (self.beat + 1, line_data)
        if match is not None:
            m = self.mshr[match]
            ms = m["line"] % self.sets
            self.data[ms][m["way"]] = line_data
            self.tags[ms][m["way"]][1] = False
            self.drain = [match, 0]
        return outputs
