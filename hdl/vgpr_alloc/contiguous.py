"""Launch-time contiguous first-fit register allocator: RDNA static VGPRs, Intel Xe3 GRF blocks
and the older fixed Intel GRF modes (geometry and sources in :mod:`.configs`; behaviour as the
golden model :mod:`gpurtl.golden.vgpr_alloc.contiguous`).

State per slot: an ownership mask over the units, the first unit and the number of units held,
plus the free count. First fit works on bit vectors: ``fits_k = free & free >> 1 & ... & free >>
(k-1)`` marks the units where ``k`` free units start; a launch of ``need`` units takes the lowest set
bit of ``fits_need`` (bit vectors also keep the Python simulator fast).
"""

from amaranth.hdl import Array, Assert, Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from gpurtl.facts.vgpr_alloc import COUNT_BITS, ContigConfig, Err, Op, command_layout, result_layout

__all__ = ["ContigAllocator", "contig_layouts"]


def _bits(n):
    return max(1, int(n).bit_length())


def contig_layouts(config):
    return command_layout(), result_layout(
        slots=config.slots,
        unit_bits=_bits(config.max_units),
        free_bits=_bits(config.units),
        row_bits=_bits(config.rows - 1),
    )


class _FreeMask(wiring.Component):
    """``free`` = units no slot owns."""

    def __init__(self, units, slots):
        self._u, self._s = units, slots
        super().__init__({"own": In(units).array(slots), "free": Out(units)})

    def elaborate(self, platform):
        m = Module()
        acc = Const(0, self._u)
        for w in range(self._s):
            acc = acc | self.own[w]
        m.d.comb += self.free.eq(~acc)
        return m


class _FitMasks(wiring.Component):
    """``fits[k-1]`` has bit ``u`` set when units ``u .. u+k-1`` are all free (``fits[0]`` is the
    free mask). Flat expressions of the ``free`` input only, so the simulator evaluates this
    module once per change of the ownership registers and compiles it quickly."""

    def __init__(self, units, max_units):
        self._u, self._mu = units, max_units
        super().__init__({"free": In(units), "fits": Out(units).array(max_units)})

    def elaborate(self, platform):
        m = Module()
        for k in range(self._mu):
            fit = self.free
            for t in range(1, k + 1):
                fit = fit & (self.free >> t)
            m.d.comb += self.fits[k].eq(fit)
        return m


class _FirstFit(wiring.Component):
    """For every request size ``k``: ``found[k-1]`` and ``start[k-1]``, the lowest unit where ``k``
    free units start (a priority encoder per size)."""

    def __init__(self, units, max_units):
        self._u, self._mu = units, max_units
        super().__init__(
            {
                "fits": In(units).array(max_units),
                "found": Out(1).array(max_units),
                "start": Out(range(units)).array(max_units),
            }
        )

    def elaborate(self, platform):
        m = Module()
        U = self._u
        for k in range(self._mu):
            cand = self.fits[k]
            lowest = cand & (~cand + 1)[:U]  # one-hot lowest candidate
            m.d.comb += self.found[k].eq(cand != 0)
            m.d.comb += self.start[k].eq(
                Cat(
                    (lowest & sum(1 << u for u in range(U) if u >> b & 1)) != 0
                    for b in range(_bits(U - 1))
                )
            )
        return m


class _Pick(wiring.Component):
    """Units needed for a request of ``count`` registers and the first-fit position for it."""

    def __init__(self, cfg):
        self._cfg = cfg
        U, MU = cfg.units, cfg.max_units
        super().__init__(
            {
                "count": In(COUNT_BITS),
                "fit_found": In(1).array(MU),
                "fit_start": In(range(U)).array(MU),
                "need": Out(_bits(MU)),
                "found": Out(1),
                "start": Out(range(U)),
                "range_mask": Out(U),
            }
        )

    def elaborate(self, platform):
        m = Module()
        cfg = self._cfg
        U, MU = cfg.units, cfg.max_units
        n = Mux(self.count == 0, 1, self.count)
        need = sum((n > t) for t in cfg.thresholds)[: _bits(MU)]
        index = (need - 1)[: _bits(MU - 1)]
        start = Array(self.fit_start)[index]
        ones = ((Const(1, MU + 1) << need) - 1)[:MU]
        m.d.comb += [
            self.need.eq(need),
            self.found.eq(Array(self.fit_found)[index]),
            self.start.eq(start),
            self.range_mask.eq((ones << start)[:U]),
        ]
        return m


class ContigAllocator(wiring.Component):
    """Contiguous first-fit allocator (cycle-stepped; ports ``i`` and ``o``).

    Parameters
    ----------
    config : ContigConfig
        The geometry (:func:`.configs.rdna_static_config`, :func:`.configs.xe_config`).
    assertions : bool
        Emit the invariant ``Assert`` statements (default on).
    """

    def __init__(self, config, *, assertions=True):
        if not isinstance(config, ContigConfig):
            raise TypeError(f"`config` must be a ContigConfig, not {config!r}")
        self._cfg, self._assertions = config, bool(assertions)
        in_layout, out_layout = contig_layouts(config)
        super().__init__({"i": In(in_layout), "o": Out(out_layout)})

    @property
    def config(self):
        return self._cfg

    def elaborate(self, platform):
        m = Module()
        cfg = self._cfg
        U, S, MU = cfg.units, cfg.slots, cfg.max_units
        i, o = self.i, self.o

        # per-slot ownership masks (bit u set = the slot owns unit u), first unit and unit count
        own = Array(Signal(U, name=f"own{w}") for w in range(S))
        base = Array(Signal(range(U), name=f"base{w}") for w in range(S))
        units = Array(Signal(_bits(MU), name=f"units{w}") for w in range(S))
        free = Signal(range(U + 1), init=U)
        #: state registers by name, for fault-injection tests (set when elaborated)
        self.state = {"own": own, "base": base, "units": units, "free": free}
        m.submodules.free_mask = fm = _FreeMask(U, S)
        m.submodules.fits = fitmod = _FitMasks(U, MU)
        m.submodules.first_fit = ff = _FirstFit(U, MU)
        for w in range(S):
            m.d.comb += fm.own[w].eq(own[w])
        m.d.comb += fitmod.free.eq(fm.free)
        for k in range(MU):
            m.d.comb += ff.fits[k].eq(fitmod.fits[k])
        free_mask = fitmod.fits[0]

        # ---- command decode (expressions only: the combinational process of this module must
        # not read signals it drives, or the simulator evaluates it once per dependency level) ----
        w = i.wave
        slot_ok = w < S
        ws = w[: _bits(S - 1)]
        cur = Mux(slot_ok, units[ws], 0)
        m.submodules.pick = pick = _Pick(cfg)
        m.d.comb += pick.count.eq(i.count)
        for k in range(MU):
            m.d.comb += [pick.fit_found[k].eq(ff.found[k]), pick.fit_start[k].eq(ff.start[k])]
        need, found, start, range_mask = pick.need, pick.found, pick.start, pick.range_mask
        over = i.count > cfg.max_count

        do_launch = Signal()
        do_end = Signal()
        with m.Switch(i.op):
            with m.Case(Op.LAUNCH):
                with m.If(~slot_ok):
                    m.d.comb += o.err.eq(Err.BAD_SLOT)
                with m.Elif(cur != 0):
                    m.d.comb += o.err.eq(Err.SLOT_BUSY)
                with m.Elif(over):
                    m.d.comb += o.err.eq(Err.OVER_MAX)
                with m.Elif(found):
                    m.d.comb += [o.ack.eq(1), do_launch.eq(1)]
            with m.Case(Op.ALLOC):
                with m.If(~slot_ok):
                    m.d.comb += o.err.eq(Err.BAD_SLOT)
                with m.Else():
                    m.d.comb += o.err.eq(Err.BAD_OP)
            with m.Case(Op.END):
                with m.If(~slot_ok):
                    m.d.comb += o.err.eq(Err.BAD_SLOT)
                with m.Elif(cur == 0):
                    m.d.comb += o.err.eq(Err.NOT_RESIDENT)
                with m.Else():
                    m.d.comb += [o.ack.eq(1), do_end.eq(1)]

        # ---- state update ----
        with m.If(do_launch):
            m.d.sync += [
                base[ws].eq(start),
                units[ws].eq(need),
                own[ws].eq(range_mask),
                free.eq(free - need),
            ]
        with m.If(do_end):
            m.d.sync += [units[ws].eq(0), own[ws].eq(0), free.eq(free + cur)]

        # ---- translation ----
        lw = i.lk_wave
        l_ok = lw < S
        lws = lw[: _bits(S - 1)]
        lunits = Mux(l_ok, units[lws], 0)
        lbase = base[lws]
        lk_valid = (lunits != 0) & (i.lk_reg < lunits * cfg.regs_per_unit)
        lk_row = Mux(lk_valid, lbase * cfg.unit_rows + i.lk_reg * cfg.row_stride, 0)

        # ---- outputs ----
        m.d.comb += [o.free.eq(free), o.lk_valid.eq(lk_valid), o.lk_row.eq(lk_row)]
        m.d.comb += o.units.as_value().eq(Cat(units[s] for s in range(S)))

        if self._assertions:
            self._invariants(
                m,
                own,
                base,
                units,
                free,
                free_mask,
                do_launch,
                range_mask,
                lk_valid,
                lk_row,
                lbase,
                lunits,
            )
        return m

    def _invariants(
        self,
        m,
        own,
        base,
        units,
        free,
        free_mask,
        do_launch,
        range_mask,
        lk_valid,
        lk_row,
        lbase,
        lunits,
    ):
        """Sync-domain ``Assert`` statements, checked at every clock edge on the state before it:
        every slot's mask is exactly its range ``[base, base + units)`` (so it holds no more than
        its count), no unit has two owners, free + owned = total, a launch takes only free units
        and the translation stays inside the wave's units."""
        cfg = self._cfg
        U, S, MU = cfg.units, cfg.slots, cfg.max_units
        m.d.sync += Assert(free + sum(units[s] for s in range(S)) == U, "free + owned != total")
        ones = Array(Const((1 << k) - 1, MU) for k in range(MU + 1))
        seen = Const(0, U)
        for s in range(S):
            expect = ones[units[s]] << base[s]
            m.d.sync += Assert(units[s] <= MU, f"slot {s} holds more than its maximum")
            m.d.sync += Assert(
                (own[s] == expect[:U]) & (base[s] + units[s] <= U),
                f"slot {s}: ownership mask is not its range",
            )
            m.d.sync += Assert((seen & own[s]) == 0, f"slot {s} owns a unit another slot owns")
            seen = seen | own[s]
        m.d.sync += Assert(
            ~do_launch | ((range_mask & ~free_mask) == 0), "launch takes a unit that is not free"
        )
        lo = lbase * cfg.unit_rows
        hi = (lbase + lunits) * cfg.unit_rows
        m.d.sync += Assert(
            ~lk_valid | ((lk_row >= lo) & (lk_row < hi)),
            "translation points outside the wave's units",
        )
