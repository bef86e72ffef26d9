"""The RT unit's L0 vector cache for node fetches: set-associative, true LRU or tree pseudo-LRU,
with miss-status registers that merge misses to a pending line, and out-of-order responses
tagged by request id.

The rules are written out once, in the golden model :mod:`gpurtl.golden.rt_unit.l0_cache`; this
module is their hardware form. In short:

* Lines are 128 bytes (the size of a BVH8 node); the response port moves one whole line per
  transfer (``data`` is 1024 bits), the fill port one line in ``beats`` transfers (default 1);
  earlier beats wait in a fill buffer register of ``1024 - 1024 / beats`` bits.
* Tags, valid and pending bits and the replacement state of each set (the LRU order, or the
  ``ways - 1`` tree bits of pseudo-LRU) are registers; the data is an
  :class:`amaranth.lib.memory.Memory` of ``sets * ways`` lines with an asynchronous read port
  (the line read is registered into the response register, so the data array needs no output
  register of its own).
* The request's set is looked up in the cycle the request is offered; ``req.ready`` depends on
  the result (a hit needs the response register, a pending hit room in its miss register's
  target list, a miss a free miss register and a victim way that is not pending).
* A hit is answered one cycle after it is accepted. A miss is requested on ``mem_req`` two
  cycles after it is accepted at the earliest (miss register, then the request register). A fill
  is written in the cycle it is accepted; its first target is answered two cycles later (the
  next cycle loads the response register from the written line), then one target a cycle.
  Hits may overtake pending misses; responses carry the request ``id``.
* With ``hints``: NT requests (the near half of a split hint) do not update the replacement
  state; HT requests set a per-way protect bit that an LRU miss passes over once; an LU hit
  invalidates its line; a hit at a scope wider than CU is taken as a miss into its own way.

Timing compared with :mod:`gpurtl.golden.memory.hierarchy` (event-exact, deltas): the hierarchy
answers a hit ``delta`` cycles after the request and a pending hit ``delta`` after the fill; here
a hit takes 1 cycle, a miss ``2 + memory latency + 2`` cycles plus one cycle for each target
returned before it, fills wait while an earlier fill's targets leave, and a request waits
(back-pressure) where the hierarchy would evict a pending line or take more targets than a miss
register holds. Lookup results (hit, pending hit, miss) are the same for the same accepted
request sequence and fill times (``tests/golden/rt_unit/test_l0_cache.py`` checks it).
"""

from types import SimpleNamespace

from amaranth.hdl import Cat, Module, Mux, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from gpurtl.facts.memory_hints import SCOPE_BITS, TH_BITS, L0Lookup
from gpurtl.facts.rt_unit import LINE_BITS, L0Geometry
from gpurtl.hdl.miss import request_lowest_unsent

__all__ = ["L0Cache", "LINE_BITS", "l0_layouts", "l0_signature"]

HIT, PENDING, MISS = L0Lookup.HIT.value, L0Lookup.PENDING.value, L0Lookup.MISS.value


def _any(terms):
    """The OR of ``terms`` (0 for none)."""
    out = 0
    for term in terms:
        out = out | term
    return out


def _bits(count):
    """Bits of an index into ``count`` things (at least 1)."""
    return max(1, (count - 1).bit_length())


def l0_signature(geometry=None):
    """The :class:`wiring.Signature` of :class:`L0Cache` of ``geometry`` (an
    :class:`~gpurtl.facts.rt_unit.L0Geometry`, default: the default one)."""
    request, response, mem_request, fill = l0_layouts(L0Geometry.of(geometry))
    return wiring.Signature(
        {
            "req": In(stream.Signature(request)),
            "resp": Out(stream.Signature(response)),
            "mem_req": Out(stream.Signature(mem_request)),
            "fill": In(stream.Signature(fill)),
            "err": Out(data.StructLayout({"unexpected_fill": 1})),
            "event": Out(data.StructLayout({"valid": 1, "kind": 2})),
        }
    )


def l0_layouts(geometry):
    """``(request, response, memory request, fill)`` payload layouts of ``geometry``."""
    id_bits, line_bits = geometry.id_bits, geometry.line_bits
    fields = {"id": id_bits, "line": line_bits}
    if geometry.hints:
        fields.update(th=TH_BITS, scope=SCOPE_BITS)
    request = data.StructLayout(fields)
    response = data.StructLayout({"id": id_bits, "data": LINE_BITS})
    mem_request = data.StructLayout({"line": line_bits})
    fill = data.StructLayout({"line": line_bits, "data": geometry.beat_bits})
    return request, response, mem_request, fill


class L0Cache(wiring.Component):
    """Set-associative L0 vector cache of 128-byte lines.

    Parameters
    ----------
    geometry : L0Geometry, optional
        Size, ways, miss registers, targets, id and line index widths
        (:class:`gpurtl.facts.rt_unit.L0Geometry`, which checks them; default: its defaults).
    **fields
        Geometry fields that replace ``geometry``'s (``size=1024``, ...).

    Attributes
    ----------
    req : In(stream.Signature(request))
        ``id``, ``line``; with ``hints``, also ``th`` (a GFX12 load temporal hint) and
        ``scope``, followed as :mod:`gpurtl.golden.rt_unit.l0_cache` says.
    resp : Out(stream.Signature(response))
        ``id``, ``data`` (the 128-byte line, byte 0 in bits 0-7).
    mem_req : Out(stream.Signature(mem_request))
        ``line``: one per miss.
    fill : In(stream.Signature(fill))
        ``line``, ``data``: the answer to a memory request, in any order; ``data`` is one beat
        (``1024 / beats`` bits, the line's low bits first), a line's beats back to back.
    err : Out(StructLayout(unexpected_fill))
        High in the cycle a fill (its last beat) whose line has no requested miss register is
        taken (and dropped).
    event : Out(StructLayout(valid, kind))
        ``valid`` when a request is accepted, ``kind`` its lookup result: 0 hit, 1 pending hit,
        2 miss.
    """

    def __init__(self, geometry=None, **fields):
        self.geometry = g = L0Geometry.of(geometry, **fields)
        self.size, self.ways, self.sets = g.size, g.ways, g.sets
        self.mshrs, self.targets = g.mshrs, g.targets
        self.id_bits, self.line_bits = g.id_bits, g.line_bits
        self.set_bits, self.way_bits = g.set_bits, g.way_bits
        super().__init__(l0_signature(g))

    def state_layouts(self):
        """``(tag entry, miss register, drain, response register)`` layouts."""
        way = unsigned(_bits(self.ways))
        mshr = unsigned(_bits(self.mshrs))
        entry = data.StructLayout(
            {"valid": 1, "pending": 1, "tag": self.line_bits - self.set_bits, "mshr": mshr}
        )
        miss = data.StructLayout(
            {
                "valid": 1,
                "sent": 1,
                "line": self.line_bits,
                "way": way,
                "count": unsigned(self.targets.bit_length()),
                "ids": data.ArrayLayout(self.id_bits, self.targets),
            }
        )
        drain = data.StructLayout(
            {"active": 1, "mshr": mshr, "position": unsigned(_bits(self.targets))}
        )
        out = data.StructLayout({"valid": 1, "id": self.id_bits, "data": LINE_BITS})
        return entry, miss, drain, out

    def elaborate(self, platform):
        m = Module()
        st = self._state(m)
        self._lookup(m, st)
        self._memory_request(m, st)
        self._respond(m, st)
        self._accept(m, st)
        self._fill(m, st)
        return m

    def _state(self, m):
        """The registers and the data array, as one namespace ``st`` the stages share."""
        ways, sets = self.ways, self.sets
        entry_l, miss_l, drain_l, out_l = self.state_layouts()
        st = SimpleNamespace(way_shape=unsigned(_bits(ways)))
        st.tags = [Signal(data.ArrayLayout(entry_l, ways), name=f"tags_s{s}") for s in range(sets)]
        if self.geometry.replacement == "lru":  # the ways, least recently used first
            layout = data.ArrayLayout(st.way_shape, ways)
            init = list(range(ways))
            st.repl = [Signal(layout, init=init, name=f"lru_s{s}") for s in range(sets)]
        else:  # the tree bits, node 0 the root
            st.repl = [Signal(max(1, ways - 1), name=f"plru_s{s}") for s in range(sets)]
        st.entry_l = entry_l
        if self.geometry.hints:  # the HT protect bits, one a way
            st.protect = [Signal(ways, name=f"protect_s{s}") for s in range(sets)]
        st.mshr = Signal(data.ArrayLayout(miss_l, self.mshrs))
        st.drain = Signal(drain_l)
        st.out = Signal(out_l)
        st.mem_req = Signal(data.StructLayout({"valid": 1, "line": self.line_bits}))
        m.submodules.lines = lines = Memory(shape=LINE_BITS, depth=sets * ways, init=[])
        st.rd = lines.read_port(domain="comb")
        st.wr = lines.write_port()
        return st

    def _set_of(self, line):
        return line[: self.set_bits]

    def _address(self, set_index, way):
        return Cat(way[: self.way_bits], set_index[: self.set_bits])

    def _lookup(self, m, st):
        """The offered request in its set (state at the start of the cycle), and ``req.ready``."""
        ways, set_bits = self.ways, self.set_bits
        st.line = line = self.req.payload.line
        st.rset = rset = self._set_of(line)
        cur = Signal(data.ArrayLayout(st.entry_l, ways))
        st.cur_repl = cur_repl = Signal.like(st.repl[0], name="cur_repl")
        for s in range(self.sets):
            with m.If(rset == s):
                m.d.comb += [cur.eq(st.tags[s]), cur_repl.eq(st.repl[s])]
        if self.geometry.hints:
            st.cur_prot = cur_prot = Signal(ways, name="cur_protect")
            for s in range(self.sets):
                with m.If(rset == s):
                    m.d.comb += cur_prot.eq(st.protect[s])
        self._hint(m, st)
        st.found = found = Signal()
        st.way = way = Signal(st.way_shape)  # the matching way, or the victim on a miss
        if self.geometry.replacement == "lru":
            m.d.comb += way.eq(cur_repl[0])
            if self.geometry.hints:
                # The first unprotected way in LRU order, and before it the first invalid one
                # (without hints both are the first way in LRU order).
                for bad in (lambda w: cur_prot.bit_select(w, 1), lambda w: cur[w].valid):
                    for p in reversed(range(ways)):
                        with m.If(~bad(cur_repl[p])):
                            m.d.comb += way.eq(cur_repl[p])
        else:
            m.d.comb += way.eq(self._plru_victim(m, cur, cur_repl))
        for w in reversed(range(ways)):
            with m.If(cur[w].valid & (cur[w].tag == line[set_bits:])):
                m.d.comb += [found.eq(1), way.eq(w)]
        st.entry = entry = cur[way]
        st.kind = kind = Signal(2)
        # a wider scope refetches a present line
        present = Mux(st.wide, MISS, HIT) if self.geometry.hints else HIT
        m.d.comb += kind.eq(Mux(found, Mux(entry.pending, PENDING, present), MISS))

        free = Signal()
        st.free_k = Signal(range(self.mshrs))
        for k in reversed(range(self.mshrs)):
            with m.If(~st.mshr[k].valid):
                m.d.comb += [free.eq(1), st.free_k.eq(k)]
        st.out_free = Signal()
        m.d.comb += st.out_free.eq(~st.out.valid | self.resp.ready)
        ready = Signal()
        with m.Switch(kind):
            with m.Case(HIT):
                m.d.comb += ready.eq(st.out_free & ~st.drain.active)
            with m.Case(PENDING):
                m.d.comb += ready.eq(st.mshr[entry.mshr].count < self.targets)
            with m.Default():
                m.d.comb += ready.eq(free & ~(entry.valid & entry.pending))
        st.accept = accept = Signal()
        m.d.comb += [
            accept.eq(self.req.valid & ready),
            self.req.ready.eq(ready),
            self.event.valid.eq(accept),
            self.event.kind.eq(Mux(accept, kind, 0)),
        ]

    def _hint(self, m, st):
        """The request's hint as the L0 reads it: ``touch`` (RT, HT, RT_NT, reserved: the
        request uses its way), ``ht``, ``lu``, and ``wide`` (a scope beyond the CU). Without
        ``hints`` every request is RT at CU scope (constants)."""
        if not self.geometry.hints:
            st.touch, st.ht, st.lu, st.wide = 1, 0, 0, 0
            return
        th, scope = self.req.payload.th, self.req.payload.scope
        st.touch, st.ht, st.lu, st.wide = Signal(), Signal(), Signal(), Signal()
        nt = (th == 1) | (th == 4) | (th == 6)  # NT, NT_RT, NT_HT: non-temporal at the CU
        m.d.comb += [
            st.lu.eq(th == 3),
            st.ht.eq(th == 2),
            st.touch.eq(~nt & ~st.lu),
            st.wide.eq(scope != 0),
        ]

    def _plru_victim(self, m, cur, tree):
        """The lowest invalid way of the set ``cur``, else the leaf the tree bits lead to."""
        path = []  # the bits taken from the root down: the victim's way index, MSB first
        for level in range(self.way_bits):
            bit = Signal(name=f"plru_path{level}")
            prefix = Cat(*reversed(path)) if path else 0
            m.d.comb += bit.eq(tree.bit_select((1 << level) - 1 + prefix, 1))
            path.append(bit)
        victim = Signal(unsigned(_bits(self.ways)))
        m.d.comb += victim.eq(Cat(*reversed(path)) if path else 0)
        for w in reversed(range(self.ways)):
            with m.If(~cur[w].valid):
                m.d.comb += victim.eq(w)
        return victim

    def _plru_used(self, m, tree, way):
        """``tree`` after a use of ``way``: each bit on its path points away from it."""
        used = Signal.like(tree)
        m.d.comb += used.eq(tree)
        for level in range(self.way_bits):
            shift = self.way_bits - level
            for j in range(1 << level):
                with m.If((way >> shift) == j):
                    m.d.comb += used[(1 << level) - 1 + j].eq(~way[shift - 1])
        return used

    def _memory_request(self, m, st):
        """The memory request register takes the lowest miss register not yet requested."""
        request_lowest_unsent(m, st.mshr, st.mem_req, self.mem_req)

    def _respond(self, m, st):
        """The response register: a fill's targets first, then a hit."""
        drain, out, mshr = st.drain, st.out, st.mshr
        draining = mshr[drain.mshr]
        m.d.comb += st.rd.addr.eq(
            Mux(
                drain.active,
                self._address(self._set_of(draining.line), draining.way),
                self._address(st.rset, st.way),
            )
        )
        m.d.comb += [
            self.resp.valid.eq(out.valid),
            self.resp.payload.id.eq(out.id),
            self.resp.payload.data.eq(out.data),
        ]
        with m.If(st.out_free):
            m.d.sync += out.valid.eq(0)
            with m.If(drain.active):
                m.d.sync += [
                    out.valid.eq(1),
                    out.id.eq(draining.ids[drain.position]),
                    out.data.eq(st.rd.data),
                    drain.position.eq(drain.position + 1),
                ]
                with m.If(drain.position + 1 == draining.count):
                    m.d.sync += drain.active.eq(0)
                    with m.Switch(drain.mshr):
                        for k in range(self.mshrs):
                            with m.Case(k):
                                m.d.sync += mshr[k].valid.eq(0)
            with m.Elif(st.accept & (st.kind == HIT)):
                m.d.sync += [
                    out.valid.eq(1),
                    out.id.eq(self.req.payload.id),
                    out.data.eq(st.rd.data),
                ]

    def _accept(self, m, st):
        """An accepted request: merge a pending hit, allocate a miss, make the way most recent."""
        ways, mshr, way, line = self.ways, st.mshr, st.way, st.line
        request_id = self.req.payload.id
        with m.If(st.accept):
            with m.If(st.kind == PENDING):
                for k in range(self.mshrs):
                    with m.If(st.entry.mshr == k):
                        for t in range(self.targets):
                            with m.If(mshr[k].count == t):
                                m.d.sync += mshr[k].ids[t].eq(request_id)
                        m.d.sync += mshr[k].count.eq(mshr[k].count + 1)
            with m.Elif(st.kind == MISS):
                for k in range(self.mshrs):
                    with m.If(st.free_k == k):
                        m.d.sync += [
                            mshr[k].valid.eq(1),
                            mshr[k].sent.eq(0),
                            mshr[k].line.eq(line),
                            mshr[k].way.eq(way),
                            mshr[k].count.eq(1),
                            mshr[k].ids[0].eq(request_id),
                        ]
                for s in range(self.sets):
                    for w in range(ways):
                        with m.If((st.rset == s) & (way == w)):
                            m.d.sync += [
                                st.tags[s][w].valid.eq(1),
                                st.tags[s][w].pending.eq(1),
                                st.tags[s][w].tag.eq(line[self.set_bits :]),
                                st.tags[s][w].mshr.eq(st.free_k),
                            ]
            lru = self.geometry.replacement == "lru"
            if lru:
                used = self._lru_used(m, st.cur_repl, way)
            else:
                used = self._plru_used(m, st.cur_repl, way)
            if self.geometry.hints:
                self._accept_hinted(m, st, used, lru)
            else:
                for s in range(self.sets):
                    with m.If(st.rset == s):
                        m.d.sync += st.repl[s].eq(used)

    def _accept_hinted(self, m, st, used, lru):
        """The replacement state, protect bits and LU invalidation of an accepted request with
        a hint (inside ``If(accept)``): only RT and HT requests use their way; an LU hit drops
        its line, first in LRU order; an LRU miss that evicts a line clears the protect bits of
        the ways it passed over (all of them when all were protected); a fill clears its way's
        bit and an HT request sets it."""
        ways, way = self.ways, st.way
        lu_hit = Signal()
        m.d.comb += lu_hit.eq(st.lu & (st.kind == HIT))
        if lru:
            demoted = self._lru_demoted(m, st.cur_repl, way)
            nxt = Mux(st.touch, used, Mux(lu_hit, demoted, st.cur_repl))
        else:
            nxt = Mux(st.touch, used, st.cur_repl)
        onehot = Cat(way == w for w in range(ways))
        cur = st.cur_prot
        miss = st.kind == MISS
        if lru:
            position = Signal.like(way, name="victim_position")
            for p in reversed(range(ways)):
                with m.If(st.cur_repl[p] == way):
                    m.d.comb += position.eq(p)
            passed = Cat(
                _any((position > p) & (st.cur_repl[p] == w) for p in range(ways - 1))
                for w in range(ways)
            )
            evicting = miss & st.entry.valid & ~st.found
            cleared = Mux(evicting, cur & ~Mux(cur.all(), (1 << ways) - 1, passed), cur)
        else:
            cleared = cur
        filled = Mux(miss, cleared & ~onehot, cleared)
        marked = Mux(st.ht, filled | onehot, filled) if lru else filled
        final = Mux(lu_hit, marked & ~onehot, marked)
        for s in range(self.sets):
            with m.If(st.rset == s):
                m.d.sync += [st.repl[s].eq(nxt), st.protect[s].eq(final)]
                for w in range(ways):
                    with m.If(lu_hit & (way == w)):
                        m.d.sync += st.tags[s][w].valid.eq(0)

    def _lru_demoted(self, m, order, way):
        """The LRU ``order`` after an LU hit on ``way``: it moves to the front (the next
        victim)."""
        ways = self.ways
        position = Signal.like(way, name="demoted_position")
        for p in reversed(range(ways)):
            with m.If(order[p] == way):
                m.d.comb += position.eq(p)
        demoted = Signal(order.shape())
        m.d.comb += demoted[0].eq(way)
        for p in range(1, ways):
            m.d.comb += demoted[p].eq(Mux(p <= position, order[p - 1], order[p]))
        return demoted

    def _lru_used(self, m, order, way):
        """The LRU ``order`` (least recent first) after a use of ``way``: it moves to the end."""
        ways = self.ways
        position = Signal.like(way)  # where the used way sits in the LRU order
        for p in reversed(range(ways)):
            with m.If(order[p] == way):
                m.d.comb += position.eq(p)
        used = Signal(order.shape())
        for p in range(ways - 1):
            m.d.comb += used[p].eq(Mux(p < position, order[p], order[p + 1]))
        m.d.comb += used[ways - 1].eq(way)
        return used

    def _fill(self, m, st):
        """Fills: write the line, clear its pending mark, return its targets from the next
        cycle; a fill no miss register asked for raises ``err.unexpected_fill``."""
        fill, drain, mshr = self.fill.payload, st.drain, st.mshr
        m.d.comb += self.fill.ready.eq(~drain.active)
        take = Signal()
        m.d.comb += take.eq(self.fill.valid & ~drain.active)
        line_data, last = self._beats(m, take)
        take_last = Signal()
        m.d.comb += take_last.eq(take & last)
        matched = Signal()
        match_k = Signal(range(self.mshrs))
        for k in range(self.mshrs):
            with m.If(mshr[k].valid & mshr[k].sent & (mshr[k].line == fill.line)):
                m.d.comb += [matched.eq(1), match_k.eq(k)]
        filling = mshr[match_k]
        fset = self._set_of(fill.line)
        m.d.comb += [
            self.err.unexpected_fill.eq(take_last & ~matched),
            st.wr.addr.eq(self._address(fset, filling.way)),
            st.wr.data.eq(line_data),
            st.wr.en.eq(take_last & matched),
        ]
        with m.If(take_last & matched):
            m.d.sync += [drain.active.eq(1), drain.mshr.eq(match_k), drain.position.eq(0)]
            for s in range(self.sets):
                for w in range(self.ways):
                    with m.If((fset == s) & (filling.way == w)):
                        m.d.sync += st.tags[s][w].pending.eq(0)

    def _beats(self, m, take):
        """The line a fill's last beat completes (the fill buffer below it) and whether the beat
        on the fill port is the last; one beat a line needs no buffer."""
        beats, width = self.geometry.beats, self.geometry.beat_bits
        if beats == 1:
            return self.fill.payload.data, 1
        beat = Signal(range(beats))
        buffer = Signal(LINE_BITS - width)
        last = Signal()
        m.d.comb += last.eq(beat == beats - 1)
        with m.If(take):
            m.d.sync += beat.eq(Mux(last, 0, beat + 1))
            with m.Switch(beat):
                for k in range(beats - 1):
                    with m.Case(k):
                        m.d.sync += buffer[k * width : (k + 1) * width].eq(self.fill.payload.data)
        return Cat(buffer, self.fill.payload.data), last
