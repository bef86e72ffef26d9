"""The RT IP 3.1 OBB ray transform (bit-exact golden model).

The 104 rotation matrices and their two-level table are facts (:mod:`gpurtl.facts.obb`, from AMD
gpurt ``src/shadersClean/common/ObbCommon.hlsli``); this module decodes them into numpy tables and
rotates rays the way gpurt ``src/shadersClean/common/Common.hlsl`` ``OBBTransform`` does. With the
matrix rows ``m_r``: ``o'_r = fma(o.x, m_r0, fma(o.y, m_r1, fma(o.z, m_r2, 0)))`` and
``d'_r = fma(d.x, m_r0, fma(d.y, m_r1, d.z * m_r2))``. The rotated ray is only used for the node's
box test; it is not returned.

The instance transform (gpurt ``Common.hlsl``, the ``HwInstanceTransformNode`` world-to-object
matrix) is the same chain with a 3x4 world-to-object matrix whose
fourth column (the translation) replaces the innermost ``0`` of the origin chain; both share
:func:`transform_rows`.

Indices 104..126 are not defined by any source. This model (and the RTL) treat them as "no
rotation" and raise the ``bad_index`` error flag (see :func:`obb_transform_ray`).
"""

import numpy as np

from gpurtl.facts.obb import (
    IDENTITY_BITS,
    NO_ROTATION,
    OBB_COUNT,
    STAGE1,
    STAGE2,
    element_bits,
    obb_matrix_bits,
    stage1_codes,
)

from . import _fp

__all__ = [
    "STAGE2",
    "STAGE1",
    "OBB_COUNT",
    "NO_ROTATION",
    "IDENTITY_BITS",
    "stage1_codes",
    "element_bits",
    "obb_matrix_bits",
    "obb_matrix",
    "transform_rows",
    "obb_transform_ray",
    "obb_transform_dict",
]

# (105 x 3 x 3) bit table; row 104 = identity, used for 0x7F and for the undefined indices.
_TABLE = np.array([obb_matrix_bits(i) for i in range(OBB_COUNT)] + [IDENTITY_BITS], dtype=np.uint32)


def obb_matrix(index):
    """The matrix of ``index`` as a numpy float32 3x3 array."""
    return np.array(obb_matrix_bits(index), dtype=np.uint32).view(np.float32)


def transform_rows(matrix, origin, direction):
    """Rotate (and translate) rays with gpurt's FMA order.

    Parameters
    ----------
    matrix : array_like of uint32, shape (..., 3, 3) or (..., 3, 4)
        Row-major FP32 bit patterns; an optional fourth column is the translation added to the
        origin (innermost addend), ``+0.0`` otherwise.
    origin, direction : array_like of uint32, shape (..., 3)

    Returns
    -------
    (origin', direction') : uint32 arrays of shape (..., 3)
    """
    m = np.asarray(matrix, dtype=np.uint32)
    o = np.asarray(origin, dtype=np.uint32)
    d = np.asarray(direction, dtype=np.uint32)
    if m.shape[-2:] not in ((3, 3), (3, 4)):
        raise ValueError(f"`matrix` must end in shape (3, 3) or (3, 4), not {m.shape}")
    shape = np.broadcast_shapes(m.shape[:-2], o.shape[:-1], d.shape[:-1])
    m = np.broadcast_to(m, shape + m.shape[-2:]).reshape(-1, 3, m.shape[-1])
    o = np.broadcast_to(o, shape + (3,)).reshape(-1, 3)
    d = np.broadcast_to(d, shape + (3,)).reshape(-1, 3)
    translate = m[:, :, 3] if m.shape[-1] == 4 else np.zeros((m.shape[0], 3), np.uint32)
    out_o = np.empty_like(o)
    out_d = np.empty_like(d)
    for r in range(3):
        acc_o = _fp.fma(o[:, 2], m[:, r, 2], translate[:, r])
        acc_d = _fp.mul(d[:, 2], m[:, r, 2])
        acc_o = _fp.fma(o[:, 1], m[:, r, 1], acc_o)
        acc_d = _fp.fma(d[:, 1], m[:, r, 1], acc_d)
        out_o[:, r] = _fp.fma(o[:, 0], m[:, r, 0], acc_o)
        out_d[:, r] = _fp.fma(d[:, 0], m[:, r, 0], acc_d)
    return out_o.reshape(shape + (3,)), out_d.reshape(shape + (3,))


def obb_transform_ray(index, origin, direction):
    """The OBB transform (gpurt ``OBBTransform``), vectorized over rays.

    Parameters
    ----------
    index : int or array_like of int
        7-bit OBB matrix indices. 0..103 rotate; ``0x7F`` passes the ray through unchanged (bit
        for bit, also NaN payloads); 104..126 pass through and flag ``bad_index``.
    origin, direction : array_like of uint32, shape (..., 3)

    Returns
    -------
    (origin', direction', bad_index)
        uint32 arrays of shape (..., 3) and a bool array of the broadcast index shape.
    """
    idx = np.asarray(index, dtype=np.int64)
    if np.any((idx < 0) | (idx > 0x7F)):
        raise ValueError("`index` must be 7-bit values (0..127)")
    o = np.asarray(origin, dtype=np.uint32)
    d = np.asarray(direction, dtype=np.uint32)
    shape = np.broadcast_shapes(idx.shape, o.shape[:-1], d.shape[:-1])
    idx = np.broadcast_to(idx, shape)
    o = np.broadcast_to(o, shape + (3,))
    d = np.broadcast_to(d, shape + (3,))
    rotate = idx < OBB_COUNT
    new_o, new_d = transform_rows(_TABLE[np.where(rotate, idx, OBB_COUNT)], o, d)
    new_o = np.where(rotate[..., None], new_o, o)
    new_d = np.where(rotate[..., None], new_d, d)
    bad = (idx >= OBB_COUNT) & (idx != NO_ROTATION)
    return new_o, new_d, bad


def obb_transform_dict(tx):
    """Dictionary form used by the ``obb_transform`` block: ``{"index", "origin", "dir"}`` ->
    ``{"origin", "dir", "bad_index"}``."""
    o, d, bad = obb_transform_ray(tx["index"], tx["origin"], tx["dir"])
    return {"origin": [int(v) for v in o], "dir": [int(v) for v in d], "bad_index": int(bad)}
