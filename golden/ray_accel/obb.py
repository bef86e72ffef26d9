"""The RT IP 3.1 OBB rotation tables and the ray transform (bit-exact golden model).

Sources: AMD gpurt ``src/shadersClean/common/ObbCommon.hlsli`` (``ObbStage1Lut``,
``ObbStage2Lut``) and ``src/shadersClean/common/Common.hlsl`` (``OBBTransform``):

* A type-5 box node names a rotation by its 7-bit ``obbMatrixIndex`` (DW7 bits [6:0]); 0..103 pick
  one of 104 matrices, ``0x7F`` means "no rotation" (:data:`NO_ROTATION`).
* Stage 1: 104 entries of 54 bits = nine 6-bit element codes; element (r, c) sits at bits
  ``[18r+6c+5 : 18r+6c]``. Code bit 5 is the sign, bits 4:0 index stage 2.
* Stage 2: 32 FP32 magnitudes (26 used, entries 26..31 are 0). The element's bit pattern is
  ``STAGE2[code & 0x1F] | (code >> 5) << 31``.
* Transform, with the matrix rows ``m_r``: ``o'_r = fma(o.x, m_r0, fma(o.y, m_r1, fma(o.z, m_r2,
  0)))`` and ``d'_r = fma(d.x, m_r0, fma(d.y, m_r1, d.z * m_r2))`` (gpurt ``OBBTransform``). The
  rotated ray is only used for the node's box test; it is not returned.

The instance transform (gpurt ``IntersectHardwareInstanceNode``) is the same chain with a 3x4
world-to-object matrix whose fourth column (the translation) replaces the innermost ``0`` of the
origin chain; both share :func:`transform_rows`.

Indices 104..126 are not defined by any source. This model (and the RTL) treat them as "no
rotation" and raise the ``bad_index`` error flag (see :func:`obb_transform_ray`).
"""

import numpy as np

from . import _fp

__all__ = [
    "STAGE2", "STAGE1", "OBB_COUNT", "NO_ROTATION", "IDENTITY_BITS",
    "stage1_codes", "element_bits", "obb_matrix_bits", "obb_matrix", "transform_rows",
    "obb_transform_ray", "obb_transform_dict",
]

OBB_COUNT = 104
NO_ROTATION = 0x7F
_ONE = 0x3F800000

# obb_tables.md A1 (gpurt ObbCommon.hlsli ObbStage2Lut): FP32 bit patterns, entries 26..31 unused.
STAGE2 = (
    0x00000000, 0x3D1BE50C, 0x3E15F61A, 0x3E484336, 0x3E79DF93, 0x3E7C3A3A, 0x3E8A8BD4, 0x3E9E0875,
    0x3E9F0938, 0x3EA7BF1B, 0x3EAAAAAB, 0x3EC3EF15, 0x3F000000, 0x3F01814F, 0x3F16A507, 0x3F273D75,
    0x3F30FBC5, 0x3F3504F3, 0x3F3D3A87, 0x3F4E034D, 0x3F5A827A, 0x3F692290, 0x3F6C835E, 0x3F73023F,
    0x3F7641AF, 0x3F800000, 0, 0, 0, 0, 0, 0,
)

# obb_tables.md A2 (gpurt ObbCommon.hlsli ObbStage1Lut): 104 x 54-bit entries.
STAGE1 = (
    0x162C0AD6000019, 0x16AC02D6000019, 0x11440C51000019, 0x11C40451000019,
    0x0B580D8B000019, 0x0BD8058B000019, 0x00640E40000019, 0x00E40640000019,
    0x1602B01900B016, 0x1600B01902B016, 0x11031019011011, 0x11011019031011,
    0x0B03601901600B, 0x0B01601903600B, 0x00039019019000, 0x00019019039000,
    0x190000162C0AD6, 0x19000016AC02D6, 0x19000011440C51, 0x19000011C40451,
    0x1900000B580D8B, 0x1900000BD8058B, 0x19000000640E40, 0x19000000E40640,
    0x18066058186996, 0x180460589A6196, 0x140AC09430CB11, 0x1408C094B2C311,
    0x101EF1D03CFBCB, 0x101CF1D0BEF3CB, 0x0C33130C451C40, 0x0C31130CC71440,
    0x188468581A6996, 0x18866858986196, 0x1488C89432CB11, 0x148AC894B0C311,
    0x109CF9D03EFBCB, 0x109EF9D0BCF3CB, 0x0CB11B0C471C40, 0x0CB31B0CC51440,
    0x18181996181998, 0x18981196981198, 0x14302B11302B14, 0x14B02311B02314,
    0x103C7BCB3C7BD0, 0x10BC73CBBC73D0, 0x0C44CC4044CC4C, 0x0CC4C440C4C44C,
    0x181A19969A1198, 0x189A11961A1998, 0x14322B11B22314, 0x14B22311322B14,
    0x103E7BCBBE73D0, 0x10BE73CB3E7BD0, 0x0C46CC40C6C44C, 0x0CC6C44046CC4C,
    0x161A6998046058, 0x16986198066058, 0x1132CB1408C094, 0x11B0C3140AC094,
    0x0B3EFBD01CF1D0, 0x0BBCF3D01EF1D0, 0x00471C4C31130C, 0x00C5144C33130C,
    0x169A6198846858, 0x16186998866858, 0x11B2C31488C894, 0x1130CB148AC894,
    0x0BBEF3D09CF9D0, 0x0B3CFBD09EF9D0, 0x00C7144CB11B0C, 0x00451C4CB31B0C,
    0x171638D71458D7, 0x178C51578E3157, 0x13368A1334DA13, 0x13A0D353A28353,
    0x0E4A9A4E492A4E, 0x0EA5248EA6948E, 0x0A56490A55590A, 0x0A91554A92454A,
    0x178E51570C3957, 0x171438D79650D7, 0x13A2D353208B53, 0x13348A13B6D213,
    0x0EA7248E249C8E, 0x0E489A4ECB224E, 0x0A93554A104D4A, 0x0A54490AD7510A,
    0x170C59570E3957, 0x179630D79450D7, 0x1320DB53228B53, 0x13B68213B4D213,
    0x0E252C8E269C8E, 0x0ECA924EC9224E, 0x0A115D4A124D4A, 0x0AD6410AD5510A,
    0x179430D71658D7, 0x170E59578C3157, 0x13B4821336DA13, 0x1322DB53A08353,
    0x0EC8924E4B2A4E, 0x0E272C8EA4948E, 0x0AD4410A57590A, 0x0A135D4A90454A,
)
assert len(STAGE1) == OBB_COUNT and len(STAGE2) == 32

IDENTITY_BITS = ((_ONE, 0, 0), (0, _ONE, 0), (0, 0, _ONE))


def _check_index(index):
    if not isinstance(index, (int, np.integer)) or not 0 <= int(index) < OBB_COUNT:
        raise ValueError(f"`index` must be an OBB matrix index from 0 to {OBB_COUNT - 1}, "
                         f"not {index!r}")
    return int(index)


def stage1_codes(index):
    """The nine 6-bit element codes of matrix ``index`` as a 3x3 tuple (row-major)."""
    entry = STAGE1[_check_index(index)]
    return tuple(tuple((entry >> (18 * r + 6 * c)) & 0x3F for c in range(3)) for r in range(3))


def element_bits(code):
    """FP32 bit pattern of one 6-bit element code (sign bit 5, stage-2 index bits 4:0)."""
    if not 0 <= code < 64:
        raise ValueError(f"`code` must be a 6-bit value, not {code!r}")
    return STAGE2[code & 0x1F] | ((code >> 5) << 31)


def obb_matrix_bits(index):
    """3x3 FP32 bit patterns (rows, ``v_local = M v``) of ``index``; 0x7F gives the identity."""
    if index == NO_ROTATION:
        return IDENTITY_BITS
    return tuple(tuple(element_bits(code) for code in row) for row in stage1_codes(index))


def obb_matrix(index):
    """The matrix of ``index`` as a numpy float32 3x3 array."""
    return np.array(obb_matrix_bits(index), dtype=np.uint32).view(np.float32)


# (105 x 3 x 3) bit table; row 104 = identity, used for 0x7F and for the undefined indices.
_TABLE = np.array([obb_matrix_bits(i) for i in range(OBB_COUNT)] + [IDENTITY_BITS],
                  dtype=np.uint32)


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
    """The OBB transform of gpurt ``OBBTransform``, vectorized over rays.

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
