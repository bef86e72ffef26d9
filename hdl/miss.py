"""Logic shared by the caches with miss registers (`l0_cache`, `icache`)."""

from amaranth.hdl import Cat

__all__ = ["request_lowest_unsent"]


def request_lowest_unsent(m, mshr, mem_req, port):
    """The memory request register ``mem_req`` (``valid``, ``line``) drives ``port`` (a stream of
    ``line``) and, once free, takes the lowest of the miss registers ``mshr`` (``valid``,
    ``sent``, ``line``; an array view) not yet requested, marking it sent."""
    count = mshr.shape().length
    m.d.comb += [port.valid.eq(mem_req.valid), port.payload.line.eq(mem_req.line)]
    with m.If(~mem_req.valid | port.ready):
        m.d.sync += mem_req.valid.eq(0)
        for k in reversed(range(count)):
            with m.If(mshr[k].valid & ~mshr[k].sent):
                m.d.sync += [mem_req.valid.eq(1), mem_req.line.eq(mshr[k].line)]
        with m.Switch(Cat(mshr[k].valid & ~mshr[k].sent for k in range(count))):
            for k in range(count):
                with m.Case("-" * (count - 1 - k) + "1" + "0" * k):
                    m.d.sync += mshr[k].sent.eq(1)
