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
  into the output (``latency = 4``).
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

from amaranth.hdl import Const, Module, Mux, Signal, unsigned
from amaranth.lib import stream, wiring
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
        return 4

    @property
    def bank_depth(self):
        """DWORDs in each of the eight LDS banks."""
        return self._waves * self._stack_size // _BANKS * self._lanes

    def elaborate(self, platform):
        m = Module()
        size, lanes = self._stack_size, self._lanes
        rows = self._waves * size
        lane_bits = lanes.bit_length() - 1

        en = Signal()
        m.d.comb += [en.eq(~self.o.valid | self.o.ready), self.i.ready.eq(en)]
        req = self.i.payload

        def reg(value, name, shape=None):
            r = Signal(shape if shape is not None else value.shape(), name=name)
            with m.If(en):
                m.d.sync += r.eq(value)
            return r

        sa = req.stack_addr

        # --- stage 0: validity of the request -------------------------------------------------
        s0_row = Signal(9)
        s0_lane = Signal(5)
        m.d.comb += [s0_row.eq(sa.base[5:]), s0_lane.eq(sa.base[:5])]
        s0_push4 = req.op == StackOp.PUSH4_POP1
        s0_pop2 = req.op == StackOp.PUSH8_POP2
        s0_ok = Signal()
        m.d.comb += s0_ok.eq(
            (s0_push4 | (req.op == StackOp.PUSH8_POP1) | s0_pop2)
            & (s0_lane < lanes)
            & (s0_row + size <= rows)
            & (sa.addr < size)
            & (sa.valid_entries <= size)
            & (sa.entries_to_tlas <= size)
        )

        # --- stage 0: which slots are pushed (gpurt ds_stack_push8_impl) ------------------------
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
        value = [Signal(32, name=f"s0_value{k}") for k in range(8)]
        for k in range(7):
            m.d.comb += value[k].eq(slot[k])
        m.d.comb += value[7].eq(Mux(range_update, nxt, slot[7]))

        # The emulation's running flags, unrolled from slot 7 down to slot 0.
        push = Signal(8, name="s0_push")
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
            m.d.comb += push[k].eq(still & ~special[k] & ~skip)

        # --- stage 1 registers: the push selection --------------------------------------------
        s1_live = Signal()
        with m.If(en):
            m.d.sync += s1_live.eq(self.i.valid)
        s1_ok = reg(s0_ok, "s1_ok")
        s1_pop2 = reg(s0_pop2, "s1_pop2")
        s1_sa = reg(sa, "s1_stack_addr", STACK_ADDR_LAYOUT)
        s1_push = reg(push, "s1_push")
        s1_value = [reg(v, f"s1_value{k}") for k, v in enumerate(value)]
        s1_row = Signal(9)
        s1_lane = Signal(5)
        m.d.comb += [s1_row.eq(s1_sa.base[5:]), s1_lane.eq(s1_sa.base[:5])]

        # Push ordinals (slot 7 is pushed first), the count, and the last two pushed pointers.
        ordinal = [None] * 8
        count = Const(0, 4)
        top, below = Const(0, 32), Const(0, 32)
        for k in range(7, -1, -1):
            o = Signal(3, name=f"s1_ordinal{k}")
            m.d.comb += o.eq(count)
            ordinal[k] = o
            c = Signal(4, name=f"s1_count_after{k}")
            m.d.comb += c.eq(count + s1_push[k])
            count = c
            t, b = Signal(32, name=f"s1_top_after{k}"), Signal(32, name=f"s1_below_after{k}")
            m.d.comb += [t.eq(Mux(s1_push[k], s1_value[k], top)), b.eq(Mux(s1_push[k], top, below))]
            top, below = t, b
        s1_count = count

        # Counters after the pushes (gpurt push, applied s1_count times).
        s1_valid = Signal(range(size + 1))
        s1_etr = Signal(range(size + 1))
        s1_addr = Signal(range(size))
        s1_ovf = Signal()
        s1_tlas = Signal()
        grown_valid = s1_sa.valid_entries + s1_count
        grown_etr = s1_sa.entries_to_tlas + s1_count
        grown_addr = s1_sa.addr + s1_count
        m.d.comb += [
            s1_valid.eq(Mux(grown_valid > size, size, grown_valid)),
            s1_etr.eq(Mux(grown_etr > size, size, grown_etr)),
            s1_addr.eq(Mux(grown_addr >= size, grown_addr - size, grown_addr)),
            s1_ovf.eq(s1_sa.has_overflowed | (grown_valid > size)),
            s1_tlas.eq(s1_sa.has_tlas & ~(grown_etr > size)),
        ]

        # --- stage 1: LDS banks, writes and reads ----------------------------------------------
        def ring_row(index, name):
            row = Signal(10, name=name)
            m.d.comb += row.eq(s1_row + index)
            return row

        def bank_addr(row):
            return (row[3:] << lane_bits) | s1_lane[:lane_bits] if lane_bits else row[3:]

        rd_row = []
        for back in (1, 2):
            idx = Signal(range(size), name=f"s1_read_index{back}")
            m.d.comb += idx.eq(Mux(s1_sa.addr >= back, s1_sa.addr - back, s1_sa.addr + size - back))
            rd_row.append(ring_row(idx, f"s1_read_row{back}"))
        write = Signal(name="s1_write")
        m.d.comb += write.eq(en & s1_live & s1_ok)
        push_row = []
        for k in range(8):
            pos = Signal(range(size), name=f"s1_pos{k}")
            grown = s1_sa.addr + ordinal[k]
            m.d.comb += pos.eq(Mux(grown >= size, grown - size, grown))
            push_row.append(ring_row(pos, f"s1_push_row{k}"))
        read_data = []
        for j in range(_BANKS):
            bank = Memory(shape=32, depth=self.bank_depth, init=[])
            m.submodules[f"lds_bank{j}"] = bank
            wp = bank.write_port()
            rp = bank.read_port(domain="sync", transparent_for=())
            for k in range(8):
                with m.If(s1_push[k] & (push_row[k][:3] == j)):
                    m.d.comb += [
                        wp.en.eq(write),
                        wp.addr.eq(bank_addr(push_row[k])),
                        wp.data.eq(s1_value[k]),
                    ]
            m.d.comb += [
                rp.en.eq(en),
                rp.addr.eq(Mux(rd_row[0][:3] == j, bank_addr(rd_row[0]), bank_addr(rd_row[1]))),
            ]
            read_data.append(rp.data)

        # --- stage 2 registers ---------------------------------------------------------------
        s2_live = Signal()
        with m.If(en):
            m.d.sync += s2_live.eq(s1_live)
        s2_ok = reg(s1_ok, "s2_ok")
        s2_pop2 = reg(s1_pop2, "s2_pop2")
        s2_stack_addr = reg(s1_sa.as_value(), "s2_stack_addr", unsigned(32))
        s2_count = reg(s1_count, "s2_count")
        s2_top = reg(top, "s2_top")
        s2_below = reg(below, "s2_below")
        s2_valid = reg(s1_valid, "s2_valid")
        s2_etr = reg(s1_etr, "s2_etr")
        s2_addr = reg(s1_addr, "s2_addr")
        s2_ovf = reg(s1_ovf, "s2_ovf")
        s2_tlas = reg(s1_tlas, "s2_tlas")
        s2_bank1 = reg(rd_row[0][:3], "s2_bank1")
        s2_bank2 = reg(rd_row[1][:3], "s2_bank2")
        s2_base = reg(s1_sa.base, "s2_base")

        s2_read1 = Signal(32)
        s2_read2 = Signal(32)
        with m.Switch(s2_bank1):
            for j in range(_BANKS):
                with m.Case(j):
                    m.d.comb += s2_read1.eq(read_data[j])
        with m.Switch(s2_bank2):
            for j in range(_BANKS):
                with m.Case(j):
                    m.d.comb += s2_read2.eq(read_data[j])

        # --- stage 3 registers: the LDS read data leaves the banks unregistered ----------------
        s3_live = Signal()
        with m.If(en):
            m.d.sync += s3_live.eq(s2_live)
        s3_ok = reg(s2_ok, "s3_ok")
        s3_pop2 = reg(s2_pop2, "s3_pop2")
        s3_stack_addr = reg(s2_stack_addr, "s3_stack_addr")
        s3_count = reg(s2_count, "s3_count")
        s3_top = reg(s2_top, "s3_top")
        s3_below = reg(s2_below, "s3_below")
        s3_valid = reg(s2_valid, "s3_valid")
        s3_etr = reg(s2_etr, "s3_etr")
        s3_addr = reg(s2_addr, "s3_addr")
        s3_ovf = reg(s2_ovf, "s3_ovf")
        s3_tlas = reg(s2_tlas, "s3_tlas")
        s3_base = reg(s2_base, "s3_base")
        s3_read1 = reg(s2_read1, "s3_read1")
        s3_read2 = reg(s2_read2, "s3_read2")

        # The entry popped first and the one below it: pushed by this instruction, or from LDS.
        s3_first_entry = Signal(32)
        s3_second_entry = Signal(32)
        m.d.comb += [
            s3_first_entry.eq(Mux(s3_count != 0, s3_top, s3_read1)),
            s3_second_entry.eq(
                Mux(s3_count >= 2, s3_below, Mux(s3_count == 1, s3_read1, s3_read2))
            ),
        ]

        # --- stage 3: pop (gpurt pop) ---------------------------------------------------------
        def dec_ring(addr):
            return Mux(addr == 0, size - 1, addr - 1)

        s3_b2t = Signal()
        s3_empty = Signal()
        m.d.comb += [s3_b2t.eq((s3_etr == 0) & s3_tlas), s3_empty.eq(s3_valid == 0)]
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
                p_etr.eq(s3_etr),
                p_addr.eq(s3_addr),
                p_ovf.eq(s3_ovf),
                p_tlas.eq(0),
                p_b2t.eq(0),
                first.eq(Mux(s3_ovf, INVALID_NODE, TERMINAL_NODE)),
            ]
        with m.Else():
            etr_dec = Mux(s3_etr == 0, 0, s3_etr - 1)
            m.d.comb += [p_addr.eq(dec_ring(s3_addr)), p_b2t.eq(s3_b2t), first.eq(s3_first_entry)]
            with m.If(instance):
                # An instance starts a BLAS; a TLAS part already on the stack is dropped.
                tlas_left = s3_tlas & ~s3_b2t
                m.d.comb += [
                    p_valid.eq(Mux(tlas_left, etr_dec, s3_valid - 1)),
                    p_etr.eq(0),
                    p_ovf.eq(s3_ovf | tlas_left),
                    p_tlas.eq(1),
                ]
            with m.Else():
                m.d.comb += [
                    p_valid.eq(s3_valid - 1),
                    p_etr.eq(etr_dec),
                    p_ovf.eq(s3_ovf),
                    p_tlas.eq(s3_tlas & ~s3_b2t),
                ]

        # --- stage 3: second pop of PUSH8_POP2 (the pair rule, gpurt try_pop) -------------------
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
        out = self.o.payload
        r_valid = Signal(range(size + 1))
        r_etr = Signal(range(size + 1))
        r_addr = Signal(range(size))
        dst0, dst1 = Signal(32), Signal(32)
        m.d.comb += [
            r_valid.eq(p_valid),
            r_etr.eq(p_etr),
            r_addr.eq(p_addr),
            dst0.eq(first),
            dst1.eq(INVALID_NODE),
        ]
        with m.If(s3_pop2):
            with m.If(pair):
                m.d.comb += [dst0.eq(first & ~7), dst1.eq(first)]
            with m.Elif(~refuse):
                m.d.comb += [
                    r_valid.eq(p_valid - 1),
                    r_etr.eq(Mux(p_etr == 0, 0, p_etr - 1)),
                    r_addr.eq(dec_ring(p_addr)),
                    dst0.eq(s3_second_entry),
                    dst1.eq(first),
                ]

        # --- output register -----------------------------------------------------------------
        with m.If(en):
            m.d.sync += self.o.valid.eq(s3_live)
            with m.If(s3_ok):
                m.d.sync += [
                    out.stack_addr.valid_entries.eq(r_valid),
                    out.stack_addr.entries_to_tlas.eq(r_etr),
                    out.stack_addr.addr.eq(r_addr),
                    out.stack_addr.base.eq(s3_base),
                    out.stack_addr.has_tlas.eq(p_tlas),
                    out.stack_addr.has_overflowed.eq(p_ovf),
                    out.stack_addr.blas2tlas_pop.eq(p_b2t),
                    out.dst0.eq(dst0),
                    out.dst1.eq(dst1),
                    out.error.eq(0),
                ]
            with m.Else():
                m.d.sync += [
                    out.stack_addr.eq(s3_stack_addr),
                    out.dst0.eq(INVALID_NODE),
                    out.dst1.eq(INVALID_NODE),
                    out.error.eq(1),
                ]
        return m
