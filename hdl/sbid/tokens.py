"""Per-thread software scoreboard tokens (Intel Gen12+ SBID, ``$N`` in the assembly).

One token file for ``threads`` hardware threads of ``tokens`` tokens each. Every cycle it takes at
most one send (which sets a token), one wait (a mask of tokens) and one return (which clears a
token), and reports which threads must stall. The facts behind it are in
:mod:`gpurtl.facts.sbid`.

Semantics (shared bit for bit with :mod:`gpurtl.golden.sbid`):

* **Send** by thread ``t``: with ``alloc`` clear it names its token ``sbid`` (the compiler's
  choice, SWSB mode ``SET``); with ``alloc`` set the block takes the lowest free token of the
  thread (an allocator that always knows which tokens are free; Mesa's round-robin assignment
  does not, so it is the best case) and reports it on ``issue_sbid``. The send is accepted when
  its token is free and sets it; otherwise it is refused (``issue_accepted`` low, nothing
  changes): with ``alloc`` set that is the bound on outstanding requests (no free token); with a
  named token that is busy it also raises ``err.set_busy``. What the hardware does when a program
  sets a token in flight is not in the public sources; stalling until the token is free is our
  choice, and the flag makes it visible.
* **Return** of token ``sbid`` of thread ``t`` (out of order: any busy token may return in any
  cycle) clears it. A return of a token that is not busy raises ``err.ret_idle`` and changes
  nothing. The token a send sets is taken from the state at the start of the cycle: a token that
  returns in a cycle can be set again from the next cycle on.
* **Wait**: a mask of tokens of thread ``t`` (one bit: an instruction's ``$N.dst``; all bits: a
  ``sync.allwr``). The thread stalls until every masked token that is busy after this cycle (a
  send of the same thread in the same cycle is older than the wait) has returned; a token that
  returned before is no wait. A second wait while one is pending adds its tokens. A mask bit
  naming a token the thread never set since reset raises ``err.wait_unset`` (the wait on it is
  satisfied at once). ``$N.src`` waits are not modelled (a return implies the sources were read,
  so a ``.dst`` wait is the conservative form).
* Inputs naming a thread at or above ``threads`` are ignored.
* ``stall`` and ``busy`` are registered state; ``issue_accepted``, ``issue_sbid`` and ``err`` are
  combinational results of this cycle's inputs.
"""

from amaranth.hdl import Const, Module, Mux, Signal, unsigned
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["SbidTokens", "token_layouts", "check_size", "TOKEN_COUNTS"]

#: Allowed tokens per thread: powers of two, so that an ``sbid`` field has no unused codes
#: (Gen12/Xe2 16, Xe2 large GRF and Xe3 32; the smaller ones for quick tests).
TOKEN_COUNTS = (2, 4, 8, 16, 32)


def _thread_shape(threads):
    return unsigned(max(1, (threads - 1).bit_length()))


def _sbid_shape(tokens):
    return unsigned(max(1, (tokens - 1).bit_length()))


def check_size(threads, tokens):
    if not isinstance(threads, int) or not 1 <= threads <= 16:
        raise ValueError(f"`threads` must be an integer from 1 to 16, not {threads!r}")
    if tokens not in TOKEN_COUNTS:
        raise ValueError(
            f"`tokens` must be one of {', '.join(map(str, TOKEN_COUNTS))}, not {tokens!r}"
        )


def token_layouts(threads=8, tokens=16, *, external_returns=True, memory=False):
    """``(in_layout, out_layout)`` of the token file (``memory``: of
    :class:`~gpurtl.hdl.sbid.memory.SbidMemory`, whose sends carry ``hit`` and whose outputs
    carry the returns)."""
    thread, sbid = _thread_shape(threads), _sbid_shape(tokens)
    issue = {"valid": 1, "thread": thread, "sbid": sbid, "alloc": 1}
    if memory:
        issue["hit"] = 1
    fields = {
        "issue": data.StructLayout(issue),
        "wait": data.StructLayout({"valid": 1, "thread": thread, "mask": tokens}),
    }
    if external_returns:
        fields["ret"] = data.StructLayout({"valid": 1, "thread": thread, "sbid": sbid})
    err = {"set_busy": 1, "wait_unset": 1}
    if external_returns:
        err["ret_idle"] = 1
    out = {
        "stall": threads,
        "issue_accepted": 1,
        "issue_sbid": sbid,
        "busy": data.ArrayLayout(tokens, threads),
        "err": data.StructLayout(err),
    }
    if memory:
        out["ret"] = data.ArrayLayout(tokens, threads)
    return data.StructLayout(fields), data.StructLayout(out)


class SbidTokens(wiring.Component):
    """Token file of ``threads`` threads with ``tokens`` tokens each.

    Parameters
    ----------
    threads : int
        Hardware threads (1..16; 7 on Gen12LP, 8 on Xe2, up to 10 on Xe3).
    tokens : int
        Tokens per thread, one of :data:`TOKEN_COUNTS` (16 or 32 on real parts).
    external_returns : bool
        With ``True`` (the registered block) returns arrive on ``i.ret``; with ``False`` the
        ``clear`` member carries them, a mask of returning tokens per thread (used by
        :class:`~gpurtl.hdl.sbid.memory.SbidMemory`, whose latency model drives it), and there is
        no ``err.ret_idle``.

    Ports
    -----
    i : In(in_layout), o : Out(out_layout)
        See :func:`token_layouts`.
    clear : In(ArrayLayout(tokens, threads))
        Only with ``external_returns=False``: the tokens returning this cycle (only busy ones).
    """

    def __init__(self, threads=8, tokens=16, *, external_returns=True):
        check_size(threads, tokens)
        self._threads, self._tokens, self._external = threads, tokens, external_returns
        in_layout, out_layout = token_layouts(threads, tokens, external_returns=external_returns)
        members = {"i": In(in_layout), "o": Out(out_layout)}
        if not external_returns:
            members["clear"] = In(data.ArrayLayout(tokens, threads))
        super().__init__(members)

    @property
    def threads(self):
        return self._threads

    @property
    def tokens(self):
        return self._tokens

    def elaborate(self, platform):
        m = Module()
        threads, tokens = self._threads, self._tokens
        issue, wait = self.i.issue, self.i.wait
        busy = [Signal(tokens, name=f"busy_t{t}") for t in range(threads)]
        pend = [Signal(tokens, name=f"pend_t{t}") for t in range(threads)]
        seen = [Signal(tokens, name=f"seen_t{t}") for t in range(threads)]

        def of_thread(rows, thread, name):
            # row of the named thread; zero for a thread out of range
            value = Signal(tokens, name=name)
            for t in range(threads):
                with m.If(thread == t):
                    m.d.comb += value.eq(rows[t])
            return value

        def one_hot(index):
            return (Const(1, tokens) << index)[:tokens]

        # Send: the token it takes and whether it is free.
        current = of_thread(busy, issue.thread, "issuing_busy")
        free = Signal(tokens)
        m.d.comb += free.eq(~current)
        lowest = Signal(_sbid_shape(tokens))
        for k in reversed(range(tokens)):  # the last assignment wins: the lowest free token
            with m.If(free[k]):
                m.d.comb += lowest.eq(k)
        in_range = Signal()
        m.d.comb += in_range.eq(issue.thread < threads)
        named_busy = current.bit_select(issue.sbid, 1)
        accept = Signal()
        token = Signal(_sbid_shape(tokens))
        m.d.comb += [
            accept.eq(issue.valid & in_range & Mux(issue.alloc, free.any(), ~named_busy)),
            token.eq(Mux(issue.alloc, lowest, issue.sbid)),
            self.o.issue_accepted.eq(accept),
            self.o.issue_sbid.eq(Mux(accept, token, 0)),
            self.o.err.set_busy.eq(issue.valid & in_range & ~issue.alloc & named_busy),
        ]
        setting = Signal(tokens)
        m.d.comb += setting.eq(Mux(accept, one_hot(token), 0))

        # Returns.
        clear = [Signal(tokens, name=f"clear_t{t}") for t in range(threads)]
        if self._external:
            ret = self.i.ret
            returning = of_thread(busy, ret.thread, "returning_busy")
            ret_busy = returning.bit_select(ret.sbid, 1)
            m.d.comb += self.o.err.ret_idle.eq(ret.valid & (ret.thread < threads) & ~ret_busy)
            for t in range(threads):
                hit = ret.valid & (ret.thread == t) & ret_busy
                m.d.comb += clear[t].eq(Mux(hit, one_hot(ret.sbid), 0))
        else:
            m.d.comb += [clear[t].eq(self.clear[t] & busy[t]) for t in range(threads)]

        # Wait: its tokens never set (counting this cycle's older send of the same thread).
        waited_seen = of_thread(seen, wait.thread, "waited_seen")
        same = issue.thread == wait.thread
        known = waited_seen | Mux(same, setting, 0)
        m.d.comb += self.o.err.wait_unset.eq(
            wait.valid & (wait.thread < threads) & (wait.mask & ~known).any()
        )

        for t in range(threads):
            sets = Mux(issue.thread == t, setting, 0)
            new_busy = Signal(tokens, name=f"new_busy_t{t}")
            m.d.comb += new_busy.eq((busy[t] & ~clear[t]) | sets)
            waits = Mux(wait.valid & (wait.thread == t), wait.mask & new_busy, 0)
            m.d.sync += [
                busy[t].eq(new_busy),
                pend[t].eq((pend[t] & ~clear[t]) | waits),
                seen[t].eq(seen[t] | sets),
            ]
            m.d.comb += [self.o.busy[t].eq(busy[t]), self.o.stall[t].eq(pend[t].any())]
        return m
