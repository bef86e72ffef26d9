"""Issue stage of one Gen EU (Gen7.5 by default): ``threads`` hardware threads, a round-robin
arbiter with dual issue, a register-file read port of ``read_bytes`` per clock, a per-thread
destination scoreboard honouring the ``NoDDChk``/``NoDDClr`` dependency-control bits, the
extended-math unit's rates and a data port with hit and miss latencies.

The behaviour is defined clock for clock by :class:`gpurtl.golden.eu.EuIssueModel`, whose doc
string lists the rules; the instruction word is :func:`gpurtl.facts.eu.inst_layout`.

Ports (``i``/``o``, :func:`eu_layouts`):

``i.load``
    ``valid``, ``thread``, ``addr``, ``inst``: write one word of a thread's program memory.
``i.start``
    ``valid``, ``mask``, ``passes``: restart the masked threads at word 0 for ``passes`` runs
    through their program (0 stops them); their scoreboard entries clear.
``i.hold``
    nothing issues this clock (random stalls of the harness: an instruction-fetch bubble).
``i.dp_ready``
    the data port accepts a send this clock.
``o.issue``
    two slots of ``valid``, ``thread``, ``pc``, ``pipe`` and ``illegal`` (SIMD16 integer
    divide): the instructions issued this clock, combinational from the state and ``i``.
``o.active``, ``o.credit``
    registered: the running threads, the operand bytes held over in the read port.
"""

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from gpurtl.facts.eu import (
    GRF_BYTES,
    OPERAND_BUFFER,
    REGS,
    ExecSize,
    MathFn,
    Op,
    Type,
    inst_layout,
)

__all__ = ["EuIssue", "eu_layouts", "INST_BITS", "check_params"]

INST_BITS = inst_layout().size
_IDIV = (MathFn.IDIV_QR.value, MathFn.IDIV_Q.value, MathFn.IDIV_R.value)
_HALF = (MathFn.POW.value, MathFn.SIN.value, MathFn.COS.value, MathFn.FDIV.value)
_TWO_SOURCE_MATH = (MathFn.FDIV.value, MathFn.POW.value) + _IDIV
_CNT_BITS = 8
_CREDIT_BITS = 10
_UNIT_BITS = 6

_RANGES = {
    "threads": (1, 10),
    "read_bytes": (8, 512),
    "fp_latency": (1, 32),
    "int_latency": (1, 32),
    "math_latency": (1, 64),
    "hit_latency": (1, 200),
    "miss_latency": (1, 200),
}
DEPTHS = (4, 8, 16, 32, 64)


def check_params(**params):
    """Raise ``ValueError`` naming the first parameter out of range."""
    for name, (lo, hi) in _RANGES.items():
        value = params[name]
        if not isinstance(value, int) or isinstance(value, bool) or not lo <= value <= hi:
            raise ValueError(f"`{name}` must be an integer from {lo} to {hi}, not {value!r}")
    if params["depth"] not in DEPTHS:
        raise ValueError(
            f"`depth` must be one of {', '.join(map(str, DEPTHS))}, not {params['depth']!r}"
        )


def _bits(n):
    return max(1, (n - 1).bit_length())


def eu_layouts(threads=7, depth=16, **_):
    """``(in_layout, out_layout)`` of the block."""
    tw, aw = _bits(threads), _bits(depth)
    in_layout = data.StructLayout(
        {
            "load": data.StructLayout({"valid": 1, "thread": tw, "addr": aw, "inst": INST_BITS}),
            "start": data.StructLayout({"valid": 1, "mask": threads, "passes": 8}),
            "hold": 1,
            "dp_ready": 1,
        }
    )
    slot = data.StructLayout({"valid": 1, "thread": tw, "pc": aw, "pipe": 1, "illegal": 1})
    out_layout = data.StructLayout(
        {"issue": data.ArrayLayout(slot, 2), "active": threads, "credit": _CREDIT_BITS}
    )
    return in_layout, out_layout


class _Decode:
    """Combinational decode of one instruction word (the golden model's ``Decoded``)."""

    def __init__(self, m, word, params, name):
        inst = data.View(inst_layout(), word)
        s = lambda shape, suffix: Signal(shape, name=f"{name}_{suffix}")  # noqa: E731
        self.alu, self.em, self.dp = s(1, "alu"), s(1, "em"), s(1, "dp")
        self.dual, self.illegal = s(1, "dual"), s(1, "illegal")
        self.bytes = s(_CREDIT_BITS, "bytes")
        self.srcs, self.dsts = s(REGS, "srcs"), s(REGS, "dsts")
        self.latency, self.occupancy = s(_CNT_BITS, "latency"), s(_UNIT_BITS, "occupancy")
        self.noddchk, self.noddclr, self.eot = inst.noddchk, inst.noddclr, inst.eot
        op, size, fn = inst.op, inst.size, inst.fn
        simd16 = size == ExecSize.SIMD16
        is_float = inst.type == Type.F
        wide = Signal(name=f"{name}_wide")  # two registers per operand
        m.d.comb += wide.eq(simd16 & (inst.type != Type.W))
        alu = (op == Op.MOV) | (op == Op.ADD) | (op == Op.MUL) | (op == Op.MAD)
        is_idiv = Cat(fn == code for code in _IDIV).any()
        nsrc = Signal(2, name=f"{name}_nsrc")
        with m.Switch(op.as_value()):
            with m.Case(Op.ADD.value, Op.MUL.value):
                m.d.comb += nsrc.eq(2)
            with m.Case(Op.MAD.value):
                m.d.comb += nsrc.eq(3)
            with m.Case(Op.MATH.value):
                two = Cat(fn == code for code in _TWO_SOURCE_MATH).any()
                m.d.comb += nsrc.eq(Mux(two, 2, 1))
            with m.Case(Op.MOV.value, Op.SEND.value):
                m.d.comb += nsrc.eq(1)
        m.d.comb += [
            self.alu.eq(alu),
            self.em.eq(op == Op.MATH),
            self.dp.eq(op == Op.SEND),
            self.dual.eq(alu & is_float & ~inst.noddchk),
            self.illegal.eq((op == Op.MATH) & is_idiv & simd16),
            self.bytes.eq((nsrc * GRF_BYTES) << wide),
        ]

        def span_mask(base, two):
            return Cat((base == r) | (two & (base == (r - 1) % REGS)) for r in range(REGS))

        srcs = [span_mask(getattr(inst, f"src{k}"), wide) for k in range(3)]
        m.d.comb += self.srcs.eq(
            Mux(nsrc >= 1, srcs[0], 0) | Mux(nsrc >= 2, srcs[1], 0) | Mux(nsrc >= 3, srcs[2], 0)
        )
        send_dsts = Cat(
            ((Const(r, 4) - inst.dst)[:4] <= inst.rlen) for r in range(REGS)
        )  # dst .. dst + rlen, wrapping
        with m.If(self.dp):
            m.d.comb += self.dsts.eq(send_dsts)
        with m.Elif(alu | self.em):
            m.d.comb += self.dsts.eq(span_mask(inst.dst, wide))

        passes = Mux(simd16, 2, 1)
        lanes = Signal(5, name=f"{name}_lanes")
        with m.Switch(size.as_value()):
            for code, n in ((ExecSize.SIMD1, 1), (ExecSize.SIMD4, 4), (ExecSize.SIMD8, 8)):
                with m.Case(code.value):
                    m.d.comb += lanes.eq(n)
            with m.Case(ExecSize.SIMD16.value):
                m.d.comb += lanes.eq(8)  # run as two SIMD8 halves
        half = Cat(fn == code for code in _HALF).any()
        math_occ = Mux(is_idiv, (lanes << 1) * passes, Mux(half, 2, 1) * passes)
        base = Mux(inst.miss, params["miss_latency"], params["hit_latency"])
        alu_base = Mux(is_float, params["fp_latency"], params["int_latency"])
        with m.If(self.dp):
            m.d.comb += [self.occupancy.eq(inst.lines + 1), self.latency.eq(base + inst.lines)]
        with m.Elif(self.em):
            m.d.comb += [
                self.occupancy.eq(math_occ),
                self.latency.eq(params["math_latency"] + math_occ - 1),
            ]
        with m.Elif(alu):
            m.d.comb += [self.occupancy.eq(passes), self.latency.eq(alu_base + passes - 1)]
        with m.Else():
            m.d.comb += [self.occupancy.eq(1), self.latency.eq(1)]


def _first_in_order(m, vec, pos, name):
    """``(found, index, position)`` of the set bit of ``vec`` with the smallest round-robin
    position ``pos[t]``: a chain of compares."""
    T = len(pos)
    tw = _bits(T)
    found, index = Signal(name=f"{name}_found"), Signal(tw, name=f"{name}_index")
    best = Signal(tw + 1, name=f"{name}_pos")
    cur_pos, cur_idx, cur_found = Const(T, tw + 1), Const(0, tw), Const(0, 1)
    for t in range(T):
        take = Signal(name=f"{name}_take{t}")
        m.d.comb += take.eq(vec[t] & (~cur_found | (pos[t] < cur_pos)))
        np_ = Signal(tw + 1, name=f"{name}_p{t}")
        ni, nf = Signal(tw, name=f"{name}_i{t}"), Signal(name=f"{name}_f{t}")
        m.d.comb += [
            np_.eq(Mux(take, pos[t], cur_pos)),
            ni.eq(Mux(take, t, cur_idx)),
            nf.eq(cur_found | vec[t]),
        ]
        cur_pos, cur_idx, cur_found = np_, ni, nf
    m.d.comb += [found.eq(cur_found), index.eq(cur_idx), best.eq(cur_pos)]
    return found, index, best


class EuIssue(wiring.Component):
    """One EU's issue stage (module doc string; rules in :mod:`gpurtl.golden.eu`).

    Parameters
    ----------
    threads : int
        Hardware threads (7 on Gen7.5 to Xe-LP, 8 on Xe-HPG/Xe2, 10 on Xe3).
    depth : int
        Program-memory words per thread.
    read_bytes : int
        Register-file read bytes per clock (96: the article, citing Intel's white paper).
    fp_latency, int_latency, math_latency : int
        Clocks from an instruction's issue to a dependent's, float and integer ALU, math.
    hit_latency, miss_latency : int
        Data-port latency of a send that hits or misses, clocks.
    """

    def __init__(
        self,
        threads=7,
        depth=16,
        read_bytes=96,
        fp_latency=9,
        int_latency=7,
        math_latency=12,
        hit_latency=49,
        miss_latency=84,
    ):
        self.params = dict(
            threads=threads,
            depth=depth,
            read_bytes=read_bytes,
            fp_latency=fp_latency,
            int_latency=int_latency,
            math_latency=math_latency,
            hit_latency=hit_latency,
            miss_latency=miss_latency,
        )
        check_params(**self.params)
        in_layout, out_layout = eu_layouts(threads, depth)
        super().__init__({"i": In(in_layout), "o": Out(out_layout)})

    def elaborate(self, platform):
        m = Module()
        p = self.params
        T, depth = p["threads"], p["depth"]
        tw, aw = _bits(T), _bits(depth)
        i, o = self.i, self.o

        pc = [Signal(aw, name=f"pc{t}") for t in range(T)]
        passes = [Signal(8, name=f"passes{t}") for t in range(T)]
        active = Signal(T)
        cnt = [[Signal(_CNT_BITS, name=f"cnt{t}_r{r}") for r in range(REGS)] for t in range(T)]
        held = [Signal(REGS, name=f"held{t}") for t in range(T)]
        units = {n: Signal(_UNIT_BITS, name=f"busy_{n}") for n in ("pipe0", "pipe1", "em", "dp")}
        credit = Signal(_CREDIT_BITS)
        rr = Signal(tw)
        m.d.comb += [o.active.eq(active), o.credit.eq(credit)]

        # Program memories and per-thread decode of the word at pc.
        dec = []
        for t in range(T):
            mem = Memory(shape=INST_BITS, depth=depth, init=[])
            m.submodules[f"prog{t}"] = mem
            rd, wr = mem.read_port(domain="comb"), mem.write_port()
            m.d.comb += [
                rd.addr.eq(pc[t]),
                wr.addr.eq(i.load.addr),
                wr.data.eq(i.load.inst),
                wr.en.eq(i.load.valid & (i.load.thread == t)),
            ]
            dec.append(_Decode(m, rd.data, p, f"d{t}"))

        avail = Signal(_CREDIT_BITS + 1)
        m.d.comb += avail.eq(credit + p["read_bytes"])
        free = {n: Signal(name=f"free_{n}") for n in units}
        m.d.comb += [free[n].eq(units[n] == 0) for n in units]

        clear = Signal(T)
        for t, d in enumerate(dec):
            pend = Cat((cnt[t][r] != 0) | held[t][r] for r in range(REGS))
            m.d.comb += clear[t].eq(
                active[t] & ~(d.srcs & pend).any() & (d.noddchk | ~(d.dsts & pend).any())
            )

        # Position of each thread in this clock's round-robin order.
        pos = [Signal(tw + 1, name=f"pos{t}") for t in range(T)]
        for t in range(T):
            m.d.comb += pos[t].eq(Mux(t >= rr, t - rr, t + T - rr))

        ready_a = Signal(T)
        for t, d in enumerate(dec):
            unit_ok = Mux(
                d.alu,
                free["pipe0"] | (d.dual & free["pipe1"]),
                Mux(d.em, free["em"], Mux(d.dp, free["dp"] & i.dp_ready, 1)),
            )
            m.d.comb += ready_a[t].eq(~i.hold & clear[t] & (d.bytes <= avail) & unit_ok)
        a_found, a_idx, a_pos = _first_in_order(m, ready_a, pos, "a")

        def pick(field, index):
            return Array(getattr(d, field) for d in dec)[index]

        a_bytes, a_dual, a_alu = Signal(_CREDIT_BITS), Signal(), Signal()
        m.d.comb += [
            a_bytes.eq(pick("bytes", a_idx)),
            a_dual.eq(pick("dual", a_idx)),
            a_alu.eq(pick("alu", a_idx)),
        ]
        a_pipe = Signal()
        m.d.comb += a_pipe.eq(a_alu & ~free["pipe0"])
        pair_ok = Signal()
        m.d.comb += pair_ok.eq(a_found & a_dual & ~a_pipe & free["pipe1"])
        ready_b = Signal(T)
        for t, d in enumerate(dec):
            m.d.comb += ready_b[t].eq(
                pair_ok & clear[t] & d.dual & (pos[t] > a_pos) & (a_bytes + d.bytes <= avail)
            )
        b_found, b_idx, _ = _first_in_order(m, ready_b, pos, "b")
        b_bytes = Signal(_CREDIT_BITS)
        m.d.comb += b_bytes.eq(Mux(b_found, pick("bytes", b_idx), 0))

        for slot, (found, idx, pipe) in enumerate(((a_found, a_idx, a_pipe), (b_found, b_idx, 1))):
            m.d.comb += [
                o.issue[slot].valid.eq(found),
                o.issue[slot].thread.eq(Mux(found, idx, 0)),
                o.issue[slot].pc.eq(Mux(found, Array(pc)[idx], 0)),
                o.issue[slot].pipe.eq(Mux(found, pipe, 0)),
                o.issue[slot].illegal.eq(Mux(found, pick("illegal", idx), 0)),
            ]

        # Read port: bytes left over, at most one operand buffer.
        left = Signal(_CREDIT_BITS + 1)
        m.d.comb += left.eq(avail - Mux(a_found, a_bytes, 0) - b_bytes)
        m.d.sync += credit.eq(Mux(left > OPERAND_BUFFER, OPERAND_BUFFER, left))

        # Units.
        a_occ = Signal(_UNIT_BITS)
        m.d.comb += a_occ.eq(pick("occupancy", a_idx) - 1)
        for u in units.values():
            m.d.sync += u.eq(Mux(u == 0, 0, u - 1))
        with m.If(a_found):
            with m.If(a_alu & a_pipe):
                m.d.sync += units["pipe1"].eq(a_occ)
            with m.If(a_alu & ~a_pipe):
                m.d.sync += units["pipe0"].eq(a_occ)
            with m.If(pick("em", a_idx)):
                m.d.sync += units["em"].eq(a_occ)
            with m.If(pick("dp", a_idx)):
                m.d.sync += units["dp"].eq(a_occ)
        with m.If(b_found):
            m.d.sync += units["pipe1"].eq(pick("occupancy", b_idx) - 1)

        # Round robin: after the last thread that issued.
        last = Mux(b_found, b_idx, a_idx)
        with m.If(a_found):
            m.d.sync += rr.eq(Mux(last == T - 1, 0, last + 1))

        issued = [(a_found & (a_idx == t)) | (b_found & (b_idx == t)) for t in range(T)]
        self._thread_state(m, dec, issued, pc, passes, active, cnt, held)
        return m

    def _thread_state(self, m, dec, issued, pc, passes, active, cnt, held):
        """Next scoreboard, pc and pass count of every thread; ``start`` overrides."""
        i = self.i
        # Per-thread state: scoreboard, pc, passes; start overrides.
        for t, d in enumerate(dec):
            issue_t = Signal(name=f"issued{t}")
            m.d.comb += issue_t.eq(issued[t])
            lat = Signal(_CNT_BITS, name=f"lat{t}")
            m.d.comb += lat.eq(d.latency - 1)
            restart = i.start.valid & i.start.mask[t]
            for r in range(REGS):
                c = cnt[t][r]
                dec_c = Mux(c == 0, 0, c - 1)
                write = issue_t & d.dsts[r]
                with m.If(restart):
                    m.d.sync += [c.eq(0), held[t][r].eq(0)]
                with m.Elif(write):
                    m.d.sync += [c.eq(Mux(lat > dec_c, lat, dec_c)), held[t][r].eq(d.noddclr)]
                with m.Else():
                    m.d.sync += c.eq(dec_c)
            with m.If(restart):
                m.d.sync += [
                    pc[t].eq(0),
                    passes[t].eq(i.start.passes),
                    active[t].eq(i.start.passes != 0),
                ]
            with m.Elif(issue_t):
                with m.If(d.eot):
                    m.d.sync += pc[t].eq(0)
                    with m.If(passes[t] > 1):
                        m.d.sync += passes[t].eq(passes[t] - 1)
                    with m.Else():
                        m.d.sync += active[t].eq(0)
                with m.Else():
                    m.d.sync += pc[t].eq(pc[t] + 1)
