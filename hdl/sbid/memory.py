"""Token file behind a hit/miss memory latency model whose requests return out of order.

This is the block of the ``scoreboard`` experiment, the token counterpart of
:class:`gpurtl.hdl.waitcnt.WaitcntMemory`: a send enters the token file
(:class:`~gpurtl.hdl.sbid.tokens.SbidTokens`) and starts a countdown of ``hit_latency`` or
``miss_latency`` cycles for its token; when it expires the token returns. A token is its own
completion tag, so every request returns on its own, in any order, and any number of them in one
cycle (the return path's bandwidth is not modelled: a choice, stated in docs/scoreboard.md).

Timing: a send accepted in cycle ``t`` returns in cycle ``t + latency`` (the token is free from
``t + latency + 1`` on), as a request in :class:`gpurtl.hdl.waitcnt.ReturnQueue` leaves at the
earliest.
"""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .tokens import SbidTokens, check_size, token_layouts

__all__ = ["SbidMemory"]


class SbidMemory(wiring.Component):
    """Token file + per-token latency countdowns.

    Parameters
    ----------
    threads, tokens
        As for :class:`~gpurtl.hdl.sbid.tokens.SbidTokens`.
    hit_latency, miss_latency : int
        Cycles from a send with ``hit`` set or clear to its return (1..4096).

    Ports
    -----
    i : In(in_layout), o : Out(out_layout)
        See :func:`~gpurtl.hdl.sbid.tokens.token_layouts` with ``memory=True``: the sends carry
        ``hit``, ``o.ret`` is the mask of tokens returning this cycle, per thread.
    """

    def __init__(self, threads=8, tokens=16, hit_latency=20, miss_latency=200):
        check_size(threads, tokens)
        for name, value in (("hit_latency", hit_latency), ("miss_latency", miss_latency)):
            if not isinstance(value, int) or not 1 <= value <= 4096:
                raise ValueError(f"`{name}` must be an integer from 1 to 4096, not {value!r}")
        self._threads, self._tokens = threads, tokens
        self._hit, self._miss = hit_latency, miss_latency
        in_layout, out_layout = token_layouts(threads, tokens, external_returns=False, memory=True)
        super().__init__({"i": In(in_layout), "o": Out(out_layout)})

    def elaborate(self, platform):
        m = Module()
        threads, tokens = self._threads, self._tokens
        m.submodules.tokens = file = SbidTokens(threads, tokens, external_returns=False)
        issue = self.i.issue
        m.d.comb += [
            file.i.issue.valid.eq(issue.valid),
            file.i.issue.thread.eq(issue.thread),
            file.i.issue.sbid.eq(issue.sbid),
            file.i.issue.alloc.eq(issue.alloc),
            file.i.wait.eq(self.i.wait),
        ]
        bits = max(1, (max(self._hit, self._miss) - 1).bit_length())
        start = Signal(bits)
        m.d.comb += start.eq(Mux(issue.hit, self._hit - 1, self._miss - 1))
        for t in range(threads):
            busy = file.o.busy[t]
            done = Signal(tokens, name=f"done_t{t}")
            for k in range(tokens):
                left = Signal(bits, name=f"left_t{t}_{k}")
                m.d.comb += done[k].eq(busy[k] & (left == 0))
                taken = file.o.issue_accepted & (issue.thread == t) & (file.o.issue_sbid == k)
                with m.If(taken):
                    m.d.sync += left.eq(start)
                with m.Elif(busy[k] & (left != 0)):
                    m.d.sync += left.eq(left - 1)
            m.d.comb += [file.clear[t].eq(done), self.o.ret[t].eq(done)]
        m.d.comb += [
            self.o.stall.eq(file.o.stall),
            self.o.issue_accepted.eq(file.o.issue_accepted),
            self.o.issue_sbid.eq(file.o.issue_sbid),
            self.o.busy.eq(file.o.busy),
            self.o.err.eq(file.o.err),
        ]
        return m
