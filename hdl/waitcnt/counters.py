"""Per-wave split wait counters (RDNA 4 ``loadcnt``/``storecnt``/... or the older sets).

One counter file for ``waves`` wave slots. Every cycle it takes at most one issued instruction,
one wait instruction and one return per counter type, and reports which waves must stall.

Semantics (shared bit for bit with :mod:`gpurtl.golden.waitcnt`):

* **Issue** of class ``cls`` by wave ``w`` increments every counter the class maps to (FLAT bumps
  two, LLVM ``SIInsertWaitcnts.cpp``). What happens when such a counter is already at its maximum
  is not documented (LLVM never waits for the maximum value, which suggests that it saturates or
  stalls), so it is the ``full_policy`` parameter: ``"stall"`` (default) refuses the issue
  (``issue_accepted`` low, nothing changes); ``"saturate"`` accepts it, leaves the counter at its
  maximum and raises ``err.overflow`` (so the lost count is never silent).
* **Return** on the port of counter ``c`` for wave ``w`` decrements ``cnt[w][c]``. A return with
  nothing outstanding raises ``err.underflow.c`` and changes nothing. An issue and a return on the
  same counter in one cycle cancel out.
* **Wait**: the raw 32-bit instruction word (GFX12 ``s_wait_*`` incl. the combined forms,
  GFX9-11 ``s_waitcnt`` and the SOPK ``s_waitcnt_*cnt`` forms of the chosen generation). Each
  field becomes a threshold ``thr[w][c]`` (values at or above the counter maximum, such as the
  all-ones "no wait" field, mean no wait). A wave stalls while any ``cnt[w][c] > thr[w][c]``;
  once it no longer stalls its thresholds return to "no wait". A second wait while one is pending
  tightens the thresholds (minimum). An unknown word raises ``err.bad_wait`` and is ignored.
  An issue and a wait of the same wave in one cycle act in that order (the issue is older).
* ``stall`` and ``cnt`` are registered state; ``issue_accepted`` and ``err`` are combinational
  results of this cycle's inputs.
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, unsigned
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from gpurtl.facts.waitcnt import FULL_POLICIES, MEMORY_DEFAULTS, InstClass
from gpurtl.facts.waitcnt import profile as _profile

__all__ = ["WaitCounters", "counter_layouts", "FULL_POLICIES"]


def _wave_shape(waves):
    return unsigned(max(1, (waves - 1).bit_length()))


def counter_layouts(generation="gfx12", waves=16, *, external_returns=True):
    """``(in_layout, out_layout)`` of the counter file for a generation and wave count."""
    prof = _profile(generation)
    wave = _wave_shape(waves)
    issue = data.StructLayout({"valid": 1, "wave": wave, "cls": InstClass})
    wait = data.StructLayout({"valid": 1, "wave": wave, "word": 32})
    ret = data.StructLayout({"valid": 1, "wave": wave})
    fields = {"issue": issue, "wait": wait}
    if external_returns:
        fields["ret"] = data.StructLayout({name: ret for name in prof.counters})
    in_layout = data.StructLayout(fields)
    counts = data.StructLayout({name: width for name, width in zip(prof.counters, prof.widths)})
    err = {"overflow": 1, "bad_wait": 1}
    if external_returns:
        err["underflow"] = data.StructLayout({name: 1 for name in prof.counters})
    out_layout = data.StructLayout(
        {
            "stall": waves,
            "issue_accepted": 1,
            "cnt": data.ArrayLayout(counts, waves),
            "err": data.StructLayout(err),
        }
    )
    return in_layout, out_layout


class WaitCounters(wiring.Component):
    """Counter file of ``waves`` wave slots for one GPU ``generation``.

    Parameters
    ----------
    generation : str
        ``"gfx12"`` (RDNA 4, seven split counters), ``"gfx11"``, ``"gfx10"`` or ``"gfx9"``.
    waves : int
        Wave slots (1..64; 16 per SIMD on RDNA, LLVM ``getMaxWavesPerEU``).
    full_policy : str
        ``"stall"`` or ``"saturate"``: issue into a counter that is at its maximum.
    external_returns : bool
        With ``True`` (the registered block) returns arrive on the ``i.ret`` ports; with ``False``
        the ``ret`` and ``block`` members of the signature carry them (used by
        :class:`WaitcntMemory`, whose return queues drive them) and there is no underflow error
        (queues cannot underflow).

    Ports
    -----
    i : In(in_layout), o : Out(out_layout)
        See :func:`counter_layouts`.
    block : In(1)
        Only with ``external_returns=False``: refuses this cycle's issue (``issue_accepted`` low)
        without an error, when the enclosing design must (a full return queue). The registered
        block has no such port: an input that no interface names would be left floating by an
        outside testbench (X on Icarus).
    ret : In(...)
        Only with ``external_returns=False``: the return of each counter type.
    """

    def __init__(
        self,
        generation=MEMORY_DEFAULTS.generation,
        waves=MEMORY_DEFAULTS.waves,
        full_policy=MEMORY_DEFAULTS.full_policy,
        *,
        external_returns=True,
    ):
        self._profile = _profile(generation)
        if not isinstance(waves, int) or not 1 <= waves <= 64:
            raise ValueError(f"`waves` must be an integer from 1 to 64, not {waves!r}")
        if full_policy not in FULL_POLICIES:
            raise ValueError(
                f"`full_policy` must be one of {', '.join(FULL_POLICIES)}, not {full_policy!r}"
            )
        self._waves, self._full_policy = waves, full_policy
        self._external = external_returns
        in_layout, out_layout = counter_layouts(
            generation, waves, external_returns=external_returns
        )
        members = {"i": In(in_layout), "o": Out(out_layout)}
        if not external_returns:
            members["block"] = In(1)
            ret = data.StructLayout({"valid": 1, "wave": _wave_shape(waves)})
            members["ret"] = In(data.StructLayout({name: ret for name in self._profile.counters}))
        super().__init__(members)

    @property
    def generation(self):
        return self._profile.name

    @property
    def waves(self):
        return self._waves

    @property
    def full_policy(self):
        return self._full_policy

    @property
    def counters(self):
        return self._profile.counters

    def elaborate(self, platform):
        m = Module()
        prof, waves = self._profile, self._waves
        names, widths = prof.counters, prof.widths
        maxima = {name: (1 << width) - 1 for name, width in zip(names, widths)}
        issue, wait = self.i.issue, self.i.wait
        returns = self.i.ret if self._external else self.ret

        cnt = [
            {name: Signal(width, name=f"cnt_w{w}_{name}") for name, width in zip(names, widths)}
            for w in range(waves)
        ]
        thr = [
            {
                name: Signal(width, init=maxima[name], name=f"thr_w{w}_{name}")
                for name, width in zip(names, widths)
            }
            for w in range(waves)
        ]

        # Which counters this cycle's issue class bumps.
        bumps = {name: Signal(name=f"bump_{name}") for name in names}
        with m.Switch(issue.cls):
            for cls, targets in prof.class_map.items():
                with m.Case(cls):
                    m.d.comb += [bumps[name].eq(1) for name in targets]

        # Counter values of the issuing wave (for the full check).
        issuing = {
            name: Signal(width, name=f"issuing_{name}") for name, width in zip(names, widths)
        }
        for w in range(waves):
            with m.If(issue.wave == w):
                m.d.comb += [issuing[name].eq(cnt[w][name]) for name in names]
        returned_here = {name: Signal(name=f"ret_same_{name}") for name in names}
        for name in names:
            port = getattr(returns, name)
            m.d.comb += returned_here[name].eq(
                port.valid & (port.wave == issue.wave) & (issuing[name] != 0)
            )
        at_max = Signal()
        overflow = Signal()
        m.d.comb += at_max.eq(Cat(bumps[n] & (issuing[n] == maxima[n]) for n in names).any())
        m.d.comb += overflow.eq(
            Cat(bumps[n] & (issuing[n] == maxima[n]) & ~returned_here[n] for n in names).any()
        )
        accept = Signal()
        blocked = Const(0, 1) if self._external else self.block
        if self._full_policy == "stall":
            m.d.comb += accept.eq(issue.valid & ~blocked & ~at_max)
        else:
            m.d.comb += [
                accept.eq(issue.valid & ~blocked),
                self.o.err.overflow.eq(accept & overflow),
            ]
        m.d.comb += self.o.issue_accepted.eq(accept)

        known, clamped = self._wait_thresholds(m, wait.word, maxima)
        m.d.comb += self.o.err.bad_wait.eq(wait.valid & ~known)

        for name in names:
            port = getattr(returns, name)
            if self._external:
                underflow = Signal(name=f"underflow_{name}")
                current = Signal(maxima[name].bit_length(), name=f"returning_{name}")
                for w in range(waves):
                    with m.If(port.wave == w):
                        m.d.comb += current.eq(cnt[w][name])
                m.d.comb += underflow.eq(port.valid & (current == 0))
                m.d.comb += getattr(self.o.err.underflow, name).eq(underflow)

        stall = Signal(waves)
        for w in range(waves):
            m.d.comb += stall[w].eq(Cat(cnt[w][n] > thr[w][n] for n in names).any())
            for name in names:
                port = getattr(returns, name)
                inc = accept & (issue.wave == w) & bumps[name]
                dec = port.valid & (port.wave == w) & (cnt[w][name] != 0)
                with m.If(inc & ~dec):
                    if self._full_policy == "saturate":
                        with m.If(cnt[w][name] != maxima[name]):
                            m.d.sync += cnt[w][name].eq(cnt[w][name] + 1)
                    else:
                        m.d.sync += cnt[w][name].eq(cnt[w][name] + 1)
                with m.Elif(dec & ~inc):
                    m.d.sync += cnt[w][name].eq(cnt[w][name] - 1)
                base = Mux(stall[w], thr[w][name], maxima[name])
                new = Mux(
                    wait.valid & known & (wait.wave == w) & (clamped[name] < base),
                    clamped[name],
                    base,
                )
                m.d.sync += thr[w][name].eq(new)
                m.d.comb += getattr(self.o.cnt[w], name).eq(cnt[w][name])
        m.d.comb += self.o.stall.eq(stall)
        return m

    def _wait_thresholds(self, m, word, maxima):
        """Decode of a wait instruction word: whether it is one of the profile's wait forms,
        and per counter the threshold it asks for (the maximum: no constraint), clamped to
        the counter's width."""
        prof = self._profile
        names, widths = prof.counters, prof.widths
        asked = {name: Signal(16, name=f"asked_{name}") for name in names}
        known = Signal()
        simm16 = word[:16]
        first = True
        for form in prof.waits:
            if form.fmt == "sopp":
                hit = (word[23:32] == 0x17F) & (word[16:23] == form.opcode)
            else:
                hit = (word[28:32] == 0xB) & (word[23:28] == form.opcode)
            with m.If(hit) if first else m.Elif(hit):
                m.d.comb += known.eq(1)
                for name in names:
                    value = Const(maxima[name], 16)
                    for wf in form.fields:
                        if name in wf.counters:
                            value = simm16[wf.lo_shift : wf.lo_shift + wf.lo_bits]
                            if wf.hi_bits:
                                value = Cat(value, simm16[wf.hi_shift : wf.hi_shift + wf.hi_bits])
                    m.d.comb += asked[name].eq(value)
            first = False
        with m.Else():
            m.d.comb += [asked[name].eq(maxima[name]) for name in names]
        clamped = {name: Signal(widths[i], name=f"wait_thr_{name}") for i, name in enumerate(names)}
        for name in names:
            m.d.comb += clamped[name].eq(
                Mux(asked[name] >= maxima[name], maxima[name], asked[name])
            )
        return known, clamped
