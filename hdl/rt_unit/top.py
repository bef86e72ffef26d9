"""The RT unit top: several waves' intersect instructions in, node fetch through the L0, the ray
accelerator, results out with their wave, and every wave's ``bvhcnt`` from the wait counters.

The rules are written out in the golden model :mod:`gpurtl.golden.rt_unit.top`. Blocks:

* :class:`~.node_fetch.NodeFetch` with ``order="wave"``: the instruction's ``tag`` is its wave.
  RDNA 4 reports a wave's BVH results in order and those of different waves (and of different
  counter types) in any order: the AMD "RDNA4 Instruction Set Architecture" guide counts
  ``image_bvh*_intersect_ray`` completions with BVHcnt and waits on it with ``S_WAIT_BVHCNT``
  (section 16 "Ray Tracing" and the SOPP table), and LLVM's ``AMDGPUUsage.rst`` ("Memory Model
  GFX12") states that completion is reported in order within a counter type. The L0 answers
  hits before older misses, so the node fetch restores each wave's order in front of the
  accelerator, which keeps it (every path has one latency).
* :class:`~gpurtl.hdl.ray_accel.ray_accel.RayAccel` of the chosen build; its wave waits beside
  it in a chain of registers with the accelerator's own enable (``~o.valid | o.ready``).
* :class:`~gpurtl.hdl.waitcnt.WaitCounters` (GFX12, ``2 ** tag_bits`` waves, ``stall``). The
  ``inst`` stream carries one lane a transfer; a wave instruction is its lanes up to the one
  with ``last`` set. ``bvhcnt`` counts wave instructions, as RDNA 4's does (the ISA guide's
  ``S_WAIT_BVHCNT``: incremented when the wave issues an ``image_bvh*_intersect_ray``,
  decremented when the instruction's results have returned): the first lane taken of a wave
  instruction is a ``BVH`` issue of its wave, the result of its ``last`` lane taken is a
  ``bvh`` return. A wave whose ``bvhcnt`` is at its maximum (7, LLVM ``getBvhcntBitWidth``) has
  the first lane of its next instruction refused (``ready`` held low) until one returns; the
  lanes after the first are never refused for the count. The ``wait`` port takes ``s_wait_*``
  words.
"""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from gpurtl.facts.ray_accel import OUT_LAYOUT
from gpurtl.facts.rt_unit import WAVE_TAG_BITS, L0Geometry
from gpurtl.facts.waitcnt import InstClass
from gpurtl.facts.waitcnt import profile as waitcnt_profile

from ..pipe import delay
from ..ray_accel.ray_accel import RayAccel
from ..waitcnt import WaitCounters
from .l0_cache import l0_layouts
from .node_fetch import NodeFetch, fetch_layout

__all__ = ["RtUnit", "rt_unit_signature"]

_BVH_BITS = waitcnt_profile("gfx12").widths[waitcnt_profile("gfx12").index("bvh")]


def rt_unit_signature(geometry=None, tag_bits=WAVE_TAG_BITS):
    """The :class:`wiring.Signature` of :class:`RtUnit`."""
    _, _, mem_request, fill = l0_layouts(L0Geometry.of(geometry))
    waves = 1 << tag_bits
    return wiring.Signature(
        {
            "inst": In(stream.Signature(fetch_layout(tag_bits))),
            "out": Out(
                stream.Signature(
                    data.StructLayout({"wave": tag_bits, "last": 1, "result": OUT_LAYOUT})
                )
            ),
            "mem_req": Out(stream.Signature(mem_request)),
            "fill": In(stream.Signature(fill)),
            "wait": In(data.StructLayout({"valid": 1, "wave": tag_bits, "word": 32})),
            "bvh": Out(
                data.StructLayout({"stall": waves, "bvhcnt": data.ArrayLayout(_BVH_BITS, waves)})
            ),
            "err": Out(data.StructLayout({"unexpected_fill": 1, "dual": 1, "bad_wait": 1})),
            "event": Out(data.StructLayout({"valid": 1, "kind": 2})),
        }
    )


class RtUnit(wiring.Component):
    """Node fetch, ray accelerator and BVH counters of ``2 ** tag_bits`` waves.

    Parameters
    ----------
    geometry : L0Geometry, optional
        The L0's and the ray buffer's (:class:`~.node_fetch.NodeFetch`); ``**fields`` replace
        its fields.
    tag_bits : int
        ``2 ** tag_bits`` waves (1..5, up to an RDNA 4 CU's 32: the wait counters take up to 64 waves, the per-wave
        sequence state of the node fetch grows with the wave count).
    engines, boxes_per_engine, ftz, triangles, transforms, fp
        The ray accelerator build (:class:`~gpurtl.hdl.ray_accel.ray_accel.RayAccel`).
    dual : bool
        The node fetch fetches the dual form's two legacy nodes (``NodeFetch``'s ``dual``);
        off, the dual form raises ``err.dual``.

    Attributes
    ----------
    inst : In(stream.Signature(fetch_layout(tag_bits)))
        One lane of a wave instruction: ``tag`` is the wave, ``last`` marks the instruction's
        last lane.
    out : Out(stream.Signature(StructLayout(wave, last, result: OUT_LAYOUT)))
        A lane's result, ``last`` its instruction's (the instruction is complete); zero while
        not valid.
    mem_req, fill, event
        The L0's.
    wait : In(StructLayout(valid, wave, word))
        A wait instruction word for the counters.
    bvh : Out(StructLayout(stall, bvhcnt))
        Per wave: stalled by a wait, and its ``bvhcnt``.
    err : Out(StructLayout(unexpected_fill, dual, bad_wait))
    """

    def __init__(
        self,
        geometry=None,
        tag_bits=WAVE_TAG_BITS,
        *,
        engines=1,
        boxes_per_engine=1,
        ftz=False,
        triangles=False,
        transforms=False,
        fp="shallow",
        dual=False,
        **fields,
    ):
        self.fetch = NodeFetch(geometry, tag_bits, "wave", dual, **fields)
        self.accel = RayAccel(
            engines=engines,
            boxes_per_engine=boxes_per_engine,
            ftz=ftz,
            triangles=triangles,
            transforms=transforms,
            fp=fp,
        )
        self.counters = WaitCounters("gfx12", 1 << tag_bits, "stall")
        self.tag_bits = tag_bits
        super().__init__(rt_unit_signature(self.fetch.l0.geometry, tag_bits))

    @property
    def accel_groups(self):
        """Enabled cycles an instruction holds the accelerator's entry register."""
        return self.accel.initiation_interval

    @property
    def accel_depth(self):
        """Enabled cycles from the accelerator's last slot group to its output."""
        return self.accel.latency - self.accel.initiation_interval

    def elaborate(self, platform):
        m = Module()
        m.submodules.fetch = fetch = self.fetch
        m.submodules.accel = accel = self.accel
        m.submodules.counters = counters = self.counters
        waves = 1 << self.tag_bits
        wave, last = self.inst.payload.tag, self.inst.payload.last
        # open: the wave's instruction has lanes taken and its last lane still to come
        open_ = Signal(waves)
        first, full, take = Signal(), Signal(), Signal()
        m.d.comb += [
            first.eq(~open_.bit_select(wave, 1)),
            full.eq(first & (counters.o.cnt[wave].bvh == (1 << _BVH_BITS) - 1)),
            fetch.inst.valid.eq(self.inst.valid & ~full),
            fetch.inst.payload.eq(self.inst.payload),
            self.inst.ready.eq(fetch.inst.ready & ~full),
            take.eq(self.inst.valid & self.inst.ready),
            counters.i.issue.valid.eq(take & first),
            counters.i.issue.wave.eq(wave),
            counters.i.issue.cls.eq(InstClass.BVH),
            counters.i.wait.eq(self.wait),
        ]
        for w in range(waves):
            with m.If(take & (wave == w)):
                m.d.sync += open_[w].eq(~last)
        wiring.connect(m, wiring.flipped(self.mem_req), fetch.mem_req)
        wiring.connect(m, wiring.flipped(self.fill), fetch.fill)

        # Into the accelerator; the wave and last bit wait beside it with its enable.
        m.d.comb += [
            accel.i.valid.eq(fetch.out.valid),
            accel.i.payload.eq(fetch.out.payload.instr),
            fetch.out.ready.eq(accel.i.ready),
        ]
        side = data.StructLayout({"wave": self.tag_bits, "last": 1})
        en = Signal()
        s1 = Signal(side)
        m.d.comb += en.eq(~accel.o.valid | accel.o.ready)
        with m.If(accel.i.ready):
            m.d.sync += [s1.wave.eq(fetch.out.payload.tag), s1.last.eq(fetch.out.payload.last)]
        out_side = delay(m, en, s1, self.accel_depth, "side")

        valid = accel.o.valid
        m.d.comb += [
            self.out.valid.eq(valid),
            self.out.payload.wave.eq(Mux(valid, out_side.wave, 0)),
            self.out.payload.last.eq(valid & out_side.last),
            self.out.payload.result.eq(Mux(valid, accel.o.payload.as_value(), 0)),
            accel.o.ready.eq(self.out.ready),
            counters.i.ret.bvh.valid.eq(valid & self.out.ready & out_side.last),
            counters.i.ret.bvh.wave.eq(out_side.wave),
            self.bvh.stall.eq(counters.o.stall),
            self.err.unexpected_fill.eq(fetch.err.unexpected_fill),
            self.err.dual.eq(fetch.err.dual),
            self.err.bad_wait.eq(counters.o.err.bad_wait),
            self.event.eq(fetch.event),
        ]
        for w in range(1 << self.tag_bits):
            m.d.comb += self.bvh.bvhcnt[w].eq(counters.o.cnt[w].bvh)
        return m
