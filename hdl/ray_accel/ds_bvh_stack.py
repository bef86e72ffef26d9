"""The LDS BVH stack block: ``ds_bvh_stack_push4_pop1``, ``push8_pop1`` and ``push8_pop2`` for one
lane per cycle, with the stacks in an LDS built from :class:`amaranth.lib.memory.Memory` banks.

The rules are those of GPUOpen gpurt ``src/shaders/rtip3_ds_stack_emulation.hlsl`` and the AMD
"RDNA4 Instruction Set Architecture" guide section 16.15 (VDS opcodes 224-226), as written out in
the golden model :mod:`gpurtl.golden.ray_accel.ds_bvh_stack`.

Micro-architecture
------------------
* LDS: ``waves * stack_size`` rows of ``lanes`` DWORDs. The LDS DWORD ``base + 32 * k`` of a
  lane's entry ``k`` is row ``(base >> 5) + k``, lane ``base & 31``. Rows are spread over eight
  banks by ``row % 8``. An instruction pushes at most eight entries, at consecutive ring indices;
  with a ring size that is a multiple of 8 they fall in eight different banks, so every bank
  needs one write port and the eight pushes take one cycle.
* Stage 0 (the cycle the request is accepted): the push selection of the eight slots (walk-back
  cut, skip values, RT IP 3.1 primitive-range update), registered.
* Stage 1: the ring index of each push, the counters after the pushes, the LDS writes, and the
  reads of the two ring entries below the incoming ``addr`` (one read port per bank).
* Stage 2: the read data of the two entries is selected from the banks and registered (the
  block RAM outputs are slow; popping straight from them was the critical path).
* Stage 3: the pops. A pop takes the last pointer pushed by the same instruction when there is
  one, otherwise the entry read in stage 1; then the instance, TLAS and pair rules. Registered
  into the output.
* Each stage's results are one struct (:meth:`BvhStack.stage_layouts`), registered once; the
  latency is the number of these registers (4).
* Hazards: a request writes and reads the LDS in the same cycle, the one in which it leaves
  stage 1, and an entry it reads is never one it writes. Requests pass stage 1 in order, so every
  request reads the LDS after all earlier requests' writes: no forwarding and no stall; II = 1
  under any valid/ready pattern. ``en = ~o.valid | o.ready`` holds the whole pipeline (the read
  ports too) while the output is refused.
* Misuse: a stack address whose ring does not lie in this LDS (lane at or above ``lanes``, rows
  past the end), with ``addr`` at or above the stack size or counters above it, or an unknown
  opcode, gives ``error = 1``, the register back unchanged, ``INVALID_NODE`` in both results, and
  writes nothing.
"""

from amaranth.hdl import Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from gpurtl.facts.ds_bvh_stack import (
    INVALID_NODE,
    NODE_TYPE_INSTANCE,
    NODE_TYPE_TRIANGLE_1,
    SPECIAL_NODE_PREFIX,
    STACK_ADDR_LAYOUT,
    STACK_REQUEST_LAYOUT,
    STACK_RESPONSE_LAYOUT,
    STACK_STRIDE_DWORDS,
    TERMINAL_NODE,
    StackOp,
)

from ..pipe import reg

__all__ = ["BvhStack"]

_BANKS = 8


class BvhStack(wiring.Component):
    """One lane's LDS BVH stack instruction per cycle.

    Parameters
    ----------
    stack_size : int
        OFFSET0, the ring size of every lane: 8, 16 or 24 (a multiple of the 8 LDS banks).
    waves : int
        Waves with a stack region in the LDS (``stack_size`` rows each).
    lanes : int
        Lanes per wave with a stack, a power of two up to 32 (DWORDs per LDS row).

    Attributes
    ----------
    i : In(stream.Signature(STACK_REQUEST_LAYOUT))
        Requests: ``op``, ``stack_addr``, ``last_node_ptr``, ``data[8]``, ``tri_size_opt`` (no
        effect), ``prim_range``.
    o : Out(stream.Signature(STACK_RESPONSE_LAYOUT))
        Responses in request order: ``stack_addr``, ``dst0``, ``dst1``, ``error``.
    """

    def __init__(self, *, stack_size=16, waves=2, lanes=32):
        if stack_size not in (8, 16, 24):
            raise ValueError(f"`stack_size` must be 8, 16 or 24, not {stack_size!r}")
        if not isinstance(waves, int) or isinstance(waves, bool) or not 1 <= waves <= 64:
            raise ValueError(f"`waves` must be an integer from 1 to 64, not {waves!r}")
        if lanes not in (1, 2, 4, 8, 16, 32):
            raise ValueError(f"`lanes` must be a power of two from 1 to 32, not {lanes!r}")
        if waves * stack_size * STACK_STRIDE_DWORDS > 1 << 14:
            raise ValueError(
                f"`waves * stack_size` must be at most 512 (the 14-bit base field "
                f"addresses 64 KiB), not {waves * stack_size}"
            )
        self._stack_size, self._waves, self._lanes = stack_size, waves, lanes
        super().__init__(
            {
                "i": In(stream.Signature(STACK_REQUEST_LAYOUT)),
                "o": Out(stream.Signature(STACK_RESPONSE_LAYOUT)),
            }
        )

    @property
    def stack_size(self):
        return self._stack_size

    @property
    def waves(self):
        return self._waves

    @property
    def lanes(self):
        return self._lanes

    @property
    def latency(self):
        """Cycles from a request to its response: one per pipeline register (the stages of
        :meth:`stage_layouts`)."""
        return len(self.stage_layouts())

    @property
    def bank_depth(self):
        """DWORDs in each of the eight LDS banks."""
        return self._waves * self._stack_size // _BANKS * self._lanes

    def stage_layouts(self):
        """``{name: layout}`` of the pipeline registers, in order: each stage's results are one
        struct, registered once (``live`` is the stage's valid bit).

        ``s1``
            The request's push selection (stage 0): which slots are pushed, their values.
        ``s2``
            The request after its pushes (stage 1) and the banks of the two entries read.
        ``s3``
            The same, with the two entries read from the LDS (stage 2).
        ``out``
            The response (stage 3: the pops).
        """
        size = self._stack_size
        pushed = data.StructLayout(
            {
                "live": 1,
                "ok": 1,
                "pop2": 1,
                "stack_addr": STACK_ADDR_LAYOUT,  # as requested (the response on an error)
                "count": 4,  # entries pushed
                "top": 32,  # the last pointer pushed, and the one before it
                "below": 32,
                "valid": range(size + 1),  # the counters after the pushes
                "etr": range(size + 1),
                "addr": range(size),
                "ovf": 1,
                "tlas": 1,
            }
        )
        return {
            "s1": data.StructLayout(
                {
                    "live": 1,
                    "ok": 1,
                    "pop2": 1,
                    "stack_addr": STACK_ADDR_LAYOUT,
                    "push": 8,
                    "value": data.ArrayLayout(32, 8),
                }
            ),
            "s2": data.StructLayout({"pushed": pushed, "bank1": 3, "bank2": 3}),
            "s3": data.StructLayout({"pushed": pushed, "read1": 32, "read2": 32}),
            "out": data.StructLayout({"live": 1, "response": STACK_RESPONSE_LAYOUT}),
        }

    def elaborate(self, platform):
        m = Module()
        en = Signal()
        m.d.comb += [en.eq(~self.o.valid | self.o.ready), self.i.ready.eq(en)]
        layouts = self.stage_layouts()
        nxt = {name: Signal(layout, name=f"{name}_next") for name, layout in layouts.items()}
        cur = {name: reg(m, en, nxt[name], name) for name in layouts}
        self._select(m, nxt["s1"])
        read_data = self._access(m, en, cur["s1"], nxt["s2"])
        self._read(m, cur["s2"], read_data, nxt["s3"])
        self._pop(m, cur["s3"], nxt["out"])
        m.d.comb += [self.o.valid.eq(cur["out"].live), self.o.payload.eq(cur["out"].response)]
        return m

    def _select(self, m, s1):
        """Stage 0: the request's validity and which slots it pushes (gpurt
        ``ds_stack_push8_impl``: walk-back cut, skip values, RT IP 3.1 primitive-range update)."""
        size, rows, lanes = self._stack_size, self._waves * self._stack_size, self._lanes
        req = self.i.payload
        sa = req.stack_addr
        s0_row = Signal(9)
        s0_lane = Signal(5)
        m.d.comb += [s0_row.eq(sa.base[5:]), s0_lane.eq(sa.base[:5])]
        s0_push4 = req.op == StackOp.PUSH4_POP1
        s0_pop2 = req.op == StackOp.PUSH8_POP2
        m.d.comb += [
            s1.live.eq(self.i.valid),
            s1.ok.eq(
                (s0_push4 | (req.op == StackOp.PUSH8_POP1) | s0_pop2)
                & (s0_lane < lanes)
                & (s0_row + size <= rows)
                & (sa.addr < size)
                & (sa.valid_entries <= size)
                & (sa.entries_to_tlas <= size)
            ),
            s1.pop2.eq(s0_pop2),
            s1.stack_addr.eq(sa),
        ]
        slot = []
        for k in range(8):
            v = Signal(32, name=f"s0_slot{k}")
            m.d.comb += v.eq(Mux(s0_push4, INVALID_NODE, req.data[k]) if k >= 4 else req.data[k])
            slot.append(v)
        last = req.last_node_ptr
        rules31 = Signal(name="s0_rules31")
        m.d.comb += rules31.eq((req.op == StackOp.PUSH8_POP1) & req.prim_range)
        walkback = Signal(name="s0_walkback")
        m.d.comb += walkback.eq(last[3:] != SPECIAL_NODE_PREFIX)
        match = Signal(8, name="s0_match")
        special = Signal(8, name="s0_special")
        for k in range(8):
            m.d.comb += [
                match[k].eq((slot[k] == last) | (rules31 & (slot[k][:3] <= 3))),
                special[k].eq(slot[k][3:] == SPECIAL_NODE_PREFIX),
            ]
        range_update = Signal(name="s0_range_update")
        m.d.comb += range_update.eq(rules31 & ~last[2] & ~walkback)
        data_valid = Signal(name="s0_data_valid")
        m.d.comb += data_valid.eq(
            (~walkback | match.any() | (rules31 & (last[:3] <= 3))) & ~(range_update & last[1])
        )

        # Slot 7 of a range update is replaced by the next pair (or node) of the range.
        nxt = Signal(32, name="s0_next_prim")
        with m.If(last[0]):
            m.d.comb += nxt.eq((slot[7] & 0xFFFFFFF0) + 0x10)
        with m.Elif(slot[7][:4] == 3):
            m.d.comb += nxt.eq(slot[7] ^ 0xB)
        with m.Else():
            m.d.comb += nxt.eq(slot[7] + 1)
        for k in range(7):
            m.d.comb += s1.value[k].eq(slot[k])
        m.d.comb += s1.value[7].eq(Mux(range_update, nxt, slot[7]))

        # The emulation's running flags, unrolled from slot 7 down to slot 0.
        valid_run, skip03, skip47 = data_valid, Const(0), Const(0)
        for k in range(7, -1, -1):
            sets = special[k] & valid_run
            if k >= 4:
                sets = sets & ~skip47
                # A range update pushes slot 7 only: both skips are forced from slot 6 on.
                forced = range_update if k == 6 else 0
                new03 = Signal(name=f"s0_skip03_{k}")
                new47 = Signal(name=f"s0_skip47_{k}")
                m.d.comb += [
                    new03.eq(skip03 | (sets & ~slot[k][1]) | forced),
                    new47.eq(skip47 | (sets & ~slot[k][2]) | forced),
                ]
                skip03, skip47 = new03, new47
                skip = skip47
            else:
                new03 = Signal(name=f"s0_skip03_{k}")
                m.d.comb += new03.eq(skip03 | (sets & ~slot[k][1]))
                skip03 = skip = new03
            still = Signal(name=f"s0_valid_{k}")
            m.d.comb += still.eq(valid_run & ~(walkback & match[k]))
            valid_run = still
            m.d.comb += s1.push[k].eq(still & ~special[k] & ~skip)

    def _access(self, m, en, s1, s2):
        """Stage 1: the ring index of each push, the counters after the pushes, the LDS writes,
        and the reads of the two entries below ``addr``; returns the banks' read data."""
        size, lane_bits = self._stack_size, self._lanes.bit_length() - 1
        sa = s1.stack_addr
        s1_row = Signal(9)
        s1_lane = Signal(5)
        m.d.comb += [s1_row.eq(sa.base[5:]), s1_lane.eq(sa.base[:5])]
        out = s2.pushed
        m.d.comb += [
            out.live.eq(s1.live),
            out.ok.eq(s1.ok),
            out.pop2.eq(s1.pop2),
            out.stack_addr.eq(sa),
        ]

        # Push ordinals (slot 7 is pushed first), the count, and the last two pushed pointers.
        ordinal = [None] * 8
        count = Const(0, 4)
        top, below = Const(0, 32), Const(0, 32)
        for k in range(7, -1, -1):
            o = Signal(3, name=f"s1_ordinal{k}")
            m.d.comb += o.eq(count)
            ordinal[k] = o
            c = Signal(4, name=f"s1_count_after{k}")
            m.d.comb += c.eq(count + s1.push[k])
            count = c
            t, b = Signal(32, name=f"s1_top_after{k}"), Signal(32, name=f"s1_below_after{k}")
            m.d.comb += [t.eq(Mux(s1.push[k], s1.value[k], top)), b.eq(Mux(s1.push[k], top, below))]
            top, below = t, b
        m.d.comb += [out.count.eq(count), out.top.eq(top), out.below.eq(below)]

        # Counters after the pushes (gpurt push, applied `count` times).
        grown_valid = sa.valid_entries + count
        grown_etr = sa.entries_to_tlas + count
        grown_addr = sa.addr + count
        m.d.comb += [
            out.valid.eq(Mux(grown_valid > size, size, grown_valid)),
            out.etr.eq(Mux(grown_etr > size, size, grown_etr)),
            out.addr.eq(Mux(grown_addr >= size, grown_addr - size, grown_addr)),
            out.ovf.eq(sa.has_overflowed | (grown_valid > size)),
            out.tlas.eq(sa.has_tlas & ~(grown_etr > size)),
        ]

        # The LDS banks: eight writes (one per bank) and two reads.
        def ring_row(index, name):
            row = Signal(10, name=name)
            m.d.comb += row.eq(s1_row + index)
            return row

        def bank_addr(row):
            return (row[3:] << lane_bits) | s1_lane[:lane_bits] if lane_bits else row[3:]

        rd_row = []
        for back in (1, 2):
            idx = Signal(range(size), name=f"s1_read_index{back}")
            m.d.comb += idx.eq(Mux(sa.addr >= back, sa.addr - back, sa.addr + size - back))
            rd_row.append(ring_row(idx, f"s1_read_row{back}"))
        m.d.comb += [s2.bank1.eq(rd_row[0][:3]), s2.bank2.eq(rd_row[1][:3])]
        write = Signal(name="s1_write")
        m.d.comb += write.eq(en & s1.live & s1.ok)
        push_row = []
        for k in range(8):
            pos = Signal(range(size), name=f"s1_pos{k}")
            grown = sa.addr + ordinal[k]
            m.d.comb += pos.eq(Mux(grown >= size, grown - size, grown))
            push_row.append(ring_row(pos, f"s1_push_row{k}"))
        read_data = []
        for j in range(_BANKS):
            bank = Memory(shape=32, depth=self.bank_depth, init=[])
            m.submodules[f"lds_bank{j}"] = bank
            wp = bank.write_port()
            rp = bank.read_port(domain="sync", transparent_for=())
            for k in range(8):
                with m.If(s1.push[k] & (push_row[k][:3] == j)):
                    m.d.comb += [
                        wp.en.eq(write),
                        wp.addr.eq(bank_addr(push_row[k])),
                        wp.data.eq(s1.value[k]),
                    ]
            m.d.comb += [
                rp.en.eq(en),
                rp.addr.eq(Mux(rd_row[0][:3] == j, bank_addr(rd_row[0]), bank_addr(rd_row[1]))),
            ]
            read_data.append(rp.data)
        return read_data

    def _read(self, m, s2, read_data, s3):
        """Stage 2: the data of the two entries read, selected from the banks (the block RAM
        outputs are slow; popping straight from them was the critical path)."""
        m.d.comb += s3.pushed.eq(s2.pushed)
        for bank, read in ((s2.bank1, s3.read1), (s2.bank2, s3.read2)):
            with m.Switch(bank):
                for j in range(_BANKS):
                    with m.Case(j):
                        m.d.comb += read.eq(read_data[j])

    def _pop(self, m, s3, out):
        """Stage 3: the pops (gpurt ``pop``, and ``try_pop`` for the second pop of
        PUSH8_POP2), with the instance, TLAS and pair rules; the response."""
        size = self._stack_size
        p3 = s3.pushed
        # The entry popped first and the one below it: pushed by this instruction, or from LDS.
        s3_first_entry = Signal(32)
        s3_second_entry = Signal(32)
        m.d.comb += [
            s3_first_entry.eq(Mux(p3.count != 0, p3.top, s3.read1)),
            s3_second_entry.eq(
                Mux(p3.count >= 2, p3.below, Mux(p3.count == 1, s3.read1, s3.read2))
            ),
        ]

        def dec_ring(addr):
            return Mux(addr == 0, size - 1, addr - 1)

        s3_b2t = Signal()
        s3_empty = Signal()
        m.d.comb += [s3_b2t.eq((p3.etr == 0) & p3.tlas), s3_empty.eq(p3.valid == 0)]
        p_valid = Signal(range(size + 1))
        p_etr = Signal(range(size + 1))
        p_addr = Signal(range(size))
        p_ovf, p_tlas, p_b2t = Signal(), Signal(), Signal()
        first = Signal(32, name="s3_first")
        instance = Signal(name="s3_first_is_instance")
        m.d.comb += instance.eq(s3_first_entry[:3] == NODE_TYPE_INSTANCE)
        with m.If(s3_empty):
            m.d.comb += [
                p_valid.eq(0),
                p_etr.eq(p3.etr),
                p_addr.eq(p3.addr),
                p_ovf.eq(p3.ovf),
                p_tlas.eq(0),
                p_b2t.eq(0),
                first.eq(Mux(p3.ovf, INVALID_NODE, TERMINAL_NODE)),
            ]
        with m.Else():
            etr_dec = Mux(p3.etr == 0, 0, p3.etr - 1)
            m.d.comb += [p_addr.eq(dec_ring(p3.addr)), p_b2t.eq(s3_b2t), first.eq(s3_first_entry)]
            with m.If(instance):
                # An instance starts a BLAS; a TLAS part already on the stack is dropped.
                tlas_left = p3.tlas & ~s3_b2t
                m.d.comb += [
                    p_valid.eq(Mux(tlas_left, etr_dec, p3.valid - 1)),
                    p_etr.eq(0),
                    p_ovf.eq(p3.ovf | tlas_left),
                    p_tlas.eq(1),
                ]
            with m.Else():
                m.d.comb += [
                    p_valid.eq(p3.valid - 1),
                    p_etr.eq(etr_dec),
                    p_ovf.eq(p3.ovf),
                    p_tlas.eq(p3.tlas & ~s3_b2t),
                ]

        # The second pop of PUSH8_POP2 (the pair rule, gpurt try_pop).
        pair = Signal(name="s3_pair")
        refuse = Signal(name="s3_refuse")
        m.d.comb += [
            pair.eq(first[:3] == NODE_TYPE_TRIANGLE_1),
            refuse.eq(
                ((p_etr == 0) & p_tlas)
                | (p_valid == 0)
                | (s3_second_entry[:3] == NODE_TYPE_INSTANCE)
            ),
        ]
        resp = out.response
        m.d.comb += [
            out.live.eq(p3.live),
            resp.stack_addr.valid_entries.eq(p_valid),
            resp.stack_addr.entries_to_tlas.eq(p_etr),
            resp.stack_addr.addr.eq(p_addr),
            resp.stack_addr.base.eq(p3.stack_addr.base),
            resp.stack_addr.has_tlas.eq(p_tlas),
            resp.stack_addr.has_overflowed.eq(p_ovf),
            resp.stack_addr.blas2tlas_pop.eq(p_b2t),
            resp.dst0.eq(first),
            resp.dst1.eq(INVALID_NODE),
        ]
        with m.If(p3.pop2):
            with m.If(pair):
                m.d.comb += [resp.dst0.eq(first & ~7), resp.dst1.eq(first)]
            with m.Elif(~refuse):
                m.d.comb += [
                    resp.stack_addr.valid_entries.eq(p_valid - 1),
                    resp.stack_addr.entries_to_tlas.eq(Mux(p_etr == 0, 0, p_etr - 1)),
                    resp.stack_addr.addr.eq(dec_ring(p_addr)),
                    resp.dst0.eq(s3_second_entry),
                    resp.dst1.eq(first),
                ]
        # Misuse: the register back unchanged, no pointers, the error flag.
        with m.If(~p3.ok):
            m.d.comb += [
                resp.stack_addr.eq(p3.stack_addr),
                resp.dst0.eq(INVALID_NODE),
                resp.dst1.eq(INVALID_NODE),
                resp.error.eq(1),
            ]
