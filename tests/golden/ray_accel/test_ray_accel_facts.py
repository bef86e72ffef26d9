"""The shared node formats of ``gpurtl.facts.ray_accel`` read real encoded nodes exactly as the
golden decoders do (BVH8 box, instance, legacy FP32/FP16 boxes, compressed primitive header);
the box grow constant is the exact rational; the published sorting network sorts every 0/1
input (the 0-1 principle), its first three stages each half; the pointer flags' struct and masks
name the same bits."""

from fractions import Fraction
from functools import lru_cache
from itertools import product

import numpy as np
from amaranth.lib import data

from gpurtl.facts import ray_accel as facts
from gpurtl.facts.fp32 import bits_f32
from gpurtl.facts.ray_accel import (
    BOX8_NODE_LAYOUT,
    INSTANCE_NODE_LAYOUT,
    LEGACY_BOX16_LAYOUT,
    LEGACY_BOX32_LAYOUT,
    NARROW_SORT_STAGES,
    PRIMITIVE_HEADER_LAYOUT,
    SORT_STAGES,
    box_grow_constant,
)
from gpurtl.golden.ray_accel.encode import box_node, primitive_node
from gpurtl.golden.ray_accel.scalar import instance
from gpurtl.sim.blocks.ray_accel import stimulus
from gpurtl.sim.core import layouts


def _fields(layout, dwords):
    value = sum((int(d) & 0xFFFFFFFF) << (32 * k) for k, d in enumerate(dwords))
    return layouts.unpack(layout, value & ((1 << layout.size) - 1))


@lru_cache(maxsize=None)
def _instructions():
    return tuple(stimulus(np.random.default_rng(7), 100))


def _nodes(kind_filter):
    for tx in _instructions():
        for ptr, node in zip(tx["node_ptr"], tx["node"]):
            if kind_filter(tx, ptr):
                yield node


def test_box8_layout_matches_the_decoder():
    count = 0
    for node in _nodes(lambda tx, p: not tx["dual"] and p & 0xF == 5):
        f, d = _fields(BOX8_NODE_LAYOUT, node), box_node.decode_box8(node)
        h = f["header"]
        assert [h["internal_base"], h["leaf_base"], h["parent"]] == [
            d["internal_base"],
            d["leaf_base"],
            d["parent"],
        ]
        assert h["origin"] == list(d["origin"]) and h["exp"] == d["exp"]
        assert h["count_minus_1"] + 1 == d["count"] and h["obb_index"] == d["obb_index"]
        for c, dc in zip(f["children"], d["children"]):
            assert [c["qmin_x"], c["qmin_y"], c["qmin_z"]] == dc["qmin"]
            assert [c["qmax_x"], c["qmax_y"], c["qmax_z"]] == dc["qmax"]
            assert [c["cull_flags"], c["mask"], c["type"], c["range"]] == [
                dc["cull_flags"],
                dc["mask"],
                dc["type"],
                dc["range"],
            ]
        count += 1
    assert count > 20


def test_instance_layout_matches_the_decoder():
    count = 0
    for node in _nodes(lambda tx, p: not tx["dual"] and p & 0xF == 6):
        f, d = _fields(INSTANCE_NODE_LAYOUT, node), instance.decode_instance(node)
        assert f["world_to_object"] == [list(r) for r in d["world_to_object"]]
        assert [f["child_base"], f["parent"], f["user_data"], f["mask"]] == [
            d["child_base"],
            d["parent"],
            d["user_data"],
            d["mask"],
        ]
        assert f["filter_origin"] == list(d["filter_origin"])
        assert f["filter_exp"] == d["filter_exp"]
        assert f["filter_count_minus_1"] + 1 == d["filter_count"]
        for c, words in zip(f["filter_children"], d["filter_info"]):
            assert _fields(BOX8_NODE_LAYOUT["children"].shape.elem_shape, words) == c
        count += 1
    assert count > 5


def test_legacy_box_layouts_match_the_decoders():
    seen = {4: 0, 5: 0}
    for tx in _instructions():
        if not tx["dual"]:
            continue
        for ptr, node in zip(tx["node_ptr"], tx["node"]):
            if ptr & 7 == 5:
                f, d = _fields(LEGACY_BOX32_LAYOUT, node), box_node.decode_box4_fp32(node)
                for j, c in enumerate(d["children"]):
                    assert f["ptr"][j] == c["ptr"] and f["flags"][j] & 0xF == c["cull_flags"]
                    assert f["bounds"][j]["min"] == list(c["min"])
                    assert f["bounds"][j]["max"] == list(c["max"])
            elif ptr & 7 == 4:
                f, d = _fields(LEGACY_BOX16_LAYOUT, node), box_node.decode_box4_fp16(node)
                for j, c in enumerate(d["children"]):
                    assert f["ptr"][j] == c["ptr"]
                    assert [box_node.f16_to_f32(h) for h in f["bounds"][j]["min"]] == c["min"]
                    assert [box_node.f16_to_f32(h) for h in f["bounds"][j]["max"]] == c["max"]
            else:
                continue
            seen[ptr & 7] += 1
    assert min(seen.values()) > 5


def test_primitive_header_layout_matches_the_decoder():
    count = 0
    for node in _nodes(lambda tx, p: not tx["dual"] and (p & 7) <= 3):
        f, h = _fields(PRIMITIVE_HEADER_LAYOUT, node), primitive_node.decode_header(node)
        assert [
            f["payload_x_minus_1"] + 1,
            f["payload_y_minus_1"] + 1,
            f["payload_z_minus_1"] + 1,
        ] == list(h.payloads)
        assert f["trailing_zeros"] == h.trailing_zeros
        assert 2 * f["geo_anchor_half"] == h.geo_anchor_bits
        assert 2 * f["geo_payload_half"] == h.geo_payload_bits
        assert f["pair_count_minus_1"] + 1 == h.pair_count
        assert [f["vertex_type"], f["prim_anchor_bits"], f["prim_payload_bits"], f["midpoint"]] == [
            h.vertex_type,
            h.prim_anchor_bits,
            h.prim_payload_bits,
            h.midpoint,
        ]
        count += 1
    assert count > 5


def test_box_grow_constant_is_exact():
    assert box_grow_constant(0) == 0
    for g in range(1, 256):
        assert Fraction(bits_f32(box_grow_constant(g))) == Fraction(g, 1 << 24)


def _network_sorts(stages, bits):
    v = list(bits)
    for stage in stages:
        for i, j in stage:
            if v[j] < v[i]:
                v[i], v[j] = v[j], v[i]
    return v


def test_sort_networks_sort_every_01_input():
    for bits in product((0, 1), repeat=8):
        assert _network_sorts(SORT_STAGES, bits) == sorted(bits)
        narrow = _network_sorts(NARROW_SORT_STAGES, bits)
        assert narrow[:4] == sorted(bits[:4]) and narrow[4:] == sorted(bits[4:])
    broken = SORT_STAGES[:-1]
    assert any(_network_sorts(broken, b) != sorted(b) for b in product((0, 1), repeat=8))


def test_pointer_flags_struct_and_masks_name_the_same_bits():
    """Bit ``k`` of the pointer flags is BVH base bit ``54 + k``: the struct's fields, the
    ``PF_*`` masks and the values they had as plain constants agree."""
    layout = data.Layout.cast(facts.PointerFlags)
    assert layout.size == facts.POINTER_FLAGS_SHAPE.width == 10
    expected = {
        "force_opaque": 0x001,
        "force_non_opaque": 0x002,
        "disable_tri_cull": 0x004,
        "flip_facedness": 0x008,
        "cull_back": 0x010,
        "cull_front": 0x020,
        "cull_opaque": 0x040,
        "cull_non_opaque": 0x080,
        "skip_triangles": 0x100,
        "skip_procedural": 0x200,
    }
    assert [name for name, _ in layout] == list(expected)
    for name, mask in expected.items():
        assert 1 << layout[name].offset == mask
        assert getattr(facts, f"PF_{name.upper()}") == mask
    assert facts.PF_BOX_CULL_SHIFT == 6
