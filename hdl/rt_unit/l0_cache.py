"""The RT unit's L0 vector cache for node fetches: set-associative, true LRU, with miss-status
registers that merge misses to a pending line, and out-of-order responses tagged by request id.

The rules are written out once, in the golden model :mod:`gpurtl.golden.rt_unit.l0_cache`; this
module is their hardware form. In short:

* Lines are 128 bytes (the size of a BVH8 node); every port moves one whole line per transfer
  (``data`` is 1024 bits): a line is never split into beats.
* Tags, valid and pending bits and the LRU order of each set are registers; the data is an
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

Timing compared with :mod:`gpurtl.golden.memory.hierarchy` (event-exact, deltas): the hierarchy
answers a hit ``delta`` cycles after the request and a pending hit ``delta`` after the fill; here
a hit takes 1 cycle, a miss ``2 + memory latency + 2`` cycles plus one cycle for each target
returned before it, fills wait while an earlier fill's targets leave, and a request waits
(back-pressure) where the hierarchy would evict a pending line or take more targets than a miss
register holds. Lookup results (hit, pending hit, miss) are the same for the same accepted
request sequence and fill times (``tests/golden/test_l0_cache.py`` checks it).
"""

from types import SimpleNamespace

from amaranth.hdl import Cat, Module, Mux, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

__all__ = ["L0Cache", "LINE_BITS", "l0_layouts", "l0_signature"]

#: Bits of one 128-byte line.
LINE_BITS = 1024
HIT, PENDING, MISS = 0, 1, 2


def _bits(count):
    """Bits of an index into ``count`` things (at least 1)."""
    return max(1, (count - 1).bit_length())


def l0_signature(id_bits=4, line_bits=16):
    """The :class:`wiring.Signature` of :class:`L0Cache` (ports depend on these two only)."""
    request, response, mem_request, fill = l0_layouts(id_bits, line_bits)
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


def l0_layouts(id_bits, line_bits):
    """``(request, response, memory request, fill)`` payload layouts."""
    request = data.StructLayout({"id": id_bits, "line": line_bits})
    response = data.StructLayout({"id": id_bits, "data": LINE_BITS})
    mem_request = data.StructLayout({"line": line_bits})
    fill = data.StructLayout({"line": line_bits, "data": LINE_BITS})
    return request, response, mem_request, fill


class L0Cache(wiring.Component):
    """Set-associative L0 vector cache of 128-byte lines.

    Parameters
    ----------
    size : int
        Bytes; a multiple of ``128 * ways`` giving a power-of-two number of sets.
    ways : int
        Associativity, a power of two.
    mshrs : int
        Miss-status registers: lines missing at once (outstanding misses).
    targets : int
        Requests one miss register holds (the miss and the pending hits merged into it).
    id_bits : int
        Width of the request id carried to the response.
    line_bits : int
        Width of a line index (byte address / 128); more than the set index bits.

    Attributes
    ----------
    req : In(stream.Signature(request))
        ``id``, ``line``.
    resp : Out(stream.Signature(response))
        ``id``, ``data`` (the 128-byte line, byte 0 in bits 0-7).
    mem_req : Out(stream.Signature(mem_request))
        ``line``: one per miss.
    fill : In(stream.Signature(fill))
        ``line``, ``data``: the answer to a memory request, in any order.
    err : Out(StructLayout(unexpected_fill))
        High in the cycle a fill whose line has no requested miss register is taken (and
        dropped).
    event : Out(StructLayout(valid, kind))
        ``valid`` when a request is accepted, ``kind`` its lookup result: 0 hit, 1 pending hit,
        2 miss.
    """

    def __init__(self, size=2048, ways=4, mshrs=4, targets=4, id_bits=4, line_bits=16):
        if not isinstance(ways, int) or ways < 1 or ways & (ways - 1):
            raise ValueError(f"`ways` must be a power of two, not {ways!r}")
        if not isinstance(size, int) or size <= 0 or size % (128 * ways):
            raise ValueError(f"`size` must be a positive multiple of 128 x ways, not {size!r}")
        sets = size // (128 * ways)
        if sets & (sets - 1):
            raise ValueError(f"`size` must make a power-of-two number of sets, not {sets} sets")
        for name, value in (("mshrs", mshrs), ("targets", targets), ("id_bits", id_bits)):
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"`{name}` must be a positive integer, not {value!r}")
        set_bits = (sets - 1).bit_length()
        if not isinstance(line_bits, int) or line_bits <= set_bits:
            raise ValueError(f"`line_bits` must be an integer above {set_bits}, not {line_bits!r}")
        self.size, self.ways, self.sets = size, ways, sets
        self.mshrs, self.targets = mshrs, targets
        self.id_bits, self.line_bits = id_bits, line_bits
        self.set_bits, self.way_bits = set_bits, (ways - 1).bit_length()
        super().__init__(l0_signature(id_bits, line_bits))

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
        st.lru = [
            Signal(data.ArrayLayout(st.way_shape, ways), init=list(range(ways)), name=f"lru_s{s}")
            for s in range(sets)
        ]
        st.entry_l = entry_l
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
        st.cur_lru = cur_lru = Signal(data.ArrayLayout(st.way_shape, ways))
        for s in range(self.sets):
            with m.If(rset == s):
                m.d.comb += [cur.eq(st.tags[s]), cur_lru.eq(st.lru[s])]
        found = Signal()
        st.way = way = Signal(st.way_shape)  # the matching way, or the victim on a miss
        m.d.comb += way.eq(cur_lru[0])
        for w in reversed(range(ways)):
            with m.If(cur[w].valid & (cur[w].tag == line[set_bits:])):
                m.d.comb += [found.eq(1), way.eq(w)]
        st.entry = entry = cur[way]
        st.kind = kind = Signal(2)
        m.d.comb += kind.eq(Mux(found, Mux(entry.pending, PENDING, HIT), MISS))

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

    def _memory_request(self, m, st):
        """The memory request register takes the lowest miss register not yet requested."""
        mshr, mem_req = st.mshr, st.mem_req
        m.d.comb += [
            self.mem_req.valid.eq(mem_req.valid),
            self.mem_req.payload.line.eq(mem_req.line),
        ]
        with m.If(~mem_req.valid | self.mem_req.ready):
            m.d.sync += mem_req.valid.eq(0)
            for k in reversed(range(self.mshrs)):
                with m.If(mshr[k].valid & ~mshr[k].sent):
                    m.d.sync += [mem_req.valid.eq(1), mem_req.line.eq(mshr[k].line)]
            with m.Switch(Cat(mshr[k].valid & ~mshr[k].sent for k in range(self.mshrs))):
                for k in range(self.mshrs):
                    with m.Case("-" * (self.mshrs - 1 - k) + "1" + "0" * k):
                        m.d.sync += mshr[k].sent.eq(1)

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
            position = Signal(st.way_shape)  # where the used way sits in the LRU order
            for p in reversed(range(ways)):
                with m.If(st.cur_lru[p] == way):
                    m.d.comb += position.eq(p)
            touched = Signal(data.ArrayLayout(st.way_shape, ways))
            for p in range(ways - 1):
                m.d.comb += touched[p].eq(Mux(p < position, st.cur_lru[p], st.cur_lru[p + 1]))
            m.d.comb += touched[ways - 1].eq(way)
            for s in range(self.sets):
                with m.If(st.rset == s):
                    m.d.sync += st.lru[s].eq(touched)

    def _fill(self, m, st):
        """Fills: write the line, clear its pending mark, return its targets from the next
        cycle; a fill no miss register asked for raises ``err.unexpected_fill``."""
        fill, drain, mshr = self.fill.payload, st.drain, st.mshr
        m.d.comb += self.fill.ready.eq(~drain.active)
        take = Signal()
        m.d.comb += take.eq(self.fill.valid & ~drain.active)
        matched = Signal()
        match_k = Signal(range(self.mshrs))
        for k in range(self.mshrs):
            with m.If(mshr[k].valid & mshr[k].sent & (mshr[k].line == fill.line)):
                m.d.comb += [matched.eq(1), match_k.eq(k)]
        filling = mshr[match_k]
        fset = self._set_of(fill.line)
        m.d.comb += [
            self.err.unexpected_fill.eq(take & ~matched),
            st.wr.addr.eq(self._address(fset, filling.way)),
            st.wr.data.eq(fill.data),
            st.wr.en.eq(take & matched),
        ]
        with m.If(take & matched):
            m.d.sync += [drain.active.eq(1), drain.mshr.eq(match_k), drain.position.eq(0)]
            for s in range(self.sets):
                for w in range(self.ways):
                    with m.If((fset == s) & (filling.way == w)):
                        m.d.sync += st.tags[s][w].pending.eq(0)
