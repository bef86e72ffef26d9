"""The instruction cache: set-associative, true LRU, a fetch port, kernel-entry, sequential and
software (``s_prefetch_inst*``) prefetch, misses to a memory port.

The rules are written out once, in the golden model :mod:`gpurtl.golden.icache.model`; this
module is their hardware form. Tags, pending marks, LRU orders, miss registers and the prefetch
registers are registers; the line data is an :class:`amaranth.lib.memory.Memory` of
``sets * ways`` lines with an asynchronous read port (its word is registered into the response
register). The fetch port's set and the prefetch candidate's set are looked up in the same
cycle, from the state at its start.
"""

from types import SimpleNamespace

from amaranth.hdl import Cat, Module, Mux, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from gpurtl.facts.inst_prefetch import MAX_DISTANCE, PREFETCH_LENGTH_BITS, ICacheGeometry
from gpurtl.hdl.miss import request_lowest_unsent

__all__ = ["ICache", "icache_signature"]

HIT, PENDING, MISS = 0, 1, 2
LINE_BITS = 1024


def _bits(count):
    return max(1, (count - 1).bit_length())


def _geometry(geometry, fields):
    g = geometry if geometry is not None else ICacheGeometry()
    if fields:
        g = ICacheGeometry(**{**g.__dict__, **fields})
    return g


def icache_signature(geometry=None, **fields):
    """The :class:`wiring.Signature` of :class:`ICache` of ``geometry``."""
    g = _geometry(geometry, fields)
    line = g.line_bits
    return wiring.Signature(
        {
            "fetch": In(stream.Signature(data.StructLayout({"pc": g.pc_bits}))),
            "resp": Out(
                stream.Signature(data.StructLayout({"pc": g.pc_bits, "hit": 1, "word": 32}))
            ),
            "start": In(stream.Signature(data.StructLayout({"line": line, "lines": g.entry_bits}))),
            "pf": In(
                stream.Signature(data.StructLayout({"line": line, "count": PREFETCH_LENGTH_BITS}))
            ),
            "distance": In(unsigned(MAX_DISTANCE.bit_length())),
            "mem_req": Out(stream.Signature(data.StructLayout({"line": line}))),
            "fill": In(stream.Signature(data.StructLayout({"line": line, "data": LINE_BITS}))),
            "err": Out(data.StructLayout({"unexpected_fill": 1})),
            "event": Out(data.StructLayout({"valid": 1, "kind": 2, "issue": 1})),
        }
    )


class ICache(wiring.Component):
    """Instruction cache of 128-byte lines with prefetch.

    Parameters
    ----------
    geometry : ICacheGeometry, optional
        Size, ways, miss registers, line index width, kernel-entry prefetch limit.
    **fields
        Geometry fields that replace ``geometry``'s.

    Attributes
    ----------
    fetch : In(stream.Signature(pc))
        A demand fetch of the instruction at byte address ``pc``.
    resp : Out(stream.Signature(pc, hit, word))
        The fetch's answer: ``hit`` 1 if its line was there, ``word`` the 32 bits at ``pc``.
    start : In(stream.Signature(line, lines))
        Kernel-entry prefetch: ``lines`` (clamped to ``entry_lines``) from line ``line``.
    pf : In(stream.Signature(line, count))
        An ``s_prefetch_inst*`` request: ``count + 1`` lines from line ``line``.
    distance : In(2)
        Sequential prefetch distance in lines (``s_set_inst_prefetch_distance``), 0 to 3.
    mem_req : Out(stream.Signature(line))
    fill : In(stream.Signature(line, data))
    err : Out(StructLayout(unexpected_fill))
    event : Out(StructLayout(valid, kind, issue))
        ``valid``/``kind`` per accepted fetch (0 hit, 1 pending, 2 miss); ``issue`` when a
        prefetch allocates a line.
    """

    def __init__(self, geometry=None, **fields):
        self.geometry = _geometry(geometry, fields)
        super().__init__(icache_signature(self.geometry))

    def elaborate(self, platform):
        m = Module()
        g = self.geometry
        st = self._state(m)
        fetch_line = self.fetch.payload.pc[7:]
        dem = self._lookup(m, st, fetch_line, "dem")
        ready, accept, out_free, wait_line = self._fetch_control(m, st, dem)
        take, match_k, matched = self._fill_match(m, st, out_free, wait_line)
        cand = self._candidate(m, st, accept)
        pre = self._lookup(m, st, cand.line, "pre")

        issue = Signal()
        advance = Signal()
        with m.If(cand.active):
            with m.If(pre.kind != MISS):
                m.d.comb += advance.eq(1)
            with m.Else():
                m.d.comb += advance.eq(st.any_free & ~pre.victim_pending)
                m.d.comb += issue.eq(st.any_free & ~pre.victim_pending)

        range_ready = Signal()
        m.d.comb += [
            range_ready.eq(st.rng_left == 0),
            self.start.ready.eq(range_ready),
            self.pf.ready.eq(range_ready & ~self.start.valid),
            self.fetch.ready.eq(ready),
            self.event.valid.eq(accept),
            self.event.kind.eq(Mux(accept, dem.kind, 0)),
            self.event.issue.eq(issue),
        ]
        self._memory_request(m, st)
        self._respond(m, st, dem, accept, out_free, take & matched & wait_line)

        # An accepted fetch; else the prefetch candidate.
        pc = self.fetch.payload.pc
        with m.If(accept):
            with m.If(dem.kind != HIT):
                m.d.sync += [st.wait.valid.eq(1), st.wait.pc.eq(pc)]
            with m.If(dem.kind == MISS):
                self._allocate(m, st, fetch_line, dem)
            self._touch(m, st, dem)
            with m.If(~st.last.valid | (st.last.line != fetch_line)):
                m.d.sync += [st.seq_next.eq(fetch_line + 1), st.seq_left.eq(self.distance)]
            m.d.sync += [st.last.valid.eq(1), st.last.line.eq(fetch_line)]
        with m.Elif(cand.active & advance):
            with m.If(issue):
                self._allocate(m, st, cand.line, pre)
                self._touch(m, st, pre)
            with m.If(cand.from_seq):
                m.d.sync += [st.seq_next.eq(st.seq_next + 1), st.seq_left.eq(st.seq_left - 1)]
            with m.Else():
                m.d.sync += [st.rng_next.eq(st.rng_next + 1), st.rng_left.eq(st.rng_left - 1)]

        entry = self.start.payload.lines
        with m.If(range_ready & self.start.valid):
            m.d.sync += [
                st.rng_next.eq(self.start.payload.line),
                st.rng_left.eq(Mux(entry > g.entry_lines, g.entry_lines, entry)),
            ]
        with m.Elif(range_ready & self.pf.valid):
            m.d.sync += [
                st.rng_next.eq(self.pf.payload.line),
                st.rng_left.eq(self.pf.payload.count + 1),
            ]

        self._fill_write(m, st, take, match_k, matched)
        return m

    def _state(self, m):
        g = self.geometry
        way = unsigned(_bits(g.ways))
        entry_l = data.StructLayout({"valid": 1, "pending": 1, "tag": g.line_bits - g.set_bits})
        miss_l = data.StructLayout({"valid": 1, "sent": 1, "line": g.line_bits, "way": way})
        st = SimpleNamespace(way_shape=way, entry_l=entry_l)
        st.tags = [
            Signal(data.ArrayLayout(entry_l, g.ways), name=f"tags_s{s}") for s in range(g.sets)
        ]
        order = data.ArrayLayout(way, g.ways)
        st.lru = [Signal(order, init=list(range(g.ways)), name=f"lru_s{s}") for s in range(g.sets)]
        st.mshr = Signal(data.ArrayLayout(miss_l, g.mshrs))
        st.mem_req = Signal(data.StructLayout({"valid": 1, "line": g.line_bits}))
        st.out = Signal(data.StructLayout({"valid": 1, "pc": g.pc_bits, "hit": 1, "word": 32}))
        st.wait = Signal(data.StructLayout({"valid": 1, "pc": g.pc_bits}))
        st.last = Signal(data.StructLayout({"valid": 1, "line": g.line_bits}))
        left = max(g.entry_lines, 1 << PREFETCH_LENGTH_BITS).bit_length()
        st.seq_next = Signal(g.line_bits)
        st.seq_left = Signal(MAX_DISTANCE.bit_length())
        st.rng_next = Signal(g.line_bits)
        st.rng_left = Signal(left)
        m.submodules.lines = lines = Memory(shape=LINE_BITS, depth=g.sets * g.ways, init=[])
        st.rd = lines.read_port(domain="comb")
        st.wr = lines.write_port()
        st.any_free = Signal()
        st.free_k = Signal(range(g.mshrs))
        for k in reversed(range(g.mshrs)):
            with m.If(~st.mshr[k].valid):
                m.d.comb += [st.any_free.eq(1), st.free_k.eq(k)]
        return st

    def _address(self, set_index, way):
        g = self.geometry
        return Cat(way[: g.way_bits], set_index[: g.set_bits])

    def _lookup(self, m, st, line, name):
        """Kind, way (the victim on a miss), set and LRU order of ``line``."""
        g = self.geometry
        lk = SimpleNamespace(line=line)
        lk.set = line[: g.set_bits] if g.set_bits else Signal(1, name=f"{name}_set0")
        cur = Signal(data.ArrayLayout(st.entry_l, g.ways), name=f"{name}_tags")
        lk.order = Signal.like(st.lru[0], name=f"{name}_lru")
        for s in range(g.sets):
            with m.If(lk.set == s):
                m.d.comb += [cur.eq(st.tags[s]), lk.order.eq(st.lru[s])]
        found = Signal(name=f"{name}_found")
        lk.way = Signal(st.way_shape, name=f"{name}_way")
        m.d.comb += lk.way.eq(lk.order[0])
        for w in reversed(range(g.ways)):
            with m.If(cur[w].valid & (cur[w].tag == line[g.set_bits :])):
                m.d.comb += [found.eq(1), lk.way.eq(w)]
        entry = cur[lk.way]
        lk.kind = Signal(2, name=f"{name}_kind")
        m.d.comb += lk.kind.eq(Mux(found, Mux(entry.pending, PENDING, HIT), MISS))
        lk.victim_pending = Signal(name=f"{name}_victim_pending")
        m.d.comb += lk.victim_pending.eq(entry.valid & entry.pending)
        return lk

    def _fetch_control(self, m, st, dem):
        out_free, ready, accept = Signal(), Signal(), Signal()
        m.d.comb += out_free.eq(~st.out.valid | self.resp.ready)
        with m.If(st.wait.valid):
            m.d.comb += ready.eq(0)
        with m.Elif(dem.kind == HIT):
            m.d.comb += ready.eq(out_free)
        with m.Elif(dem.kind == PENDING):
            m.d.comb += ready.eq(1)
        with m.Else():
            m.d.comb += ready.eq(st.any_free & ~dem.victim_pending)
        m.d.comb += accept.eq(self.fetch.valid & ready)
        wait_line = Signal()
        m.d.comb += wait_line.eq(st.wait.valid & (st.wait.pc[7:] == self.fill.payload.line))
        m.d.comb += self.fill.ready.eq(~(wait_line & ~out_free))
        return ready, accept, out_free, wait_line

    def _fill_match(self, m, st, out_free, wait_line):
        g = self.geometry
        take, matched = Signal(), Signal()
        match_k = Signal(range(g.mshrs))
        m.d.comb += take.eq(self.fill.valid & self.fill.ready)
        for k in range(g.mshrs):
            e = st.mshr[k]
            with m.If(take & e.valid & e.sent & (e.line == self.fill.payload.line)):
                m.d.comb += [matched.eq(1), match_k.eq(k)]
        m.d.comb += self.err.unexpected_fill.eq(take & ~matched)
        return take, match_k, matched

    def _candidate(self, m, st, accept):
        cand = SimpleNamespace(line=Signal(self.geometry.line_bits, name="cand_line"))
        cand.active, cand.from_seq = Signal(name="cand_active"), Signal(name="cand_from_seq")
        with m.If(~accept):
            with m.If(st.seq_left != 0):
                m.d.comb += [cand.active.eq(1), cand.from_seq.eq(1), cand.line.eq(st.seq_next)]
            with m.Elif(st.rng_left != 0):
                m.d.comb += [cand.active.eq(1), cand.line.eq(st.rng_next)]
        return cand

    def _allocate(self, m, st, line, lk):
        """Enter ``line`` pending in way ``lk.way`` and give it the free miss register."""
        g = self.geometry
        for k in range(g.mshrs):
            with m.If(st.free_k == k):
                m.d.sync += [
                    st.mshr[k].valid.eq(1),
                    st.mshr[k].sent.eq(0),
                    st.mshr[k].line.eq(line),
                    st.mshr[k].way.eq(lk.way),
                ]
        for s in range(g.sets):
            for w in range(g.ways):
                with m.If((lk.set == s) & (lk.way == w)):
                    m.d.sync += [
                        st.tags[s][w].valid.eq(1),
                        st.tags[s][w].pending.eq(1),
                        st.tags[s][w].tag.eq(line[g.set_bits :]),
                    ]

    def _touch(self, m, st, lk):
        """The LRU order of ``lk``'s set after a use of ``lk.way``: it moves to the end."""
        g = self.geometry
        position = Signal.like(lk.way)
        for p in reversed(range(g.ways)):
            with m.If(lk.order[p] == lk.way):
                m.d.comb += position.eq(p)
        used = Signal.like(lk.order)
        for p in range(g.ways - 1):
            m.d.comb += used[p].eq(Mux(p < position, lk.order[p], lk.order[p + 1]))
        m.d.comb += used[g.ways - 1].eq(lk.way)
        for s in range(g.sets):
            with m.If(lk.set == s):
                m.d.sync += st.lru[s].eq(used)

    def _memory_request(self, m, st):
        """The memory request register takes the lowest miss register not yet requested."""
        request_lowest_unsent(m, st.mshr, st.mem_req, self.mem_req)

    def _respond(self, m, st, dem, accept, out_free, answer_wait):
        out, pc = st.out, self.fetch.payload.pc
        m.d.comb += [
            st.rd.addr.eq(self._address(dem.set, dem.way)),
            self.resp.valid.eq(out.valid),
            self.resp.payload.pc.eq(out.pc),
            self.resp.payload.hit.eq(out.hit),
            self.resp.payload.word.eq(out.word),
        ]
        with m.If(out_free):
            m.d.sync += out.valid.eq(0)
            with m.If(answer_wait):
                wpc = st.wait.pc
                m.d.sync += [
                    out.valid.eq(1),
                    out.pc.eq(wpc),
                    out.hit.eq(0),
                    out.word.eq(self.fill.payload.data.word_select(wpc[2:7], 32)),
                    st.wait.valid.eq(0),
                ]
            with m.Elif(accept & (dem.kind == HIT)):
                m.d.sync += [
                    out.valid.eq(1),
                    out.pc.eq(pc),
                    out.hit.eq(1),
                    out.word.eq(st.rd.data.word_select(pc[2:7], 32)),
                ]

    def _fill_write(self, m, st, take, match_k, matched):
        g = self.geometry
        filling = st.mshr[match_k]
        fset = filling.line[: g.set_bits] if g.set_bits else 0
        write = Signal()
        m.d.comb += [
            write.eq(take & matched),
            st.wr.addr.eq(self._address(filling.line[: max(g.set_bits, 1)], filling.way)),
            st.wr.data.eq(self.fill.payload.data),
            st.wr.en.eq(write),
        ]
        with m.If(write):
            for k in range(g.mshrs):
                with m.If(match_k == k):
                    m.d.sync += st.mshr[k].valid.eq(0)
            for s in range(g.sets):
                for w in range(g.ways):
                    with m.If((fset == s) & (filling.way == w)):
                        m.d.sync += st.tags[s][w].pending.eq(0)
