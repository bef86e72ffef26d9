"""Compressed primitive node and legacy triangle node: layout and encoder round trips.

The layout tests build nodes bit by bit from the layout tables
(gpurt ``gfx12/primitiveNode.hlsli``, ``gfx10/TriangleNode1_0.hlsli``) with a tiny writer of their own (not the
module's encoder), so a wrong offset in the module cannot hide behind a matching encoder.
"""

import random
import struct

import pytest

from gpurtl.golden.ray_accel.encode import primitive_node as pn


def f32(x):
    return struct.unpack("<I", struct.pack("<f", x))[0]


class Bits:
    """Independent little-endian bit writer over a 1024-bit node."""

    def __init__(self):
        self.value = 0

    def put(self, offset, width, value):
        assert 0 <= value < (1 << width)
        self.value |= value << offset

    def get(self, offset, width):
        return (self.value >> offset) & ((1 << width) - 1)

    def dwords(self):
        return [(self.value >> (32 * k)) & 0xFFFFFFFF for k in range(32)]


def raw(node_bytes, offset, width):
    return (int.from_bytes(node_bytes, "little") >> offset) & ((1 << width) - 1)


# ---------------------------------------------------------------------------------------------
# the layout, hand-built


def test_header_fields_at_spec_bit_positions():
    b = Bits()
    # gpurt ``gfx12/primitiveNode.hlsli`` table: bits 0-4 px-1, 5-9 py-1, 10-14 pz-1, 15-19 TZ,
    # 20-23 geoA/2, 24-27 geoP/2,
    # 28-30 pairs-1, 31 vertex type, 32-36 primA, 37-41 primP, 42-51 midpoint
    for off, w, v in [
        (0, 5, 12),
        (5, 5, 20),
        (10, 5, 31),
        (15, 5, 7),
        (20, 4, 9),
        (24, 4, 3),
        (28, 3, 5),
        (31, 1, 0),
        (32, 5, 17),
        (37, 5, 4),
        (42, 10, 777),
    ]:
        b.put(off, w, v)
    h = pn.decode_header(b.dwords())
    assert (h.payload_x, h.payload_y, h.payload_z) == (13, 21, 32)
    assert h.trailing_zeros == 7
    assert (h.geo_anchor_bits, h.geo_payload_bits) == (18, 6)
    assert h.pair_count == 6 and h.vertex_type == 0
    assert (h.prim_anchor_bits, h.prim_payload_bits, h.midpoint) == (17, 4, 777)
    # header ends at bit 51: bit 52 belongs to the vertex section
    b.put(52, 1, 1)
    assert pn.decode_header(b.dwords()) == h


def test_vertex_prefix_payload_and_index_section_hand_built():
    """A one-pair node built by hand: TZ=4, payloads (10, 12, 28), prefixes (18, 16, 0)."""
    tz, pay = 4, (10, 12, 28)
    pre = tuple(32 - tz - p for p in pay)  # (18, 16, 0)
    rng = random.Random(1)
    prefix_vals = [rng.getrandbits(n) for n in pre]
    verts = []
    for _ in range(4):
        v = []
        for a in range(3):
            payload = rng.getrandbits(pay[a])
            v.append(((prefix_vals[a] << (32 - pre[a])) if pre[a] else 0) | (payload << tz))
        verts.append(tuple(x & 0xFFFFFFFF for x in v))
    b = Bits()
    b.put(0, 5, pay[0] - 1)
    b.put(5, 5, pay[1] - 1)
    b.put(10, 5, pay[2] - 1)
    b.put(15, 5, tz)
    geo_a, geo_p, prim_a, prim_p = 12, 4, 9, 3
    b.put(20, 4, geo_a // 2)
    b.put(24, 4, geo_p // 2)
    b.put(28, 3, 0)
    b.put(32, 5, prim_a)
    b.put(37, 5, prim_p)
    mid = 1024 - 29 - 1 * prim_p - prim_a
    b.put(42, 10, mid)
    off = 52
    for a in range(3):
        if pre[a]:
            b.put(off, pre[a], prefix_vals[a])
        off += pre[a]
    for v in verts:
        for a in range(3):
            b.put(off, pay[a], (v[a] >> tz) & ((1 << pay[a]) - 1))
            off += pay[a]
    # IDs: prim anchor 0x1A5 (9 bits) at mid, tri1 payload 3 bits above; geo anchor (12 bits)
    # just below mid, tri1 payload 4 bits below that.
    b.put(mid, prim_a, 0x1A5)
    b.put(mid + prim_a, prim_p, 0b010)
    b.put(mid - geo_a, geo_a, 0xABC)
    b.put(mid - geo_a - geo_p, geo_p, 0x7)
    # descriptor at 1024-29: tri0 = (0,1,2) opaque, tri1 = (2,1,3) non-opaque double-sided, stop
    desc = (
        (1 << 0)
        | (1 << 1)
        | (0 << 2)
        | (2 << 3)
        | (1 << 7)
        | (3 << 11)
        | (0 << 15)
        | (1 << 16)
        | (0 << 17)
        | (1 << 21)
        | (2 << 25)
    )
    b.put(1024 - 29, 29, desc)

    dec = pn.decode_pair(b.dwords(), 0)
    assert not dec.error
    assert dec.tris[0].vertices == (verts[0], verts[1], verts[2])
    assert dec.tris[1].vertices == (verts[2], verts[1], verts[3])
    assert dec.tris[0].prim_id == 0x1A5
    assert dec.tris[1].prim_id == (0x1A5 & ~0b111) | 0b010
    assert dec.tris[0].geo_id == 0xABC
    assert dec.tris[1].geo_id == (0xABC & ~0xF) | 0x7
    assert (dec.tris[0].opaque, dec.tris[1].opaque) == (1, 0)
    assert (dec.tris[0].double_sided, dec.tris[1].double_sided) == (0, 1)
    assert dec.navigation == pn.NAV_END_OF_RANGE
    assert dec.tris[1].valid


def test_pair_descriptor_bits_and_navigation():
    b = Bits()
    b.put(28, 3, 2)  # 3 pairs
    b.put(1024 - 29 * 1, 29, (5 << 25) | (6 << 21) | (7 << 17))  # pair 0, no stop, tri1 invalid
    b.put(1024 - 29 * 2, 29, (1 << 25) | (2 << 21) | (3 << 17) | 1)  # pair 1, stop
    b.put(1024 - 29 * 3, 29, (15 << 17) | (15 << 21))  # pair 2 procedural
    d0, d1, d2 = (pn.decode_pair(b.dwords(), p) for p in range(3))
    assert d0.desc.tri0 == (7, 6, 5) and not d0.tris[1].valid
    assert d0.navigation == pn.NAV_END_OF_PAIR
    assert d1.navigation == pn.NAV_END_OF_RANGE
    assert d2.navigation == pn.NAV_END_OF_NODE and d2.tris[0].procedural
    assert not d2.error and pn.decode_pair(b.dwords(), 3).error  # pair beyond the count


def test_id_payload_not_shorter_than_anchor_is_the_id():
    b = Bits()
    b.put(32, 5, 3)
    b.put(37, 5, 8)
    b.put(20, 4, 1)
    b.put(24, 4, 2)  # prim 3/8, geo 2/4
    mid = 900
    b.put(42, 10, mid)
    b.put(mid, 3, 0b101)
    b.put(mid + 3, 8, 0xEE)
    b.put(mid + 11, 8, 0x11)
    b.put(mid - 2, 2, 0b11)
    b.put(mid - 2 - 4, 4, 0x9)
    b.put(mid - 2 - 8, 4, 0x4)
    n = b.dwords()
    assert [pn.read_prim_id(n, t) for t in range(3)] == [0b101, 0xEE, 0x11]
    assert [pn.read_geo_id(n, t) for t in range(3)] == [0b11, 0x9, 0x4]


def test_fields_read_as_zero_past_the_node_end_and_malformed_prefix():
    b = Bits()
    b.put(0, 5, 31)
    b.put(15, 5, 4)  # payload_x 32 + TZ 4 > 32: malformed
    b.put(42, 10, 1023)
    b.put(32, 5, 20)  # prim anchor runs past bit 1023
    b.value |= 1 << 1023
    dec = pn.decode_pair(b.dwords(), 0)
    assert dec.error
    assert dec.tris[0].prim_id == 1  # only bit 1023 exists


def test_procedural_node_layout():
    node = pn.encode_procedural_node((1.0, -2.0, 3.0), (4.0, 5.0, 6.5), prim_id=77, geo_id=9)
    assert [raw(node, 52 + 32 * k, 32) for k in range(6)] == [
        f32(x) for x in (1.0, -2.0, 3.0, 4.0, 5.0, 6.5)
    ]
    assert raw(node, 20, 4) == 15 and raw(node, 32, 5) == 31 and raw(node, 42, 10) == 963
    d = pn.decode_pair(node, 0)
    assert d.tris[0].procedural and not d.tris[1].valid
    assert d.tris[0].prim_id == 77 and d.tris[0].geo_id == 9
    assert d.tris[0].vertices[:2] == (
        (f32(1.0), f32(-2.0), f32(3.0)),
        (f32(4.0), f32(5.0), f32(6.5)),
    )


# ---------------------------------------------------------------------------------------------
# encoder round trips


def random_pairs(rng, npairs, *, grid=True):
    """Pairs over a small vertex pool (so vertices are shared), random IDs and flags."""
    pool_size = rng.randint(3, 8)
    if grid:
        pool = [
            tuple(float(rng.randint(-64, 64)) * 0.25 for _ in range(3)) for _ in range(pool_size)
        ]
    else:
        pool = [tuple(rng.uniform(-1e3, 1e3) for _ in range(3)) for _ in range(pool_size)]
    base_prim, base_geo = rng.getrandbits(rng.randint(0, 31)), rng.getrandbits(rng.randint(0, 30))
    pairs = []
    for _p in range(npairs):
        tris = []
        for k in range(2):
            if k == 1 and rng.random() < 0.25:
                tris.append(None)
                continue
            while True:
                idx = rng.sample(range(pool_size), 3)
                if idx != [0, 0, 0]:
                    break
            prim = (base_prim ^ rng.getrandbits(rng.randint(0, 8))) & 0x7FFFFFFF
            geo = (base_geo ^ rng.getrandbits(rng.randint(0, 6))) & 0x3FFFFFFF
            tris.append(
                pn.Triangle(
                    tuple(pool[i] for i in idx),
                    prim_id=prim,
                    geo_id=geo,
                    opaque=rng.randint(0, 1),
                    double_sided=rng.randint(0, 1),
                )
            )
        pairs.append(pn.TrianglePair(tris[0], tris[1], range_stop=rng.choice([None, 0, 1])))
    return pairs


@pytest.mark.parametrize("grid", [True, False])
def test_round_trip_random(grid):
    rng = random.Random(7 + grid)
    done = 0
    for _ in range(300):
        pairs = random_pairs(rng, rng.randint(1, 8), grid=grid)
        try:
            node = pn.encode_primitive_node(pairs)
        except ValueError:
            continue
        done += 1
        header = pn.decode_header(node)
        assert header.pair_count == len(pairs)
        for p, pair in enumerate(pairs):
            d = pn.decode_pair(node, p)
            assert not d.error
            for k, tri in enumerate((pair.tri0, pair.tri1)):
                got = d.tris[k]
                if tri is None:
                    assert not got.valid
                    continue
                assert got.valid and not got.procedural
                assert got.vertices == tri.bits()
                assert (got.prim_id, got.geo_id) == (tri.prim_id, tri.geo_id)
                assert (got.opaque, got.double_sided) == (tri.opaque, tri.double_sided)
            stop = pair.range_stop if pair.range_stop is not None else int(p == len(pairs) - 1)
            want_nav = 3 if stop else (1 if p == len(pairs) - 1 else 0)
            assert d.navigation == want_nav
    assert done > 100


def test_encoder_fields_at_spec_positions():
    """Check the encoder's output with raw bit reads at the layout's offsets."""
    t0 = pn.Triangle(((1.0, 2.0, 3.0), (1.5, 2.0, 3.0), (1.0, 2.5, 3.0)), prim_id=1000, geo_id=5)
    t1 = pn.Triangle(
        ((1.5, 2.0, 3.0), (1.5, 2.5, 3.0), (1.0, 2.5, 3.0)), prim_id=1003, geo_id=5, opaque=0
    )
    node = pn.encode_primitive_node([pn.TrianglePair(t0, t1)])
    # all coordinates are multiples of 0.5 in [1, 3]: trailing zeros of the OR of the patterns
    union = 0
    for v in t0.bits() + t1.bits():
        for c in v:
            union |= c
    tz = (union & -union).bit_length() - 1
    assert raw(node, 15, 5) == tz
    assert raw(node, 28, 3) == 0
    assert raw(node, 32, 5) == (1000).bit_length()  # prim anchor bits
    assert raw(node, 37, 5) == (1000 ^ 1003).bit_length()
    mid = raw(node, 42, 10)
    assert mid == 1024 - 29 - 1 * (1000 ^ 1003).bit_length() - (1000).bit_length()
    assert raw(node, mid, (1000).bit_length()) == 1000
    desc = raw(node, 1024 - 29, 29)
    assert (desc >> 16) & 1 == 1 and (desc >> 2) & 1 == 0 and desc & 1 == 1
    assert [(desc >> s) & 15 for s in (17, 21, 25)] == [0, 1, 2]
    assert [(desc >> s) & 15 for s in (3, 7, 11)] == [1, 3, 2]


def test_encoder_rejects_what_does_not_fit():
    rng = random.Random(3)
    many = [tuple(rng.uniform(-1, 1) for _ in range(3)) for _ in range(20)]
    tris = [pn.Triangle((many[3 * k], many[3 * k + 1], many[3 * k + 2])) for k in range(6)]
    with pytest.raises(ValueError, match="unique vertices"):
        pn.encode_primitive_node([pn.TrianglePair(tris[2 * k], tris[2 * k + 1]) for k in range(3)])
    with pytest.raises(ValueError, match="1 to 8 pairs"):
        pn.encode_primitive_node([])
    with pytest.raises(ValueError, match="prim_id"):
        pn.encode_primitive_node([pn.TrianglePair(pn.Triangle(tris[0].vertices, prim_id=1 << 31))])


def test_pack_triangles_produces_decodable_nodes():
    rng = random.Random(11)
    tris = [
        pn.Triangle(
            tuple(tuple(rng.uniform(-5, 5) for _ in range(3)) for _ in range(3)),
            prim_id=k,
            geo_id=3,
        )
        for k in range(40)
    ]
    nodes = pn.pack_triangles(tris)
    seen = []
    for node, where in nodes:
        for pair, tri in where:
            d = pn.decode_pair(node, pair)
            seen.append((d.tris[tri].prim_id, d.tris[tri].vertices))
    assert [s[0] for s in seen] == list(range(40))
    assert all(s[1] == t.bits() for s, t in zip(seen, tris))


def test_legacy_node_layouts():
    verts = [(1.0, 2.0, 3.0), (4.0, 5.0, 6.0), (7.0, 8.0, 9.0), (10.0, 11.0, 12.0)]
    node = pn.encode_legacy_node(verts, prim_index=(21, 22), geometry_index=33, triangle_id=0x1234)
    assert len(node) == 64
    dw = [int.from_bytes(node[4 * k : 4 * k + 4], "little") for k in range(16)]
    assert dw[0:3] == [f32(1.0), f32(2.0), f32(3.0)] and dw[9:12] == [
        f32(10.0),
        f32(11.0),
        f32(12.0),
    ]
    assert dw[12:16] == [21, 22, 33, 0x1234]  # RT IP 3.0: @48 @52 @56 @60
    dec = pn.decode_legacy_node(node)
    assert pn.legacy_triangle_vertices(dec, 1) == tuple(
        tuple(f32(c) for c in verts[i]) for i in (1, 3, 2)
    )
    node2 = pn.encode_legacy_node(
        verts, prim_index=(21, 22), geometry_index=33, layout="rtip2", geometry_flags=3
    )
    dw2 = [int.from_bytes(node2[4 * k : 4 * k + 4], "little") for k in range(16)]
    assert dw2[12:16] == [33 | (3 << 24), 21, 22, 0x8989]
    dec2 = pn.decode_legacy_node(node2, layout="rtip2")
    assert dec2.geometry_index == 33 and dec2.prim_index == (21, 22)
