"""Memory return queue of one counter type, in front of a fixed hit/miss latency model.

Every request enters with its wave and whether it hits; it is *done* ``hit_latency`` or
``miss_latency`` cycles after it entered (the memory serves all requests concurrently). At most
one done request leaves per cycle and decrements its wave's counter. The order in which done
requests may leave is the design choice that Chips and Cheese measured ("RDNA 4's 'Out-of-Order'
Memory Accesses", 2025):

``"inorder"`` (RDNA 3 style)
    One queue shared by all waves, drained strictly oldest first: a request leaves only when it and
    every older request of *any* wave have left. One wave's miss holds back another wave's hits
    (the false cross-wave dependency the article measured on RDNA 3).

``"ooo"`` (RDNA 4 style)
    Requests stay in order within a wave (the counter semantics need it; LLVM ``AMDGPUUsage.rst``
    "Memory Model GFX12") but waves are independent: the oldest done request that is its wave's
    oldest outstanding one leaves.

Timing: a request entering in cycle ``t`` can leave in cycle ``t + latency`` at the earliest; the
queue holds ``depth`` requests and reports ``full`` (the issue must then be refused).
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, unsigned
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from gpurtl.facts.waitcnt import MEMORY_DEFAULTS, QUEUE_ORDERS

__all__ = ["ReturnQueue", "QUEUE_ORDERS"]


class ReturnQueue(wiring.Component):
    """Return queue of one counter type.

    Parameters
    ----------
    waves : int
        Wave slots.
    depth : int
        Requests held (2..64).
    order : str
        ``"inorder"`` or ``"ooo"`` (see the module doc string).
    hit_latency, miss_latency : int
        Cycles from entry to done (1..4096).

    Ports
    -----
    push : In({valid, wave, hit})
        A request enters (ignored when ``full``; the enclosing design refuses the issue).
    full : Out(1)
    ret : Out({valid, wave})
        The request leaving this cycle.
    """

    def __init__(
        self,
        waves,
        depth=MEMORY_DEFAULTS.queue_depth,
        order="inorder",
        hit_latency=MEMORY_DEFAULTS.hit_latency,
        miss_latency=MEMORY_DEFAULTS.miss_latency,
    ):
        if order not in QUEUE_ORDERS:
            raise ValueError(f"`order` must be one of {', '.join(QUEUE_ORDERS)}, not {order!r}")
        if not isinstance(depth, int) or not 2 <= depth <= 64:
            raise ValueError(f"`depth` must be an integer from 2 to 64, not {depth!r}")
        for name, value in (("hit_latency", hit_latency), ("miss_latency", miss_latency)):
            if not isinstance(value, int) or not 1 <= value <= 4096:
                raise ValueError(f"`{name}` must be an integer from 1 to 4096, not {value!r}")
        self._waves, self._depth, self._order = waves, depth, order
        self._hit, self._miss = hit_latency, miss_latency
        wave = unsigned(max(1, (waves - 1).bit_length()))
        super().__init__(
            {
                "push": In(data.StructLayout({"valid": 1, "wave": wave, "hit": 1})),
                "full": Out(1),
                "ret": Out(data.StructLayout({"valid": 1, "wave": wave})),
            }
        )

    @property
    def depth(self):
        return self._depth

    @property
    def order(self):
        return self._order

    @property
    def timestamp_bits(self):
        """Width of the entry timestamps: a request never waits longer than its latency plus
        ``depth`` cycles (one leaves per cycle), so ages below ``2**bits`` never wrap."""
        return (max(self._hit, self._miss) + self._depth + 2).bit_length() + 1

    def elaborate(self, platform):
        m = Module()
        depth, bits = self._depth, self.timestamp_bits
        wave_shape = self.push.wave.shape()
        now = Signal(bits)
        m.d.sync += now.eq(now + 1)

        entry = data.StructLayout({"valid": 1, "wave": wave_shape, "hit": 1, "ts": bits})
        slots = [Signal(entry, name=f"slot{k}") for k in range(depth)]

        def done(slot):
            age = Signal(bits)
            m.d.comb += age.eq(now - slot.ts)
            return slot.valid & (age >= Mux(slot.hit, self._hit, self._miss))

        count = Signal(range(depth + 1))
        m.d.comb += self.full.eq(count == depth)
        push = self.push.valid & ~self.full

        if self._order == "inorder":
            # Circular buffer; only the head may leave.
            head = Signal(range(depth))
            tail = Signal(range(depth))
            head_slot = Signal(entry)
            with m.Switch(head):
                for k in range(depth):
                    with m.Case(k):
                        m.d.comb += head_slot.eq(slots[k])
            pop = Signal()
            m.d.comb += [
                pop.eq(done(head_slot)),
                self.ret.valid.eq(pop),
                self.ret.wave.eq(Mux(pop, head_slot.wave, 0)),
            ]
            with m.If(pop):
                m.d.sync += head.eq(Mux(head == depth - 1, 0, head + 1))
                with m.Switch(head):
                    for k in range(depth):
                        with m.Case(k):
                            m.d.sync += slots[k].valid.eq(0)
            with m.If(push):
                m.d.sync += tail.eq(Mux(tail == depth - 1, 0, tail + 1))
                with m.Switch(tail):
                    for k in range(depth):
                        with m.Case(k):
                            m.d.sync += slots[k].eq(
                                Cat(Const(1, 1), self.push.wave, self.push.hit, now)
                            )
            m.d.sync += count.eq(count + push - pop)
        else:
            # Collapsing queue kept in age order (slot 0 oldest).
            candidate = Signal(depth)
            for k in range(depth):
                older_same_wave = (
                    Cat(slots[j].valid & (slots[j].wave == slots[k].wave) for j in range(k)).any()
                    if k
                    else Const(0, 1)
                )
                m.d.comb += candidate[k].eq(done(slots[k]) & ~older_same_wave)
            # Lowest candidate index: one-hot select, then the shift mask "at or above it".
            onehot = Signal(depth)
            m.d.comb += onehot.eq(candidate & -candidate)
            pop = Signal()
            m.d.comb += pop.eq(candidate.any())
            for k in range(depth):
                with m.If(onehot[k]):
                    m.d.comb += [self.ret.wave.eq(slots[k].wave)]
            m.d.comb += self.ret.valid.eq(pop)
            shift = Signal(depth)  # bit k: slot k takes slot k+1's entry
            m.d.comb += shift.eq(Cat(onehot[: k + 1].any() for k in range(depth)))
            fill = Signal(range(depth + 1))
            m.d.comb += fill.eq(count - pop)
            for k in range(depth):
                following = slots[k + 1] if k + 1 < depth else Const(0, entry.size)
                moved = Mux(shift[k], following, slots[k])
                with m.If(push & (fill == k)):
                    m.d.sync += slots[k].eq(Cat(Const(1, 1), self.push.wave, self.push.hit, now))
                with m.Else():
                    m.d.sync += slots[k].eq(moved)
            m.d.sync += count.eq(count + push - pop)
        return m
