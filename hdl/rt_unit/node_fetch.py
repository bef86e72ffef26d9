"""The RT unit's node fetch: intersect instructions in, their node lines read through the L0
vector cache, the assembled ray accelerator instructions out.

The rules are written out in the golden model :mod:`gpurtl.golden.rt_unit.node_fetch`. In short:
an instruction without its node data waits in a ray buffer slot (the lowest free one, which is
also the L0 request id) while the L0 finds the node's line (``node_ptr[0] >> 4``: a BVH8 node is
one 128-byte line at byte offset ``(node_ptr & ~0xF) << 3``, gpurt's pointer encoding); the L0's
response picks the slot back by its id and leaves as ``INSTR_LAYOUT`` with ``node[0]`` filled in,
on the ray accelerator's input stream (plus the instruction's ``tag``). With ``order="l0"`` the
output is the L0's response register, so a hit reaches the accelerator one cycle after the
instruction is taken; with ``order="wave"`` the line goes into a node buffer and each wave's
instructions leave in the order they came (two cycles for a hit).

The ray buffer is an :class:`amaranth.lib.memory.Memory` of ``2 ** id_bits`` instructions with
an asynchronous read port (the response id selects the slot in the cycle the response is
offered). The default build does not fetch the dual form (two legacy nodes): it fetches
``node_ptr[0]``'s line as a BVH8 instruction would and raises ``err.dual``. With ``dual=True``
(order ``"wave"``) the dual form's second node line is a second L0 lookup of the same slot (id
``slot + 2 ** id_bits``) in a later cycle, unless it is the empty node or in the first node's
line; the node buffer holds two lines a slot, and the legacy nodes are cut out of their lines
(the golden model's module doc gives the rules).
"""

from types import SimpleNamespace

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from gpurtl.facts.memory_hints import TH, Scope
from gpurtl.facts.ray_accel import INSTR_LAYOUT
from gpurtl.facts.rt_unit import (
    DUAL_EMPTY_NODE,
    DUAL_EMPTY_PTR,
    FETCH_ORDER,
    FETCH_TAG_BITS,
    ORDERS,
    L0Geometry,
)

from .l0_cache import LINE_BITS, L0Cache, l0_layouts

__all__ = ["NodeFetch", "ORDERS", "fetch_layout", "node_fetch_signature"]


def fetch_layout(tag_bits):
    """An instruction as the node fetch takes it: ``INSTR_LAYOUT`` without ``node``, plus
    ``tag`` and ``last``, both carried to the output unchanged (the RT unit puts the wave in
    ``tag`` and marks the last lane of a wave instruction with ``last``)."""
    fields = {name: INSTR_LAYOUT[name].shape for name in ("dual", "ray", "node_ptr")}
    fields.update(pointer_flags=INSTR_LAYOUT["pointer_flags"].shape)
    fields.update(desc=INSTR_LAYOUT["desc"].shape)
    return data.StructLayout({"tag": tag_bits, "last": 1, **fields})


def node_fetch_signature(geometry=None, tag_bits=FETCH_TAG_BITS):
    """The :class:`wiring.Signature` of :class:`NodeFetch`."""
    _, _, mem_request, fill = l0_layouts(L0Geometry.of(geometry))
    out = data.StructLayout({"tag": tag_bits, "last": 1, "instr": INSTR_LAYOUT})
    return wiring.Signature(
        {
            "inst": In(stream.Signature(fetch_layout(tag_bits))),
            "out": Out(stream.Signature(out)),
            "mem_req": Out(stream.Signature(mem_request)),
            "fill": In(stream.Signature(fill)),
            "err": Out(data.StructLayout({"unexpected_fill": 1, "dual": 1})),
            "event": Out(data.StructLayout({"valid": 1, "kind": 2})),
        }
    )


class NodeFetch(wiring.Component):
    """Node fetch through an L0 cache.

    Parameters
    ----------
    geometry : L0Geometry, optional
        The L0's (:class:`~.l0_cache.L0Cache`); ``2 ** id_bits`` ray buffer slots. ``**fields``
        replace its fields.
    tag_bits : int
        Width of the ``tag`` carried from ``inst`` to ``out``.
    order : str
        ``"l0"``: the output is the L0's response (hits overtake misses of any tag);
        ``"wave"``: the tag is a wave, and each wave's instructions leave in the order they were
        taken (nodes wait in a second buffer of ``2 ** id_bits`` lines); waves overtake each
        other. The RT unit uses ``"wave"``: RDNA 4 returns BVH results in order within a wave
        (see docs/rt_unit.md).
    dual : bool
        Fetch the dual form's two legacy nodes (order ``"wave"`` only; the L0 gets
        ``id_bits + 1`` id bits, the node buffer two lines a slot). Off: the dual form raises
        ``err.dual``.

    Attributes
    ----------
    inst : In(stream.Signature(fetch_layout(tag_bits)))
    out : Out(stream.Signature(StructLayout(tag, last, instr: INSTR_LAYOUT)))
        In the order ``order`` names; ``tag`` and ``last`` are the instruction's.
    mem_req, fill, event
        The L0's.
    err : Out(StructLayout(unexpected_fill, dual))
    """

    def __init__(
        self, geometry=None, tag_bits=FETCH_TAG_BITS, order=FETCH_ORDER, dual=False, **fields
    ):
        if not isinstance(tag_bits, int) or tag_bits < 1:
            raise ValueError(f"`tag_bits` must be a positive integer, not {tag_bits!r}")
        if order not in ORDERS:
            raise ValueError(f"`order` must be one of {', '.join(ORDERS)}, not {order!r}")
        if dual and order != "wave":
            raise ValueError('`dual` needs order "wave"')
        self.dual = bool(dual)
        if self.dual:  # a second id per slot for the second node's lookup
            g = L0Geometry.of(geometry, **fields)
            self.l0 = L0Cache(g, id_bits=g.id_bits + 1)
            self.id_bits, self.line_bits = g.id_bits, g.line_bits
        else:
            self.l0 = L0Cache(geometry, **fields)
            self.id_bits, self.line_bits = self.l0.id_bits, self.l0.line_bits
        self.tag_bits, self.order = tag_bits, order
        super().__init__(node_fetch_signature(self.l0.geometry, tag_bits))

    def elaborate(self, platform):
        m = Module()
        m.submodules.l0 = l0 = self.l0
        slots = 1 << self.id_bits
        m.submodules.buffer = buffer = Memory(
            shape=fetch_layout(self.tag_bits), depth=slots, init=[]
        )
        st = SimpleNamespace(rd=buffer.read_port(domain="comb"), busy=Signal(slots))
        wr = buffer.write_port()

        free = Signal()
        st.free = free
        st.slot = slot = Signal(self.id_bits)
        for k in reversed(range(slots)):
            with m.If(~st.busy[k]):
                m.d.comb += [free.eq(1), slot.eq(k)]
        inst = self.inst.payload
        st.take = take = Signal()
        if self.dual:
            self._dual_request(m, st)
        else:
            m.d.comb += [
                l0.req.valid.eq(self.inst.valid & free),
                l0.req.payload.id.eq(slot),
                l0.req.payload.line.eq(inst.node_ptr[0][4 : 4 + self.line_bits]),
                self.inst.ready.eq(free & l0.req.ready),
                take.eq(self.inst.valid & free & l0.req.ready),
            ]
        m.d.comb += [
            wr.addr.eq(slot),
            wr.data.eq(inst),
            wr.en.eq(take),
        ]
        if not self.dual:  # the dual build fetches the dual form
            m.d.comb += self.err.dual.eq(take & inst.dual)
        if self.l0.geometry.hints:  # node fetches are regular loads at CU scope
            m.d.comb += [l0.req.payload.th.eq(TH.RT), l0.req.payload.scope.eq(Scope.CU)]
        if self.order == "l0":
            self._l0_order(m, st)
        else:
            self._wave_order(m, st)
        wiring.connect(m, wiring.flipped(self.mem_req), l0.mem_req)
        wiring.connect(m, wiring.flipped(self.fill), l0.fill)
        m.d.comb += [
            self.err.unexpected_fill.eq(l0.err.unexpected_fill),
            self.event.eq(l0.event),
        ]
        return m

    def _lines(self, ptr):
        """The line index field of a node pointer."""
        return ptr[4 : 4 + self.line_bits]

    def _dual_request(self, m, st):
        """The L0 request of the ``dual`` build: the first node's line as an instruction is
        taken; the second node's (id ``slot + 2 ** id_bits``) from the next cycle on, until the
        L0 takes it, with no instruction taken meanwhile."""
        l0, inst = self.l0, self.inst.payload
        second = Signal(
            data.StructLayout({"valid": 1, "slot": self.id_bits, "line": self.line_bits})
        )
        st.fetch1 = fetch1 = Signal()
        p0, p1 = inst.node_ptr[0], inst.node_ptr[1]
        m.d.comb += fetch1.eq(
            inst.dual & (p1 != DUAL_EMPTY_PTR) & (self._lines(p0) != self._lines(p1))
        )
        with m.If(second.valid):
            m.d.comb += [
                l0.req.valid.eq(1),
                l0.req.payload.id.eq(Cat(second.slot, Const(1, 1))),
                l0.req.payload.line.eq(second.line),
            ]
        with m.Else():
            m.d.comb += [
                l0.req.valid.eq(self.inst.valid & st.free),
                l0.req.payload.id.eq(st.slot),
                l0.req.payload.line.eq(self._lines(p0)),
            ]
        m.d.comb += [
            self.inst.ready.eq(st.free & l0.req.ready & ~second.valid),
            st.take.eq(self.inst.valid & self.inst.ready),
        ]
        with m.If(second.valid & l0.req.ready):
            m.d.sync += second.valid.eq(0)
        with m.If(st.take & fetch1):
            m.d.sync += [
                second.valid.eq(1),
                second.slot.eq(st.slot),
                second.line.eq(self._lines(p1)),
            ]

    def _dual_node(self, line, ptr):
        """A legacy node's 32 dwords cut out of its ``line`` (the golden ``dual_node``)."""
        half, kind = ptr[3], ptr[0:3]
        short = (kind == 0) | (kind == 1) | (kind == 4)  # 64-byte node types
        low = Mux(half, line[512:], line[:512])
        return Cat(low, Mux(half | short, 0, line[512:]))

    def _dual_output(self, m, held, line0, line1):
        """The output payload of the ``dual`` build: a dual instruction's two legacy nodes."""
        out = self.out.payload
        p0, p1 = held.node_ptr[0], held.node_ptr[1]
        empty = Const(sum(w << (32 * k) for k, w in enumerate(DUAL_EMPTY_NODE)), LINE_BITS)
        shared = self._lines(p0) == self._lines(p1)
        node1 = Mux(p1 == DUAL_EMPTY_PTR, empty, self._dual_node(Mux(shared, line0, line1), p1))
        with m.If(held.dual):
            m.d.comb += [
                out.instr.node[0].eq(self._dual_node(line0, p0)),
                out.instr.node[1].eq(node1),
            ]

    def _output(self, m, held, node):
        """The output payload: the slot's instruction ``held`` with ``node`` as ``node[0]``."""
        out = self.out.payload
        m.d.comb += [
            out.tag.eq(held.tag),
            out.last.eq(held.last),
            out.instr.dual.eq(held.dual),
            out.instr.ray.eq(held.ray),
            out.instr.node_ptr.eq(held.node_ptr),
            out.instr.pointer_flags.eq(held.pointer_flags),
            out.instr.desc.eq(held.desc),
            out.instr.node[0].eq(node),
        ]

    def _l0_order(self, m, st):
        """The output is the L0 response with its slot's instruction."""
        l0, slots = self.l0, 1 << self.id_bits
        resp = l0.resp.payload
        m.d.comb += [
            st.rd.addr.eq(resp.id),
            self.out.valid.eq(l0.resp.valid),
            l0.resp.ready.eq(self.out.ready),
        ]
        self._output(m, st.rd.data, resp.data)
        freed = Signal(slots)
        with m.If(l0.resp.valid & self.out.ready):
            m.d.comb += freed.eq(1 << resp.id)
        taken = Signal(slots)
        with m.If(st.take):
            m.d.comb += taken.eq(1 << st.slot)
        m.d.sync += st.busy.eq((st.busy & ~freed) | taken)

    def _wave_order(self, m, st):
        """Nodes wait in a node buffer; each wave's instructions leave in the order they came.

        Every slot keeps its wave (the tag) and its place in that wave's sequence; a slot may
        leave when its node is in and its place is the wave's next. Among those the lowest slot
        leaves; an output refused by ``out.ready`` is held (the same slot) until taken."""
        l0, slots, tag = self.l0, 1 << self.id_bits, self.inst.payload.tag
        waves, seq_bits = 1 << self.tag_bits, self.id_bits + 1
        depth = 2 * slots if self.dual else slots  # dual: the second nodes from ``slots`` on
        m.submodules.nodes = nodes = Memory(shape=LINE_BITS, depth=depth, init=[])
        node_rd, node_wr = nodes.read_port(domain="comb"), nodes.write_port()
        arrived = Signal(slots)
        arrived1 = Signal(slots)  # dual: the second node is in, or was not fetched
        wave = [Signal(self.tag_bits, name=f"wave_of{k}") for k in range(slots)]
        seq = [Signal(seq_bits, name=f"seq_of{k}") for k in range(slots)]
        issued = Signal(data.ArrayLayout(seq_bits, waves))  # next place given, per wave
        retired = Signal(data.ArrayLayout(seq_bits, waves))  # next place to leave, per wave
        hold = Signal(data.StructLayout({"valid": 1, "slot": self.id_bits}))

        resp = l0.resp.payload
        m.d.comb += [
            l0.resp.ready.eq(1),
            node_wr.addr.eq(resp.id),
            node_wr.data.eq(resp.data),
            node_wr.en.eq(l0.resp.valid),
        ]
        candidate = Signal(slots)
        for k in range(slots):
            here = arrived[k] & arrived1[k] if self.dual else arrived[k]
            m.d.comb += candidate[k].eq(st.busy[k] & here & (seq[k] == retired[wave[k]]))
        sel = Signal(self.id_bits)
        for k in reversed(range(slots)):
            with m.If(candidate[k]):
                m.d.comb += sel.eq(k)
        with m.If(hold.valid):
            m.d.comb += sel.eq(hold.slot)
        leave = Signal()
        m.d.comb += [
            self.out.valid.eq(hold.valid | candidate.any()),
            leave.eq(self.out.valid & self.out.ready),
            st.rd.addr.eq(sel),
            node_rd.addr.eq(sel),
        ]
        self._output(m, st.rd.data, node_rd.data)
        if self.dual:
            node_rd1 = nodes.read_port(domain="comb")
            m.d.comb += node_rd1.addr.eq(Cat(sel, Const(1, 1)))
            self._dual_output(m, st.rd.data, node_rd.data, node_rd1.data)
        m.d.sync += [hold.valid.eq(self.out.valid & ~self.out.ready), hold.slot.eq(sel)]

        for k in range(slots):
            with m.If(leave & (sel == k)):
                m.d.sync += [st.busy[k].eq(0), arrived[k].eq(0)]
                if self.dual:
                    m.d.sync += arrived1[k].eq(0)
            if self.dual:
                with m.If(l0.resp.valid & (resp.id == k + slots)):
                    m.d.sync += arrived1[k].eq(1)
            with m.If(l0.resp.valid & (resp.id == k)):
                m.d.sync += arrived[k].eq(1)
            with m.If(st.take & (st.slot == k)):
                m.d.sync += [st.busy[k].eq(1), wave[k].eq(tag), seq[k].eq(issued[tag])]
                if self.dual:
                    m.d.sync += arrived1[k].eq(~st.fetch1)
        for w in range(waves):
            with m.If(st.take & (tag == w)):
                m.d.sync += issued[w].eq(issued[w] + 1)
            with m.If(leave & (Array(wave)[sel] == w)):
                m.d.sync += retired[w].eq(retired[w] + 1)
