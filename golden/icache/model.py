"""Cycle-stepped golden model of the instruction cache (:mod:`gpurtl.hdl.icache`).

The rules, shared bit for bit with the RTL:

* ``size`` bytes of 128-byte lines in ``size / (128 * ways)`` sets; line ``L`` (program counter
  / 128) lives in set ``L % sets``. True LRU per set. A line is entered in the tags when it is
  requested from memory and marked *pending* until its fill.
* **Fetch port** (``fetch`` in, ``resp`` out): one demand fetch of the instruction at ``pc`` at a
  time. A *hit* (line present and filled) is answered the next cycle with ``hit = 1`` and the
  32-bit word at ``pc``. A *pending* line (being fetched, by a prefetch or an earlier miss) or a
  *miss* parks the fetch in the wait register (a miss also allocates the line: a free miss
  register and a victim way that is not pending are needed, otherwise the fetch waits); it is
  answered with ``hit = 0`` in the cycle after its line's fill is taken, the word taken from the
  fill. ``fetch.ready`` is low while a fetch waits, and for a hit while the response register is
  full. Every accepted fetch makes its way the most recently used.
* **Prefetch** never answers anything; it only allocates lines (the ``issue`` output pulses) and
  requests them from memory. It acts only in cycles where no fetch is accepted, one candidate
  line a cycle, from two sources, the sequential one first (a choice):

  - *sequential*: when a fetch is accepted for a line other than the previous fetch's, the
    ``distance`` input (``s_set_inst_prefetch_distance``; 0 turns it off) sets up the
    ``distance`` lines after it as candidates;
  - *range*: a kernel-entry request on ``start`` (``line``, ``lines``: the kernel's
    ``INST_PREF_SIZE``, clamped to ``entry_lines``) or an ``s_prefetch_inst*`` request on ``pf``
    (``line``, ``count``: the instruction's ``sdata``, ``count + 1`` lines) loads the range
    register, when it is empty; ``start`` wins over ``pf``.

  A candidate already present (filled or pending) is skipped without touching the LRU state (a
  choice); an absent one is allocated (most recently used, a choice) when a miss register is free
  and its victim way is not pending, otherwise the source waits. Line indices wrap at
  ``2 ** line_bits``.
* **Memory** (``mem_req`` out, ``fill`` in): the memory request register takes the lowest miss
  register not yet requested (a miss allocated this cycle is requested next cycle at the
  earliest). A fill (any order, one 1024-bit transfer) for a requested line writes it, clears its
  pending mark and frees its miss register; a fill no miss register asked for is dropped with
  ``err.unexpected_fill``. ``fill.ready`` is low only when the fill's line is the waiting fetch's
  and the response register is full.
* Payload outputs of the response and memory request registers keep their last value while
  ``valid`` is low. ``event`` reports each accepted fetch's lookup (``HIT``, ``PENDING``,
  ``MISS``).
"""

from gpurtl.facts.inst_prefetch import ICacheGeometry

__all__ = ["HIT", "PENDING", "MISS", "ICacheCore", "ICacheModel", "word_of"]

HIT, PENDING, MISS = 0, 1, 2


def word_of(line_data, pc):
    """The 32-bit word at byte address ``pc`` of a 128-byte line's data."""
    return (line_data >> (32 * ((pc >> 2) & 31))) & 0xFFFFFFFF


class ICacheCore:
    """Tags and true-LRU state of a set-associative cache of 128-byte lines, with pending marks:
    the part of the rules that does not depend on timing (the experiments use it too)."""

    def __init__(self, sets, ways):
        self.sets, self.ways = sets, ways
        self.tags = [[None] * ways for _ in range(sets)]  # [line, pending] or None
        self.lru = [list(range(ways)) for _ in range(sets)]  # least recently used first

    def lookup(self, line):
        """``(kind, way)`` of ``line``: ``way`` is the victim for a miss."""
        s = line % self.sets
        for way, entry in enumerate(self.tags[s]):
            if entry is not None and entry[0] == line:
                return (PENDING if entry[1] else HIT), way
        return MISS, self.lru[s][0]

    def victim_pending(self, line, way):
        entry = self.tags[line % self.sets][way]
        return entry is not None and entry[1]

    def touch(self, line, way):
        order = self.lru[line % self.sets]
        order.remove(way)
        order.append(way)

    def allocate(self, line, way):
        """Enter ``line`` in ``way`` of its set, pending; returns the line it replaced or None."""
        s = line % self.sets
        old = self.tags[s][way]
        self.tags[s][way] = [line, True]
        return None if old is None else old[0]

    def filled(self, line, way):
        self.tags[line % self.sets][way][1] = False


class ICacheModel:
    """Golden model of :class:`gpurtl.hdl.icache.ICache`.

    Parameters
    ----------
    geometry : ICacheGeometry, optional
    **fields
        Geometry fields that replace ``geometry``'s.

    ``step(inputs) -> outputs`` takes one cycle's inputs, returns that cycle's outputs, then
    advances one clock.
    """

    def __init__(self, geometry=None, **fields):
        g = geometry if geometry is not None else ICacheGeometry()
        if fields:
            g = ICacheGeometry(**{**g.__dict__, **fields})
        self.geometry = g
        self.core = ICacheCore(g.sets, g.ways)
        self.data = [[0] * g.ways for _ in range(g.sets)]
        self.mshr = [None] * g.mshrs  # {"line", "way", "sent"} or None
        self.mem_req = None
        self._last_line = 0
        self.out = None  # (pc, hit, word)
        self._last_out = (0, 0, 0)
        self.wait = None  # (pc, line)
        self.last = None  # line of the previous accepted fetch
        self.seq = [0, 0]  # next line, lines left
        self.rng = [0, 0]
        self.mask = (1 << g.line_bits) - 1

    def step(self, inputs):
        g, core = self.geometry, self.core
        fetch, fill = inputs["fetch"], inputs["fill"]
        pc = fetch["payload"]["pc"]
        line = pc >> 7
        kind, way = core.lookup(line)
        out_free = self.out is None or bool(inputs["resp"]["ready"])
        free = [k for k, m in enumerate(self.mshr) if m is None]
        if self.wait is not None:
            ready = False
        elif kind == HIT:
            ready = out_free
        elif kind == PENDING:
            ready = True
        else:
            ready = bool(free) and not core.victim_pending(line, way)
        accept = bool(fetch["valid"]) and ready

        fill_line = fill["payload"]["line"]
        wait_line = self.wait is not None and self.wait[1] == fill_line
        fill_ready = not (wait_line and not out_free)
        fill_take = bool(fill["valid"]) and fill_ready
        match = None
        if fill_take:
            for k, m in enumerate(self.mshr):
                if m is not None and m["sent"] and m["line"] == fill_line:
                    match = k

        range_ready = self.rng[1] == 0
        start_take = range_ready and bool(inputs["start"]["valid"])
        pf_take = range_ready and not inputs["start"]["valid"] and bool(inputs["pf"]["valid"])

        # The prefetch candidate (state at the start of the cycle).
        source = None
        if not accept:
            source = self.seq if self.seq[1] else self.rng if self.rng[1] else None
        issue = False
        if source is not None:
            cline = source[0]
            ckind, cway = core.lookup(cline)
            if ckind != MISS:
                advance = True
            else:
                advance = bool(free) and not core.victim_pending(cline, cway)
                issue = advance

        out_pc, out_hit, out_word = self.out if self.out is not None else self._last_out
        outputs = {
            "fetch": {"ready": int(ready)},
            "resp": {
                "valid": int(self.out is not None),
                "payload": {"pc": out_pc, "hit": out_hit, "word": out_word},
            },
            "start": {"ready": int(range_ready)},
            "pf": {"ready": int(range_ready and not inputs["start"]["valid"])},
            "mem_req": {
                "valid": int(self.mem_req is not None),
                "payload": {"line": self._last_line},
            },
            "fill": {"ready": int(fill_ready)},
            "err": {"unexpected_fill": int(fill_take and match is None)},
            "event": {"valid": int(accept), "kind": kind if accept else 0, "issue": int(issue)},
        }

        if self.mem_req is None or inputs["mem_req"]["ready"]:
            self.mem_req = None
            for m in self.mshr:
                if m is not None and not m["sent"]:
                    m["sent"] = True
                    self.mem_req = self._last_line = m["line"]
                    break

        if out_free:
            self.out = None
            if match is not None and wait_line:
                wpc = self.wait[0]
                self.out = (wpc, 0, word_of(fill["payload"]["data"], wpc))
                self.wait = None
            elif accept and kind == HIT:
                s = line % g.sets
                self.out = (pc, 1, word_of(self.data[s][way], pc))
            if self.out is not None:
                self._last_out = self.out

        if accept:
            if kind != HIT:
                self.wait = (pc, line)
            if kind == MISS:
                k = free[0]
                core.allocate(line, way)
                self.mshr[k] = {"line": line, "way": way, "sent": False}
            core.touch(line, way)
            if line != self.last:
                self.seq = [(line + 1) & self.mask, int(inputs["distance"])]
            self.last = line
        elif source is not None and advance:
            if issue:
                core.allocate(cline, cway)
                self.mshr[free[0]] = {"line": cline, "way": cway, "sent": False}
                core.touch(cline, cway)
            source[0] = (source[0] + 1) & self.mask
            source[1] -= 1

        if start_take:
            start = inputs["start"]["payload"]
            self.rng = [start["line"], min(start["lines"], g.entry_lines)]
        elif pf_take:
            request = inputs["pf"]["payload"]
            self.rng = [request["line"], request["count"] + 1]

        if match is not None:
            m = self.mshr[match]
            s = m["line"] % g.sets
            self.data[s][m["way"]] = fill["payload"]["data"]
            core.filled(m["line"], m["way"])
            self.mshr[match] = None
        return outputs
