"""Wait counters behind a memory latency model and per-counter return queues.

This is the block of the ``ooo-memory`` experiment: instructions issue into the counter file
(:class:`~gpurtl.hdl.waitcnt.counters.WaitCounters`) and, for every counter they bump, into that
counter's :class:`~gpurtl.hdl.waitcnt.return_queue.ReturnQueue`; the queues produce the returns.
An issue is refused (``issue_accepted`` low) when any queue it needs is full, or per the counter
file's ``full_policy``.
"""

from amaranth.hdl import Cat, Module, Signal, unsigned
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from gpurtl.facts.waitcnt import MEMORY_DEFAULTS as _D
from gpurtl.facts.waitcnt import InstClass
from gpurtl.facts.waitcnt import profile as _profile

from .counters import WaitCounters, counter_layouts
from .return_queue import ReturnQueue

__all__ = ["WaitcntMemory", "memory_layouts"]


def memory_layouts(generation="gfx12", waves=16):
    """``(in_layout, out_layout)`` of :class:`WaitcntMemory`."""
    prof = _profile(generation)
    wave = unsigned(max(1, (waves - 1).bit_length()))
    _, counters_out = counter_layouts(generation, waves, external_returns=False)
    in_layout = data.StructLayout(
        {
            "issue": data.StructLayout({"valid": 1, "wave": wave, "cls": InstClass, "hit": 1}),
            "wait": data.StructLayout({"valid": 1, "wave": wave, "word": 32}),
        }
    )
    ret = data.StructLayout({"valid": 1, "wave": wave})
    out_layout = data.StructLayout(
        {
            "stall": waves,
            "issue_accepted": 1,
            "cnt": counters_out["cnt"].shape,
            "ret": data.StructLayout({name: ret for name in prof.counters}),
            "err": counters_out["err"].shape,
        }
    )
    return in_layout, out_layout


class WaitcntMemory(wiring.Component):
    """Counter file + memory latency model + return queues.

    Parameters
    ----------
    generation, waves, full_policy
        As for :class:`WaitCounters`.
    queue : str
        ``"inorder"`` (RDNA 3: one in-order queue per counter type shared by all waves) or
        ``"ooo"`` (RDNA 4: waves and counter types complete independently).
    queue_depth : int
        Requests per counter type's queue.
    hit_latency, miss_latency : int
        Memory latency of a request issued with ``hit`` set or clear.
    """

    def __init__(
        self,
        generation=_D.generation,
        waves=_D.waves,
        full_policy=_D.full_policy,
        queue=_D.queue,
        queue_depth=_D.queue_depth,
        hit_latency=_D.hit_latency,
        miss_latency=_D.miss_latency,
    ):
        self._prof = _profile(generation)
        self._counters = WaitCounters(generation, waves, full_policy, external_returns=False)
        self._queues = {
            name: ReturnQueue(waves, queue_depth, queue, hit_latency, miss_latency)
            for name in self._prof.counters
        }
        self._queue = queue
        in_layout, out_layout = memory_layouts(generation, waves)
        super().__init__({"i": In(in_layout), "o": Out(out_layout)})

    @property
    def queue(self):
        return self._queue

    def elaborate(self, platform):
        m = Module()
        prof = self._prof
        m.submodules.counters = counters = self._counters
        issue = self.i.issue
        bumps = {name: Signal(name=f"bump_{name}") for name in prof.counters}
        with m.Switch(issue.cls):
            for cls, targets in prof.class_map.items():
                with m.Case(cls):
                    m.d.comb += [bumps[name].eq(1) for name in targets]
        blocked = Signal()
        m.d.comb += blocked.eq(Cat(bumps[n] & self._queues[n].full for n in prof.counters).any())
        m.d.comb += [
            counters.i.issue.valid.eq(issue.valid),
            counters.i.issue.wave.eq(issue.wave),
            counters.i.issue.cls.eq(issue.cls),
            counters.i.wait.eq(self.i.wait),
            counters.block.eq(blocked),
        ]
        for name in prof.counters:
            queue = self._queues[name]
            m.submodules[f"queue_{name}"] = queue
            m.d.comb += [
                queue.push.valid.eq(counters.o.issue_accepted & bumps[name]),
                queue.push.wave.eq(issue.wave),
                queue.push.hit.eq(issue.hit),
                getattr(counters.ret, name).eq(queue.ret),
                getattr(self.o.ret, name).eq(queue.ret),
            ]
        m.d.comb += [
            self.o.stall.eq(counters.o.stall),
            self.o.issue_accepted.eq(counters.o.issue_accepted),
            self.o.cnt.eq(counters.o.cnt),
            self.o.err.eq(counters.o.err),
        ]
        return m
