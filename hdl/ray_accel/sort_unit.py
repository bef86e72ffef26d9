"""The sort unit: the 19-comparator 8-wide network of gpurt ``rtip3_opcode_emulation.hlsl``
``IntersectNodeBvh8`` (``SortUnit``).

Source: gpurt ``src/shaders/rtip3_opcode_emulation.hlsl`` ``IntersectNodeBvh8``; golden model
:mod:`gpurtl.golden.ray_accel.scalar.sort`.

Each slot carries a 32-bit pointer and a 32-bit FP key. The 3-bit class key is computed at the
input, ``ext = 4 * (ptr == INVALID_NODE) + 2 * (stf & (ptr & 7) > 3) + (stf & (ptr & 7) != 1)``.
A comparator on slots ``(i, j)``, ``i < j``, swaps when ``ext_j < ext_i`` or, with equal classes,
``key_j < key_i`` (IEEE less-than from an ``FPCmpCore``; a NaN key never swaps).

Stages S1..S6 of ``SORT_STAGES`` (:mod:`gpurtl.facts.ray_accel`); one register after each stage
(``latency = 6``), or with ``split_compares`` two: the swap decisions (FP32 compare and class
compare), then the swaps (``latency = 12``). ``wide = 0``
disables the comparators of S4..S6 (two independent 4-wide sorts), ``enable = 0`` all of them
(slots pass through in order, with the same latency).

Interface (clock-enable core, no valid/ready): ``en``; ``i``: ``slots[8]`` {``ptr``, ``key``},
``enable``, ``wide``, ``stf``; ``o``: ``ptrs[8]``.
"""

from amaranth.hdl import Module, Mux, Signal, unsigned
from amaranth.lib import data, wiring

from gpurtl.facts.ray_accel import INVALID_NODE, SORT_STAGES

from ..fp32 import FPCmpCore
from ..pipe import EnableCoreSignature, EnableCoreStream, reg

__all__ = ["SLOT_LAYOUT", "SORT_IN_LAYOUT", "SORT_OUT_LAYOUT", "SortUnit", "SortPipe"]

SLOT_LAYOUT = data.StructLayout({"ptr": unsigned(32), "key": unsigned(32)})
SORT_IN_LAYOUT = data.StructLayout(
    {
        "slots": data.ArrayLayout(SLOT_LAYOUT, 8),
        "enable": unsigned(1),
        "wide": unsigned(1),
        "stf": unsigned(1),
    }
)
SORT_OUT_LAYOUT = data.StructLayout({"ptrs": data.ArrayLayout(unsigned(32), 8)})


class SortUnit(wiring.Component):
    """8-slot sorting network core.

    Parameters
    ----------
    ftz : bool
        Subnormal keys compare as zero.
    split_compares : bool
        Register the swap decisions before the swaps (two cycles per stage, for clock rate).
    """

    def __init__(self, *, ftz=False, split_compares=False):
        if not isinstance(ftz, bool):
            raise TypeError(f"`ftz` must be a boolean, not {ftz!r}")
        if not isinstance(split_compares, bool):
            raise TypeError(f"`split_compares` must be a boolean, not {split_compares!r}")
        self._ftz, self._split = ftz, split_compares
        super().__init__(EnableCoreSignature(SORT_IN_LAYOUT, SORT_OUT_LAYOUT))

    @property
    def latency(self):
        return len(SORT_STAGES) * (2 if self._split else 1)

    @property
    def split_compares(self):
        return self._split

    @property
    def ftz(self):
        return self._ftz

    def elaborate(self, platform):
        m = Module()
        en = self.en
        ent = data.StructLayout({"ptr": unsigned(32), "key": unsigned(32), "ext": unsigned(3)})
        cur = []
        stf = self.i.stf
        for k in range(8):
            ptr = self.i.slots[k].ptr
            low = ptr[:3]
            ext = Signal(3, name=f"ext{k}")
            m.d.comb += ext.eq(
                Mux(ptr == INVALID_NODE, 4, 0)
                | Mux(stf & (low > 3), 2, 0)
                | Mux(stf & (low != 1), 1, 0)
            )
            s = Signal(ent, name=f"in{k}")
            m.d.comb += [s.ptr.eq(ptr), s.key.eq(self.i.slots[k].key), s.ext.eq(ext)]
            cur.append(s)
        enable, wide = self.i.enable, self.i.wide
        for n, stage in enumerate(SORT_STAGES):
            on = enable & (wide if n >= 3 else 1)
            swaps = []
            for a, b in stage:
                cmp = FPCmpCore(stages=0, ftz=self._ftz)
                m.submodules[f"s{n + 1}_cmp{a}{b}"] = cmp
                m.d.comb += [cmp.en.eq(en), cmp.a.eq(cur[b].key), cmp.b.eq(cur[a].key)]
                swap = Signal(name=f"s{n + 1}_swap{a}{b}")
                m.d.comb += swap.eq(
                    on & Mux(cur[a].ext != cur[b].ext, cur[b].ext < cur[a].ext, cmp.lt)
                )
                swaps.append(swap)
            if self._split:
                swaps = [reg(m, en, x, f"s{n + 1}b_swap{a}{b}") for (a, b), x in zip(stage, swaps)]
                cur = [reg(m, en, v, f"s{n + 1}b_slot{k}", shape=ent) for k, v in enumerate(cur)]
                enable = reg(m, en, enable, f"s{n + 1}b_enable")
                wide = reg(m, en, wide, f"s{n + 1}b_wide")
            nxt = list(cur)
            for (a, b), swap in zip(stage, swaps):
                lo, hi = (
                    Signal(ent, name=f"s{n + 1}_lo{a}{b}"),
                    Signal(ent, name=f"s{n + 1}_hi{a}{b}"),
                )
                m.d.comb += [lo.eq(Mux(swap, cur[b], cur[a])), hi.eq(Mux(swap, cur[a], cur[b]))]
                nxt[a], nxt[b] = lo, hi
            enable = reg(m, en, enable, f"s{n + 1}_enable")
            wide = reg(m, en, wide, f"s{n + 1}_wide")
            cur = [reg(m, en, v, f"s{n + 1}_slot{k}", shape=ent) for k, v in enumerate(nxt)]
        for k in range(8):
            m.d.comb += self.o.ptrs[k].eq(cur[k].ptr)
        return m


class SortPipe(EnableCoreStream):
    """``SortUnit`` in a valid/ready stream (block ``ray_sort``), II = 1, one global enable."""

    def __init__(self, *, ftz=False, split_compares=False):
        super().__init__(
            SortUnit(ftz=ftz, split_compares=split_compares), SORT_IN_LAYOUT, SORT_OUT_LAYOUT
        )
