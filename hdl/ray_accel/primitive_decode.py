"""Decode of one triangle pair of an RT IP 3.1 compressed primitive node (RTL).

``PrimitiveDecodeCore`` is a clock-enable datapath core (no valid/ready): ``en``, an input struct
``i`` (``node``: 32 dwords, ``node_ptr``: 32 bits) and an output struct ``o`` (:data:`PAIR_LAYOUT`),
``latency == 2``. Bit-exact with :func:`gpurtl.golden.ray_accel.encode.primitive_node.decode_pair` (layout
and malformed-node rules in that module's doc string; gpurt ``gfx12/primitiveNode.hlsli``).

Stage 1 decodes the 52-bit header, the pair index (pointer bits 0, 1, 3), the pair descriptor (a
mux of the 8 fixed positions ``1024 - 29 (p + 1)``) and every bit offset (prefixes, the six
vertices, the ID anchors and payloads). Stage 2 extracts the variable-length fields with shifters
over the node padded with zeros on both sides (so fields past bit 1023 or below bit 0 read 0, as in
the golden model) and rebuilds the vertex components ``prefix << (32 - prefix_len) | payload <<
trailing_zeros`` and the IDs.

Output fields (:data:`PAIR_LAYOUT`): ``tri[k]`` (k = 0, 1) with ``v[3][3]`` (vertex bit patterns,
x/y/z), ``prim_id``, ``geo_id``, ``opaque``, ``procedural`` (indices v0 = v1 = 15), ``valid`` (tri 0
always; tri 1 unless its indices are all 0); ``nav`` (navigation bits); ``error`` (pair index at or
above the pair count, vertex type 1, a negative prefix length, or ``(node_ptr & 7) > 3``).
Procedural triangles carry meaningless vertices (the triangle test ignores them).
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, wiring

from gpurtl.facts.fp32 import Float32
from gpurtl.facts.ray_accel import NODE_LAYOUT

from ..pipe import EnableCoreSignature, EnableCoreStream, reg

__all__ = [
    "TRI_LAYOUT",
    "PAIR_LAYOUT",
    "DECODE_IN_LAYOUT",
    "PrimitiveDecodeCore",
    "PrimitiveDecode",
]

VEC3 = data.ArrayLayout(Float32, 3)
TRI_LAYOUT = data.StructLayout(
    {
        "v": data.ArrayLayout(VEC3, 3),
        "prim_id": unsigned(32),
        "geo_id": unsigned(32),
        "opaque": unsigned(1),
        "procedural": unsigned(1),
        "valid": unsigned(1),
    }
)
PAIR_LAYOUT = data.StructLayout(
    {
        "tri": data.ArrayLayout(TRI_LAYOUT, 2),
        "nav": unsigned(2),
        "error": unsigned(1),
    }
)
DECODE_IN_LAYOUT = data.StructLayout({"node": NODE_LAYOUT, "node_ptr": unsigned(32)})

_LOW_PAD = 512  # the lowest field offset a malformed header can produce is -480
_HIGH_PAD = 1024  # the highest field end is below 52 + 93 + 15 * 96 + 96 < 2048

_OFFSET = unsigned(12)  # a bit offset into the padded node
_XYZ = data.ArrayLayout(unsigned(6), 3)
#: The stage-1 register: the node, the header fields and every field offset stage 2 extracts.
_S1_LAYOUT = data.StructLayout(
    {
        "node": unsigned(1024),
        "tz": unsigned(5),
        "pay": _XYZ,  # payload bits of each vertex component
        "pl": _XYZ,  # prefix length of each component
        "pre_off": data.ArrayLayout(_OFFSET, 3),
        "v_off": data.ArrayLayout(data.ArrayLayout(_OFFSET, 3), 2),
        "prim_a": unsigned(5),
        "prim_p": unsigned(5),
        "geo_a": unsigned(5),
        "geo_p": unsigned(5),
        "prim_anchor_off": _OFFSET,
        "geo_anchor_off": _OFFSET,
        "prim_off": data.ArrayLayout(_OFFSET, 2),
        "geo_off": data.ArrayLayout(_OFFSET, 2),
        "t_is_0": unsigned(1),
        "opaque": data.ArrayLayout(unsigned(1), 2),
        "proc": data.ArrayLayout(unsigned(1), 2),
        "valid1": unsigned(1),
        "nav": unsigned(2),
        "error": unsigned(1),
    }
)


class PrimitiveDecodeCore(wiring.Component):
    """Pair decode of a compressed primitive node; see the module doc string.

    Attributes
    ----------
    en : In(1)
        Clock enable of both register stages.
    i : In(DECODE_IN_LAYOUT)
        ``node`` (32 little-endian dwords) and ``node_ptr``.
    o : Out(PAIR_LAYOUT)
        The decoded pair, ``latency`` (2) enabled cycles later.
    """

    LATENCY = 2

    def __init__(self):
        super().__init__(EnableCoreSignature(DECODE_IN_LAYOUT, PAIR_LAYOUT))

    @property
    def latency(self):
        return self.LATENCY

    def elaborate(self, platform):
        m = Module()
        s1 = reg(m, self.en, self._stage1(m), "s1")
        self._stage2(m, s1)
        return m

    def _stage1(self, m):
        """Header, pair descriptor and every field offset, as a :data:`_S1_LAYOUT` value."""
        node = Signal(1024)
        m.d.comb += node.eq(self.i.node.as_value())
        ptr = self.i.node_ptr
        px, py, pz = node[0:5] + 1, node[5:10] + 1, node[10:15] + 1
        tz = node[15:20]
        geo_a, geo_p = Cat(Const(0, 1), node[20:24]), Cat(Const(0, 1), node[24:28])
        count = node[28:31] + 1
        vtype = node[31]
        prim_a, prim_p, mid = node[32:37], node[37:42], node[42:52]

        raw_pl = [Signal(signed(8), name=f"s1_raw_prefix_{c}") for c in "xyz"]
        pl = [Signal(6, name=f"s1_prefix_len_{c}") for c in "xyz"]
        for raw, p, length in zip(raw_pl, (px, py, pz), pl):
            m.d.comb += [raw.eq(32 - tz - p), length.eq(Mux(raw[7], 0, raw[:6]))]
        bad_prefix = raw_pl[0][7] | raw_pl[1][7] | raw_pl[2][7]

        pair = Signal(3)
        m.d.comb += pair.eq(Cat(ptr[0:2], ptr[3]))
        desc = Signal(29)
        with m.Switch(pair):
            for p in range(8):
                with m.Case(p):
                    lo = 1024 - 29 * (p + 1)
                    m.d.comb += desc.eq(node[lo : lo + 29])
        idx = [[desc[17:21], desc[21:25], desc[25:29]], [desc[3:7], desc[7:11], desc[11:15]]]

        vbits = Signal(7)
        vstart = Signal(9)
        m.d.comb += [vbits.eq(px + py + pz), vstart.eq(52 + pl[0] + pl[1] + pl[2])]

        # every offset is biased by _LOW_PAD (so it is never negative)
        B = _LOW_PAD
        s1 = Signal(_S1_LAYOUT, name="s1_next")
        tri_index = [Cat(Const(0, 1), pair), Cat(Const(1, 1), pair)]
        m.d.comb += [
            s1.node.eq(node),
            s1.tz.eq(tz),
            s1.pre_off[0].eq(B + 52),
            s1.pre_off[1].eq(B + 52 + pl[0]),
            s1.pre_off[2].eq(B + 52 + pl[0] + pl[1]),
            s1.prim_a.eq(prim_a),
            s1.prim_p.eq(prim_p),
            s1.geo_a.eq(geo_a),
            s1.geo_p.eq(geo_p),
            s1.prim_anchor_off.eq(B + mid),
            s1.geo_anchor_off.eq(B + mid - geo_a),
            s1.t_is_0.eq(pair == 0),
            s1.opaque[0].eq(desc[16]),
            s1.opaque[1].eq(desc[2]),
            s1.valid1.eq((idx[1][0] != 0) | (idx[1][1] != 0) | (idx[1][2] != 0)),
            s1.nav.eq(Mux(desc[0], 3, Mux(pair == count - 1, 1, 0))),
            s1.error.eq((pair >= count) | vtype | bad_prefix | (ptr[0:3] > 3)),
        ]
        for a, (pay, length) in enumerate(zip((px, py, pz), pl)):
            m.d.comb += [s1.pay[a].eq(pay), s1.pl[a].eq(length)]
        for k, t in enumerate(tri_index):
            m.d.comb += [s1.v_off[k][n].eq(B + vstart + idx[k][n] * vbits) for n in range(3)] + [
                # payload of triangle t >= 1 (t = 0 uses the anchor; this offset is never used)
                s1.prim_off[k].eq(B + mid + prim_a + (t - 1) * prim_p),
                s1.geo_off[k].eq(B + mid - geo_a - t * geo_p),
                s1.proc[k].eq((idx[k][0] == 15) & (idx[k][1] == 15)),
            ]
        return s1

    def _stage2(self, m, s1):
        """Field extraction from the registered stage 1 ``s1`` into the output register."""
        en = self.en
        padded = Cat(Const(0, _LOW_PAD), s1.node, Const(0, _HIGH_PAD))

        def field(offset, width):
            return padded.bit_select(offset, width)

        def masked(value, length, width):
            return value & ((Const(1, width + 1) << length) - 1)[:width]

        prefix_top = []
        for a in range(3):
            window = field(s1.pre_off[a], 32)
            length = s1.pl[a]
            top = Signal(32, name=f"s2_prefix_top_{'xyz'[a]}")
            shift = Signal(6, name=f"s2_prefix_shift_{'xyz'[a]}")
            # prefix bits are window[0:length]; left-aligned = window << (32 - length) (mod 2^32)
            m.d.comb += [shift.eq(32 - length), top.eq(Mux(length == 0, 0, (window << shift)[:32]))]
            prefix_top.append(top)

        o = self.o
        for k in range(2):
            for n in range(3):
                window = field(s1.v_off[k][n], 96)
                shift = 0
                for a in range(3):
                    payload = (
                        masked(window >> shift, s1.pay[a], 32)
                        if a
                        else masked(window, s1.pay[a], 32)
                    )
                    comp = Signal(32, name=f"s2_v_{k}_{n}_{'xyz'[a]}")
                    m.d.comb += comp.eq(prefix_top[a] | (payload << s1.tz)[:32])
                    with m.If(en):
                        m.d.sync += o.tri[k].v[n][a].eq(comp)
                    shift = s1.pay[0] if a == 0 else s1.pay[0] + s1.pay[1]

        def decode_id(anchor_off, anchor_len, pay_off, pay_len, first):
            anchor = masked(field(anchor_off, 32), anchor_len, 32)
            payload = masked(field(pay_off, 32), pay_len, 32)
            keep_mask = ~((Const(1, 33) << pay_len) - 1)[:32]
            merged = Mux(pay_len >= anchor_len, payload, (anchor & keep_mask) | payload)
            return Mux(first, anchor, merged)

        for k in range(2):
            first = s1.t_is_0 if k == 0 else Const(0, 1)
            prim = decode_id(s1.prim_anchor_off, s1.prim_a, s1.prim_off[k], s1.prim_p, first)
            geo = decode_id(s1.geo_anchor_off, s1.geo_a, s1.geo_off[k], s1.geo_p, first)
            with m.If(en):
                m.d.sync += [
                    o.tri[k].prim_id.eq(prim),
                    o.tri[k].geo_id.eq(geo),
                    o.tri[k].opaque.eq(s1.opaque[k]),
                    o.tri[k].procedural.eq(s1.proc[k]),
                    o.tri[k].valid.eq(1 if k == 0 else s1.valid1),
                ]
        with m.If(en):
            m.d.sync += [o.nav.eq(s1.nav), o.error.eq(s1.error)]


class PrimitiveDecode(EnableCoreStream):
    """Stream wrapper of :class:`PrimitiveDecodeCore` (registry block ``ray_primitive_decode``)."""

    def __init__(self):
        super().__init__(PrimitiveDecodeCore(), DECODE_IN_LAYOUT, PAIR_LAYOUT)
