"""Triangle-pair nodes (compressed primitive nodes) over arrays: what
:func:`.triangle.triangle_pair_eval_batch` does, with the result rules vectorised.

The compressed node decode (:func:`.primitive_node.decode_pair`, variable-length bit fields) stays
scalar Python; it is a pure function of the 128 node bytes and the pair index, so
:class:`PairDecodeCache` remembers what it returned (long runs that draw their nodes from a pool
decode each node once). The watertight test is :func:`.triangle.intersect` on all triangles at
once, and :func:`.triangle.triangle_result_dwords` is applied with array operations.
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
    PF_SKIP_PROCEDURAL,
    PF_SKIP_TRIANGLES,
)

from ..encode import primitive_node as pn
from ..encode.ray import pair_index
from ..scalar import triangle

__all__ = ["PairDecodeCache", "triangle_pair_dwords"]

_M32 = 0xFFFFFFFF


class PairDecodeCache:
    """The fields of :func:`.primitive_node.decode_pair` the result needs, by node and pair.

    Parameters
    ----------
    size : int
        Entries kept; the cache is emptied when it is full.
    """

    def __init__(self, size=1 << 16):
        if not isinstance(size, int) or size < 1:
            raise ValueError(f"`size` must be a positive integer, not {size!r}")
        self._size = size
        self._entries = {}

    @property
    def size(self):
        return self._size

    def __call__(self, node_raw, pair):
        """``(vertices 2x3x3, procedural[2], opaque[2], valid1, prim_id[2], geo_id[2],
        navigation, error)`` of 128 node bytes and a pair index."""
        key = (node_raw, pair)
        entry = self._entries.get(key)
        if entry is None:
            dec = pn.decode_pair(node_raw, pair)
            t0, t1 = dec.tris
            entry = (
                tuple(((0, 0, 0),) * 3 if t.procedural else t.vertices for t in (t0, t1)),
                (t0.procedural, t1.procedural),
                (t0.opaque, t1.opaque),
                t1.valid,
                (t0.prim_id, t1.prim_id),
                (t0.geo_id, t1.geo_id),
                dec.navigation,
                dec.error,
            )
            if len(self._entries) >= self._size:
                self._entries.clear()
            self._entries[key] = entry
        return entry


_CACHE = PairDecodeCache()


def _set(flags, bit):
    return (flags & np.uint32(bit)) != 0


def triangle_pair_dwords(nodes, node_ptr, origin, direction, flags, *, cache=None):
    """The 10 result dwords and the misuse flag of triangle-pair instructions.

    Parameters
    ----------
    nodes : (M, 32) uint32 node dwords
    node_ptr : (M,) uint32 pointers (pair index in bits 0, 1 and 3)
    origin, direction : (M, 3) uint32 FP32 patterns
    flags : (M,) effective pointer flags
    cache : PairDecodeCache, optional
        A module-wide cache by default.

    Returns
    -------
    (dwords (M, 10) uint32, error (M,) bool)
    """
    cache = _CACHE if cache is None else cache
    raw = np.ascontiguousarray(nodes, dtype="<u4")
    entries = [cache(raw[m].tobytes(), pair_index(int(node_ptr[m]))) for m in range(len(raw))]
    m = len(entries)
    if m == 0:
        return np.zeros((0, 10), dtype=np.uint32), np.zeros(0, dtype=bool)
    verts = np.array([e[0] for e in entries], dtype=np.uint32)  # (M, 2, 3, 3)
    procedural = np.array([e[1] for e in entries], dtype=bool)  # (M, 2)
    opaque_bit = np.array([e[2] for e in entries], dtype=bool)
    valid1 = np.array([e[3] for e in entries], dtype=bool)
    prim_id = np.array([e[4] for e in entries], dtype=np.uint64)
    geo_id = np.array([e[5] for e in entries], dtype=np.uint64)
    navigation = np.array([e[6] for e in entries], dtype=np.uint64)
    error = np.array([e[7] for e in entries], dtype=bool) | ((node_ptr & np.uint32(7)) > 3)

    res = triangle.intersect(
        np.repeat(origin, 2, axis=0),
        triangle.ray_setup(np.repeat(direction, 2, axis=0)),
        verts[:, :, 0].reshape(-1, 3),
        verts[:, :, 1].reshape(-1, 3),
        verts[:, :, 2].reshape(-1, 3),
    )
    hit, backface = res["hit"].reshape(m, 2), res["backface"].reshape(m, 2)
    t, i, j = (res[k].reshape(m, 2) for k in ("t", "i", "j"))

    f = flags[:, None]
    opaque = _set(f, PF_FORCE_OPAQUE) | (~_set(f, PF_FORCE_NON_OPAQUE) & opaque_bit)
    opaque_culled = np.where(opaque, _set(f, PF_CULL_OPAQUE), _set(f, PF_CULL_NON_OPAQUE))
    front = ~backface ^ _set(f, PF_FLIP_FACEDNESS)
    face_culled = ~_set(f, PF_DISABLE_TRI_CULL) & np.where(
        front, _set(f, PF_CULL_FRONT), _set(f, PF_CULL_BACK)
    )
    tri_culled = _set(f, PF_SKIP_TRIANGLES) | opaque_culled | face_culled
    proc_culled = _set(f, PF_SKIP_PROCEDURAL) | opaque_culled
    tri_hit = hit & ~tri_culled

    inf, one, zero = np.uint32(triangle.POS_INF), np.uint32(triangle.ONE), np.uint32(0)
    dw0 = np.where(procedural, np.where(proc_culled, inf, zero), np.where(tri_hit, t, inf))
    dw1 = np.where(procedural, np.where(proc_culled, zero, one), np.where(tri_hit, i, zero))
    dw2 = np.where(procedural, np.where(proc_culled, zero, one), np.where(tri_hit, j, zero))
    dw3 = np.where(procedural | ~tri_hit, zero, (~front).astype(np.uint32))
    sign = np.uint32(triangle.SIGN)
    mag = np.uint32(0x7FFFFFFF)
    dw1 = (dw1 & mag) | np.where(procedural, sign, zero)
    dw2 = (dw2 & mag) | np.where(opaque, zero, sign)
    dw3 = (((prim_id << np.uint64(1)) | dw3) & np.uint64(_M32)).astype(np.uint32)

    out = np.empty((m, 10), dtype=np.uint32)
    for k in range(2):
        out[:, 4 * k : 4 * k + 4] = np.stack([dw0[:, k], dw1[:, k], dw2[:, k], dw3[:, k]], axis=1)
    out[~valid1, 4:8] = np.array([triangle.POS_INF, triangle.ONE, triangle.ONE, 0], dtype=np.uint32)
    out[:, 8:10] = (((geo_id << np.uint64(2)) | navigation[:, None]) & np.uint64(_M32)).astype(
        np.uint32
    )
    return out, error
