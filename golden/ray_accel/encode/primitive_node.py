"""RT IP 3.1 compressed primitive node and legacy 64-byte triangle node: decode and encode.

Sources of every layout fact (the compressed primitive node and the legacy triangle node): AMD
gpurt
``src/shadersClean/common/gfx12/primitiveNode.hlsli`` (``PrimitiveStructure``,
``TryInitTriStructHeader``), ``src/shadersClean/common/gfx10/TriangleNode1_0.hlsli`` and Mesa
``src/amd/vulkan/bvh/encode_gfx12.comp`` / ``bvh.h``. Code and prose here are this project's own.

Compressed primitive node (128 bytes = 1024 bits)
-------------------------------------------------
Bit ``k`` of the node is bit ``k % 32`` of little-endian dword ``k // 32``. Every field is read
LSB first at its bit offset, through a window that reads **zero** outside ``[0, 1024)`` (gpurt's
``ReadPackedBits`` reads 0 past dword 31; for offsets below 0, which only a malformed header can
produce, this model also reads 0).

==========  =====  ==========================================================================
bits        width  field (``PrimitiveHeader`` attribute)
==========  =====  ==========================================================================
0-4         5      ``payload_x - 1``
5-9         5      ``payload_y - 1``
10-14       5      ``payload_z - 1``
15-19       5      ``trailing_zeros``
20-23       4      ``geo_anchor_bits / 2``
24-27       4      ``geo_payload_bits / 2``
28-30       3      ``pair_count - 1``
31          1      ``vertex_type`` (always 0; the meaning of 1 is undocumented)
32-36       5      ``prim_anchor_bits``
37-41       5      ``prim_payload_bits``
42-51       10     ``midpoint`` (absolute bit offset of the index section midpoint)
==========  =====  ==========================================================================

Vertex section from bit 52: the three prefixes (``32 - trailing_zeros - payload_c`` bits each, x
then y then z), then up to 16 vertices of ``payload_x + payload_y + payload_z`` bits (x in the low
bits). Component ``c`` of a vertex is ``(prefix_c << (32 - prefix_len_c)) | (payload_c <<
trailing_zeros)`` (a zero-length prefix contributes nothing).

Index section: pair descriptor ``j`` (29 bits) at ``1024 - 29 (j + 1)``; primitive IDs grow up
from the midpoint (anchor for triangle 0 at ``mid``, triangle ``t >= 1`` at ``mid + anchor +
(t - 1) payload``); geometry IDs grow down (anchor at ``mid - anchor``, triangle ``t >= 1`` at
``mid - anchor - t payload``). Triangle ``t = 2 pair + tri``. An ID payload at least as long as the
anchor is the ID itself; otherwise it replaces the low ``payload`` bits of the anchor.

Pair descriptor: [0] range stop, [1] tri1 double sided, [2] tri1 opaque, [6:3] [10:7] [14:11]
tri1 v0 v1 v2, [15] tri0 double sided, [16] tri0 opaque, [20:17] [24:21] [28:25] tri0 v0 v1 v2.
Triangle 1 is invalid when its three indices are 0. A triangle is procedural when its v0 and v1
indices are both 15; a procedural node stores its box as 6 FP32 (min xyz, max xyz) from bit 52.
Navigation bits (``CalcNavigationBits``): 3 when the range-stop bit is set, else 1 for the last
pair of the node, else 0.

Malformed nodes (defined behaviour, reported by :attr:`PairDecode.error`): a pair index at or above
the pair count (its descriptor is still read from where it would be), ``trailing_zeros + payload >
32`` on an axis (the prefix length is then taken as 0 and the component truncated to 32 bits), and
``vertex_type = 1``.

Legacy 64-byte triangle node (gpurt ``gfx10/BoxNode1_0.hlsli``, ``TriangleNode1_0.hlsli``, RT IP
3.0 layout used by the dual instruction)
------------------------------------------------------------------------------------
v0 @0, v1 @12, v2 @24, v3 @36 (3 x FP32 each); ``layout="rtip3_0"``: prim_index0 @48,
prim_index1 @52, geometry_index @56, triangle_id @60; ``layout="rtip2"``: geometry index and flags
@48 (index in bits 0-23), prim_index0 @52, prim_index1 @56, triangle_id @60. Node type 0 tests
(v0, v1, v2), type 1 tests (v1, v3, v2). ``triangle_id`` holds 8 bits per triangle: [1:0] I_SRC,
[3:2] J_SRC, [4] double sided, [5] flip winding, [6] procedural, [7] opaque.
"""

from dataclasses import dataclass, field

from gpurtl.facts.fp32 import f32_bits

__all__ = [
    "NODE_BITS",
    "HEADER_BITS",
    "PAIR_DESC_BITS",
    "MAX_VERTICES",
    "MAX_PAIRS",
    "NAV_END_OF_PAIR",
    "NAV_END_OF_NODE",
    "NAV_END_OF_RANGE",
    "PROCEDURAL_INDEX",
    "Triangle",
    "TrianglePair",
    "PrimitiveHeader",
    "PairDesc",
    "TriangleDecode",
    "PairDecode",
    "node_int",
    "node_to_bytes",
    "read_bits",
    "decode_header",
    "decode_pair_desc",
    "read_vertex",
    "read_prim_id",
    "read_geo_id",
    "decode_pair",
    "decode_primitive_node",
    "pair_desc_bits",
    "encode_primitive_node",
    "encode_procedural_node",
    "pack_triangles",
    "LegacyTriangleNode",
    "decode_legacy_node",
    "encode_legacy_node",
    "legacy_triangle_vertices",
]

NODE_BITS = 1024
HEADER_BITS = 52
PAIR_DESC_BITS = 29
MAX_VERTICES = 16
MAX_PAIRS = 8
DATA_BITS = NODE_BITS - HEADER_BITS  # 972: what the encoder's fit test may use
NAV_END_OF_PAIR, NAV_END_OF_NODE, NAV_END_OF_RANGE = 0, 1, 3
PROCEDURAL_INDEX = 0xF
_M32 = 0xFFFFFFFF


# --------------------------------------------------------------------------------------------------
# raw bits


def node_int(node):
    """The 1024-bit integer of a node given as 128 bytes, 32 dwords or an ``int``."""
    if isinstance(node, int):
        if not 0 <= node < (1 << NODE_BITS):
            raise ValueError("a node integer must be in 0 .. 2**1024 - 1")
        return node
    if isinstance(node, (bytes, bytearray, memoryview)):
        raw = bytes(node)
        if len(raw) != 128:
            raise ValueError(f"a node has 128 bytes, not {len(raw)}")
        return int.from_bytes(raw, "little")
    dwords = list(node)
    if len(dwords) != 32:
        raise ValueError(f"a node has 32 dwords, not {len(dwords)}")
    value = 0
    for k, dword in enumerate(dwords):
        value |= (int(dword) & _M32) << (32 * k)
    return value


def node_to_bytes(value):
    """128 bytes of a 1024-bit node integer."""
    return int(value).to_bytes(128, "little")


def read_bits(node, offset, length):
    """``length`` bits of the node integer from bit ``offset`` (zero outside ``[0, 1024)``)."""
    if length <= 0:
        return 0
    mask = (1 << length) - 1
    if offset >= 0:
        return (node >> offset) & mask
    return (node << -offset) & mask


def _write_bits(node, offset, length, value):
    if length <= 0:
        return node
    if offset < 0 or offset + length > NODE_BITS:
        raise ValueError(f"field at bit {offset} (+{length}) lies outside the node")
    mask = ((1 << length) - 1) << offset
    return (node & ~mask) | ((int(value) << offset) & mask)


# --------------------------------------------------------------------------------------------------
# header and descriptors


@dataclass(frozen=True)
class PrimitiveHeader:
    """The decoded 52-bit header (lengths in bits, already +1 / x2 as gpurt's header layout
    says)."""

    payload_x: int
    payload_y: int
    payload_z: int
    trailing_zeros: int
    geo_anchor_bits: int
    geo_payload_bits: int
    pair_count: int
    vertex_type: int
    prim_anchor_bits: int
    prim_payload_bits: int
    midpoint: int

    @property
    def payloads(self):
        return (self.payload_x, self.payload_y, self.payload_z)

    @property
    def raw_prefix_lengths(self):
        """``32 - trailing_zeros - payload`` per axis (may be negative in a malformed node)."""
        return tuple(32 - self.trailing_zeros - p for p in self.payloads)

    @property
    def prefix_lengths(self):
        """Prefix lengths used by the decoder (negative raw lengths count as 0)."""
        return tuple(max(0, n) for n in self.raw_prefix_lengths)

    @property
    def vertex_bits(self):
        return self.payload_x + self.payload_y + self.payload_z

    @property
    def vertex_section(self):
        """Bit offset of vertex 0."""
        return HEADER_BITS + sum(self.prefix_lengths)

    @property
    def malformed(self):
        return self.vertex_type != 0 or min(self.raw_prefix_lengths) < 0


def decode_header(node):
    """:class:`PrimitiveHeader` of a node (bytes, dwords or integer)."""
    n = node_int(node)
    return PrimitiveHeader(
        payload_x=read_bits(n, 0, 5) + 1,
        payload_y=read_bits(n, 5, 5) + 1,
        payload_z=read_bits(n, 10, 5) + 1,
        trailing_zeros=read_bits(n, 15, 5),
        geo_anchor_bits=2 * read_bits(n, 20, 4),
        geo_payload_bits=2 * read_bits(n, 24, 4),
        pair_count=read_bits(n, 28, 3) + 1,
        vertex_type=read_bits(n, 31, 1),
        prim_anchor_bits=read_bits(n, 32, 5),
        prim_payload_bits=read_bits(n, 37, 5),
        midpoint=read_bits(n, 42, 10),
    )


@dataclass(frozen=True)
class PairDesc:
    """A decoded 29-bit triangle-pair descriptor."""

    range_stop: int
    tri0: tuple  # (v0, v1, v2) vertex indices
    tri1: tuple
    opaque: tuple  # (tri0, tri1)
    double_sided: tuple  # (tri0, tri1)

    @property
    def tri1_valid(self):
        return any(self.tri1)

    def procedural(self, tri):
        idx = self.tri0 if tri == 0 else self.tri1
        return idx[0] == PROCEDURAL_INDEX and idx[1] == PROCEDURAL_INDEX


def decode_pair_desc(bits):
    """:class:`PairDesc` of a 29-bit descriptor value."""

    def f(lsb, w):
        return (bits >> lsb) & ((1 << w) - 1)

    return PairDesc(
        range_stop=f(0, 1),
        tri1=(f(3, 4), f(7, 4), f(11, 4)),
        tri0=(f(17, 4), f(21, 4), f(25, 4)),
        opaque=(f(16, 1), f(2, 1)),
        double_sided=(f(15, 1), f(1, 1)),
    )


def pair_desc_bits(tri0, tri1, *, opaque=(1, 1), double_sided=(0, 0), range_stop=0):
    """29-bit descriptor value of index triples ``tri0``/``tri1`` and the flag pairs."""
    for name, idx in (("tri0", tri0), ("tri1", tri1)):
        if len(idx) != 3 or any(not 0 <= i <= 15 for i in idx):
            raise ValueError(f"`{name}` must be three vertex indices 0..15, not {idx!r}")
    return (
        (range_stop & 1)
        | ((double_sided[1] & 1) << 1)
        | ((opaque[1] & 1) << 2)
        | (tri1[0] << 3)
        | (tri1[1] << 7)
        | (tri1[2] << 11)
        | ((double_sided[0] & 1) << 15)
        | ((opaque[0] & 1) << 16)
        | (tri0[0] << 17)
        | (tri0[1] << 21)
        | (tri0[2] << 25)
    )


# --------------------------------------------------------------------------------------------------
# field readers


def _prefixes(n, header):
    lengths = header.prefix_lengths
    offset = HEADER_BITS
    values = []
    for length in lengths:
        prefix = read_bits(n, offset, length)
        values.append((prefix << (32 - length)) & _M32 if length else 0)
        offset += length
    return values


def read_vertex(node, index, header=None):
    """Vertex ``index`` (0..15) of a compressed node as three uint32 bit patterns."""
    n = node_int(node)
    header = header or decode_header(n)
    prefixes = _prefixes(n, header)
    offset = header.vertex_section + index * header.vertex_bits
    out = []
    for prefix, payload_bits in zip(prefixes, header.payloads):
        payload = read_bits(n, offset, payload_bits)
        out.append((prefix | (payload << header.trailing_zeros)) & _M32)
        offset += payload_bits
    return tuple(out)


def _read_procedural_box(n):
    words = [read_bits(n, HEADER_BITS + 32 * k, 32) for k in range(6)]
    return tuple(words[:3]), tuple(words[3:])


def _id(anchor, payload, payload_bits, anchor_bits):
    if payload_bits >= anchor_bits:
        return payload
    return (anchor & ~((1 << payload_bits) - 1) & _M32) | payload


def read_prim_id(node, tri_index, header=None):
    """Primitive ID of triangle ``tri_index`` (= 2 pair + tri) of a compressed node."""
    n = node_int(node)
    h = header or decode_header(n)
    anchor = read_bits(n, h.midpoint, h.prim_anchor_bits)
    if tri_index == 0:
        return anchor
    offset = h.midpoint + h.prim_anchor_bits + (tri_index - 1) * h.prim_payload_bits
    return _id(
        anchor, read_bits(n, offset, h.prim_payload_bits), h.prim_payload_bits, h.prim_anchor_bits
    )


def read_geo_id(node, tri_index, header=None):
    """Geometry ID of triangle ``tri_index`` (= 2 pair + tri) of a compressed node."""
    n = node_int(node)
    h = header or decode_header(n)
    anchor = read_bits(n, h.midpoint - h.geo_anchor_bits, h.geo_anchor_bits)
    if tri_index == 0:
        return anchor
    offset = h.midpoint - h.geo_anchor_bits - tri_index * h.geo_payload_bits
    return _id(
        anchor, read_bits(n, offset, h.geo_payload_bits), h.geo_payload_bits, h.geo_anchor_bits
    )


@dataclass(frozen=True)
class TriangleDecode:
    """One triangle of a decoded pair: vertex bit patterns, IDs and flags."""

    vertices: tuple  # three (x, y, z) uint32 triples (procedural: box min, box max, zeros)
    prim_id: int
    geo_id: int
    opaque: int
    double_sided: int
    procedural: bool
    valid: bool


@dataclass(frozen=True)
class PairDecode:
    """Everything the triangle-pair test needs from one node and pair index."""

    pair: int
    header: PrimitiveHeader
    desc: PairDesc
    tris: tuple  # (TriangleDecode, TriangleDecode)
    navigation: int
    error: bool


def decode_pair(node, pair):
    """Decode pair ``pair`` (0..7) of a compressed primitive node: :class:`PairDecode`."""
    if not 0 <= pair < MAX_PAIRS:
        raise ValueError(f"`pair` must be an integer from 0 to 7, not {pair!r}")
    n = node_int(node)
    h = decode_header(n)
    desc = decode_pair_desc(read_bits(n, NODE_BITS - PAIR_DESC_BITS * (pair + 1), PAIR_DESC_BITS))
    tris = []
    for tri in (0, 1):
        idx = desc.tri0 if tri == 0 else desc.tri1
        procedural = desc.procedural(tri)
        if procedural:
            lo, hi = _read_procedural_box(n)
            vertices = (lo, hi, (0, 0, 0))
        else:
            vertices = tuple(read_vertex(n, i, h) for i in idx)
        t = 2 * pair + tri
        tris.append(
            TriangleDecode(
                vertices=vertices,
                prim_id=read_prim_id(n, t, h),
                geo_id=read_geo_id(n, t, h),
                opaque=desc.opaque[tri],
                double_sided=desc.double_sided[tri],
                procedural=procedural,
                valid=(tri == 0) or desc.tri1_valid,
            )
        )
    if desc.range_stop:
        nav = NAV_END_OF_RANGE
    elif pair == h.pair_count - 1:
        nav = NAV_END_OF_NODE
    else:
        nav = NAV_END_OF_PAIR
    error = pair >= h.pair_count or h.malformed
    return PairDecode(pair=pair, header=h, desc=desc, tris=tuple(tris), navigation=nav, error=error)


def decode_primitive_node(node):
    """All pairs of a node (up to its pair count): list of :class:`PairDecode`."""
    n = node_int(node)
    return [decode_pair(n, p) for p in range(decode_header(n).pair_count)]


# --------------------------------------------------------------------------------------------------
# encoder


def _bits3(vertex):
    out = []
    for c in vertex:
        if isinstance(c, float):
            out.append(f32_bits(c))
        else:
            c = int(c)  # also accepts numpy integer scalars
            if not 0 <= c <= _M32:
                raise ValueError(f"a vertex component bit pattern must be a uint32, not {c}")
            out.append(c)
    if len(out) != 3:
        raise ValueError(f"a vertex has 3 components, not {len(out)}")
    return tuple(out)


@dataclass
class Triangle:
    """A triangle for the encoders: three vertices (Python floats or uint32 bit patterns), its
    primitive ID (< 2**31), geometry ID (< 2**30) and flags."""

    vertices: tuple
    prim_id: int = 0
    geo_id: int = 0
    opaque: int = 1
    double_sided: int = 0

    def bits(self):
        if len(self.vertices) != 3:
            raise ValueError(f"a triangle has 3 vertices, not {len(self.vertices)}")
        return tuple(_bits3(v) for v in self.vertices)


@dataclass
class TrianglePair:
    """One pair for :func:`encode_primitive_node`; ``tri1=None`` makes triangle 1 invalid."""

    tri0: Triangle
    tri1: Triangle = None
    range_stop: int = None  # None: set on the last pair of the node only


def _clz32(x):
    return 32 - int(x).bit_length()


def _ctz32(x):
    return (x & -x).bit_length() - 1 if x else 32


def encode_primitive_node(pairs, *, trailing_zero_compression=True):
    """128 bytes of a compressed primitive node holding ``pairs`` (1..8 :class:`TrianglePair`).

    Follows gpurt's encoder choices (gpurt ``gfx12/primitiveNode.hlsli``): unique vertices in order
    of first use,
    ``TZ = ctz(OR of all coordinates)``, ``prefix_c = min(clz(OR(v.c XOR v0.c)), 31 - TZ)``,
    ``payload = 32 - clz(OR(id XOR anchor))``, even geometry lengths, ``mid = 1024 - 29 pairs -
    (2 pairs - 1) prim_payload - prim_anchor``. Raises ``ValueError`` when the pairs do not fit
    (more than 16 unique vertices, more than 8 pairs or more than 972 data bits) or a triangle
    cannot be expressed (IDs too wide, an index pattern that reads as procedural or invalid).
    """
    pairs = list(pairs)
    if not 1 <= len(pairs) <= MAX_PAIRS:
        raise ValueError(f"a primitive node holds 1 to 8 pairs, not {len(pairs)}")
    verts, index_of = [], {}
    tri_list = []  # (t, Triangle or None, index triple)
    for p, pair in enumerate(pairs):
        for k, tri in enumerate((pair.tri0, pair.tri1)):
            if tri is None:
                if k == 0:
                    raise ValueError(f"pair {p}: triangle 0 is required")
                tri_list.append((2 * p + 1, None, (0, 0, 0)))
                continue
            idx = []
            for v in tri.bits():
                if v not in index_of:
                    index_of[v] = len(verts)
                    verts.append(v)
                idx.append(index_of[v])
            tri_list.append((2 * p + k, tri, tuple(idx)))
    if len(verts) > MAX_VERTICES:
        raise ValueError(f"{len(verts)} unique vertices do not fit (at most 16)")
    for t, tri, idx in tri_list:
        if tri is None:
            continue
        if idx[0] == PROCEDURAL_INDEX and idx[1] == PROCEDURAL_INDEX:
            raise ValueError(f"triangle {t}: v0 and v1 both at index 15 would read as procedural")
        if t % 2 == 1 and idx == (0, 0, 0):
            raise ValueError(f"triangle {t}: indices (0, 0, 0) would read as an invalid triangle")
        if not 0 <= tri.prim_id < (1 << 31):
            raise ValueError(
                f"triangle {t}: `prim_id` must be in 0 .. 2**31 - 1, not {tri.prim_id}"
            )
        if not 0 <= tri.geo_id < (1 << 30):
            raise ValueError(f"triangle {t}: `geo_id` must be in 0 .. 2**30 - 1, not {tri.geo_id}")

    union = 0
    for v in verts:
        for c in v:
            union |= c
    tz = (_ctz32(union) if union else 0) if trailing_zero_compression else 0
    tz = min(tz, 31)
    prefix_len = []
    for axis in range(3):
        diff = 0
        for v in verts:
            diff |= v[axis] ^ verts[0][axis]
        length = min(_clz32(diff), 31 - tz) if trailing_zero_compression else 0
        prefix_len.append(length)
    payload = [32 - tz - n for n in prefix_len]

    valid = [(t, tri) for t, tri, _ in tri_list if tri is not None]
    prim_anchor = valid[0][1].prim_id
    geo_anchor = valid[0][1].geo_id
    prim_diff = geo_diff = 0
    for _, tri in valid[1:]:
        prim_diff |= tri.prim_id ^ prim_anchor
        geo_diff |= tri.geo_id ^ geo_anchor
    prim_pay = 32 - _clz32(prim_diff)
    prim_anc = 32 - _clz32(prim_anchor)
    geo_pay = (33 - _clz32(geo_diff)) & ~1
    geo_anc = (33 - _clz32(geo_anchor)) & ~1
    npairs = len(pairs)
    vertex_bits = sum(payload)
    need = (
        PAIR_DESC_BITS * npairs
        + (2 * npairs - 1) * (prim_pay + geo_pay)
        + len(verts) * vertex_bits
        + sum(prefix_len)
        + prim_anc
        + geo_anc
    )
    if need > DATA_BITS:
        raise ValueError(f"the pairs need {need} data bits, more than the node's {DATA_BITS}")
    mid = NODE_BITS - PAIR_DESC_BITS * npairs - (2 * npairs - 1) * prim_pay - prim_anc

    n = 0
    n = _write_bits(n, 0, 5, payload[0] - 1)
    n = _write_bits(n, 5, 5, payload[1] - 1)
    n = _write_bits(n, 10, 5, payload[2] - 1)
    n = _write_bits(n, 15, 5, tz)
    n = _write_bits(n, 20, 4, geo_anc // 2)
    n = _write_bits(n, 24, 4, geo_pay // 2)
    n = _write_bits(n, 28, 3, npairs - 1)
    n = _write_bits(n, 32, 5, prim_anc)
    n = _write_bits(n, 37, 5, prim_pay)
    n = _write_bits(n, 42, 10, mid)
    offset = HEADER_BITS
    for axis in range(3):
        if prefix_len[axis]:
            n = _write_bits(n, offset, prefix_len[axis], verts[0][axis] >> (32 - prefix_len[axis]))
        offset += prefix_len[axis]
    for v in verts:
        for axis in range(3):
            n = _write_bits(n, offset, payload[axis], (v[axis] >> tz) & ((1 << payload[axis]) - 1))
            offset += payload[axis]
    n = _write_bits(n, mid, prim_anc, prim_anchor)
    n = _write_bits(n, mid - geo_anc, geo_anc, geo_anchor)
    for t, tri in valid[1:]:
        pid = tri.prim_id & ((1 << prim_pay) - 1)
        gid = tri.geo_id & ((1 << geo_pay) - 1)
        n = _write_bits(n, mid + prim_anc + (t - 1) * prim_pay, prim_pay, pid)
        n = _write_bits(n, mid - geo_anc - t * geo_pay, geo_pay, gid)
    idx_of = {t: idx for t, _, idx in tri_list}
    for p, pair in enumerate(pairs):
        stop = pair.range_stop if pair.range_stop is not None else int(p == npairs - 1)
        t1 = pair.tri1
        bits = pair_desc_bits(
            idx_of[2 * p],
            idx_of[2 * p + 1],
            opaque=(pair.tri0.opaque, t1.opaque if t1 else 0),
            double_sided=(pair.tri0.double_sided, t1.double_sided if t1 else 0),
            range_stop=stop,
        )
        n = _write_bits(n, NODE_BITS - PAIR_DESC_BITS * (p + 1), PAIR_DESC_BITS, bits)
    return node_to_bytes(n)


def encode_procedural_node(box_min, box_max, *, prim_id=0, geo_id=0, opaque=1, range_stop=1):
    """128 bytes of a one-pair procedural (AABB) primitive node, laid out as gpurt's
    ``TryInitTriStructHeader`` does for AABB geometry: payload lengths 1, no trailing zeros, the box
    uncompressed from bit 52, geometry anchor 30 bits, primitive anchor 31 bits, midpoint
    ``1024 - 29 - 32 = 963``, tri0 indices (15, 15, 0), tri1 invalid."""
    if not 0 <= prim_id < (1 << 31) or not 0 <= geo_id < (1 << 30):
        raise ValueError("`prim_id` must be below 2**31 and `geo_id` below 2**30")
    lo, hi = _bits3(box_min), _bits3(box_max)
    mid = NODE_BITS - PAIR_DESC_BITS - 32
    n = 0
    n = _write_bits(n, 20, 4, 15)  # geometry anchor 30 bits
    n = _write_bits(n, 32, 5, 31)  # primitive anchor 31 bits
    n = _write_bits(n, 42, 10, mid)
    for k, word in enumerate(lo + hi):
        n = _write_bits(n, HEADER_BITS + 32 * k, 32, word)
    n = _write_bits(n, mid, 31, prim_id)
    n = _write_bits(n, mid - 30, 30, geo_id)
    desc = pair_desc_bits(
        (PROCEDURAL_INDEX, PROCEDURAL_INDEX, 0),
        (0, 0, 0),
        opaque=(opaque, 0),
        range_stop=range_stop,
    )
    n = _write_bits(n, NODE_BITS - PAIR_DESC_BITS, PAIR_DESC_BITS, desc)
    return node_to_bytes(n)


def pack_triangles(triangles, *, max_pairs=MAX_PAIRS):
    """Greedy packer for BVH builders: pair consecutive triangles and fill nodes until the next
    pair does not fit. Returns a list of ``(node_bytes, [(pair, tri) for each input triangle])``;
    the last pair of each node carries the range-stop bit."""
    triangles = list(triangles)
    pairs = [
        TrianglePair(triangles[k], triangles[k + 1] if k + 1 < len(triangles) else None)
        for k in range(0, len(triangles), 2)
    ]
    nodes, current = [], []

    def flush():
        node = encode_primitive_node(current)
        where = []
        for p, pair in enumerate(current):
            where.append((p, 0))
            if pair.tri1 is not None:
                where.append((p, 1))
        nodes.append((node, where))

    for pair in pairs:
        trial = current + [pair]
        try:
            if len(trial) > max_pairs:
                raise ValueError("full")
            encode_primitive_node(trial)
            current = trial
        except ValueError:
            if not current:
                raise
            flush()
            current = [pair]
            encode_primitive_node(current)
    if current:
        flush()
    return nodes


# --------------------------------------------------------------------------------------------------
# legacy 64-byte triangle node


@dataclass
class LegacyTriangleNode:
    """The fields of a legacy 64-byte triangle node (four vertices, two triangles)."""

    vertices: list = field(default_factory=lambda: [(0, 0, 0)] * 4)  # v0..v3 uint32 triples
    prim_index: tuple = (0, 0)
    geometry_index: int = 0
    triangle_id: int = 0
    geometry_flags: int = 0  # rtip2 layout only: bits 24..31 of the dword at 48


_LEGACY_LAYOUTS = ("rtip3_0", "rtip2")


def decode_legacy_node(node, *, layout="rtip3_0"):
    """:class:`LegacyTriangleNode` of 64 (or 128) node bytes / dwords / integer."""
    if layout not in _LEGACY_LAYOUTS:
        raise ValueError(f"`layout` must be 'rtip3_0' or 'rtip2', not {layout!r}")
    if isinstance(node, (bytes, bytearray)) and len(node) == 64:
        node = bytes(node) + bytes(64)
    elif not isinstance(node, int) and not isinstance(node, (bytes, bytearray)):
        node = list(node)
        if len(node) == 16:
            node = node + [0] * 16
    n = node_int(node)
    dw = [read_bits(n, 32 * k, 32) for k in range(16)]
    verts = [tuple(dw[3 * v : 3 * v + 3]) for v in range(4)]
    if layout == "rtip3_0":
        return LegacyTriangleNode(verts, (dw[12], dw[13]), dw[14], dw[15], 0)
    return LegacyTriangleNode(verts, (dw[13], dw[14]), dw[12] & 0xFFFFFF, dw[15], dw[12] >> 24)


def encode_legacy_node(
    vertices,
    *,
    prim_index=(0, 0),
    geometry_index=0,
    triangle_id=None,
    layout="rtip3_0",
    geometry_flags=0,
):
    """64 bytes of a legacy triangle node. ``vertices`` are v0..v3 (floats or bit patterns).
    ``triangle_id`` defaults to Mesa's choice (I_SRC = 1, J_SRC = 2, opaque) for both triangles."""
    if layout not in _LEGACY_LAYOUTS:
        raise ValueError(f"`layout` must be 'rtip3_0' or 'rtip2', not {layout!r}")
    verts = [_bits3(v) for v in vertices]
    if len(verts) != 4:
        raise ValueError(f"a legacy triangle node has 4 vertices, not {len(verts)}")
    if triangle_id is None:
        triangle_id = (0x89 << 8) | 0x89
    dw = [c for v in verts for c in v]
    if layout == "rtip3_0":
        dw += [prim_index[0], prim_index[1], geometry_index, triangle_id]
    else:
        if not 0 <= geometry_index < (1 << 24):
            raise ValueError("the rtip2 layout holds a 24-bit geometry index")
        dw += [
            geometry_index | ((geometry_flags & 0xFF) << 24),
            prim_index[0],
            prim_index[1],
            triangle_id,
        ]
    return b"".join((int(d) & _M32).to_bytes(4, "little") for d in dw)


def legacy_triangle_vertices(node, node_type):
    """The tested triangle of a legacy node: type 0 -> (v0, v1, v2), type 1 -> (v1, v3, v2)."""
    v = node.vertices
    if node_type == 0:
        return (v[0], v[1], v[2])
    if node_type == 1:
        return (v[1], v[3], v[2])
    raise ValueError(f"a legacy triangle node type is 0 or 1, not {node_type}")
