"""RDNA 4 dynamic-VGPR block allocator of one SIMD (``s_alloc_vgpr``), with deadlock avoidance.

The rules, the parameters' sources and the choices made where the reference notes are silent are
listed in the golden model :mod:`gpurtl.golden.vgpr_alloc.dynamic`; this is the same machine in
RTL. State:

* ``blocks[w]`` (0 = slot empty), the block table ``tbl[w][1..max_blocks-1]`` (entry 0 is always the
  slot block ``w``), the free stack ``stack[0..top-1]`` of shared-pool blocks, the reserve holder;
* with ``assertions`` on, per-wave ownership masks of the pool blocks, kept only to check the other
  structures (see :meth:`DynVgprAllocator._invariants`).

Each structure is one wide register whose fields are picked with ``word_select`` (a register file
with one read port per entry a command can touch); as Python integers this keeps the Amaranth
simulator fast.

One command per clock; a grant of ``k`` blocks pops ``k`` stack entries into the table in the same
edge, a shrink or an end pushes the released entries back.
"""

from amaranth.hdl import Array, Assert, Cat, Const, Module, Mux, Signal, unsigned
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from gpurtl.facts.vgpr_alloc import (
    COUNT_BITS,
    REG_BITS,
    Err,
    Op,
    command_layout,
    dyn_params_ok,
    result_layout,
)
from gpurtl.facts.vgpr_alloc import DYN_DEFAULTS as _D

__all__ = ["DynVgprAllocator", "dyn_layouts"]

SLOTS = 16


def _bits(n):
    return max(1, (n).bit_length())


def dyn_layouts(*, rf_vgprs=1536, block_size=16, **_):
    total = rf_vgprs // block_size
    return command_layout(), result_layout(
        slots=SLOTS,
        unit_bits=4,
        free_bits=_bits(total),
        row_bits=_bits(rf_vgprs - 1),
        extra={"holder_valid": unsigned(1), "holder": unsigned(4)},
    )


class _WordSelect(wiring.Component):
    """``word`` = word ``index`` of ``value`` (``width``-bit words)."""

    def __init__(self, bits, width):
        self._width = width
        super().__init__({"value": In(bits), "index": In(4), "word": Out(width)})

    def elaborate(self, platform):
        m = Module()
        m.d.comb += self.word.eq(self.value.word_select(self.index, self._width))
        return m


class _Decode(wiring.Component):
    """Command decode and the translation bounds check, from the inputs and the state registers.

    A module of its own built from expressions only: the Python simulator re-evaluates a
    combinational process each time a signal it reads changes, so a process that reads signals it
    drives runs once per dependency level; this one runs once per input change.
    """

    def __init__(self, B, L, MAXB, T, R):
        self._B, self._L, self._MAXB, self._T, self._R = B, L, MAXB, T, R
        super().__init__(
            {
                "op": In(Op),
                "wave": In(4),
                "count": In(COUNT_BITS),
                "lk_wave": In(4),
                "lk_reg": In(REG_BITS),
                "top": In(range(T + 1)),
                "hv": In(1),
                "hw": In(4),
                "blocks": In(4 * SLOTS),
                "cur": Out(4),
                "tgt": Out(6),
                "first": Out(4),
                "nrel": Out(4),
                "nget": Out(4),
                "live": Out(1),
                "ack": Out(1),
                "err": Out(Err),
                "do_launch": Out(1),
                "do_grow": Out(1),
                "do_shrink": Out(1),
                "do_end": Out(1),
                "do_push": Out(1),
                "top_next": Out(range(T + 1)),
                "hv_next": Out(1),
                "hw_next": Out(4),
                "lj": Out(REG_BITS),
                "lk_valid": Out(1),
            }
        )

    def elaborate(self, platform):
        m = Module()
        B, L, MAXB, R = self._B, self._L, self._MAXB, self._R
        lb = B.bit_length() - 1
        blocks = Array(self.blocks[4 * n : 4 * n + 4] for n in range(SLOTS))
        top, hv, hw, w = self.top, self.hv, self.hw, self.wave
        slot_ok = w < L
        cur = blocks[w]
        resident = cur != 0
        live = slot_ok & resident
        req = (self.count + (B - 1)) >> lb
        tgt = Mux(req == 0, 1, req)
        over = tgt > MAXB
        grow = tgt > cur
        k = (tgt - cur)[:4]
        general = top >= k + R
        via_res = (top >= k) & (~hv | (hw == w))
        op = self.op
        is_launch, is_alloc, is_end = op == Op.LAUNCH, op == Op.ALLOC, op == Op.END
        do_launch = is_launch & slot_ok & ~resident
        alloc_ok = is_alloc & live & ~over
        do_grow = alloc_ok & grow & (general | via_res)
        do_shrink = alloc_ok & (tgt < cur)
        do_end = is_end & live
        do_push = do_shrink | (do_end & (cur > 1))
        first = Mux(is_end, 1, tgt)
        nrel = Mux(do_push, cur - first, 0)
        nget = Mux(do_grow, k, 0)
        top_next = (top - nget + nrel)[: len(top)]
        # reserve holder: set by a grant that draws on the reserve, dropped when the holder ends
        # or when the free count is back at the reserve size
        take = do_grow & ~general
        lj = self.lk_reg >> lb
        m.d.comb += [
            self.cur.eq(cur),
            self.tgt.eq(tgt),
            self.first.eq(first),
            self.nrel.eq(nrel),
            self.nget.eq(nget),
            self.live.eq(live),
            self.ack.eq(do_launch | do_grow | (alloc_ok & ~grow) | do_end),
            self.err.eq(
                Mux(
                    op == Op.NONE,
                    Err.NONE,
                    Mux(
                        ~slot_ok,
                        Err.BAD_SLOT,
                        Mux(
                            is_launch,
                            Mux(resident, Err.SLOT_BUSY, Err.NONE),
                            Mux(
                                ~resident,
                                Err.NOT_RESIDENT,
                                Mux(is_alloc & over, Err.OVER_MAX, Err.NONE),
                            ),
                        ),
                    ),
                )
            ),
            self.do_launch.eq(do_launch),
            self.do_grow.eq(do_grow),
            self.do_shrink.eq(do_shrink),
            self.do_end.eq(do_end),
            self.do_push.eq(do_push),
            self.top_next.eq(top_next),
            self.hv_next.eq(Mux(take, 1, hv & ~(do_end & (hw == w))) & (top_next < R)),
            self.hw_next.eq(Mux(take, w, hw)),
            self.lj.eq(lj),
            self.lk_valid.eq((self.lk_wave < L) & (lj < blocks[self.lk_wave])),
        ]
        return m


class DynVgprAllocator(wiring.Component):
    """Dynamic-VGPR allocator (cycle-stepped; ports ``i`` and ``o``).

    Parameters
    ----------
    rf_vgprs : int
        1536 or 1024 VGPRs per SIMD.
    block_size : int
        16 or 32 (``SQ_DYN_VGPR.BLOCK_SIZE``).
    wave_limit : int
        Enabled wave slots (``SQ_DYN_VGPR.WAVE_LIMIT``), 1..16.
    max_blocks : int
        Maximum blocks per wave (``SQ_DYN_VGPR.MAX_BLOCK_ALLOC + 1``), 1..8.
    fwd_progress : bool
        Deadlock avoidance (``SQ_DYN_VGPR.FWD_PROGRESS``).
    reserve : int
        Blocks deadlock avoidance keeps back (default 7 = ``max_blocks - 1``).
    assertions : bool
        Emit the invariant ``Assert`` statements (default on).
    """

    def __init__(
        self,
        *,
        rf_vgprs=_D.rf_vgprs,
        block_size=_D.block_size,
        wave_limit=_D.wave_limit,
        max_blocks=_D.max_blocks,
        fwd_progress=_D.fwd_progress,
        reserve=_D.reserve,
        assertions=True,
    ):
        dyn_params_ok(rf_vgprs, block_size, wave_limit, max_blocks, fwd_progress, reserve)
        self._rf, self._B, self._limit = rf_vgprs, block_size, wave_limit
        self._max, self._fwd, self._reserve = max_blocks, bool(fwd_progress), reserve
        self._assertions = bool(assertions)
        in_layout, out_layout = dyn_layouts(rf_vgprs=rf_vgprs, block_size=block_size)
        super().__init__({"i": In(in_layout), "o": Out(out_layout)})

    @property
    def total_blocks(self):
        return self._rf // self._B

    @property
    def pool_blocks(self):
        return self.total_blocks - self._limit

    @property
    def reserve(self):
        """Blocks held back (0 when deadlock avoidance is off)."""
        return self._reserve if self._fwd else 0

    def elaborate(self, platform):
        m = Module()
        B, L, MAXB = self._B, self._limit, self._max
        T, P, R = self.total_blocks, self.pool_blocks, self.reserve
        lb = B.bit_length() - 1
        bb = _bits(T - 1)  # block number width
        E = MAXB - 1  # table entries a command can touch
        i, o = self.i, self.o

        # ---- state (wide registers; fields are selected with word_select) ----
        blocks = Signal(4 * SLOTS)  # blocks of wave w: word w (0 = empty)
        tbl = Signal(bb * SLOTS * 8)  # entry j of wave w: word 8 * w + j
        stack = Signal(bb * max(P, 1), init=sum((L + s) << (bb * s) for s in range(P)))
        top = Signal(range(T + 1), init=P)  # free stack: words 0 .. top-1
        hv = Signal()
        hw = Signal(4)
        #: state registers by name, for fault-injection tests (set when elaborated)
        self.state = {"blocks": blocks, "tbl": tbl, "stack": stack, "top": top, "hv": hv, "hw": hw}

        # ---- command decode (its own module, see _Decode) ----
        m.submodules.decode = d = _Decode(B, L, MAXB, T, R)
        m.d.comb += [
            d.op.eq(i.op),
            d.wave.eq(i.wave),
            d.count.eq(i.count),
            d.lk_wave.eq(i.lk_wave),
            d.lk_reg.eq(i.lk_reg),
            d.top.eq(top),
            d.hv.eq(hv),
            d.hw.eq(hw),
            d.blocks.eq(blocks),
        ]
        w = i.wave

        def entry(wave, j):
            return tbl.word_select(Cat(j[:3], wave), bb)

        # granted blocks come from the top of the stack; released ones are the table entries
        # first .. first+nrel-1 of the commanded wave
        popped = [stack.word_select((top - 1 - n)[: len(top)], bb) for n in range(E)]
        freed = [entry(w, d.first + n) for n in range(E)]

        # ---- state update ----
        with m.If(d.do_launch):
            m.d.sync += blocks.word_select(w, 4).eq(1)
        with m.If(d.do_grow | d.do_shrink):
            m.d.sync += blocks.word_select(w, 4).eq(d.tgt)
        with m.If(d.do_end):
            m.d.sync += blocks.word_select(w, 4).eq(0)
        m.d.sync += top.eq(d.top_next)
        for n in range(E):
            with m.If(n < d.nrel):
                m.d.sync += stack.word_select((top + n)[: len(top)], bb).eq(freed[n])
            with m.If(n < d.nget):
                m.d.sync += entry(w, d.cur + n).eq(popped[n])
        m.d.sync += [hv.eq(d.hv_next), hw.eq(d.hw_next)]

        # ---- translation ----
        lblock = Mux(d.lj == 0, i.lk_wave, entry(i.lk_wave, d.lj))
        lk_row = Mux(d.lk_valid, Cat(i.lk_reg[:lb], lblock[:bb]), 0)

        # ---- outputs ----
        m.d.comb += [
            o.ack.eq(d.ack),
            o.err.eq(d.err),
            o.free.eq(top),
            o.lk_valid.eq(d.lk_valid),
            o.lk_row.eq(lk_row),
            o.holder_valid.eq(hv),
            o.holder.eq(Mux(hv, hw, 0)),
            o.units.as_value().eq(blocks),
        ]

        if self._assertions:
            self._invariants(m, blocks, top, hv, hw, w, d, entry, popped, freed, lblock)
        return m

    def _invariants(self, m, blocks, top, hv, hw, w, d, entry, popped, freed, lblock):
        """Sync-domain ``Assert`` statements, checked at every clock edge on the state before it.

        Beside the tables, a per-wave ownership mask over the pool blocks is kept, written only
        through checked transitions: a block is handed out only when no wave owns it, and released
        only by the wave that owns it; at its end a wave must release exactly the blocks it owns.
        So no block ever has two owners, and the masks must agree with the tables, the counts and
        the translation.
        """
        L, MAXB, T, P, R = self._limit, self._max, self.total_blocks, self.pool_blocks, self.reserve
        E = MAXB - 1
        lw = self.i.lk_wave
        own = Signal(max(P, 1) * SLOTS)  # bit b of word w: wave w owns block L + b
        Pm = max(P, 1)

        def owns(wave, block):
            return own.word_select(wave, Pm).bit_select((block - L)[: len(block)], 1)

        def count(n):
            return blocks.word_select(n, 4)

        any_owner = Const(0, Pm)
        for n in range(SLOTS):
            m.d.sync += Assert(
                (any_owner & own.word_select(n, Pm)) == 0,
                f"a block owned by wave {n} has another owner",
            )
            any_owner = any_owner | own.word_select(n, Pm)

        def one(block):
            return Const(1, Pm) << (block - L)[: len(block)]

        got = 0
        for n in range(E):
            got = got | Mux(n < d.nget, one(popped[n]), 0)
        rel = 0
        for n in range(E):
            rel = rel | Mux(n < d.nrel, one(freed[n]), 0)
        # the commanded wave's mask, as a signal of its own submodule (so that the bit-by-bit
        # count below reads a signal instead of re-evaluating the selection 80 times)
        m.submodules.own_sel = sel = _WordSelect(len(own), Pm)
        m.d.comb += [sel.value.eq(own), sel.index.eq(w)]
        mine = sel.word
        with m.If(d.do_grow):
            m.d.sync += own.word_select(w, Pm).eq(mine | got)
        with m.If(d.do_push):
            m.d.sync += own.word_select(w, Pm).eq(mine & ~rel)

        # conservation: free + owned + reserved (idle slot blocks) = total
        owned = sum(count(n) for n in range(L))
        idle = sum((count(n) == 0) for n in range(L))
        m.d.sync += Assert(top + owned + idle == T, "free + owned + reserved != total")
        for n in range(SLOTS):
            limit = MAXB if n < L else 0
            m.d.sync += Assert(count(n) <= limit, f"slot {n} holds more than its maximum")
        # the commanded wave: its live table entries are pool blocks it owns, and it owns exactly
        # as many pool blocks as its count says
        cur = d.cur
        for j in range(1, MAXB):
            e = entry(w, Const(j, 3))
            m.d.sync += Assert(
                ~d.live | (j >= cur) | ((e >= L) & owns(w, e)),
                "block table entry points at a block the wave does not own",
            )
        m.d.sync += Assert(
            ~d.live | (sum(mine[b] for b in range(P)) == cur - 1),
            "the wave's ownership mask and block count disagree",
        )
        # blocks handed out are free and distinct; blocks given back are the wave's own; an
        # ending wave gives back everything it owns
        for n in range(E):
            m.d.sync += Assert(
                (n >= d.nget) | ((popped[n] >= L) & ~(any_owner >> (popped[n] - L)[:8])[0]),
                "free stack hands out a block that is not free",
            )
            for n2 in range(n):
                m.d.sync += Assert(
                    (n >= d.nget) | (popped[n] != popped[n2]), "free stack hands out a block twice"
                )
        m.d.sync += Assert(
            ~d.do_push | ((rel & ~mine) == 0), "a wave releases a block it does not own"
        )
        m.d.sync += Assert(~d.do_end | (rel == mine), "an ending wave keeps blocks")
        # translation never points outside the wave's blocks
        m.d.sync += Assert(
            ~d.lk_valid | Mux(lblock < L, lblock == lw, owns(lw, lblock)),
            "translation points outside the wave's blocks",
        )
        # deadlock avoidance: the reserve holder (or, with none, any wave) can reach the maximum
        if R > 0:
            m.d.sync += Assert(~hv | ((count(hw) != 0) & (top < R)), "stale reserve holder")
            if R >= MAXB - 1:
                need = Mux(hv, MAXB - count(hw), MAXB - 1)
                m.d.sync += Assert(top >= need, "reserve no longer lets one wave reach the max")
        else:
            m.d.sync += Assert(~hv, "reserve holder without a reserve")
