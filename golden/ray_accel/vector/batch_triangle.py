"""Legacy triangle nodes of the dual instruction over arrays: what
:func:`.triangle.legacy_triangle_result` (node layout ``rtip3_0``) does, for many nodes at once.

The node (64 bytes): vertices v0..v3 in dwords 0..11, primitive indices in 12/13, the geometry
index in 14, the triangle id in 15 (:func:`.primitive_node.decode_legacy_node`). Type 0 tests
``(v0, v1, v2)``, type 1 ``(v1, v3, v2)``; the watertight test is :func:`.triangle.intersect`
(already vectorised) and the culling and result rules are those of the scalar function.
"""

import numpy as np

from gpurtl.facts.ray_accel import (
    PF_CULL_BACK,
    PF_CULL_FRONT,
    PF_CULL_NON_OPAQUE,
    PF_CULL_OPAQUE,
    PF_DISABLE_TRI_CULL,
    PF_FLIP_FACEDNESS,
    PF_FORCE_NON_OPAQUE,
    PF_FORCE_OPAQUE,
    PF_SKIP_TRIANGLES,
)

from ..scalar import triangle

__all__ = ["legacy_triangle_dwords"]

_TYPE_VERTICES = np.array([[0, 1, 2], [1, 3, 2]])


def _set(flags, bit):
    return (flags & np.uint32(bit)) != 0


def legacy_triangle_dwords(node, node_type, origin, direction, flags, return_mode):
    """The 4 result dwords and the geometry index of legacy triangle nodes.

    Parameters
    ----------
    node : (M, 32) uint32 node dwords
    node_type : (M,) 0 or 1 (the pointer's low 3 bits)
    origin, direction : (M, 3) uint32 FP32 patterns
    flags : (M,) effective pointer flags
    return_mode : (M,) descriptor ``return_mode``

    Returns
    -------
    (dwords (M, 4) uint32, geometry_index (M,) uint32)
    """
    vertices = node[:, 0:12].reshape(-1, 4, 3)
    picked = np.take_along_axis(
        vertices, _TYPE_VERTICES[node_type.astype(np.int64)][..., None], axis=1
    )
    res = triangle.intersect(
        origin, triangle.ray_setup(direction), picked[:, 0], picked[:, 1], picked[:, 2]
    )
    triangle_id = node[:, 15]
    tri_flags = (triangle_id >> (np.uint32(8) * node_type.astype(np.uint32))) & np.uint32(0xFF)
    opaque = _set(flags, PF_FORCE_OPAQUE) | (
        ~_set(flags, PF_FORCE_NON_OPAQUE) & ((tri_flags & np.uint32(0x80)) != 0)
    )
    opaque_culled = np.where(opaque, _set(flags, PF_CULL_OPAQUE), _set(flags, PF_CULL_NON_OPAQUE))
    flip = _set(flags, PF_FLIP_FACEDNESS)
    front = ~res["backface"] ^ flip
    face_culled = ~_set(flags, PF_DISABLE_TRI_CULL) & np.where(
        front, _set(flags, PF_CULL_FRONT), _set(flags, PF_CULL_BACK)
    )
    culled = _set(flags, PF_SKIP_TRIANGLES) | opaque_culled | face_culled
    sign = np.where(flip, np.uint32(triangle.SIGN), np.uint32(0))
    t_num, t_den = res["t_num"] ^ sign, res["det"] ^ sign
    zero = np.zeros_like(t_num)
    bary = np.stack([res["u"], res["v"], res["w"], zero], axis=1)
    src_i = (tri_flags & np.uint32(3)).astype(np.int64)[:, None]
    src_j = ((tri_flags >> np.uint32(2)) & np.uint32(3)).astype(np.int64)[:, None]
    mode1 = np.stack(
        [
            t_num,
            t_den,
            np.take_along_axis(bary, src_i, 1)[:, 0],
            np.take_along_axis(bary, src_j, 1)[:, 0],
        ],
        axis=1,
    )
    mode0 = np.stack([t_num, t_den, triangle_id, zero + np.uint32(1)], axis=1)
    miss = np.array([triangle.POS_INF, triangle.ONE, 0, 0], dtype=np.uint32)
    dwords = np.where((return_mode != 0)[:, None], mode1, mode0)
    dwords = np.where((~res["hit"] | culled)[:, None], miss, dwords)
    return dwords.astype(np.uint32), node[:, 14].copy()
