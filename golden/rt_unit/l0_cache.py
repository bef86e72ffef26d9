"""Cycle-stepped golden model of the RT unit's L0 vector cache (:mod:`gpurtl.hdl.rt_unit.l0_cache`).

The rules, shared bit for bit with the RTL (written here as plain Python over lists):

* ``size`` bytes of 128-byte lines in ``size / (128 * ways)`` sets of ``ways`` ways; the set of
  line ``L`` (a line index: byte address / 128) is ``L % sets``. One line moves as one transfer
  on every port (``data`` is 1024 bits).
* **Replacement: true LRU** per set. Every accepted request (hit, pending hit or miss) makes its
  way the most recently used; a fill does not. The victim of a miss is the least recently used
  way, so invalid ways, never touched, are used up first. The line is entered in the tags at the
  miss, marked *pending* until its fill (as :class:`gpurtl.golden.memory.hierarchy.Cache` does),
  so a later request to it is a *pending hit*.
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
* The payload outputs of the response and memory request registers keep their last value while
  ``valid`` is low.
* ``event`` reports every accepted request's lookup result (``HIT``, ``PENDING``, ``MISS``).
"""

__all__ = ["HIT", "PENDING", "MISS", "LINE_BYTES", "L0CacheModel", "cache_geometry"]

LINE_BYTES = 128
HIT, PENDING, MISS = 0, 1, 2


def cache_geometry(size, ways):
    """``sets`` of a cache of ``size`` bytes and ``ways`` ways of 128-byte lines; raises
    ValueError for sizes that do not make a power-of-two number of sets."""
    if not isinstance(ways, int) or ways < 1 or ways & (ways - 1):
        raise ValueError(f"`ways` must be a power of two, not {ways!r}")
    if not isinstance(size, int) or size <= 0 or size % (LINE_BYTES * ways):
        raise ValueError(f"`size` must be a positive multiple of 128 x ways, not {size!r}")
    sets = size // (LINE_BYTES * ways)
    if sets & (sets - 1):
        raise ValueError(f"`size` must make a power-of-two number of sets, not {sets} sets")
    return sets


class L0CacheModel:
    """Golden model of :class:`gpurtl.hdl.rt_unit.L0Cache`.

    Parameters
    ----------
    size, ways, mshrs, targets, id_bits, line_bits : int
        As the RTL's (see its doc string).

    ``step(inputs) -> outputs`` takes one cycle's inputs (fields as in the block's layouts),
    returns that cycle's outputs, then advances one clock.
    """

    def __init__(self, size=2048, ways=4, mshrs=4, targets=4, id_bits=4, line_bits=16):
        self.sets = cache_geometry(size, ways)
        self.ways, self.mshrs, self.targets = ways, mshrs, targets
        self.id_bits, self.line_bits = id_bits, line_bits
        # per set and way: None (invalid) or [line, pending, mshr index]
        self.tags = [[None] * ways for _ in range(self.sets)]
        self.lru = [list(range(ways)) for _ in range(self.sets)]  # least recently used first
        self.data = [[0] * ways for _ in range(self.sets)]
        # per miss register: None (free) or {"line", "way", "ids", "sent"}
        self.mshr = [None] * mshrs
        self.mem_req = None  # line in the memory request register
        self.out = None  # (id, data) in the response register
        # what the two registers last held: their payload outputs keep it while not valid
        self._last_line, self._last_out = 0, (0, 0)
        self.drain = None  # [mshr index, next target] while a fill's targets leave

    def lookup(self, line):
        """``(kind, way)`` of ``line`` in the state at the start of this cycle (``way`` is the
        victim for a miss)."""
        s = line % self.sets
        for way, entry in enumerate(self.tags[s]):
            if entry is not None and entry[0] == line:
                return (PENDING if entry[1] else HIT), way
        return MISS, self.lru[s][0]

    def _touch(self, s, way):
        self.lru[s].remove(way)
        self.lru[s].append(way)

    def step(self, inputs):
        req, fill = inputs["req"], inputs["fill"]
        line = req["payload"]["line"]
        s = line % self.sets
        kind, way = self.lookup(line)
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
        match = None
        if fill_take:
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
            "err": {"unexpected_fill": int(fill_take and match is None)},
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
            if kind == PENDING:
                self.mshr[self.tags[s][way][2]]["ids"].append(req["payload"]["id"])
            elif kind == MISS:
                k = free[0]
                self.tags[s][way] = [line, True, k]
                self.mshr[k] = {"line": line, "way": way, "ids": [req["payload"]["id"]]}
                self.mshr[k]["sent"] = False
            self._touch(s, way)

        if match is not None:
            m = self.mshr[match]
            ms = m["line"] % self.sets
            self.data[ms][m["way"]] = fill["payload"]["data"]
            self.tags[ms][m["way"]][1] = False
            self.drain = [match, 0]
        return outputs
