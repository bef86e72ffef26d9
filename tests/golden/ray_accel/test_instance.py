"""Checks of the instance-node model (golden/ray_accel/scalar/instance.py) against the instance node of
gpurt ``IntersectHardwareInstanceNode``."""

import numpy as np
import pytest

from gpurtl.facts.fp32 import bits_f32, f32_bits
from gpurtl.facts.ray_accel import PF_FORCE_OPAQUE, PF_SKIP_PROCEDURAL, PF_SKIP_TRIANGLES
from gpurtl.golden.ray_accel.encode.ray import make_ray
from gpurtl.golden.ray_accel.scalar import instance


def rotation_z(deg):
    a = np.radians(deg)
    return [[np.cos(a), -np.sin(a), 0.0], [np.sin(a), np.cos(a), 0.0], [0.0, 0.0, 1.0]]


def test_encode_decode_roundtrip():
    w = [[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0], [9.0, 10.0, 11.0, 12.0]]
    base = (0x123456789 << 3) | (0x2A5 << 54)
    info = [[0x00100200, 0x7F0FF001, 0x05FFEFFF]]
    dw = instance.encode_instance(
        w,
        base,
        user_data=0xABCDEF,
        mask=0x81,
        parent=0x55,
        filter_origin=(f32_bits(-1.0),) * 3,
        filter_exp=(130, 131, 132),
        filter_count=2,
        filter_info=info,
    )
    f = instance.decode_instance(dw)
    assert [[bits_f32(v) for v in row] for row in f["world_to_object"]] == w
    assert f["child_base"] == base and f["user_data"] == 0xABCDEF and f["mask"] == 0x81
    assert f["parent"] == 0x55 and f["filter_exp"] == [130, 131, 132] and f["filter_count"] == 2
    assert f["filter_info"][0] == info[0]
    assert f["filter_info"][1] == [0xFFFFFFFF, 0xFFF, 0]
    with pytest.raises(ValueError, match="user_data"):
        instance.encode_instance(w, 0, user_data=1 << 24)


def test_transform_is_rigid_motion():
    # world-to-object = R^T (x - t): transformed points land where the inverse motion puts them.
    r = np.array(rotation_z(30.0))
    t = np.array([1.0, -2.0, 0.5])
    w = np.hstack([r.T, (-r.T @ t)[:, None]]).astype(np.float32)
    dw = instance.encode_instance(w.tolist(), 8 << 3)
    ray = make_ray((3.0, 1.0, 2.0), (0.0, 1.0, 0.0))
    out = instance.instance_transform(dw, ray, 0)
    assert out["culled"] == 0
    o = np.array([bits_f32(v) for v in out["origin"]])
    d = np.array([bits_f32(v) for v in out["dir"]])
    assert np.allclose(o, r.T @ (np.array([3.0, 1.0, 2.0]) - t), atol=1e-5)
    assert np.allclose(d, r.T @ np.array([0.0, 1.0, 0.0]), atol=1e-6)


def test_cull_rules():
    w = [[1.0, 0, 0, 0], [0, 1.0, 0, 0], [0, 0, 1.0, 5.0]]
    tri = instance.encode_instance(w, 8 << 3, mask=0x0F)
    aabb = instance.encode_instance(w, (8 << 3) | (1 << 62), mask=0x0F)
    ray = make_ray((0.0, 0.0, 0.0), (1.0, 0.0, 0.0), instance_mask=0xF0)
    out = instance.instance_transform(tri, ray, 0)
    assert out["culled"] == 1 and out["origin"] == ray["origin"]  # mask miss: ray unchanged
    ray["instance_mask"] = 0x01
    assert instance.instance_transform(tri, ray, 0)["culled"] == 0
    assert bits_f32(instance.instance_transform(tri, ray, 0)["origin"][2]) == 5.0
    assert instance.instance_transform(tri, ray, PF_SKIP_TRIANGLES)["culled"] == 1
    assert instance.instance_transform(tri, ray, PF_SKIP_PROCEDURAL)["culled"] == 0
    assert instance.instance_transform(aabb, ray, PF_SKIP_PROCEDURAL)["culled"] == 1
    assert instance.instance_transform(aabb, ray, PF_SKIP_TRIANGLES)["culled"] == 0
    # pointer flags disabled in the T#: nothing is skipped
    assert (
        instance.instance_transform(tri, ray, PF_SKIP_TRIANGLES, {"pointer_flags_en": 0})["culled"]
        == 0
    )


def test_blas_pointer_flag_merge():
    va3 = 0x0123456789AB8 >> 3 << 3
    inst = 0b0000001101  # force opaque + disable cull + flip facedness (instance)
    base = va3 | (inst << 54) | 0x7  # low bits are dropped by the address mask
    # no override: instance flags OR ray flags
    assert instance.blas_base_pointer(base, 0b0100000000) >> 54 == 0b0100001101
    # ray forces opaque: the instance's force bits (0,1) are dropped, then the ray's ORed in
    assert instance.blas_base_pointer(base, PF_FORCE_OPAQUE) >> 54 == 0b1101
    assert instance.blas_base_pointer(base, 0b10) >> 54 == 0b1110
    assert instance.blas_base_pointer(base, 0) & ((1 << 54) - 1) == va3 & instance.ADDRESS_MASK


def _filter_node(child_type=5, child_range=0, mask=0xFF):
    from gpurtl.golden.ray_accel.encode import box_node

    enc = box_node.encode_box8(
        [
            {
                "min": [-1.0, -1.0, -1.0],
                "max": [1.0, 1.0, 1.0],
                "type": child_type,
                "range": child_range,
            }
        ]
    )
    w = [[1.0, 0, 0, -10.0], [0, 1.0, 0, 0], [0, 0, 1.0, 0]]  # object = world - (10, 0, 0)
    return instance.encode_instance(
        w,
        0x1000 << 3,
        user_data=0x123456,
        mask=mask,
        filter_origin=enc[3:6],
        filter_exp=[(enc[6] >> (8 * a)) & 0xFF for a in range(3)],
        filter_count=1,
        filter_info=[enc[8:11]],
    )


def test_instance_result_filter_box():
    from gpurtl.golden.ray_accel.encode.ray import default_desc, node_bytes

    desc = default_desc()
    node = node_bytes(_filter_node())
    hit = make_ray((0.0, 0.0, 0.0), (1.0, 0.0, 0.0))
    dw, o, d = instance.instance_node_result(node, hit, 0, desc)
    # box root hit (gpurt ``rtip3_opcode_emulation.hlsl`` ``IntersectHardwareInstanceNode``)
    assert dw[7] == 0xFFFFFF05
    assert dw[6] == 0x123456 and dw[2] == 0x1000 << 3 and dw[3] == 0
    assert [bits_f32(v) for v in o] == [-10.0, 0.0, 0.0]
    assert dw[0] == dw[1] == dw[4] == dw[5] == instance.UNDEFINED_DW
    assert dw[8] == dw[9] == 0xFFFFFFFF
    miss = make_ray((0.0, 5.0, 0.0), (1.0, 0.0, 0.0))
    assert instance.instance_node_result(node, miss, 0, desc)[0][7] == 0xFFFFFFFF
    short = make_ray((0.0, 0.0, 0.0), (1.0, 0.0, 0.0), extent=5.0)  # box starts at t = 9
    assert instance.instance_node_result(node, short, 0, desc)[0][7] == 0xFFFFFFFF
    # primitive root: child 0 at prim offset 0 with range 1 -> pointer 0x00 (type 0)
    prim = node_bytes(_filter_node(child_type=0, child_range=1))
    assert instance.instance_node_result(prim, hit, 0, desc)[0][7] == 0xFFFFFF00
    culled = node_bytes(_filter_node(mask=0x02))
    hit["instance_mask"] = 0x01
    dw, o, _ = instance.instance_node_result(culled, hit, 0, desc)
    assert dw[7] == 0xFFFFFFFF and o == hit["origin"]
