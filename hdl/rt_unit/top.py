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
* :class:`~gpurtl.hdl.waitcnt.WaitCounters` (GFX12, ``2 ** tag_bits`` waves, ``stall``): a taken
  instruction is a ``BVH`` issue of its wave, a taken result a ``bvh`` return; the ``wait``
  port takes ``s_wait_*`` words. A wave with ``bvhcnt`` at its maximum (7, LLVM
  ``getBvhcntBitWidth``) has its next instruction refused.
"""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from gpurtl.facts.ray_accel import OUT_LAYOUT
from gpurtl.facts.waitcnt import InstClass
from gpurtl.facts.waitcnt import profile as waitcnt_profile

from ..pipe import delay
from ..ray_accel.ray_accel import RayAccel
from ..waitcnt import WaitCounters
from .l0_cache import l0_layouts
from .node_fetch import NodeFetch, fetch_layout

__all__ = ["RtUnit", "rt_unit_signature"]

_BVH_BITS = waitcnt_profile("gfx12").widths[waitcnt_profile("gfx12").index("bvh")]


def rt_unit_signature(id_bits=4, line_bits=16, tag_bits=4):
    """The :class:`wiring.Signature` of :class:`RtUnit`."""
    _, _, mem_request, fill = l0_layouts(id_bits, line_bits)
    waves = 1 << tag_bits
    return wiring.Signature(
        {
            "inst": In(stream.Signature(fetch_layout(tag_bits))),
            "out": Out(
                stream.Signature(data.StructLayout({"wave": tag_bits, "result": OUT_LAYOUT}))
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
    size, ways, mshrs, targets, id_bits, line_bits : int
        The L0's and the ray buffer's (:class:`~.node_fetch.NodeFetch`).
    tag_bits : int
        ``2 ** tag_bits`` waves (1..4: the wait counters take up to 64 waves, the per-wave
        sequence state of the node fetch grows with the wave count).
    engines, boxes_per_engine, ftz, triangles, transforms, fp
        The ray accelerator build (:class:`~gpurtl.hdl.ray_accel.ray_accel.RayAccel`).

    Attributes
    ----------
    inst : In(stream.Signature(fetch_layout(tag_bits)))
        ``tag`` is the wave.
    out : Out(stream.Signature(StructLayout(wave, result: OUT_LAYOUT)))
        Zero while not valid.
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
        size=2048,
        ways=4,
        mshrs=4,
        targets=4,
        id_bits=4,
        line_bits=16,
        tag_bits=2,
        *,
        engines=1,
        boxes_per_engine=1,
        ftz=False,
        triangles=False,
        transforms=False,
        fp="shallow",
    ):
        self.fetch = NodeFetch(size, ways, mshrs, targets, id_bits, line_bits, tag_bits, "wave")
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
        super().__init__(rt_unit_signature(id_bits, line_bits, tag_bits))

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
        wave = self.inst.payload.tag
        full = Signal()
        m.d.comb += [
            full.eq(counters.o.cnt[wave].bvh == (1 << _BVH_BITS) - 1),
            fetch.inst.valid.eq(self.inst.valid & ~full),
            fetch.inst.payload.eq(self.inst.payload),
            self.inst.ready.eq(fetch.inst.ready & ~full),
            counters.i.issue.valid.eq(self.inst.valid & self.inst.ready),
            counters.i.issue.wave.eq(wave),
            counters.i.issue.cls.eq(InstClass.BVH),
            counters.i.wait.eq(self.wait),
        ]
        wiring.connect(m, wiring.flipped(self.mem_req), fetch.mem_req)
        wiring.connect(m, wiring.flipped(self.fill), fetch.fill)

        # Into the accelerator; the wave waits beside it with the accelerator's enable.
        m.d.comb += [
            accel.i.valid.eq(fetch.out.valid),
            accel.i.payload.eq(fetch.out.payload.instr),
            fetch.out.ready.eq(accel.i.ready),
        ]
        en = Signal()
        s1_wave = Signal(self.tag_bits)
        m.d.comb += en.eq(~accel.o.valid | accel.o.ready)
        with m.If(accel.i.ready):
            m.d.sync += s1_wave.eq(fetch.out.payload.tag)
        out_wave = delay(m, en, s1_wave, self.accel_depth, "wave")

        valid = accel.o.valid
        m.d.comb += [
            self.out.valid.eq(valid),
            self.out.payload.wave.eq(Mux(valid, out_wave, 0)),
            self.out.payload.result.eq(Mux(valid, accel.o.payload.as_value(), 0)),
            accel.o.ready.eq(self.out.ready),
            counters.i.ret.bvh.valid.eq(valid & self.out.ready),
            counters.i.ret.bvh.wave.eq(out_wave),
            self.bvh.stall.eq(counters.o.stall),
            self.err.unexpected_fill.eq(fetch.err.unexpected_fill),
            self.err.dual.eq(fetch.err.dual),
            self.err.bad_wait.eq(counters.o.err.bad_wait),
            self.event.eq(fetch.event),
        ]
        for w in range(1 << self.tag_bits):
            m.d.comb += self.bvh.bvhcnt[w].eq(counters.o.cnt[w].bvh)
        return m
